//! The dashboard's components: the agent list, the agent view (transcript,
//! tools, prompt, pickers), the question dialog and the approval inbox.

use leptos::html;
use leptos::prelude::*;
use serde_json::Value;
use shard_protocol::agent::{
    Decision, PendingKind, PermissionAnswer, PermissionRequest, StreamingBehavior, ToolResult,
    UiKind, UiRequest, UiValue,
};
use shard_protocol::orchestrator::ActivityPhase;
use shard_protocol::types::{
    AgentInfo, AgentStatus, RenderDescriptor, RuntimeState, ToolResultContent,
};

use crate::guard;
use crate::markdown::Markdown;
use crate::state::{Answer, Block, ClientState, Connection, Item, Question};

pub fn status_label(status: AgentStatus) -> &'static str {
    match status {
        AgentStatus::Idle => "idle",
        AgentStatus::Streaming => "streaming",
        AgentStatus::WaitingForPermission => "waiting for permission",
        AgentStatus::WaitingForUi => "waiting for an answer",
        AgentStatus::Compacting => "compacting",
        AgentStatus::Error => "error",
        AgentStatus::Unknown => "unknown",
    }
}

fn runtime_label(state: RuntimeState) -> &'static str {
    match state {
        RuntimeState::Starting => "starting",
        RuntimeState::Running => "running",
        RuntimeState::Stopped => "stopped",
        RuntimeState::Failed => "failed",
        RuntimeState::Unknown => "unknown",
    }
}

fn phase_label(phase: ActivityPhase) -> &'static str {
    match phase {
        ActivityPhase::Idle => "idle",
        ActivityPhase::Thinking => "thinking",
        ActivityPhase::Streaming => "writing",
        ActivityPhase::Tool => "running a tool",
        ActivityPhase::Waiting => "waiting",
        ActivityPhase::Compacting => "compacting",
        ActivityPhase::Retrying => "retrying",
        ActivityPhase::Error => "error",
        ActivityPhase::Unknown => "",
    }
}

fn waiting(status: AgentStatus) -> bool {
    matches!(status, AgentStatus::WaitingForPermission | AgentStatus::WaitingForUi)
}

// ---------------------------------------------------------------------------
// The agent list
// ---------------------------------------------------------------------------

#[component]
pub fn CreateAgent(state: ClientState) -> impl IntoView {
    let cwd = RwSignal::new(String::new());
    let name = RwSignal::new(String::new());
    let model = RwSignal::new(String::new());
    let mode = RwSignal::new(String::new());
    let connected = move || state.connection.get() == Connection::Connected;
    let submit = {
        let state = state.clone();
        move |event: leptos::ev::SubmitEvent| {
            event.prevent_default();
            let cwd_value = cwd.get_untracked();
            if cwd_value.trim().is_empty() {
                state
                    .notice
                    .set(Some("Give the agent a working directory (an absolute path).".to_owned()));
                return;
            }
            state.create_agent(
                cwd_value.trim(),
                name.get_untracked().trim(),
                model.get_untracked().trim(),
                &mode.get_untracked(),
            );
            name.set(String::new());
        }
    };
    view! {
        <details class="create-panel">
            <summary>"New agent"</summary>
            <form class="create" on:submit=submit aria-label="Create an agent">
                <label>"Working directory"
                    <input name="cwd" type="text" placeholder="/home/me/project" required
                        prop:value=cwd on:input=move |event| cwd.set(event_target_value(&event))/>
                </label>
                <label>"Name"
                    <input name="name" type="text" placeholder="optional"
                        prop:value=name on:input=move |event| name.set(event_target_value(&event))/>
                </label>
                <label>"Model"
                    <input name="model" type="text" placeholder="default"
                        prop:value=model on:input=move |event| model.set(event_target_value(&event))/>
                </label>
                <label>"Mode"
                    <select name="mode" on:change=move |event| mode.set(event_target_value(&event))>
                        <option value="">"default"</option>
                        <option value="build">"build"</option>
                        <option value="plan">"plan"</option>
                    </select>
                </label>
                <button type="submit" disabled=move || !connected()>"Create agent"</button>
            </form>
        </details>
    }
}

#[component]
pub fn AgentList(state: ClientState) -> impl IntoView {
    let filter = RwSignal::new(String::new());
    let sort = RwSignal::new("created".to_owned());
    let agents = state.agents;
    let activity = state.activity;
    let selected = state.selected;
    let rows = move || {
        let needle = filter.get().to_lowercase();
        let mut list: Vec<AgentInfo> = agents
            .get()
            .into_iter()
            .filter(|agent| {
                needle.is_empty()
                    || [
                        agent.name.as_deref().unwrap_or(""),
                        &agent.cwd,
                        &agent.agent_id,
                        agent.model.as_deref().unwrap_or(""),
                    ]
                    .iter()
                    .any(|field| field.to_lowercase().contains(&needle))
            })
            .collect();
        match sort.get().as_str() {
            "name" => {
                list.sort_by_key(|agent| agent.name.clone().unwrap_or_default().to_lowercase())
            }
            "status" => {
                list.sort_by_key(|agent| (!waiting(agent.status), status_label(agent.status)))
            }
            "cost" => list.sort_by(|a, b| {
                let cost = |agent: &AgentInfo| {
                    agent.usage.as_ref().map_or(0, |usage| usage.input + usage.output)
                };
                cost(b).cmp(&cost(a))
            }),
            _ => {}
        }
        list
    };
    view! {
        <section class="agent-list" aria-label="Agents">
            <div class="list-tools">
                <input type="search" class="filter" placeholder="Filter agents" aria-label="Filter agents"
                    prop:value=filter on:input=move |event| filter.set(event_target_value(&event))/>
                <label class="sort">"Sort"
                    <select aria-label="Sort agents" on:change=move |event| sort.set(event_target_value(&event))>
                        <option value="created">"created"</option>
                        <option value="name">"name"</option>
                        <option value="status">"needs me"</option>
                        <option value="cost">"usage"</option>
                    </select>
                </label>
            </div>
            <ul class="agents">
                {move || {
                    let list = rows();
                    if list.is_empty() {
                        return view! { <li class="empty">"No agents yet."</li> }.into_any();
                    }
                    list.into_iter().map(|info| {
                        let id = info.agent_id.clone();
                        let phase = activity.with(|map| map.get(&id).cloned());
                        let doing = phase.map(|(phase, tool)| match tool {
                            Some(tool) => format!("{} · {tool}", phase_label(phase)),
                            None => phase_label(phase).to_owned(),
                        });
                        let usage = info.usage.as_ref().map(|usage| match usage.cost {
                            Some(cost) => format!("{} tok · ${cost:.4}", usage.input + usage.output),
                            None => format!("{} tok", usage.input + usage.output),
                        });
                        let is_selected = selected.get().as_deref() == Some(id.as_str());
                        let select = {
                            let state = state.clone();
                            let id = id.clone();
                            move |_| state.select(Some(id.clone()))
                        };
                        view! {
                            <li class="agent" class:selected=is_selected data-agent-id=id.clone()>
                                <button class="open" on:click=select aria-label=format!("Open {}", info.name.clone().unwrap_or_else(|| id.clone()))>
                                    <span class="name">{info.name.clone().unwrap_or_else(|| id.clone())}</span>
                                    {waiting(info.status).then(|| view! { <span class="badge" title="waiting for an answer">"needs you"</span> })}
                                </button>
                                <span class="status" data-status=status_label(info.status)>{status_label(info.status)}</span>
                                <span class="runtime">{runtime_label(info.runtime_state)}</span>
                                <span class="activity">{doing}</span>
                                <span class="cwd" title=info.cwd.clone()>{info.cwd.clone()}</span>
                                <span class="model">{[info.model.clone(), info.mode.clone()].into_iter().flatten().collect::<Vec<_>>().join(" · ")}</span>
                                <span class="usage">{usage}</span>
                            </li>
                        }
                    }).collect_view().into_any()
                }}
            </ul>
        </section>
    }
}

// ---------------------------------------------------------------------------
// The agent view
// ---------------------------------------------------------------------------

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
            let tone = format!("{tone:?}").to_lowercase();
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
                    let kind = format!("{:?}", entry.kind).to_lowercase();
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

fn tree_text(node: &shard_protocol::types::TreeNode, depth: usize) -> String {
    let mut text = format!("{}{}\n", "  ".repeat(depth), node.name);
    for child in &node.children {
        text.push_str(&tree_text(child, depth + 1));
    }
    text
}

#[component]
fn ToolView(
    name: String,
    args: Value,
    read_only: Option<bool>,
    start: Option<RenderDescriptor>,
    result: Option<ToolResult>,
) -> impl IntoView {
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
    let body = result.clone().map(|result| {
        let text = content_text(&result.content);
        match result.render {
            Some(render) if !matches!(render, RenderDescriptor::Unknown) => view! {
                {render_descriptor(render)}
                <details class="raw"><summary>"output"</summary><pre>{text}</pre></details>
            }
            .into_any(),
            _ => view! { <pre class="output">{text}</pre> }.into_any(),
        }
    });
    view! {
        <div class="tool" data-kind=kind data-state=state_class>
            <div class="tool-line"><span class="tool-name">{name}</span><code class="tool-args">{summary}</code></div>
            {start.filter(|_| result.is_none()).map(render_descriptor)}
            {body}
            {footer.filter(|text| !text.is_empty()).map(|text| view! { <div class="tool-footer">{text}</div> })}
        </div>
    }
}

#[component]
fn Transcript(state: ClientState) -> impl IntoView {
    let items = state.transcript;
    view! {
        <div class="transcript" aria-live="polite">
            {move || items.get().into_iter().map(|item| match item {
                Item::User { text } => view! { <div class="message user"><Markdown text=text/></div> }.into_any(),
                Item::Assistant { message_id, blocks, .. } => view! {
                    <div class="message assistant" data-message-id=message_id>
                        {blocks.into_iter().map(|block| match block {
                            Block::Text(text) => view! { <Markdown text=text/> }.into_any(),
                            Block::Thinking(text) => view! {
                                <details class="thinking"><summary>"thinking"</summary><div class="thinking-text">{text}</div></details>
                            }.into_any(),
                        }).collect_view()}
                    </div>
                }.into_any(),
                Item::Tool { name, args, read_only, start, result, .. } => view! {
                    <ToolView name=name args=args read_only=read_only start=start result=result/>
                }.into_any(),
                Item::Compaction { index, tokens_before, tokens_after } => view! {
                    <div class="compaction" role="separator">
                        {if tokens_before > 0 { format!("compacted (#{index}): {tokens_before} → {tokens_after} tokens") } else { format!("earlier conversation summarized (#{index})") }}
                    </div>
                }.into_any(),
                Item::Notice { text, error } => view! { <div class="notice-line" class:error=error>{text}</div> }.into_any(),
            }).collect_view()}
        </div>
    }
}

#[component]
fn Pickers(state: ClientState) -> impl IntoView {
    let s1 = state.clone();
    let s2 = state.clone();
    let s3 = state.clone();
    let s4 = state.clone();
    let s5 = state.clone();
    let s6 = state.clone();
    view! {
        <div class="pickers">
            <Show when=move || s1.has_capability("mode-switch") && !s1.modes.get().is_empty()>
                <label>"Mode"
                    <select aria-label="Mode" on:change={
                        let state = s2.clone();
                        move |event| state.set_mode(event_target_value(&event))
                    }>
                        {let state = s2.clone(); move || state.modes.get().into_iter().map(|mode| {
                            let current = state.mode.get() == mode.name;
                            view! { <option value=mode.name.clone() selected=current title=mode.description>{mode.name.clone()}</option> }
                        }).collect_view()}
                    </select>
                </label>
            </Show>
            <Show when=move || s3.has_capability("model-switch") && !s3.models.get().is_empty()>
                <label>"Model"
                    <select aria-label="Model" on:change={
                        let state = s4.clone();
                        move |event| state.set_model(event_target_value(&event))
                    }>
                        {let state = s4.clone(); move || {
                            let active = state.model.get().map(|model| model.id);
                            state.models.get().into_iter().map(|model| {
                                let current = active.as_deref() == Some(model.id.as_str());
                                view! { <option value=model.id.clone() selected=current>{model.id.clone()}</option> }
                            }).collect_view()
                        }}
                    </select>
                </label>
            </Show>
            <Show when=move || s5.has_capability("reasoning-switch") && !s5.levels.get().is_empty()>
                <label>"Reasoning"
                    <select aria-label="Reasoning" on:change={
                        let state = s6.clone();
                        move |event| {
                            let model = state.model.get_untracked().map(|model| model.id).unwrap_or_default();
                            state.set_reasoning_level(model, event_target_value(&event));
                        }
                    }>
                        {let state = s6.clone(); move || {
                            let active = state.level.get();
                            state.levels.get().into_iter().map(|level| {
                                let current = active.as_deref() == Some(level.id.as_str());
                                view! { <option value=level.id.clone() selected=current>{level.label.clone()}</option> }
                            }).collect_view()
                        }}
                    </select>
                </label>
            </Show>
        </div>
    }
}

#[component]
fn PromptBox(state: ClientState) -> impl IntoView {
    // The draft lives in the state: it survives a reconnect, and a refused
    // prompt comes back into it.
    let text = state.draft;
    let error = state.prompt_error;
    let busy = {
        let status = state.status;
        move || !matches!(status.get(), AgentStatus::Idle | AgentStatus::Error)
    };
    let send = {
        let state = state.clone();
        move |behavior: Option<StreamingBehavior>| {
            let message = text.get_untracked();
            if message.trim().is_empty() {
                return;
            }
            if state.prompt(&message, behavior) {
                text.set(String::new());
            }
        }
    };
    let on_submit = {
        let send = send.clone();
        move |event: leptos::ev::SubmitEvent| {
            event.prevent_default();
            send(busy().then_some(StreamingBehavior::FollowUp));
        }
    };
    let steer = {
        let send = send.clone();
        move |_| send(Some(StreamingBehavior::Steer))
    };
    let abort = {
        let state = state.clone();
        move |_| state.abort()
    };
    let on_key = {
        let send = send.clone();
        move |event: leptos::ev::KeyboardEvent| {
            // Ctrl/Cmd+Enter sends.
            if event.key() == "Enter" && (event.ctrl_key() || event.meta_key()) {
                event.prevent_default();
                send(busy().then_some(StreamingBehavior::FollowUp));
            }
        }
    };
    view! {
        <form class="prompt" on:submit=on_submit aria-label="Prompt">
            <textarea name="prompt" rows="3" aria-label="Message to the agent" placeholder="Message (Ctrl+Enter to send)"
                prop:value=text on:input=move |event| text.set(event_target_value(&event)) on:keydown=on_key></textarea>
            {move || error.get().map(|why| view! { <p class="prompt-error" role="alert">{why}</p> })}
            <div class="prompt-actions">
                <button type="submit">{move || if busy() { "Queue follow-up" } else { "Send" }}</button>
                <Show when=busy>
                    <button type="button" on:click=steer.clone()>"Steer"</button>
                    <button type="button" class="danger" on:click=abort.clone()>"Abort"</button>
                </Show>
            </div>
        </form>
    }
}

#[component]
pub fn AgentView(state: ClientState) -> impl IntoView {
    let s = state.clone();
    view! {
        <Show when=move || s.selected.get().is_some() fallback=|| view! { <section class="agent-view empty"><p>"Select an agent to see its work."</p></section> }>
            {
                let state = state.clone();
                let title = {
                    let state = state.clone();
                    move || state.selected.get().map(|id| state.agent_name(&id)).unwrap_or_default()
                };
                let terminate = {
                    let state = state.clone();
                    move |_| {
                        state.terminate_selected();
                    }
                };
                let kill = {
                    let state = state.clone();
                    move |_| {
                        state.kill_selected();
                    }
                };
                let close = {
                    let state = state.clone();
                    move |_| state.select(None)
                };
                let status = state.status;
                let usage = {
                    let state = state.clone();
                    move || {
                        let selected = state.selected.get()?;
                        state.agents.with(|agents| {
                            let usage = agents.iter().find(|agent| agent.agent_id == selected)?.usage.clone()?;
                            Some(match usage.cost {
                                Some(cost) => format!("{} in · {} out · ${cost:.4}", usage.input, usage.output),
                                None => format!("{} in · {} out", usage.input, usage.output),
                            })
                        })
                    }
                };
                view! {
                    <section class="agent-view" aria-label="Agent">
                        <header class="agent-header">
                            <button class="back" on:click=close aria-label="Back to agents">"←"</button>
                            <h2>{title}</h2>
                            <span class="status" data-status=move || status_label(status.get())>{move || status_label(status.get())}</span>
                            <span class="usage" title="tokens used">{usage}</span>
                            <Pickers state=state.clone()/>
                            <div class="lifecycle">
                                <button on:click=terminate>"Terminate"</button>
                                <button class="danger" on:click=kill>"Kill"</button>
                            </div>
                        </header>
                        <Transcript state=state.clone()/>
                        <PromptBox state=state.clone()/>
                    </section>
                }
            }
        </Show>
    }
}

// ---------------------------------------------------------------------------
// Questions
// ---------------------------------------------------------------------------

/// The answers a permission request offers: the server's choices, else the
/// legacy options. "Always allow" (intent `persist`) never gets a shortcut
/// (crate::guard).
fn permission_answers(
    request: &PermissionRequest,
) -> Vec<(String, String, Option<String>, Answer)> {
    match &request.choices {
        Some(choices) if !choices.is_empty() => choices
            .iter()
            .map(|choice| {
                let intent = format!("{:?}", choice.intent).to_lowercase();
                let key = if intent == "persist" { None } else { choice.accelerator.clone() };
                (
                    choice.label.clone(),
                    intent,
                    key,
                    Answer::Permission(PermissionAnswer::Choice(choice.id.clone())),
                )
            })
            .collect(),
        _ => request
            .options
            .iter()
            .map(|option| {
                let (label, intent, key) = match option {
                    Decision::Allow => ("Allow", "allow", Some("y")),
                    Decision::AllowAlways => ("Always allow", "persist", None),
                    Decision::Deny => ("Deny", "deny", Some("n")),
                };
                (
                    label.to_owned(),
                    intent.to_owned(),
                    key.map(str::to_owned),
                    Answer::Permission(PermissionAnswer::Decision(*option)),
                )
            })
            .collect(),
    }
}

/// The answer a key press gives to `question`, if the guard lets it.
fn shortcut_answer(
    question: &Question,
    event: &leptos::ev::KeyboardEvent,
    shown_at: f64,
) -> Option<Answer> {
    let PendingKind::Permission(request) = &question.request else { return None };
    let answers = permission_answers(request);
    let keys: Vec<String> = answers.iter().filter_map(|(_, _, key, _)| key.clone()).collect();
    let key = event.key();
    let press = guard::Press {
        key: &key,
        ctrl: event.ctrl_key(),
        alt: event.alt_key(),
        meta: event.meta_key(),
        shift: event.shift_key(),
        repeat: event.repeat(),
    };
    let pressed = guard::shortcut(&press, &keys, shown_at, guard::now_ms())?;
    answers
        .into_iter()
        .find(|(_, _, key, _)| key.as_deref() == Some(pressed))
        .map(|(_, _, _, answer)| answer)
}

/// A question's body and answer controls (shared by the dialog and the inbox).
/// Nothing answers before the question is armed (`shown_at`, crate::guard).
#[component]
pub fn QuestionBody(state: ClientState, question: Question, shown_at: f64) -> impl IntoView {
    // The answers are disabled until armed, so they look it too. An effect,
    // so the timer only ever runs in the browser.
    let armed = RwSignal::new(false);
    Effect::new(move |_| {
        let wait = (guard::ARM_DELAY_MS - (guard::now_ms() - shown_at)).max(0.0);
        set_timeout(
            move || {
                armed.try_set(true);
            },
            std::time::Duration::from_millis(wait as u64),
        );
    });
    match question.request.clone() {
        PendingKind::Permission(request) => {
            let details = request.details.clone().unwrap_or_default();
            let answers = permission_answers(&request);
            view! {
                <p class="question-prompt">{request.prompt.clone()}</p>
                <dl class="details">
                    {details.into_iter().map(|detail| {
                        let format = detail.format.map(|format| format!("{format:?}").to_lowercase()).unwrap_or_default();
                        view! { <dt>{detail.label.unwrap_or_default()}</dt><dd data-format=format><pre>{detail.value}</pre></dd> }
                    }).collect_view()}
                </dl>
                <div class="answers">
                    {answers.into_iter().map(|(label, intent, key, answer)| {
                        let state = state.clone();
                        let question = question.clone();
                        // "Always allow" takes a second, separate activation.
                        let persist = intent == "persist";
                        let confirming = RwSignal::new(false);
                        let text = match &key { Some(key) => format!("{label} ({key})"), None => label.clone() };
                        let shown = move || if confirming.get() { format!("Confirm: {}", label.to_lowercase()) } else { text.clone() };
                        let click = move |_| {
                            if !guard::armed(shown_at, guard::now_ms()) {
                                return;
                            }
                            if persist && !confirming.get_untracked() {
                                confirming.set(true);
                                return;
                            }
                            state.answer(&question, answer.clone());
                        };
                        view! {
                            <button class="answer" data-intent=intent data-key=key.unwrap_or_default()
                                prop:disabled=move || !armed.get() class:confirming=move || confirming.get()
                                on:click=click>{shown}</button>
                        }
                    }).collect_view()}
                </div>
            }.into_any()
        }
        PendingKind::Ui(request) => {
            view! { <UiBody state=state question=question request=request shown_at=shown_at armed=armed/> }.into_any()
        }
    }
}

#[component]
fn UiBody(
    state: ClientState,
    question: Question,
    request: UiRequest,
    shown_at: f64,
    armed: RwSignal<bool>,
) -> impl IntoView {
    let value = RwSignal::new(request.prefill.clone().unwrap_or_default());
    let respond = move |answer: Option<UiValue>| {
        if guard::armed(shown_at, guard::now_ms()) {
            state.answer(&question, Answer::Ui(answer))
        }
    };
    let message = request.message.clone().or(request.title.clone()).unwrap_or_default();
    let body = match request.kind {
        UiKind::Select => {
            let respond = respond.clone();
            request.options.clone().unwrap_or_default().into_iter().map(|option| {
                let respond = respond.clone();
                let label = option.clone();
                view! { <button class="answer" prop:disabled=move || !armed.get() on:click=move |_| respond(Some(UiValue::Text(option.clone())))>{label}</button> }
            }).collect_view().into_any()
        }
        UiKind::Confirm => {
            let (yes, no) = (respond.clone(), respond.clone());
            view! {
                <button class="answer" prop:disabled=move || !armed.get() data-intent="allow" on:click=move |_| yes(Some(UiValue::Text("yes".to_owned())))>"Yes"</button>
                <button class="answer" prop:disabled=move || !armed.get() data-intent="deny" on:click=move |_| no(Some(UiValue::Text("no".to_owned())))>"No"</button>
            }.into_any()
        }
        UiKind::Editor => {
            let submit = respond.clone();
            view! {
                <textarea aria-label="Answer" rows="6" prop:value=value on:input=move |event| value.set(event_target_value(&event))></textarea>
                <button class="answer" prop:disabled=move || !armed.get() on:click=move |_| submit(Some(UiValue::Text(value.get_untracked())))>"Submit"</button>
            }.into_any()
        }
        _ => {
            let submit = respond.clone();
            let placeholder = request.placeholder.clone().unwrap_or_default();
            view! {
                <input type="text" aria-label="Answer" placeholder=placeholder prop:value=value on:input=move |event| value.set(event_target_value(&event))/>
                <button class="answer" prop:disabled=move || !armed.get() on:click=move |_| submit(Some(UiValue::Text(value.get_untracked())))>"Submit"</button>
            }.into_any()
        }
    };
    let dismiss = respond.clone();
    view! {
        <p class="question-prompt">{message}</p>
        <div class="answers">{body}<button class="answer" prop:disabled=move || !armed.get() data-intent="deny" on:click=move |_| dismiss(None)>"Dismiss"</button></div>
    }
}

/// The dialog for the selected agent's first open question. It takes focus
/// only when the user is not typing, and then onto itself, never onto an
/// answer; its shortcuts work only while it has focus, once armed; Tab stays
/// inside it; Escape or "Later" closes it and the question stays in the inbox
/// (crate::guard).
#[component]
pub fn QuestionDialog(state: ClientState) -> impl IntoView {
    let current = {
        let state = state.clone();
        Memo::new(move |_| {
            let selected = state.selected.get()?;
            state.open_questions().into_iter().find(|question| question.agent_id == selected)
        })
    };
    view! {
        {move || current.get().map(|question| {
            let state = state.clone();
            let shown_at = guard::now_ms();
            let dialog: NodeRef<html::Div> = NodeRef::new();
            let later: NodeRef<html::Button> = NodeRef::new();
            Effect::new(move |_| {
                if let Some(dialog) = dialog.get() {
                    if !guard::typing() {
                        let _ = dialog.focus();
                    }
                }
            });
            let key = question.key();
            let dismiss = {
                let state = state.clone();
                let key = key.clone();
                move || state.dismissed.update(|dismissed| dismissed.push(key.clone()))
            };
            let on_key = {
                let state = state.clone();
                let question = question.clone();
                let dismiss = dismiss.clone();
                move |event: leptos::ev::KeyboardEvent| {
                    if event.key() == "Escape" {
                        event.prevent_default();
                        dismiss();
                        return;
                    }
                    if let Some(answer) = shortcut_answer(&question, &event, shown_at) {
                        event.prevent_default();
                        state.answer(&question, answer);
                    }
                }
            };
            let agent = state.agent_name(&question.agent_id);
            let title = match &question.request {
                PendingKind::Permission(request) => format!("{agent} asks to use {}", request.tool_name),
                PendingKind::Ui(_) => format!("{agent} asks you"),
            };
            let close = dismiss.clone();
            let to_dialog = move |_| { if let Some(dialog) = dialog.get() { let _ = dialog.focus(); } };
            view! {
                <div class="overlay">
                    <div class="dialog" role="dialog" aria-labelledby="question-title" tabindex="-1" node_ref=dialog
                        on:keydown=on_key data-request-id=question.request.request_id().to_owned()>
                        <span tabindex="0" on:focus=move |_| { if let Some(button) = later.get() { let _ = button.focus(); } }></span>
                        <h2 id="question-title">{title}</h2>
                        <QuestionBody state=state.clone() question=question.clone() shown_at=shown_at/>
                        <button class="later" node_ref=later on:click=move |_| close()>"Later (Esc)"</button>
                        <span tabindex="0" on:focus=to_dialog></span>
                    </div>
                </div>
            }
        })}
    }
}

/// Every open question of every agent this tab knows, answerable here.
#[component]
pub fn Inbox(state: ClientState) -> impl IntoView {
    let all = {
        let state = state.clone();
        move || state.questions.with(|questions| questions.values().cloned().collect::<Vec<_>>())
    };
    let count = move || all().len();
    view! {
        <section class="inbox" aria-label="Approval inbox" class:empty=move || count() == 0>
            <h2>"Inbox " <span class="count">{count}</span></h2>
            <ul>
                // Keyed: an entry (and an answer being typed in it) stays as
                // other questions come and go.
                <For each=all key=Question::key let:question>
                    {
                        let name = state.agent_name(&question.agent_id);
                        let shown_at = guard::now_ms();
                        let open = {
                            let state = state.clone();
                            let agent = question.agent_id.clone();
                            move |_| state.select(Some(agent.clone()))
                        };
                        let on_key = {
                            let state = state.clone();
                            let question = question.clone();
                            move |event: leptos::ev::KeyboardEvent| {
                                // Only the entry itself, not a field inside it.
                                let on_entry = event.target() == event.current_target();
                                if on_entry {
                                    if let Some(answer) = shortcut_answer(&question, &event, shown_at) {
                                        event.prevent_default();
                                        state.answer(&question, answer);
                                    }
                                }
                            }
                        };
                        view! {
                            <li class="inbox-item" tabindex="0" on:keydown=on_key data-agent-id=question.agent_id.clone()
                                data-request-id=question.request.request_id().to_owned()>
                                <button class="agent-link" on:click=open>{name}</button>
                                <QuestionBody state=state.clone() question=question.clone() shown_at=shown_at/>
                            </li>
                        }
                    }
                </For>
            </ul>
        </section>
    }
}
