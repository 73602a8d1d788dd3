//! The questions part driven on its own: who wins, who waits, who is
//! told, and where the daemon's own questions' answers go.

use std::time::Duration;

use serde_json::json;
use shard_protocol::agent::{PermissionChoice, PermissionRequest};

use super::*;
use crate::agents::approvals::StepUp;

const HEADLESS: Duration = Duration::from_secs(300);

fn questions(headless: Option<HeadlessPolicy>, step_up: Option<StepUp>) -> Questions {
    let cwd = std::env::temp_dir();
    let runtime = shard_platform::runtimes::BUILTIN.to_owned();
    Questions::new(Rules { headless, headless_timeout: HEADLESS, step_up, cwd, runtime })
}

fn bash(request_id: &str) -> PendingKind {
    PendingKind::Permission(PermissionRequest {
        request_id: request_id.to_owned(),
        tool_name: "bash".to_owned(),
        input: json!({"command": "make"}),
        prompt: "Run make?".to_owned(),
        options: vec![Decision::Allow, Decision::Deny],
        details: None,
        choices: None,
    })
}

fn raise(questions: &mut Questions, request: PendingKind, nobody: bool) -> Vec<Out> {
    let raising = Raising { nobody, allow_inside: false, for_a_person: false };
    questions.raise(request, None, Wire::from("{}"), raising)
}

fn reply(request_id: &str, decision: Decision) -> ClientMessage {
    let answer = PermissionAnswer::Decision(decision);
    let request_id = request_id.to_owned();
    ClientMessage::PermissionResponse(PermissionResponse { request_id, answer, reason: None })
}

fn by(source: &str) -> Answerer {
    Answerer { source: source.to_owned(), ..Answerer::default() }
}

fn denial(outs: &[Out]) -> bool {
    outs.iter().any(|out| {
        matches!(out, Out::Send(ClientMessage::PermissionResponse(response), _)
            if response.answer == PermissionAnswer::Decision(Decision::Deny))
    })
}

#[test]
fn a_question_for_a_person_is_never_answered_headless() {
    let mut denying = questions(None, None);
    let raising = Raising { nobody: true, allow_inside: false, for_a_person: true };
    let outs = denying.raise(bash("b1"), None, Wire::from("{}"), raising);
    assert!(!denial(&outs), "nobody attached, and still open");
    assert!(outs.iter().any(|out| matches!(out, Out::Waiting(_))), "told to those away");
    assert!(denying.is_open("b1"));
    // The last responder leaving starts no timeout for it.
    let now = Instant::now();
    denying.responders_changed(true, now);
    assert_eq!(denying.next_headless(), None);
    let outs = raise(&mut denying, bash("p2"), true);
    assert!(denial(&outs), "an ordinary question is still denied: {:?}", Out::kinds(&outs));
}

#[test]
fn a_question_nobody_can_answer_is_denied_at_once_unless_it_queues() {
    let mut denying = questions(None, None);
    let outs = raise(&mut denying, bash("p1"), true);
    assert_eq!(Out::kinds(&outs), ["asked", "pending", "deliver", "send"]);
    assert!(denial(&outs));
    assert!(
        matches!(
            denying.judge(reply("p1", Decision::Allow), by("web"), None, false),
            Err(Verdict::Answered)
        ),
        "the headless answer came first"
    );

    let mut queueing = questions(Some(HeadlessPolicy::Queue), None);
    let outs = raise(&mut queueing, bash("p1"), true);
    assert_eq!(Out::kinds(&outs), ["asked", "pending", "deliver", "waiting"]);
    queueing.responders_changed(true, Instant::now());
    assert_eq!(queueing.next_headless(), None, "it waits for someone, however long");
}

#[test]
fn a_question_left_alone_is_denied_after_the_headless_timeout_and_not_before() {
    let start = Instant::now();
    let mut questions = questions(None, None);
    assert_eq!(Out::kinds(&raise(&mut questions, bash("p1"), false)).last(), Some(&"waiting"));
    questions.responders_changed(true, start);
    assert_eq!(questions.next_headless(), Some(start + HEADLESS));
    questions.responders_changed(true, start + HEADLESS / 2);
    assert_eq!(questions.next_headless(), Some(start + HEADLESS), "the clock is not reset");
    assert!(questions.timers(start + HEADLESS - Duration::from_millis(1)).is_empty());
    questions.responders_changed(false, start + HEADLESS / 2);
    assert_eq!(questions.next_headless(), None, "someone came back");
    questions.responders_changed(true, start + HEADLESS);
    assert!(denial(&questions.timers(start + HEADLESS * 2)));
    assert!(questions.timers(start + HEADLESS * 3).is_empty(), "answered once");
}

#[test]
fn the_first_valid_answer_wins_and_every_other_says_why_not() {
    let mut questions = questions(None, None);
    raise(&mut questions, bash("p1"), false);
    let judge = |questions: &Questions, message, fingerprint| {
        questions.judge(message, by("unix"), fingerprint, false).map(|accepted| accepted.request_id)
    };
    assert!(matches!(judge(&questions, reply("p9", Decision::Allow), None), Err(Verdict::Unknown)));
    assert!(
        matches!(
            judge(&questions, reply("p1", Decision::AllowAlways), None),
            Err(Verdict::Invalid)
        ),
        "not among the request's options"
    );
    assert!(matches!(
        judge(&questions, reply("p1", Decision::Allow), Some("another call")),
        Err(Verdict::Changed)
    ));
    let PendingKind::Permission(asked) = bash("p1") else { unreachable!() };
    let call = fingerprint(&asked);
    let accepted = judge(&questions, reply("p1", Decision::Allow), Some(&call));
    assert_eq!(accepted.ok().as_deref(), Some("p1"));
    questions.won("p1", by("unix"), &reply("p1", Decision::Allow));
    assert!(matches!(judge(&questions, reply("p1", Decision::Deny), None), Err(Verdict::Answered)));
    // Answered, it stays open until the agent settles it, with who
    // answered.
    let resolved = shard_protocol::agent::PermissionResolved {
        request_id: "p1".into(),
        answer: PermissionAnswer::Decision(Decision::Allow),
        source: None,
    };
    let outs = questions.resolved(ServerMessage::PermissionResolved(resolved), "");
    assert_eq!(Out::kinds(&outs), ["settled", "pending", "activity", "resolved", "question"]);
    let Some(Out::Resolved { outcome, by, .. }) = outs.get(3) else { unreachable!() };
    assert_eq!((outcome.as_str(), by.source.as_str()), ("allow", "unix"));
    let Some(Out::Question(line)) = outs.last() else { unreachable!() };
    assert!(line.contains(r#""source":"unix""#), "{line}");
    assert!(questions.is_empty());
}

#[test]
fn an_allow_from_away_needs_a_passkey_where_step_up_guards_it() {
    let rule = StepUp {
        tools: vec!["bash".to_owned()],
        writes_outside_cwd: true,
        places: crate::agents::sensitive::Places::default(),
    };
    let mut questions = questions(None, Some(rule));
    raise(&mut questions, bash("p1"), false);
    let allow = || reply("p1", Decision::Allow);
    for away in ["web", "push"] {
        assert!(matches!(questions.judge(allow(), by(away), None, false), Err(Verdict::StepUp)));
        assert!(questions.judge(allow(), by(away), None, true).is_ok(), "stepped up");
    }
    assert!(questions.judge(allow(), by("unix"), None, false).is_ok(), "a local client");
    assert!(questions.judge(reply("p1", Decision::Deny), by("web"), None, false).is_ok());
}

#[test]
fn the_sandbox_answers_what_it_holds_and_nobody_is_asked() {
    let mut questions = questions(None, None);
    let raising = Raising { nobody: false, allow_inside: true, for_a_person: false };
    let outs = questions.raise(bash("p1"), None, Wire::from("{}"), raising);
    assert_eq!(Out::kinds(&outs), ["asked", "pending", "deliver", "send"]);
    assert!(!denial(&outs));
    // A structured question is answered with its allow choice.
    let PendingKind::Permission(mut request) = bash("p2") else { unreachable!() };
    request.options = Vec::new();
    request.choices = Some(vec![PermissionChoice {
        id: "yes".into(),
        label: "Yes".into(),
        description: None,
        accelerator: None,
        intent: ChoiceIntent::Allow,
    }]);
    let raising = Raising { nobody: false, allow_inside: true, for_a_person: false };
    let outs = questions.raise(PendingKind::Permission(request), None, Wire::from("{}"), raising);
    assert!(
        outs.iter()
            .any(|out| matches!(out, Out::Send(ClientMessage::PermissionResponse(answer), _)
        if answer.answer == PermissionAnswer::Choice("yes".into())))
    );
}

#[test]
fn a_gone_process_ends_every_open_question_and_keeps_an_answer_unconfirmed() {
    let mut questions = questions(None, None);
    raise(&mut questions, bash("p1"), false);
    raise(&mut questions, bash("p2"), false);
    questions.judge(reply("p2", Decision::Allow), by("web"), None, false).expect("valid");
    questions.won("p2", by("web"), &reply("p2", Decision::Allow));
    let outs = questions.orphaned();
    let outcomes: Vec<(&str, &str)> = outs
        .iter()
        .filter_map(|out| match out {
            Out::Resolved { outcome, by, .. } => Some((outcome.as_str(), by.source.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes, [("deny", "runtime_exited"), ("unconfirmed", "web")]);
    assert!(matches!(outs.last(), Some(Out::Pending(open)) if open.is_empty()));
    assert!(questions.is_empty());
}

/// A question the daemon asks itself, and where its answer lands.
fn asked_by_daemon(
    questions: &mut Questions,
    request_id: &str,
    nobody: bool,
) -> (Vec<Out>, std::sync::Arc<std::sync::Mutex<Option<PermissionAnswer>>>) {
    let heard = std::sync::Arc::new(std::sync::Mutex::new(None));
    let into = heard.clone();
    let asker: Answer = Box::new(move |answer| *into.lock().expect("lock") = Some(answer.clone()));
    let raising = Raising { nobody, allow_inside: true, for_a_person: false };
    (questions.raise(bash(request_id), Some(asker), Wire::from("{}"), raising), heard)
}

#[test]
fn the_daemons_own_question_is_answered_to_the_daemon_and_closed_at_once() {
    let mut questions = questions(None, None);
    let (outs, heard) = asked_by_daemon(&mut questions, "net-1", false);
    assert_eq!(Out::kinds(&outs), ["asked", "pending", "deliver", "waiting"], "never held");
    let accepted = questions.judge(reply("net-1", Decision::Allow), by("web"), None, false);
    let accepted = accepted.expect("valid");
    assert!(!accepted.for_agent, "its answer is not the agent's");
    let outs = questions.won("net-1", accepted.answerer, &accepted.message);
    assert_eq!(
        Out::kinds(&outs),
        ["answer", "settled", "pending", "activity", "resolved", "question"]
    );
    assert!(outs.iter().all(|out| !matches!(out, Out::Send(..))), "nothing to the agent");
    let Some(Out::Answer(asker, answer)) = outs.into_iter().next() else { unreachable!() };
    asker(&answer);
    assert_eq!(*heard.lock().expect("lock"), Some(PermissionAnswer::Decision(Decision::Allow)));
    assert!(questions.is_empty(), "closed by the daemon, not by the agent");
}

#[test]
fn the_daemons_own_question_is_denied_headless_and_withdrawn_when_moot() {
    let mut questions = questions(None, None);
    let (outs, _) = asked_by_daemon(&mut questions, "net-1", true);
    let kinds = Out::kinds(&outs);
    assert_eq!(&kinds[..4], ["asked", "pending", "deliver", "answer"], "{kinds:?}");
    let Some(Out::Question(line)) = outs.last() else { panic!("not closed") };
    assert!(line.contains(r#""source":"headless""#), "{line}");

    let (_, heard) = asked_by_daemon(&mut questions, "net-2", false);
    let outs = questions.withdraw("net-2");
    let Some(Out::Question(line)) = outs.last() else { panic!("not closed") };
    assert!(line.contains(r#""source":"withdrawn""#) && line.contains("deny"), "{line}");
    assert!(questions.is_empty());
    assert!(questions.withdraw("net-2").is_empty(), "withdrawn once");
    drop(outs);
    assert_eq!(*heard.lock().expect("lock"), None, "its asker is dropped, never told allow");
    // The agent's own questions are never withdrawn by the daemon.
    raise(&mut questions, bash("p1"), false);
    assert!(questions.withdraw("p1").is_empty());
}
