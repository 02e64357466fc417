//! Redaction of an event before a producer (`toolcalls ingest`, `--follow`, `receive`)
//! publishes or writes it, so that the secrets the rules name never reach the input topics.
//!
//! The rules are the records' ([`Redaction::apply`]): pointers into the arguments, the result
//! and each attribute; patterns over every string of those, the hook context and the reasons.
//! Where the arguments change and the event names no checksum, the checksum of the original
//! arguments is set first — the one the processor would compute from them — so that the call
//! still joins by checksum with an observability bus that saw the arguments unredacted.

use super::Redaction;
use crate::checksum::{checksum_of_json, Checksum};
use crate::event::{Event, EventBody};
use crate::Json;

impl Redaction {
    /// Redacts `event` in place; true when anything was.
    pub fn apply_event(&self, event: &mut Event) -> bool {
        if self.is_empty() {
            return false;
        }
        let mut what = Vec::new();
        match &mut event.body {
            EventBody::Announce(a) => {
                self.call_args(Some(&a.tool), &mut a.args, &mut a.checksum, &mut what);
                if let Some(hook) = &mut a.hook_context {
                    self.object(hook, "hookContext", &mut what);
                }
            }
            EventBody::Completion(c) => {
                self.call_args(c.tool.as_deref(), &mut c.args, &mut c.checksum, &mut what);
                if let Some(result) = &mut c.result {
                    self.json(result, "result", &mut what);
                }
            }
            EventBody::Approval(a) => {
                self.call_args(a.tool.as_deref(), &mut a.args, &mut a.checksum, &mut what);
                self.free_text(&mut a.reason, "reason", &mut what);
                self.free_text(&mut a.by, "by", &mut what);
            }
            EventBody::HookDecision(h) => {
                self.call_args(h.tool.as_deref(), &mut h.args, &mut h.checksum, &mut what);
                self.free_text(&mut h.reason, "reason", &mut what);
            }
            EventBody::TurnEnd(t) | EventBody::TurnAborted(t) => {
                self.free_text(&mut t.reason, "reason", &mut what);
            }
            EventBody::ExecutionStart(_) | EventBody::ExecutionEnd(_) => {}
        }
        if let Some(attributes) = &mut event.attributes {
            self.attributes(attributes, "attributes", &mut what);
        }
        !what.is_empty()
    }

    /// Redacts a call's arguments; when they change and no checksum is named, names the one of
    /// the original arguments first (none without a tool, as the processor computes none).
    fn call_args(
        &self,
        tool: Option<&str>,
        args: &mut Option<Json>,
        checksum: &mut Option<Checksum>,
        what: &mut Vec<String>,
    ) {
        let Some(json) = args else {
            return;
        };
        let original = checksum.is_none().then(|| json.clone());
        let before = what.len();
        self.json(json, "args", what);
        if what.len() > before {
            if let (Some(tool), Some(original)) = (tool, original) {
                *checksum = Some(checksum_of_json(tool, Some(&original)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::REDACTED;
    use serde_json::json;

    fn event(line: serde_json::Value) -> Event {
        Event::decode(line.to_string().as_bytes()).unwrap()
    }

    fn rules() -> Redaction {
        Redaction::new(
            &["/password".into(), "/content".into()],
            &["sk-[A-Za-z0-9]{20,}".into(), "hunter[0-9]".into()],
        )
        .unwrap()
    }

    const KEY: &str = "sk-abcdefghijklmnopqrstuvwx";

    /// Arguments and results that are the JSON text of a value (OpenAI's and Codex's
    /// `arguments`, OTel's `gen_ai.tool.call.*`): the pointers name what the text holds, and the
    /// checksum stays the one the adapter computed from the original text.
    #[test]
    fn pointers_reach_into_arguments_and_results_sent_as_json_text() {
        let args = r#"{"user":"admin","password":"hunter-plain","nested":[{"password":"x"}]}"#;
        let mut a = event(json!({
            "v": 1, "kind": "announce", "source": "s", "session": "x", "callId": "c1",
            "time": "2026-01-01T00:00:00Z", "tool": "login", "args": args,
            "checksum": "a".repeat(64)
        }));
        let rules = Redaction::new(&["/password".into(), "/0/content".into()], &[]).unwrap();
        assert!(rules.apply_event(&mut a));
        let EventBody::Announce(body) = &a.body else {
            unreachable!()
        };
        let serde_json::Value::String(text) = body.args.as_ref().unwrap().to_value() else {
            panic!("the arguments stay JSON text: {:?}", body.args)
        };
        let held: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            held,
            json!({"user": "admin", "password": REDACTED, "nested": [{"password": "x"}]})
        );
        assert_eq!(body.checksum.as_ref().unwrap().to_string(), "a".repeat(64));

        let mut c = event(json!({
            "v": 1, "kind": "completion", "source": "s", "session": "x", "callId": "c1",
            "time": "2026-01-01T00:00:01Z", "result": r#"[{"content":"token 123"}]"#
        }));
        assert!(rules.apply_event(&mut c));
        let text = String::from_utf8(c.encode()).unwrap();
        assert!(!text.contains("token 123"), "{text}");
        // Text that holds no object or array is left to the patterns.
        let mut plain = event(json!({
            "v": 1, "kind": "completion", "source": "s", "session": "x", "callId": "c1",
            "time": "2026-01-01T00:00:01Z", "result": "\"password\""
        }));
        assert!(!rules.apply_event(&mut plain));
    }

    #[test]
    fn every_field_that_may_hold_a_secret_is_redacted_and_the_checksum_kept() {
        let announce = json!({
            "v": 1, "kind": "announce", "source": "s", "session": "x", "callId": "c1",
            "time": "2026-01-01T00:00:00Z", "tool": "Bash",
            "args": {"command": format!("curl -H 'Authorization: {KEY}' x"), "password": "pw"},
            "hookContext": {"note": "hunter2"},
            "attributes": {"toolUseResult": {"content": "top secret", "file": "/a"}}
        });
        let mut a = event(announce.clone());
        let unredacted = checksum_of_json("Bash", Some(&Json::from(announce["args"].clone())));
        assert!(rules().apply_event(&mut a));
        let text = String::from_utf8(a.encode()).unwrap();
        for secret in [KEY, "\"pw\"", "hunter2", "top secret"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(text.contains("\"file\":\"/a\""), "{text}");
        let EventBody::Announce(body) = &a.body else {
            unreachable!()
        };
        assert_eq!(body.checksum, Some(unredacted), "the original arguments'");

        let completion = json!({
            "v": 1, "kind": "completion", "source": "s", "session": "x", "callId": "c1",
            "time": "2026-01-01T00:00:01Z", "tool": "Bash", "args": {"password": "pw"},
            "result": format!("exported {KEY}")
        });
        let mut c = event(completion);
        assert!(rules().apply_event(&mut c));
        let text = String::from_utf8(c.encode()).unwrap();
        assert!(!text.contains(KEY) && !text.contains("\"pw\""), "{text}");
        let EventBody::Completion(body) = &c.body else {
            unreachable!()
        };
        let args = Json::from(json!({"password": "pw"}));
        assert_eq!(body.checksum, Some(checksum_of_json("Bash", Some(&args))));

        for (kind, extra) in [
            (
                "approval",
                json!({"callId": "c1", "decision": "denied", "by": "hunter7", "reason": "no hunter2"}),
            ),
            (
                "hook_decision",
                json!({"callId": "c1", "hook": "PreToolUse", "decision": "deny", "reason": "hunter2"}),
            ),
            ("turn_end", json!({"reason": "hunter2 typed"})),
        ] {
            let mut line = json!({
                "v": 1, "kind": kind, "source": "s", "session": "x",
                "time": "2026-01-01T00:00:02Z"
            });
            line.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let mut e = event(line);
            assert!(rules().apply_event(&mut e), "{kind}");
            let text = String::from_utf8(e.encode()).unwrap();
            assert!(!text.contains("hunter"), "{text}");
        }
    }

    #[test]
    fn an_event_without_secrets_is_left_exactly_as_it_was() {
        let line = json!({
            "v": 1, "kind": "announce", "source": "s", "session": "x",
            "time": "2026-01-01T00:00:00Z", "tool": "Read", "args": {"path": "/a"}
        });
        let mut e = event(line);
        let before = e.clone();
        assert!(!rules().apply_event(&mut e));
        assert_eq!(e, before, "no checksum added either");
        assert!(!Redaction::default().apply_event(&mut e));
    }

    #[test]
    fn a_named_checksum_stays_and_odd_text_is_still_redacted() {
        let named = "b".repeat(64);
        let text = format!(
            r#"{{"v":1,"kind":"announce","source":"s","session":"x","time":"2026-01-01T00:00:00Z","tool":"t","checksum":"{named}","args":{{"password":"pw","x":"\ud800"}}}}"#
        );
        let mut e = Event::decode(text.as_bytes()).unwrap();
        assert!(rules().apply_event(&mut e));
        let EventBody::Announce(a) = &e.body else {
            unreachable!()
        };
        assert_eq!(a.checksum.as_ref().map(|c| c.as_str()), Some(&*named));
        assert!(!String::from_utf8(e.encode()).unwrap().contains("\"pw\""));
    }
}
