//! Redaction of an input message that is not a valid event, before the processor copies it to
//! the dead-letter topic: such a message may hold the same secrets as a valid one (an event with
//! one field of the wrong type still carries its arguments), and the dead-letter topic is read by
//! whoever looks into refused input.
//!
//! A message may be anything, and is read as text, bytes that are not UTF-8 as U+FFFD. When that
//! text is a JSON object, it is redacted as an event is: the pointers inside its `args`, `result`
//! and each member of `attributes`, the patterns over every string and key. Otherwise — not JSON,
//! or JSON that a tree cannot hold exactly (a lone surrogate escape, a number beyond a double,
//! deep nesting) — the patterns run over each JSON string in the text, decoded (an escape such as
//! `\u0049` hides nothing), then over the whole text.

use super::Redaction;
use serde_json::Value;

impl Redaction {
    /// The payload of a message refused as an event, redacted; `None` when the rules find
    /// nothing in it, and it goes to the dead-letter topic as it came.
    pub fn dead_letter(&self, payload: &[u8]) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let text = String::from_utf8_lossy(payload);
        if let Ok(Value::Object(mut event)) = serde_json::from_str::<Value>(&text) {
            let mut what = Vec::new();
            for field in ["args", "result"] {
                if let Some(value) = event.get_mut(field) {
                    self.pointers_into(value, field, &mut what);
                }
            }
            if let Some(Value::Object(attributes)) = event.get_mut("attributes") {
                for (key, value) in attributes.iter_mut() {
                    self.pointers_into(value, &format!("attributes.{key}"), &mut what);
                }
            }
            self.object(&mut event, "message", &mut what);
            return (!what.is_empty())
                .then(|| serde_json::to_vec(&event).expect("a JSON object serializes"));
        }
        // Each JSON string decoded first, so that an escape hides nothing; then the whole text.
        let strings = self.strings_in(&text);
        let whole = self.text(strings.as_deref().unwrap_or(&text));
        let redacted = whole.or(strings)?;
        // A string written again holds what a tree can (a lone surrogate became U+FFFD): the
        // message may now read as an object, which is redacted as one, as it would be next time.
        if let Ok(Value::Object(_)) = serde_json::from_str::<Value>(&redacted) {
            if let Some(again) = self.dead_letter(redacted.as_bytes()) {
                return Some(again);
            }
        }
        Some(redacted.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Redaction {
        Redaction::new(&["/password".to_owned()], &["sk-[a-z0-9]{8,}".to_owned()]).unwrap()
    }

    fn redacted(payload: &[u8]) -> String {
        String::from_utf8(rules().dead_letter(payload).expect("something redacted")).unwrap()
    }

    #[test]
    fn an_event_refused_for_one_field_is_redacted_as_an_event() {
        // `isError` of the wrong type: refused, its arguments and result intact.
        let message = br#"{"v":1,"kind":"completion","source":"s","session":"x","callId":"c","time":"2026-01-01T00:00:00Z","isError":"yes","args":{"password":"hunter2","key":"sk-abcdefgh12"},"result":{"password":"p"},"attributes":{"toolUseResult":{"password":"q"}}}"#;
        let out = redacted(message);
        for secret in ["hunter2", "sk-abcdefgh12", "\"p\"", "\"q\""] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["args"]["password"], "[REDACTED]");
        assert_eq!(v["args"]["key"], "[REDACTED]");
        assert_eq!(v["attributes"]["toolUseResult"]["password"], "[REDACTED]");
        assert_eq!(v["isError"], "yes", "the rest as it came");
    }

    /// A message a tree cannot hold (lone surrogates) whose redacted strings make it one: it is
    /// redacted as the object it now is, so that redacting it again changes nothing.
    #[test]
    fn redacting_a_dead_letter_twice_changes_nothing_more() {
        let rules = Redaction::new(&["/0".into()], &["[0-9]{5,}".into(), "tool".into()]).unwrap();
        let message = br#"{"kind":"completion","result":["a.txt","b.txt"],"session":"\ude00\ud83123456789d","tool":"list_directory","v":1}"#;
        let once = rules.dead_letter(message).expect("redacted");
        let again = rules.dead_letter(&once).unwrap_or_else(|| once.clone());
        assert_eq!(
            String::from_utf8_lossy(&again),
            String::from_utf8_lossy(&once)
        );
        let v: Value = serde_json::from_slice(&once).unwrap();
        assert_eq!(v["[REDACTED]"], "list_directory", "{v}");
        assert_eq!(v["session"], "\u{fffd}\u{fffd}[REDACTED]d");
    }

    /// An event too deep for a tree, a secret escaped in its arguments: found all the same.
    #[test]
    fn escaped_secrets_in_a_message_too_deep_for_a_tree_are_redacted() {
        let message = format!(
            r#"{{"v":1,"kind":"announce","args":{{"cmd":"KEY=sk-\u0061bcdefgh12"}},"attributes":{{"d":{}1{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let out = redacted(message.as_bytes());
        assert!(out.contains(r#""cmd":"KEY=[REDACTED]""#), "{out}");
        assert!(
            out.ends_with(&format!("1{}}}}}", "]".repeat(200))),
            "the rest as it came"
        );
    }

    #[test]
    fn text_that_is_no_json_object_is_searched_by_the_patterns() {
        for message in [
            &b"not json sk-abcdefgh12 at all"[..],
            b"{\"args\":{\"k\":\"sk-abcdefgh12\"},\"s\":\"\\ud800\"}",
            b"\xff\xfe sk-abcdefgh12",
            b"[\"sk-abcdefgh12\"]",
        ] {
            let out = redacted(message);
            assert!(
                !out.contains("sk-abcdefgh12") && out.contains("[REDACTED]"),
                "{out}"
            );
        }
    }

    /// Bytes that are not UTF-8 do not keep the pointers from applying to an event.
    #[test]
    fn an_event_with_bytes_that_are_not_utf8_is_redacted_as_an_event() {
        let message =
            b"{\"kind\":\"announce\",\"session\":\"s\xff\",\"args\":{\"password\":\"hunter2\"}}";
        let out = redacted(message);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["args"]["password"], "[REDACTED]");
        assert_eq!(v["session"], "s\u{fffd}");
        assert_eq!(
            rules().dead_letter(out.as_bytes()).as_deref(),
            Some(out.as_bytes())
        );
    }

    #[test]
    fn a_message_without_secrets_goes_as_it_came() {
        let rules = rules();
        for message in [
            &br#"{"v":1,"kind":"announce","args":{"user":"a"}}"#[..],
            b"not json",
            b"",
            b"\xff",
        ] {
            assert_eq!(rules.dead_letter(message), None);
        }
        assert_eq!(Redaction::default().dead_letter(b"sk-abcdefgh12"), None);
    }
}
