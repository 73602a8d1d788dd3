//! The transcript on screen: a keyed, windowed list of rows
//! (crate::transcript). At most
//! [`WINDOW_ROWS`](crate::transcript::WINDOW_ROWS) rows are in the DOM; while
//! the user follows the end the window slides with it, and "Show earlier" /
//! "Show later" page it by [`PAGE_ROWS`]. A streaming block is its chunks as
//! text nodes (a delta rewrites one); a complete text block is markdown,
//! rendered once. The view stays at the end while the user is there
//! (crate::follow), with no work per delta. The row marked by a find or a
//! search result (crate::find) is scrolled into view whenever it is marked.
//!
//! Each row is wrapped in a box-less element (`display: contents`) that
//! carries its key and whether it is marked, so the rows' own elements stay
//! the list's flex items.

use leptos::html;
use leptos::prelude::*;

use std::ops::Range;

use super::tools::ToolView;
use super::{Details, state};
use crate::find::Find;
#[cfg(feature = "hydrate")]
use crate::follow::Follower;
use crate::markdown::{Markdown, Ticked};
use crate::transcript::{self, Message, PAGE_ROWS, Row, RowKind, TextBlock};

/// Off the browser (the daemon's render of the page) nothing scrolls.
#[cfg(not(feature = "hydrate"))]
#[derive(Clone)]
struct Follower;

/// The transcript: its code (rows, tool views, markdown) is a chunk of
/// its own, fetched when an agent is first on screen, as the header and
/// the prompt box are; nothing of it is wanted before.
#[component]
pub fn Transcript() -> impl IntoView {
    super::deferred(|| true, transcript_body)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(transcript_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn transcript_body() -> Result<AnyView, super::Unloaded> {
    Ok(transcript_view().into_any())
}

fn transcript_view() -> impl IntoView {
    let (screen, find) = (state().screen, state().find);
    let rows = screen.transcript;
    let start = screen.window_start;
    let range = Memo::new(move |_| transcript::shown(start.get(), rows.with(Vec::len)));
    let later = move || rows.with(Vec::len).saturating_sub(range.get().end);
    // Scrolled up from the end (crate::follow): "Jump to the latest" shows.
    let away = RwSignal::new(false);
    let scroller: NodeRef<html::Div> = NodeRef::new();
    let content: NodeRef<html::Div> = NodeRef::new();
    // How the view jumps to the end, once it follows it (hydrate only).
    let follower = StoredValue::new_local(None);
    #[cfg(feature = "hydrate")]
    follow_end(scroller, content, start, find.marked, away, follower);
    let to_end = screen.scroll_to_end;
    scroll_when_asked(scroller, to_end, find, follower);
    // A first run: an empty transcript on the demo model shows what it does.
    let roster = state().roster;
    let demo = Memo::new(move |_| {
        rows.with(Vec::is_empty)
            && screen.selected.get().is_some_and(|agent_id| roster.on_demo_model(&agent_id))
    });
    // One Tab stop; ↑/↓ between messages, whose Fork is then the next.
    let on_key = move |event: leptos::ev::KeyboardEvent| {
        #[cfg(feature = "hydrate")]
        if let Some(transcript) = scroller.get_untracked() {
            crate::message_keys::step(&event, &transcript);
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = event;
    };
    let on_focus = move |event: leptos::ev::FocusEvent| {
        #[cfg(feature = "hydrate")]
        if let Some(transcript) = scroller.get_untracked() {
            use wasm_bindgen::JsCast;
            let focused = event.target().and_then(|target| target.dyn_into().ok());
            crate::message_keys::focus_moved(&transcript, focused);
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = event;
    };
    view! {
        <div class="transcript" node_ref=scroller data-rows=move || rows.with(Vec::len).to_string()
            tabindex="0" aria-label="Transcript" title="↑ and ↓ go from message to message"
            on:keydown=on_key on:focusin=on_focus>
            {super::deferred(move || demo.get(), examples)}
            <RowWindow range=range content=content/>
            <Show when=move || away.get() && later() == 0>
                <button type="button" class="jump-latest" on:click=move |_| to_end.update(|bump| *bump += 1)>
                    "↓ Latest"
                </button>
            </Show>
        </div>
    }
}

/// The rows in the DOM (`range` of the transcript), each keyed and marked
/// when found, between "Show earlier" and "Show later", which page the
/// window by [`PAGE_ROWS`].
#[component]
fn RowWindow(range: Memo<Range<usize>>, content: NodeRef<html::Div>) -> impl IntoView {
    let (screen, find) = (state().screen, state().find);
    let marked = find.marked;
    let rows = screen.transcript;
    let start = screen.window_start;
    let earlier = move || range.get().start;
    let later = move || rows.with(Vec::len).saturating_sub(range.get().end);
    let show_earlier =
        move |_| start.set(Some(range.get_untracked().start.saturating_sub(PAGE_ROWS)));
    let show_later = move |_| {
        let shown = range.get_untracked();
        let len = rows.with_untracked(Vec::len);
        start.set((shown.end + PAGE_ROWS < len).then_some(shown.start + PAGE_ROWS));
    };
    view! {
        <div class="rows" node_ref=content>
            <Show when=move || { earlier() > 0 }>
                <button class="page earlier" on:click=show_earlier>
                    {move || format!("Show earlier ({} more)", earlier())}
                </button>
            </Show>
            <For each=move || transcript::window(rows, range.get()) key=|row| row.key
                children=move |row| {
                    let key = row.key;
                    view! {
                        <div class="row" data-row=key class:marked=move || marked.get() == Some(key)>
                            <RowView row=row/>
                        </div>
                    }
                }/>
            <Show when=move || { later() > 0 }>
                <div class="page later">
                    <button on:click=show_later>{move || format!("Show later ({} more)", later())}</button>
                    <button on:click=move |_| { marked.set(None); start.set(None); }>"Jump to the latest"</button>
                </div>
            </Show>
        </div>
    }
}

/// Keeps the view at the end while the reader is there (crate::follow).
#[cfg(feature = "hydrate")]
fn follow_end(
    scroller: NodeRef<html::Div>,
    content: NodeRef<html::Div>,
    start: RwSignal<Option<usize>>,
    marked: RwSignal<Option<u64>>,
    away: RwSignal<bool>,
    follower: StoredValue<Option<Follower>, LocalStorage>,
) {
    // Set as the view goes, so that a scroll or a resize told after it
    // reads none of its signals.
    let gone = {
        let gone = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let going = gone.clone();
        on_cleanup(move || going.store(true, std::sync::atomic::Ordering::Relaxed));
        gone
    };
    Effect::new(move |done: Option<bool>| {
        if done == Some(true) {
            return true;
        }
        match (scroller.get(), content.get()) {
            (Some(scroller), Some(content)) => {
                // Paged back, or a row marked (found, or a search result's
                // message): nothing follows the end until the mark goes.
                let following =
                    move || start.get_untracked().is_none() && marked.get_untracked().is_none();
                let made =
                    crate::follow::stick_to_end(scroller, content, following, away, gone.clone());
                follower.set_value(Some(made));
                true
            }
            _ => false,
        }
    });
}

/// Moves the view when asked: to the end when `to_end` is bumped, to a
/// row when a find or a search result marks it.
fn scroll_when_asked(
    scroller: NodeRef<html::Div>,
    to_end: RwSignal<u64>,
    find: Find,
    follower: StoredValue<Option<Follower>, LocalStorage>,
) {
    // Opening an agent, or sending a prompt, shows the end and follows it.
    Effect::new(move |_| {
        to_end.track();
        request_animation_frame(move || {
            #[cfg(feature = "hydrate")]
            if let Some(Some(follower)) = follower.try_with_value(Clone::clone) {
                return follower.to_end();
            }
            #[cfg(not(feature = "hydrate"))]
            let _ = follower;
            if let Some(scroller) = scroller.get_untracked() {
                scroller.set_scroll_top(scroller.scroll_height());
            }
        });
    });
    // A row marked by a find or a search result: into view, once the
    // window holding it is rendered.
    Effect::new(move |_| {
        find.reveal.track();
        let Some(key) = find.marked.get_untracked() else { return };
        #[cfg(feature = "hydrate")]
        request_animation_frame(move || reveal_row(key));
        #[cfg(not(feature = "hydrate"))]
        let _ = key;
    });
}

/// What the built-in `demo` model does (CONTRACT.md, "The built-in `demo`
/// model"), as prompts one tap sends: a stream, a command that asks first,
/// a file written with its diff, a question. Shown while the transcript of
/// an agent on that model is empty; a chunk of its own, fetched then.
const EXAMPLES: [(&str, &str); 4] = [
    ("Stream a reply", "stream: 40"),
    ("Run a command (it asks you first)", "run: ls -la"),
    ("Write a file, shown as a diff", "write: hello.md\n# Hello\nWritten by the demo agent."),
    ("Ask you a question", "ask: What should the next agent work on?"),
];

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(examples, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn examples() -> Result<AnyView, super::Unloaded> {
    let (screen, roster) = (state().screen, state().roster);
    let rows = screen.transcript;
    let shown = move || {
        rows.with(Vec::is_empty)
            && screen.selected.get().is_some_and(|agent_id| roster.on_demo_model(&agent_id))
    };
    Ok(view! {
        <section class="examples" aria-label="Try the demo model" hidden=move || !shown()>
            <h3>"Try the demo model"</h3>
            <p>"It needs no API key: a line that starts with one of these words tells it what to do. Each button sends one."</p>
            <ul>
                {EXAMPLES.map(|(what, text)| view! {
                    <li><button type="button" class="example" on:click=move |_| { screen.prompt(text, None); }>
                        <span class="example-what">{what}</span>
                        <code>{text}</code>
                    </button></li>
                }).collect_view()}
            </ul>
            <p class="example-more">"Anything else is said back word by word. A model of your own goes in config.toml (docs/AGENT.md)."</p>
        </section>
    }
    .into_any())
}

/// Scrolls the row `key` of the transcript into view, in the middle.
#[cfg(feature = "hydrate")]
fn reveal_row(key: u64) {
    let selector = format!(".transcript .row[data-row=\"{key}\"] > *");
    let Some(found) = document().query_selector(&selector).ok().flatten() else { return };
    let options = web_sys::ScrollIntoViewOptions::new();
    options.set_block(web_sys::ScrollLogicalPosition::Center);
    found.scroll_into_view_with_scroll_into_view_options(&options);
}

#[component]
fn RowView(row: Row) -> impl IntoView {
    match row.kind {
        RowKind::User { text, entry_id } => {
            // Once its entry is known, it can be edited and sent again
            // (unless it is the first: there is nothing before it).
            let rows = state().screen.transcript;
            let said = text.clone();
            let edit = move || {
                let before = crate::transcript::entry_before(rows, &entry_id.get()?)?;
                Some(view! { <EditButton before=before text=said.to_string()/> })
            };
            // Focusable, so that a tap selects it and shows its Edit.
            view! { <div class="message user" tabindex="-1"><Markdown text=text.to_string()/>{edit}</div> }
                .into_any()
        }
        RowKind::Assistant(message) => view! { <MessageView message=message/> }.into_any(),
        RowKind::Tool(tool) => view! { <ToolView tool=tool/> }.into_any(),
        RowKind::Compaction { index, tokens_before, tokens_after } => {
            let text = if tokens_before > 0 {
                format!("compacted (#{index}): {tokens_before} → {tokens_after} tokens")
            } else {
                format!("earlier conversation summarized (#{index})")
            };
            view! { <div class="compaction" role="separator">{text}</div> }.into_any()
        }
        RowKind::Notice { text, error, retry } => {
            let retry = retry.map(|prompt| {
                let screen = state().screen;
                let sent = RwSignal::new(false);
                let again = move |_| {
                    if screen.prompt(&prompt, None) {
                        sent.set(true);
                    }
                };
                view! {
                    <button type="button" class="retry" prop:disabled=move || sent.get() on:click=again>
                        "Retry"
                    </button>
                }
            });
            view! { <div class="notice-line" class:error=error><Ticked text=text.to_string()/>{retry}</div> }
                .into_any()
        }
    }
}

#[component]
fn MessageView(message: Message) -> impl IntoView {
    let blocks = message.blocks.clone();
    let entry = message.entry_id.clone();
    let fork = message.entry_id.clone();
    let aborted = message.aborted.clone();
    view! {
        <div class="message assistant" tabindex="-1" data-message-id=message.message_id.to_string()
            data-complete=move || entry.with(Option::is_some).to_string()>
            <For each=move || blocks.get() key=|block| block.key let:block>
                <BlockView block=block/>
            </For>
            {move || aborted.get().then(|| view! { <p class="stopped">"Stopped here: the turn was aborted."</p> })}
            {move || fork.get().map(|entry_id| view! { <ForkButton entry_id=entry_id/> })}
        </div>
    }
}

/// "Fork": a new session with the conversation up to this message; the
/// agent stays on its own until the user switches (the sessions panel). A
/// fork mid-turn is refused by the agent, and the refusal shown: the row
/// does not follow the status (a transcript of any length stays cheap).
#[component]
fn ForkButton(entry_id: String) -> impl IntoView {
    let state = state();
    if forks_elsewhere(&state) {
        return ().into_any();
    }
    let ledger = state.ledger;
    let fork = move |_| ledger.fork_at(&entry_id);
    // Its label is the stylesheet's (`::before`), so that a message's text
    // stays the message's own (what copying or reading it gives).
    view! {
        <button type="button" class="fork" tabindex="-1" on:click=fork aria-label="Fork"
            title="A new session with the conversation up to here"></button>
    }
    .into_any()
}

/// "Edit" on a user message: a new session with the conversation before
/// it, switched to, with the message in the box to change and send
/// (crate::ledger::Ledger::edit_from). Fork on a reply keeps a message
/// that would then wait unanswered; this is what a person means instead.
#[component]
fn EditButton(before: String, text: String) -> impl IntoView {
    let state = state();
    if forks_elsewhere(&state) {
        return ().into_any();
    }
    let ledger = state.ledger;
    let edit = move |_| ledger.edit_from(&before, text.clone());
    view! {
        <button type="button" class="fork edit" tabindex="-1" on:click=edit aria-label="Edit"
            title="Change this message and send it again: a new session from here, the old one kept"></button>
    }
    .into_any()
}

/// The agent on screen is not Shard's own: it keeps its own sessions, and
/// cannot fork (so it offers no Fork and no Edit).
fn forks_elsewhere(state: &crate::state::ClientState) -> bool {
    state.screen.selected.with_untracked(|selected| {
        selected.as_deref().is_some_and(|agent_id| state.roster.is_foreign(agent_id))
    })
}

/// A block's text: its chunks while it streams, then its final text once.
fn block_text(block: &TextBlock) -> impl IntoView + use<> {
    let (done, chunks, thinking) = (block.done.clone(), block.chunks.clone(), block.thinking);
    move || match done.get() {
        Some(text) if thinking => text.to_string().into_any(),
        Some(text) => view! { <Markdown text=text.to_string()/> }.into_any(),
        None => {
            let chunks = chunks.clone();
            let each = move || chunks.get().into_iter().enumerate().collect::<Vec<_>>();
            let streamed = view! {
                <For each=each key=|(index, _)| *index
                    children=|(_, chunk)| view! { <span class="chunk">{move || chunk.get()}</span> }/>
            };
            if thinking {
                streamed.into_any()
            } else {
                view! { <div class="markdown streaming"><p>{streamed}</p></div> }.into_any()
            }
        }
    }
}

#[component]
fn BlockView(block: TextBlock) -> impl IntoView {
    let text = block_text(&block);
    if block.thinking {
        view! {
            <Details class="thinking" open=block.open.clone()>
                <summary>"thinking"</summary>
                <div class="thinking-text">{text}</div>
            </Details>
        }
        .into_any()
    } else {
        text.into_any()
    }
}
