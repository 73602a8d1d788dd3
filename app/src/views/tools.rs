//! Tool calls as they run and finish, and every render descriptor kind as
//! plain DOM text.

use leptos::prelude::*;
use serde_json::Value;
use shard_protocol::types::{PathKind, RenderDescriptor, Tone, ToolResultContent};

use super::Details;
use crate::transcript::{Tool, ToolCall};

fn content_text(content: &ToolResultContent) -> String {
    match content {
        ToolResultContent::Text { text } => text.clone(),
        ToolResultContent::Json { value } => {
            serde_json::to_string_pretty(value).unwrap_or_default()
        }
        ToolResultContent::Error { message } => message.clone(),
        ToolResultContent::Unknown => String::new(),
    }
}

/// Every render descriptor kind, each as plain DOM text.
pub fn render_descriptor(render: RenderDescriptor) -> AnyView {
    match render {
        RenderDescriptor::Text { text } => view! { <pre class="render text">{text}</pre> }.into_any(),
        RenderDescriptor::Kv { pairs } => view! {
            <dl class="render kv">
                {pairs.into_iter().map(|pair| view! { <dt>{pair.k}</dt><dd>{pair.v}</dd> }).collect_view()}
            </dl>
        }.into_any(),
        RenderDescriptor::Diff { path, hunks } => view! {
            <div class="render diff">
                <div class="path">{path}</div>
                {hunks.into_iter().map(|hunk| view! {
                    <div class="hunk">
                        <div class="hunk-header">{format!("@@ -{},{} +{},{} @@", hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines)}</div>
                        {hunk.lines.into_iter().map(|line| {
                            let class = match line.chars().next() { Some('+') => "line add", Some('-') => "line del", _ => "line" };
                            view! { <div class=class>{line}</div> }
                        }).collect_view()}
                    </div>
                }).collect_view()}
            </div>
        }.into_any(),
        RenderDescriptor::Tree { root } => view! { <pre class="render tree">{tree_text(&root, 0)}</pre> }.into_any(),
        RenderDescriptor::Progress { label, current, total } => {
            let max = total.unwrap_or(current.max(1));
            view! {
                <div class="render progress"><span>{label}</span>
                    <progress max=max.to_string() value=current.to_string()></progress>
                    <span>{format!("{current}/{max}")}</span>
                </div>
            }.into_any()
        }
        RenderDescriptor::Status { label, tone } => {
            let tone = match tone {
                Tone::Info => "info",
                Tone::Warn => "warn",
                Tone::Error => "error",
                Tone::Unknown => "unknown",
            };
            view! { <div class="render status" data-tone=tone>{label}</div> }.into_any()
        }
        RenderDescriptor::Command { command, exit_code, duration_ms } => view! {
            <div class="render command"><code>"$ "{command}</code>
                {exit_code.map(|code| view! { <span class="exit">{format!("exit {code}")}</span> })}
                {duration_ms.map(|ms| view! { <span class="duration">{format!("{ms} ms")}</span> })}
            </div>
        }.into_any(),
        RenderDescriptor::PathList { paths } => view! {
            <ul class="render path-list">
                {paths.into_iter().map(|entry| {
                    let kind = match entry.kind {
                        PathKind::File => "file",
                        PathKind::Dir => "dir",
                        PathKind::Unknown => "unknown",
                    };
                    view! { <li data-kind=kind><span class="path">{entry.path}</span>{entry.hint.map(|hint| view! { <span class="hint">{hint}</span> })}</li> }
                }).collect_view()}
            </ul>
        }.into_any(),
        RenderDescriptor::Code { path, lang, text } => view! {
            <div class="render code">
                {path.map(|path| view! { <div class="path">{path}{lang.map(|lang| format!(" · {lang}"))}</div> })}
                <pre><code>{text}</code></pre>
            </div>
        }.into_any(),
        RenderDescriptor::Unknown => ().into_any(),
    }
}

/// A render descriptor in a tool card. Its code is a WASM chunk of its
/// own, fetched with the first card that has one (`views::deferred`).
#[component]
fn Rendered(render: RenderDescriptor) -> impl IntoView {
    super::deferred(|| true, move || rendered(render.clone()))
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(tool_render, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn rendered(render: RenderDescriptor) -> Result<AnyView, super::Unloaded> {
    Ok(render_descriptor(render))
}

/// A JSON result as fields, its code a chunk of its own like [`Rendered`].
#[component]
fn JsonFields(value: Value) -> impl IntoView {
    super::deferred(|| true, move || json_fields(value.clone()))
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(tool_json, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn json_fields(value: Value) -> Result<AnyView, super::Unloaded> {
    Ok(json_view(&value, 0))
}

/// How deep and how wide a JSON result is drawn as fields; the rest is
/// in the raw output below it.
const JSON_DEPTH: usize = 4;
const JSON_ITEMS: usize = 50;

/// A JSON value as nested fields: an object as names and values, an array
/// as a numbered list, a scalar as its text.
fn json_view(value: &Value, depth: usize) -> AnyView {
    let more = |count: usize| {
        (count > JSON_ITEMS).then(|| format!("… {} more (in the output)", count - JSON_ITEMS))
    };
    match value {
        Value::Object(fields) if depth < JSON_DEPTH => {
            let rows = fields
                .iter()
                .take(JSON_ITEMS)
                .map(|(name, value)| view! { <dt>{name.clone()}</dt><dd>{json_view(value, depth + 1)}</dd> })
                .collect_view();
            let more =
                more(fields.len()).map(|more| view! { <dt>"…"</dt><dd class="more">{more}</dd> });
            view! { <dl class="kv">{rows}{more}</dl> }.into_any()
        }
        Value::Array(items) if depth < JSON_DEPTH => {
            let rows = items
                .iter()
                .take(JSON_ITEMS)
                .map(|item| view! { <li>{json_view(item, depth + 1)}</li> })
                .collect_view();
            let more = more(items.len()).map(|more| view! { <li class="more">{more}</li> });
            view! { <ol class="items">{rows}{more}</ol> }.into_any()
        }
        Value::String(text) => text.clone().into_any(),
        Value::Null => "—".into_any(),
        other => other.to_string().into_any(),
    }
}

fn tree_text(node: &shard_protocol::types::TreeNode, depth: usize) -> String {
    let mut text = format!("{}{}\n", "  ".repeat(depth), node.name);
    for child in &node.children {
        text.push_str(&tree_text(child, depth + 1));
    }
    text
}

/// One tool call. It re-renders only when the call itself changes (its
/// start, then its result); an opened raw output stays open.
#[component]
pub fn ToolView(tool: Tool) -> impl IntoView {
    let open = tool.open.clone();
    move || {
        let ToolCall { name, args, read_only, start, result } = tool.call.get();
        let summary = match (name.as_str(), &args) {
            ("bash", args) => args["command"].as_str().unwrap_or_default().to_owned(),
            (_, args) => args
                .get("path")
                .or(args.get("pattern"))
                .or(args.get("question"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        };
        let kind = if read_only == Some(true) { "read" } else { "write" };
        let (state_class, footer) = match &result {
            None => ("running", None),
            Some(result) => {
                let mut parts = Vec::new();
                if let Some(code) = result.exit_code {
                    parts.push(format!("exit code {code}"));
                }
                if let Some(ms) = result.duration_ms {
                    parts.push(format!("{ms} ms"));
                }
                if result.is_error && result.exit_code.is_none() {
                    parts.push("failed".to_owned());
                }
                (if result.is_error { "error" } else { "done" }, Some(parts.join(" · ")))
            }
        };
        let running = result.is_none();
        let body = result.map(|result| {
            let text = content_text(&result.content);
            match result.render {
                Some(render) if !matches!(render, RenderDescriptor::Unknown) => view! {
                    <Rendered render=render/>
                    <Details class="raw" open=open.clone()>
                        <summary>"output"</summary><pre>{text}</pre>
                    </Details>
                }
                .into_any(),
                _ => match result.content {
                    // Data reads as fields, with the JSON itself a click away.
                    ToolResultContent::Json { value } if value.is_object() || value.is_array() => {
                        view! {
                            <div class="render json"><JsonFields value=value/></div>
                            <Details class="raw" open=open.clone()>
                                <summary>"output"</summary><pre>{text}</pre>
                            </Details>
                        }
                        .into_any()
                    }
                    _ => view! { <pre class="output">{text}</pre> }.into_any(),
                },
            }
        });
        view! {
            <div class="tool" data-kind=kind data-state=state_class>
                <div class="tool-line"><span class="tool-name">{name}</span><code class="tool-args">{summary}</code></div>
                {start.filter(|_| running).map(|render| view! { <Rendered render=render/> })}
                {body}
                {footer.filter(|text| !text.is_empty()).map(|text| view! { <div class="tool-footer">{text}</div> })}
            </div>
        }
    }
}
