//! A permission question's details, as the question shows them: each
//! label and value (a path broken at its slashes), an edit's "replace"
//! and "with" as one change in the lines of a diff, and a long one
//! collapsed behind "Show all", never cut.

use leptos::prelude::*;
use shard_protocol::agent::{DetailFormat, PermissionDetail};
use shard_protocol::display::escaped;

/// Lines of a detail shown before "Show all": a whole file's content is in
/// the question, collapsed, never cut.
const COLLAPSED_LINES: usize = 12;

/// The details of a permission question, in order; an edit's "replace"
/// and "with" (exactly what the call will be given) as one change in the
/// lines of a diff, as the tool's card shows it once it ran.
pub(super) fn details_view(details: Vec<PermissionDetail>) -> impl IntoView {
    let mut shown = Vec::with_capacity(details.len());
    let mut details = details.into_iter().peekable();
    while let Some(detail) = details.next() {
        let pair = detail.label.as_deref() == Some("replace")
            && details.peek().is_some_and(|next| next.label.as_deref() == Some("with"));
        match details.next_if(|_| pair) {
            Some(with) => shown.push(change_view(&detail.value, &with.value).into_any()),
            None => shown.push(detail_view(detail).into_any()),
        }
    }
    shown
}

/// `old` replaced by `new` as diff lines: the lines both share at the start
/// and the end as context, the rest removed then added.
pub fn change_lines(old: &str, new: &str) -> Vec<(char, String)> {
    let (old, new): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail =
        old[head..].iter().rev().zip(new[head..].iter().rev()).take_while(|(a, b)| a == b).count();
    let context = |lines: &[&str]| lines.iter().map(|line| (' ', (*line).to_owned())).collect();
    let mut lines: Vec<(char, String)> = context(&old[..head]);
    lines.extend(old[head..old.len() - tail].iter().map(|line| ('-', (*line).to_owned())));
    lines.extend(new[head..new.len() - tail].iter().map(|line| ('+', (*line).to_owned())));
    lines.extend(context(&old[old.len() - tail..]));
    lines
}

fn change_view(old: &str, new: &str) -> impl IntoView {
    let lines = change_lines(&escaped(old), &escaped(new));
    let count = lines.len();
    let long = count > COLLAPSED_LINES;
    let open = RwSignal::new(false);
    let toggle =
        move || if open.get() { "Show less".to_owned() } else { format!("Show all {count} lines") };
    let lines = lines
        .into_iter()
        .map(|(sign, line)| {
            let class = match sign {
                '+' => "line add",
                '-' => "line del",
                _ => "line",
            };
            view! { <div class=class>{format!("{sign}{line}")}</div> }
        })
        .collect_view();
    view! {
        <dt>"change"</dt>
        <dd data-format="diff" data-label="change">
            <div class="render diff" class:collapsed=move || long && !open.get()>{lines}</div>
            {long.then(|| view! {
                <button type="button" class="show-all" on:click=move |_| open.update(|open| *open = !*open)>{toggle}</button>
            })}
        </dd>
    }
}

fn detail_view(detail: PermissionDetail) -> impl IntoView {
    let format = match detail.format {
        Some(DetailFormat::Text) => "text",
        Some(DetailFormat::Command) => "command",
        Some(DetailFormat::Path) => "path",
        Some(DetailFormat::Code) => "code",
        Some(DetailFormat::Unknown) => "unknown",
        None => "",
    };
    let label = escaped(detail.label.as_deref().unwrap_or_default());
    let value = escaped(&detail.value);
    let lines = value.lines().count();
    let long = lines > COLLAPSED_LINES || value.len() > 100 * COLLAPSED_LINES;
    let open = RwSignal::new(false);
    let toggle =
        move || if open.get() { "Show less".to_owned() } else { format!("Show all {lines} lines") };
    // A path may break after any `/`, not inside a name.
    let shown = if format == "path" {
        value
            .split_inclusive('/')
            .map(|part| view! { <span class="path-part">{part.to_owned()}</span><wbr/> })
            .collect_view()
            .into_any()
    } else {
        value.into_any()
    };
    view! {
        <dt>{label.clone()}</dt>
        <dd data-format=format data-label=label>
            <pre class:collapsed=move || long && !open.get()>{shown}</pre>
            {long.then(|| view! {
                <button type="button" class="show-all" on:click=move |_| open.update(|open| *open = !*open)>{toggle}</button>
            })}
        </dd>
    }
}

#[cfg(test)]
mod tests {
    use super::change_lines;

    fn signs(lines: &[(char, String)]) -> Vec<String> {
        lines.iter().map(|(sign, line)| format!("{sign}{line}")).collect()
    }

    #[test]
    fn an_edit_reads_as_the_lines_it_removes_and_adds_between_what_stays() {
        let lines = change_lines("fn a() {\n    old();\n}", "fn a() {\n    new();\n    more();\n}");
        assert_eq!(
            signs(&lines),
            [" fn a() {", "-    old();", "+    new();", "+    more();", " }"]
        );
        // What both sides share is never counted twice.
        assert_eq!(signs(&change_lines("x\nx", "x")), [" x", "-x"]);
        assert_eq!(signs(&change_lines("same", "same\nadded")), [" same", "+added"]);
        assert_eq!(signs(&change_lines("one", "two")), ["-one", "+two"]);
    }
}
