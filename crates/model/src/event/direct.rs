//! The common message read in one pass over its text: [`read`], the fast path of
//! [`Event::decode`](super::Event::decode).
//!
//! serde's derived decoder finds each field by name through a generic visitor and builds every
//! value through its own machinery; for the flat envelope of an event that was about half the cost
//! of decoding. Here the envelope is read straight from the text: keys are matched as bytes,
//! strings taken where they lie (unescaped when they hold escapes), integers and booleans read in
//! place, times and checksums parsed by the same functions the derived decoder calls. `args` and
//! `result` (verbatim JSON) are checked by the grammar serde_json checks them by and copied as they
//! stand; `attributes`, `hookContext` (maps of any JSON) and `sideEffects` are each read by
//! serde_json on its own, as the derived decoder reads them.
//!
//! It gives up (`None`), and the caller decodes the message with serde, which then gives its event
//! or its error, on anything else: an unknown or repeated field, an escape in a key, a lone
//! surrogate in a string field, a number that is not a plain unsigned integer, a value of the wrong
//! type, a map nested deep enough to come near serde_json's limit, anything that is not JSON. What
//! it returns is the [`RawEvent`] serde builds from the same text (the differential tests below
//! and the model fuzz check that), so every rule that follows — versions, kinds, required and
//! empty fields — stays in one place, `decode`.

use super::wire::{KindName, RawEvent};
use super::EventKind;
use crate::checksum::Checksum;
use crate::json::Json;
use crate::jsonscan::{skip_whitespace, string_stop, unicode_escape, value_end, Cursor};
use crate::time::Timestamp;
use serde::de::DeserializeOwned;
use std::borrow::Cow;
use std::sync::Arc;

/// Most brackets a map or `sideEffects` may hold to be read here. serde_json stops at 128 levels
/// counted from the message's own object, so the same value read on its own would be allowed one
/// level more; a value that may nest that deep is left to the whole-message reader.
const MAX_BRACKETS_APART: usize = 64;

/// The message's fields as serde's derived decoder reads them, or `None` to leave the message to
/// it. `text` is the whole message.
pub(super) fn read(text: &str) -> Option<RawEvent> {
    let mut r = Reader {
        cur: Cursor::new(text),
    };
    let mut raw = RawEvent::default();
    r.object(&mut raw)?;
    r.cur.at_end().then_some(raw)
}

/// The `source` and `session` of a message, found by walking its top-level keys up to them: what
/// [`Event::peek_scope`](super::Event::peek_scope) gives.
///
/// Both must be strings, each given once before the other is found, in a JSON object; anything
/// else is `None`. The values are exactly what `decode` puts in the event when it gives one: it
/// reads the same keys (serde matches a key after unescaping it, so the walk does too), refuses
/// a repeated field, and unescapes a string as [`Reader::string`] does here. What comes after
/// both is not looked at: if it is not a valid event, `decode` refuses the message, and the peek
/// gave no event's scope.
pub(super) fn scope(bytes: &[u8]) -> Option<(Cow<'_, str>, Cow<'_, str>)> {
    match plain_scope(bytes) {
        Some((source, session)) => Some((Cow::Borrowed(source), Cow::Borrowed(session))),
        None => escaped_scope(bytes),
    }
}

/// [`scope`] when no key before them and neither value holds an escape: nearly every message,
/// read without checking the rest of the message's UTF-8.
fn plain_scope(bytes: &[u8]) -> Option<(&str, &str)> {
    let mut at = skip_whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let (mut source, mut session) = (None, None);
    loop {
        at = skip_whitespace(bytes, at + 1);
        let (key, after) = plain_string(bytes, at)?;
        at = skip_whitespace(bytes, after);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = skip_whitespace(bytes, at + 1);
        let slot = match key {
            b"source" => &mut source,
            b"session" => &mut session,
            _ => {
                at = skip_whitespace(bytes, value_end(bytes, at)?);
                if bytes.get(at) != Some(&b',') {
                    return None;
                }
                continue;
            }
        };
        if slot.is_some() {
            return None;
        }
        let (value, after) = plain_string(bytes, at)?;
        *slot = Some(std::str::from_utf8(value).ok()?);
        if let (Some(source), Some(session)) = (source, session) {
            return Some((source, session));
        }
        at = skip_whitespace(bytes, after);
        if bytes.get(at) != Some(&b',') {
            return None;
        }
    }
}

/// [`scope`] for a message the plain walk gave up on: its keys and values unescaped.
fn escaped_scope(bytes: &[u8]) -> Option<(Cow<'_, str>, Cow<'_, str>)> {
    let mut r = Reader {
        cur: Cursor::new(std::str::from_utf8(bytes).ok()?),
    };
    r.cur.skip_whitespace();
    if !r.cur.eat(b'{') {
        return None;
    }
    let (mut source, mut session) = (None, None);
    loop {
        r.cur.skip_whitespace();
        let key = r.string()?;
        r.cur.skip_whitespace();
        if !r.cur.eat(b':') {
            return None;
        }
        r.cur.skip_whitespace();
        let slot = match &*key {
            "source" => &mut source,
            "session" => &mut session,
            _ => {
                r.cur.pos = value_end(r.cur.bytes, r.cur.pos)?;
                r.cur.skip_whitespace();
                if !r.cur.eat(b',') {
                    return None;
                }
                continue;
            }
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(r.string()?);
        if source.is_some() && session.is_some() {
            return source.zip(session);
        }
        r.cur.skip_whitespace();
        if !r.cur.eat(b',') {
            return None;
        }
    }
}

/// The characters of the string at `at` (its opening quote) and the place after it, when it
/// holds no escape.
fn plain_string(bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let stop = string_stop(bytes, at + 1)?;
    (bytes[stop] == b'"').then(|| (&bytes[at + 1..stop], stop + 1))
}

struct Reader<'t> {
    cur: Cursor<'t>,
}

impl<'t> Reader<'t> {
    /// Reads the message's object, field by field, into `raw`.
    fn object(&mut self, raw: &mut RawEvent) -> Option<()> {
        self.cur.skip_whitespace();
        if !self.cur.eat(b'{') {
            return None;
        }
        self.cur.skip_whitespace();
        if self.cur.eat(b'}') {
            return Some(());
        }
        loop {
            self.cur.skip_whitespace();
            let (start, end) = self.cur.plain_key()?;
            self.cur.skip_whitespace();
            if !self.cur.eat(b':') {
                return None;
            }
            self.cur.skip_whitespace();
            let key = &self.cur.bytes[start..end];
            self.field(key, raw)?;
            self.cur.skip_whitespace();
            if self.cur.eat(b'}') {
                return Some(());
            }
            if !self.cur.eat(b',') {
                return None;
            }
        }
    }

    /// Reads the value of field `key` into `raw`.
    fn field(&mut self, key: &[u8], raw: &mut RawEvent) -> Option<()> {
        match key {
            b"v" => put(&mut raw.v, self.unsigned().map(serde_json::Number::from)),
            b"kind" => put(&mut raw.kind, self.kind()),
            b"source" => put(&mut raw.source, self.shared()),
            b"session" => put(&mut raw.session, self.shared()),
            b"thread" => put(&mut raw.thread, self.shared()),
            b"turn" => put(&mut raw.turn, self.shared()),
            b"callId" => put(&mut raw.call_id, self.owned()),
            b"time" => put(&mut raw.time, self.time()),
            b"attributes" => put(&mut raw.attributes, self.apart()),
            b"tool" => put(&mut raw.tool, self.owned()),
            b"args" => put(&mut raw.args, self.verbatim()),
            b"checksum" => put(&mut raw.checksum, self.checksum()),
            b"sideEffects" => put(&mut raw.side_effects, self.apart()),
            b"agent" => put(&mut raw.agent, self.owned()),
            b"execution" => put(&mut raw.execution, self.owned()),
            b"hookContext" => put(&mut raw.hook_context, self.apart()),
            b"result" => put(&mut raw.result, self.verbatim()),
            b"isError" => put(&mut raw.is_error, self.boolean()),
            b"cancelled" => put(&mut raw.cancelled, self.boolean()),
            b"startedAt" => put(&mut raw.started_at, self.time()),
            b"durationMs" => put(&mut raw.duration_ms, self.unsigned()),
            b"reason" => put(&mut raw.reason, self.owned()),
            b"decision" => put(&mut raw.decision, self.owned()),
            b"by" => put(&mut raw.by, self.owned()),
            b"hook" => put(&mut raw.hook, self.owned()),
            b"policyId" => put(&mut raw.policy_id, self.owned()),
            b"policyVersion" => put(&mut raw.policy_version, self.owned()),
            _ => None,
        }
    }

    /// A string, borrowed from the text unless it holds escapes.
    fn string(&mut self) -> Option<Cow<'t, str>> {
        if !self.cur.eat(b'"') {
            return None;
        }
        let start = self.cur.pos;
        let stop = string_stop(self.cur.bytes, start)?;
        self.cur.pos = stop + 1;
        if self.cur.bytes[stop] == b'"' {
            return Some(Cow::Borrowed(&self.cur.text[start..stop]));
        }
        let mut unescaped = String::from(&self.cur.text[start..stop]);
        loop {
            self.escape(&mut unescaped)?;
            let run = self.cur.pos;
            let stop = string_stop(self.cur.bytes, run)?;
            unescaped.push_str(&self.cur.text[run..stop]);
            self.cur.pos = stop + 1;
            if self.cur.bytes[stop] == b'"' {
                return Some(Cow::Owned(unescaped));
            }
        }
    }

    /// Reads the escape after a `\` and pushes its character.
    fn escape(&mut self, out: &mut String) -> Option<()> {
        let b = self.cur.peek()?;
        self.cur.pos += 1;
        out.push(match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => unicode_escape(self.cur.bytes, &mut self.cur.pos)?,
            _ => return None,
        });
        Some(())
    }

    fn owned(&mut self) -> Option<String> {
        self.string().map(Cow::into_owned)
    }

    /// A string for an id records share: the text an event decoded shortly before had, when it
    /// is the same (`recent.rs`).
    fn shared(&mut self) -> Option<Arc<str>> {
        self.string().map(|s| super::recent::shared(&s))
    }

    fn kind(&mut self) -> Option<KindName> {
        let name = self.string()?;
        Some(match EventKind::parse(&name) {
            Some(kind) => KindName::Known(kind),
            None => KindName::Unknown(name.into_owned()),
        })
    }

    fn time(&mut self) -> Option<Timestamp> {
        Timestamp::parse_rfc3339(&self.string()?).ok()
    }

    fn checksum(&mut self) -> Option<Checksum> {
        Checksum::parse(&self.string()?).ok()
    }

    /// A plain unsigned integer within `u64`; any other number is left to serde.
    fn unsigned(&mut self) -> Option<u64> {
        let start = self.cur.pos;
        match self.cur.peek()? {
            b'0' => self.cur.pos += 1,
            b'1'..=b'9' => {
                while self.cur.peek().is_some_and(|b| b.is_ascii_digit()) {
                    self.cur.pos += 1;
                }
            }
            _ => return None,
        }
        // A fraction or an exponent makes it a float; a digit after a leading zero, no number.
        if matches!(self.cur.peek(), Some(b'.' | b'e' | b'E' | b'0'..=b'9')) {
            return None;
        }
        self.cur.bytes[start..self.cur.pos]
            .iter()
            .try_fold(0u64, |n, &d| {
                n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })
    }

    fn boolean(&mut self) -> Option<bool> {
        let rest = &self.cur.bytes[self.cur.pos..];
        let (value, len) = if rest.starts_with(b"true") {
            (true, 4)
        } else if rest.starts_with(b"false") {
            (false, 5)
        } else {
            return None;
        };
        self.cur.pos += len;
        Some(value)
    }

    /// A verbatim value (`args`, `result`), checked as the derived decoder checks it.
    fn verbatim(&mut self) -> Option<Json> {
        let start = self.cur.pos;
        let end = value_end(self.cur.bytes, start)?;
        self.cur.pos = end;
        Some(Json::from_checked(&self.cur.text[start..end]))
    }

    /// A value serde_json reads on its own, as the derived decoder reads it inside the message.
    fn apart<T: DeserializeOwned>(&mut self) -> Option<T> {
        let rest = &self.cur.text[self.cur.pos..];
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = values.next()?.ok()?;
        let len = values.byte_offset();
        if brackets(&rest.as_bytes()[..len]) > MAX_BRACKETS_APART {
            return None;
        }
        self.cur.pos += len;
        Some(value)
    }
}

/// Fills a field's slot with its value; `None` when the message gave the field already (serde's
/// "duplicate field") or the value was not read.
fn put<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value?);
    Some(())
}

fn brackets(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'[' || b == b'{').count()
}

#[cfg(test)]
mod tests {
    use super::super::wire::RawEvent;
    use super::super::Event;
    use proptest::prelude::*;

    /// Where the direct reader reads a message, it reads what serde reads; where serde refuses
    /// one, it gives up. Whether it read the message.
    fn agree(text: &str) -> bool {
        peek_agrees(text);
        let by_serde = serde_json::from_str::<RawEvent>(text).ok();
        match super::read(text) {
            Some(raw) => {
                assert_eq!(Some(&raw), by_serde.as_ref(), "{text}");
                true
            }
            None => false,
        }
    }

    /// Where the scope peek reads a message that decodes, it reads the event's scope.
    fn peek_agrees(text: &str) {
        if let (Some((source, session)), Ok(event)) = (
            Event::peek_scope(text.as_bytes()),
            Event::decode(text.as_bytes()),
        ) {
            assert_eq!(
                (&*source, &*session),
                (event.source.as_str(), event.session.as_str()),
                "{text}"
            );
        }
    }

    const TIME: &str = r#""time":"2026-05-10T10:00:00.067Z""#;

    #[test]
    fn peeks_at_the_scope_without_decoding() {
        fn peek(text: &str) -> Option<(String, String)> {
            Event::peek_scope(text.as_bytes()).map(|(a, b)| (a.into_owned(), b.into_owned()))
        }
        fn scope(source: &str, session: &str) -> Option<(String, String)> {
            Some((source.to_owned(), session.to_owned()))
        }
        for text in [
            format!(
                r#"{{"v":1,"kind":"announce","source":"claude-code","session":"s1",{TIME},"tool":"t"}}"#
            ),
            format!(
                r#" {{ "session" : "s1" , "args" : {{"source":"no","session":"no"}} , "source":"claude-code" , {TIME} "#
            ),
            r#"{"result":"\"x\" \u00e9","v":1,"session":"s1","source":"claude-code"}"#.to_owned(),
        ] {
            peek_agrees(&text);
            assert_eq!(peek(&text), scope("claude-code", "s1"), "{text}");
        }
        // Non-ASCII as it stands.
        assert_eq!(
            peek(r#"{"source":"é","session":"日本"}"#),
            scope("é", "日本")
        );
        // Escapes in a value or in a key, unescaped (`\u0073ource` is `source`).
        for (text, want) in [
            (
                r#"{"source":"s","session":"\u0073\n\ud83d\ude00"}"#,
                scope("s", "s\n😀"),
            ),
            (r#"{"sour\u0063e":"s","session":"x"}"#, scope("s", "x")),
            (
                r#"{"v\u0000":1,"source":"s","session":"x"}"#,
                scope("s", "x"),
            ),
            (r#"{"\u0073ource":"s","source":"s","session":"x"}"#, None),
            (r#"{"source":"s","session":"\ud800"}"#, None),
            (r#"{"source":"s","session":"\q"}"#, None),
        ] {
            peek_agrees(text);
            assert_eq!(peek(text), want, "{text}");
        }
        for text in [
            // Given twice, or not as strings, or not at all.
            r#"{"source":"s","source":"t","session":"x"}"#,
            r#"{"source":null,"session":"x"}"#,
            r#"{"source":"s","session":7}"#,
            r#"{"source":"s"}"#,
            r#"{"v":1,"kind":"turn_end"}"#,
            // Not an object, or not JSON before both are found.
            r#"["source","s","session","x"]"#,
            r#"{"v":1 "source":"s","session":"x"}"#,
            r#"{"v":tru,"source":"s","session":"x"}"#,
            "{\"source\":\"s\u{1}\",\"session\":\"x\"}",
            "",
        ] {
            assert_eq!(peek(text), None, "{text}");
        }
        // Invalid UTF-8 in a value.
        assert_eq!(
            Event::peek_scope(b"{\"source\":\"\xff\",\"session\":\"x\"}"),
            None
        );
    }

    #[test]
    fn reads_the_common_messages_as_serde_does() {
        let sum = "a".repeat(64);
        for text in [
            format!(
                r#"{{"v":1,"kind":"announce","source":"claude-code","session":"s1","turn":"t0",{TIME},"tool":"Edit","args":{{"file_path":"/a.rs","old_string":"x\n\"y\"","edits":[{{"a":1.5e3}},null,true]}},"callId":"toolu_01"}}"#
            ),
            format!(
                r#"{{"v":1,"kind":"completion","source":"codex","session":"s1",{TIME},"callId":"call_1","result":"line\n\tmore — \"quoted\" \ud83d\ude00","isError":false,"durationMs":1206}}"#
            ),
            format!(
                r#"{{"v":1,"kind":"completion","source":"adk","session":"s1",{TIME},"tool":"t","args":null,"checksum":"{sum}","result":[],"isError":true,"cancelled":false,"startedAt":"2026-05-10T09:59:59+02:00","durationMs":0}}"#
            ),
            format!(
                r#" {{ "v" : 1 , "kind" : "announce" , "source" : "s\u00e9\/\\" , "session" : "x\ud83d\ude00" , {TIME} , "tool" : "t" , "attributes" : {{"a":[1,{{"b":"c"}}]}} , "hookContext" : {{}} , "sideEffects" : {{"level":"none","idempotent":true}} , "agent":"a","execution":"e","thread":"th"}} "#
            ),
            format!(
                r#"{{"v":1,"kind":"hook_decision","source":"s","session":"x",{TIME},"hook":"PreToolUse","decision":"deny","policyId":"p","policyVersion":"3","reason":"r","tool":"Bash","args":{{}}}}"#
            ),
            format!(
                r#"{{"v":1,"kind":"approval","source":"s","session":"x",{TIME},"decision":"approved","by":"u","checksum":"{sum}"}}"#
            ),
            format!(r#"{{"v":1,"kind":"turn_end","source":"s","session":"x",{TIME},"reason":""}}"#),
            // Read as serde reads them; `decode` then refuses them.
            r#"{"v":2,"kind":"what","source":"","session":"x"}"#.to_owned(),
            r#"{"kind":"announce","durationMs":18446744073709551615}"#.to_owned(),
            "{}".to_owned(),
            r#"{"v":0,"args":"\ud800","result":1e400}"#.to_owned(),
        ] {
            assert!(agree(&text), "not read directly: {text}");
        }
    }

    #[test]
    fn leaves_the_rest_to_serde() {
        for text in [
            // What serde refuses.
            r#"{"v":1,"v":1}"#,
            r#"{"v":1,"tol":1}"#,
            r#"{"v":1,}"#,
            r#"{"v":1 "kind":"announce"}"#,
            r#"{"v":1}x"#,
            r#"{"v":01}"#,
            r#"{"v":-1}"#,
            r#"{"durationMs":1.5}"#,
            r#"{"durationMs":1e3}"#,
            r#"{"durationMs":-0}"#,
            r#"{"isError":truex}"#,
            r#"{"isError":null}"#,
            r#"{"source":null}"#,
            r#"{"source":5}"#,
            r#"{"source":"a\ud800"}"#,
            r#"{"source":"a\udc00b"}"#,
            r#"{"source":"a\x"}"#,
            "{\"source\":\"a\nb\"}",
            r#"{"time":"yesterday"}"#,
            r#"{"checksum":"ABC"}"#,
            r#"{"attributes":[1]}"#,
            r#"{"attributes":{"a":1e400}}"#,
            r#"{"sideEffects":{"level":"none","what":1}}"#,
            r#"{"args":[1,]}"#,
            r#"{"args":01}"#,
            r#"{"args":"a"#,
            r#"{"args":1x}"#,
            r#"{"v":1"#,
            r#"{"v""#,
            "{",
            "[]",
            "",
            // What serde takes and this reader leaves to it.
            r#"{"\u0076":1}"#,
            r#"{"v":1.0}"#,
            r#"{"v":18446744073709551616}"#,
        ] {
            assert!(!agree(text), "read directly: {text}");
        }
    }

    #[test]
    fn leaves_maps_that_may_reach_serde_jsons_limit_to_it() {
        for n in [super::MAX_BRACKETS_APART - 1, 125, 126, 127, 200] {
            let text = format!(
                r#"{{"attributes":{{"a":{}1{}}}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            );
            assert_eq!(agree(&text), n < super::MAX_BRACKETS_APART, "{n}");
        }
        // A verbatim value has no such limit (the derived decoder reads it without one).
        let deep = format!(r#"{{"args":{}1{}}}"#, "[".repeat(300), "]".repeat(300));
        assert!(agree(&deep));
    }

    #[test]
    fn decoding_takes_the_direct_path_to_the_same_event() {
        let text = format!(
            r#"{{"v":1,"kind":"announce","source":"s","session":"x",{TIME},"tool":"t","args":{{"b":1,"a":"\u00e9"}}}}"#
        );
        let raw = super::read(&text).expect("read directly");
        assert_eq!(
            Event::decode(text.as_bytes()),
            Event::try_from(raw),
            "decode gives what the direct reader read"
        );
        assert_eq!(
            Event::decode(text.as_bytes()).ok(),
            serde_json::from_str::<Event>(&text).ok()
        );
    }

    /// A field name the decoder knows, one it does not, or a known one spelled with an escape.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => prop::sample::select(vec![
                "v", "kind", "source", "session", "thread", "turn", "callId", "time",
                "attributes", "tool", "args", "checksum", "sideEffects", "agent", "execution",
                "hookContext", "result", "isError", "cancelled", "startedAt", "durationMs",
                "reason", "decision", "by", "hook", "policyId", "policyVersion",
            ])
            .prop_map(|k| format!("\"{k}\"")),
            1 => "[a-zA-Z]{0,8}".prop_map(|k| format!("\"{k}\"")),
            1 => prop::sample::select(vec![r#""\u0076""#, r#""\u0073ource""#, r#""sess\u0069on""#])
                .prop_map(str::to_owned),
        ]
    }

    /// A value of any JSON type, spelled as producers spell it or oddly.
    fn value() -> impl Strategy<Value = String> {
        let string = prop_oneof![
            "(\\PC|[\"\\\\/\u{0}-\u{1f}\u{7f}\u{2028}])*"
                .prop_map(|s| serde_json::to_string(&s).unwrap()),
            Just(r#""a\ud800b""#.to_owned()),
            Just(r#""\ud83d\ude00\u00E9\/""#.to_owned()),
            Just(format!("\"{}\"", "a".repeat(64))),
            Just(r#""2026-05-10T10:00:00.067Z""#.to_owned()),
            Just(r#""2026-05-10T12:00:00\u002b02:00""#.to_owned()),
            prop::sample::select(vec![
                "announce",
                "completion",
                "turn_end",
                "approved",
                "deny"
            ])
            .prop_map(|k| format!("\"{k}\"")),
        ];
        let number = prop_oneof![
            any::<u64>().prop_map(|n| n.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| serde_json::to_string(&f).unwrap()),
            prop::sample::select(vec!["0", "1", "01", "-0", "1.0", "1e3", "1e400", "1."])
                .prop_map(str::to_owned),
        ];
        let leaf = prop_oneof![
            3 => string,
            2 => number,
            1 => prop::sample::select(vec!["true", "false", "null", "tru"]).prop_map(str::to_owned),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(("[a-z]{0,3}", inner), 0..4).prop_map(|entries| {
                    let entries: Vec<String> = entries
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\":{v}"))
                        .collect();
                    format!("{{{}}}", entries.join(","))
                }),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_fields_in_any_spelling(
            fields in prop::collection::vec((key(), value()), 0..8),
            space in prop::sample::select(vec!["", " ", "\n\t ", "\r"]),
        ) {
            let entries: Vec<String> =
                fields.iter().map(|(k, v)| format!("{k}{space}:{space}{v}")).collect();
            let text = format!("{space}{{{space}{}{space}}}{space}", entries.join(&format!("{space},{space}")));
            agree(&text);
        }

        #[test]
        fn any_encoded_event_is_read_directly(
            tool in "\\PC{1,12}",
            args in value(),
            session in "(\\PC|[\"\\\\\u{0}-\u{1f}])+",
            duration in any::<u64>(),
        ) {
            let args = serde_json::from_str::<serde_json::Value>(&args).ok().filter(|_| !args.contains("1e400"));
            let text = serde_json::json!({
                "v": 1, "kind": "completion", "source": "s", "session": session,
                "time": "2026-05-10T10:00:00.067Z", "tool": tool, "args": args,
                "result": args, "durationMs": duration,
            })
            .to_string();
            prop_assert!(agree(&text), "not read directly: {}", text);
        }

        #[test]
        fn any_damaged_message(
            at in any::<prop::sample::Index>(),
            cut in any::<bool>(),
            byte in prop::sample::select(b"{}[]\",:\\ 0a-e\n".to_vec()),
        ) {
            let mut text = format!(
                r#"{{"v":1,"kind":"completion","source":"s","session":"x",{TIME},"callId":"c","result":{{"a":["b\n",1.5,null]}},"isError":false,"durationMs":7}}"#
            )
            .into_bytes();
            let i = at.index(text.len());
            if cut {
                text.truncate(i);
            } else {
                text[i] = byte;
            }
            if let Ok(text) = String::from_utf8(text) {
                agree(&text);
            }
        }
    }
}
