//! §2.1 JSONL framing: split on `\n` only, strip one `\r`, U+2028/U+2029 are
//! data, over-long lines are an error the reader survives.

use shard_protocol::jsonl::{LineDecoder, LineError, frame};
use shard_protocol::{ClientMessage, Envelope};

fn lines(decoder: &mut LineDecoder) -> Vec<Result<String, LineError>> {
    std::iter::from_fn(|| decoder.next_line()).collect()
}

#[test]
fn splits_on_newline_and_strips_one_carriage_return() {
    let mut decoder = LineDecoder::new(1024);
    decoder.feed(b"{\"a\":1}\n{\"b\":2}\r\n{\"c\":3}\r\r\n");
    assert_eq!(
        lines(&mut decoder),
        vec![Ok("{\"a\":1}".into()), Ok("{\"b\":2}".into()), Ok("{\"c\":3}\r".into())]
    );
}

#[test]
fn unicode_line_separators_are_data() {
    let message = "one\u{2028}two\u{2029}three";
    let json = format!(r#"{{"type":"prompt","message":"{message}"}}"#);
    let mut decoder = LineDecoder::new(1024);
    decoder.feed(&frame(&json));
    let got = lines(&mut decoder);
    assert_eq!(got.len(), 1, "U+2028/U+2029 must not split: {got:?}");
    let line = got.into_iter().next().and_then(Result::ok).expect("one line");
    let decoded = Envelope::<ClientMessage>::from_json(&line).expect("valid prompt");
    let ClientMessage::Prompt(prompt) = decoded.message else { panic!("prompt") };
    assert_eq!(prompt.message, message);
}

#[test]
fn a_line_split_across_reads_is_joined() {
    let input = b"{\"type\":\"abort\"}\r\n{\"type\":\"list_modes\"}\n";
    // Every split point, including inside the CRLF.
    for cut in 0..=input.len() {
        let mut decoder = LineDecoder::new(1024);
        decoder.feed(&input[..cut]);
        let mut got = lines(&mut decoder);
        decoder.feed(&input[cut..]);
        got.extend(lines(&mut decoder));
        assert_eq!(
            got,
            vec![Ok("{\"type\":\"abort\"}".into()), Ok("{\"type\":\"list_modes\"}".into())],
            "split at {cut}"
        );
    }
    // And one byte at a time.
    let mut decoder = LineDecoder::new(1024);
    let mut got = Vec::new();
    for byte in input {
        decoder.feed(std::slice::from_ref(byte));
        got.extend(lines(&mut decoder));
    }
    assert_eq!(got.len(), 2);
}

#[test]
fn an_over_long_line_is_an_error_and_the_next_line_still_decodes() {
    let mut decoder = LineDecoder::new(16);
    let long = "x".repeat(100);
    // The long line arrives in pieces; memory must not grow with it.
    decoder.feed(&long.as_bytes()[..40]);
    assert_eq!(
        lines(&mut decoder),
        vec![Err(LineError::TooLong { limit: 16 })],
        "reported once, early"
    );
    decoder.feed(&long.as_bytes()[40..]);
    assert_eq!(lines(&mut decoder), vec![], "the rest is discarded silently");
    decoder.feed(b"\n{\"ok\":true}\n");
    assert_eq!(lines(&mut decoder), vec![Ok("{\"ok\":true}".into())]);

    // An over-long line inside one read, between two good ones.
    decoder.feed(format!("{{\"a\":1}}\n{long}\n{{\"b\":2}}\n").as_bytes());
    assert_eq!(
        lines(&mut decoder),
        vec![Ok("{\"a\":1}".into()), Err(LineError::TooLong { limit: 16 }), Ok("{\"b\":2}".into())]
    );
}

#[test]
fn the_limit_counts_content_not_the_terminator() {
    let mut decoder = LineDecoder::new(4);
    decoder.feed(b"abcd\r\nabcde\n");
    assert_eq!(lines(&mut decoder), vec![Ok("abcd".into()), Err(LineError::TooLong { limit: 4 })]);
}

#[test]
fn blank_lines_are_skipped_and_invalid_utf8_is_survivable() {
    let mut decoder = LineDecoder::new(64);
    decoder.feed(b"\n\r\n{\"a\":1}\n\xff\xfe\n{\"b\":2}\n");
    assert_eq!(
        lines(&mut decoder),
        vec![Ok("{\"a\":1}".into()), Err(LineError::InvalidUtf8), Ok("{\"b\":2}".into())]
    );
}

#[test]
fn a_last_line_without_newline_is_delivered_at_end_of_input() {
    let mut decoder = LineDecoder::new(64);
    decoder.feed(b"{\"a\":1}\n{\"b\":2}");
    assert_eq!(lines(&mut decoder), vec![Ok("{\"a\":1}".into())]);
    assert_eq!(decoder.finish(), Some(Ok("{\"b\":2}".into())));
    assert_eq!(decoder.finish(), None);
}

#[test]
fn encoded_messages_are_one_line() {
    let envelope =
        Envelope::<ClientMessage>::from_json(r#"{"type":"prompt","message":"a\nb\r\nc"}"#)
            .expect("valid");
    let line = frame(&envelope.to_json());
    assert_eq!(line.iter().filter(|&&byte| byte == b'\n').count(), 1);
    assert_eq!(line.last(), Some(&b'\n'));
}
