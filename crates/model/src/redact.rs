//! Redaction: secrets in a record's arguments, result and attributes replaced before the record
//! leaves the process (records topic, query API, local output). The checksum is the one of the
//! original arguments — it is computed when the call is announced, long before — so the
//! cross-bus join still holds; the record lists what was redacted in `redacted`. The producers
//! apply the same rules to each event before they publish it (`event`).

mod event;
mod message;

use crate::record::ToolCallRecord;
use crate::Json;
use serde_json::{Map, Value};

/// What replaces a redacted value or match.
pub const REDACTED: &str = "[REDACTED]";

/// How many bytes redaction may add to one value (arguments, a result, the attributes, a text):
/// a pattern that matches short runs densely (`[0-9]` over a page of digits) would otherwise
/// make a value ten times its size, and a record past what a Kafka message may hold. A value
/// that would grow more is redacted whole.
pub const MAX_GROWTH: usize = 64 * 1024;

/// Whether `redacted` grew past [`MAX_GROWTH`] over `original` bytes.
fn outgrew(original: usize, redacted: usize) -> bool {
    redacted > original.saturating_add(MAX_GROWTH)
}

/// Redaction rules: JSON pointers (into the arguments and into the result) and regular
/// expressions (over every string of arguments, result and attributes).
#[derive(Debug, Clone, Default)]
pub struct Redaction {
    pointers: Vec<String>,
    patterns: Vec<regex::Regex>,
}

impl Redaction {
    /// The rules; the error names the rule that is not valid.
    pub fn new(pointers: &[String], patterns: &[String]) -> Result<Self, String> {
        for p in pointers {
            if !p.starts_with('/') {
                return Err(format!(
                    "redaction pointer `{p}` is not a JSON pointer: it starts with `/`, as in `/password` or `/headers/Authorization`"
                ));
            }
        }
        let patterns = patterns
            .iter()
            .map(|p| {
                regex::Regex::new(p).map_err(|e| {
                    format!("redaction pattern `{p}` is not a regular expression: {e}")
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Redaction {
            pointers: pointers.to_vec(),
            patterns,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.pointers.is_empty() && self.patterns.is_empty()
    }

    /// Redacts `record` in place; true when anything was.
    pub fn apply(&self, record: &mut ToolCallRecord) -> bool {
        if self.is_empty() {
            return false;
        }
        let mut what = Vec::new();
        if let Some(input) = &mut record.spec.input {
            self.json(input, "spec.input", &mut what);
        }
        if let Some(output) = &mut record.status.output {
            self.json(output, "status.output", &mut what);
        }
        if let Some(attributes) = &mut record.attributes {
            self.attributes(attributes, "attributes", &mut what);
        }
        if let Some(hook) = &mut record.spec.hook_context {
            self.object(hook, "spec.hookContext", &mut what);
        }
        // Free text that may quote the call: why it ended, why a hook or a person decided.
        self.free_text(&mut record.status.reason, "status.reason", &mut what);
        if let Some(approval) = &mut record.spec.approval {
            self.free_text(&mut approval.reason, "spec.approval.reason", &mut what);
            let by = &mut approval.approved_by;
            self.free_text(by, "spec.approval.approvedBy", &mut what);
        }
        for (i, d) in record.status.hook_decisions.iter_mut().enumerate() {
            let name = format!("status.hookDecisions[{i}].reason");
            self.free_text(&mut d.reason, &name, &mut what);
        }
        let any = !what.is_empty();
        for w in what {
            if !record.redacted.contains(&w) {
                record.redacted.push(w);
            }
        }
        any
    }

    /// Redacts free-form producer data: pointers inside each attribute (one may repeat the
    /// arguments or the result: Claude Code's `toolUseResult` holds both), patterns over all.
    fn attributes(&self, attributes: &mut Map<String, Value>, name: &str, what: &mut Vec<String>) {
        if !self.pointers.is_empty() {
            for (key, value) in attributes.iter_mut() {
                self.pointers_into(value, &format!("{name}.{key}"), what);
            }
        }
        self.object(attributes, name, what);
    }

    /// Replaces the matches of the patterns in every string and key of `map`, noting `name`.
    fn object(&self, map: &mut Map<String, Value>, name: &str, what: &mut Vec<String>) {
        let before = self.written_len_if_patterns(map);
        let mut value = Value::Object(std::mem::take(map));
        if self.strings(&mut value) {
            what.push(name.to_owned());
            if outgrew(before, value.to_string().len()) {
                value = Value::Object(Map::from_iter([(
                    REDACTED.to_owned(),
                    Value::String(REDACTED.to_owned()),
                )]));
            }
        }
        if let Value::Object(back) = value {
            *map = back;
        }
    }

    /// What `map` takes written, when patterns may change it (0 otherwise: nothing to compare).
    fn written_len_if_patterns(&self, map: &Map<String, Value>) -> usize {
        if self.patterns.is_empty() {
            return 0;
        }
        serde_json::to_string(map).map_or(0, |text| text.len())
    }

    /// Replaces the matches of the patterns in a free text that may quote the call, noting
    /// `name`.
    fn free_text(&self, text: &mut Option<String>, name: &str, what: &mut Vec<String>) {
        if let Some(clean) = text.as_deref().and_then(|t| self.text(t)) {
            *text = Some(clean);
            what.push(name.to_owned());
        }
    }

    /// Redacts one JSON document (arguments or result), noting where.
    ///
    /// Text a [`Value`] cannot hold exactly (a lone surrogate escape, a number beyond a double,
    /// 128 levels or more) is redacted through its lossy reading ([`Json::to_value`]), so that
    /// such a value elsewhere in the document cannot keep the rules from applying. When a rule
    /// matches there, the record carries that reading (the surrogate as U+FFFD, the number as
    /// `null`, what nests deeper than 127 levels as `null`); when none does, the patterns are
    /// tried once more on the raw text, which also holds what the reading cut.
    fn json(&self, json: &mut Json, name: &str, what: &mut Vec<String>) {
        let (mut value, exact) = match json.try_to_value() {
            Ok(value) => (value, true),
            Err(_) => (json.to_value(), false),
        };
        let mut changed = self.pointers_into(&mut value, name, what);
        if self.strings(&mut value) {
            what.push(name.to_owned());
            changed = true;
        }
        if changed {
            let redacted = Json::from(value);
            *json = if outgrew(json.as_str().len(), redacted.as_str().len()) {
                Json::from(Value::String(REDACTED.to_owned()))
            } else {
                redacted
            };
        } else if !exact {
            if let Some(clean) = self.text(json.as_str()) {
                *json = Json::from(Value::String(clean));
                what.push(name.to_owned());
            }
        }
    }

    /// Replaces what the pointers name in `value`, noting each as `name` and the pointer; whether
    /// any did.
    ///
    /// Arguments or a result that arrive as the JSON text of a value — OpenAI's and Codex's
    /// `arguments`, OTel's `gen_ai.tool.call.arguments` and `.result` — are the value that text
    /// holds to the pointers: `/password` names the password inside it, and the text is written
    /// again with it redacted.
    fn pointers_into(&self, value: &mut Value, name: &str, what: &mut Vec<String>) -> bool {
        if self.pointers.is_empty() {
            return false;
        }
        if let Value::String(text) = value {
            let Ok(mut held @ (Value::Object(_) | Value::Array(_))) =
                serde_json::from_str::<Value>(text)
            else {
                return false;
            };
            let changed = self.pointers_into(&mut held, name, what);
            if changed {
                *text = held.to_string();
            }
            return changed;
        }
        let mut changed = false;
        for p in &self.pointers {
            if let Some(v) = value.pointer_mut(p) {
                *v = Value::String(REDACTED.to_owned());
                what.push(format!("{name}{p}"));
                changed = true;
            }
        }
        changed
    }

    /// Replaces the matches of the patterns in every string (and object key) of `value`.
    fn strings(&self, value: &mut Value) -> bool {
        match value {
            Value::String(s) => match self.text(s) {
                Some(clean) => {
                    *s = clean;
                    true
                }
                None => false,
            },
            Value::Array(items) => items.iter_mut().fold(false, |any, v| self.strings(v) | any),
            Value::Object(map) => {
                let mut any = false;
                let keys: Vec<String> = map.keys().cloned().collect();
                let mut out = Map::with_capacity(map.len());
                for k in keys {
                    let mut v = map.remove(&k).expect("a key of the map");
                    any |= self.strings(&mut v);
                    let k = match self.text(&k) {
                        Some(clean) => {
                            any = true;
                            clean
                        }
                        None => k,
                    };
                    out.insert(k, v);
                }
                *map = out;
                any
            }
            _ => false,
        }
    }

    /// `text` with every match of the patterns replaced (messages that quote input: a bad line's).
    pub fn in_text<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        match self.text(text) {
            Some(clean) => clean.into(),
            None => text.into(),
        }
    }

    /// `text` with every match replaced, if any matched; all of it when that would grow it past
    /// [`MAX_GROWTH`].
    fn text(&self, text: &str) -> Option<String> {
        let mut out: Option<String> = None;
        for re in &self.patterns {
            let current = out.as_deref().unwrap_or(text);
            if re.is_match(current) {
                out = Some(re.replace_all(current, REDACTED).into_owned());
            }
        }
        out.map(|clean| {
            if outgrew(text.len(), clean.len()) {
                REDACTED.to_owned()
            } else {
                clean
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(input: Value, output: Value) -> ToolCallRecord {
        let text = format!(
            r#"{{"apiVersion":"toolcalls.dev/v1","kind":"ToolCall","metadata":{{"name":"3af89e42-d4da-5398-ae43-35e31d209ee3","revision":1,"source":"s","session":"x"}},"checksum":"{}","createdAt":"2026-01-01T00:00:00.000Z","updatedAt":"2026-01-01T00:00:00.000Z","spec":{{"toolRef":{{"name":"t"}},"input":{input},"sideEffects":{{}}}},"status":{{"phase":"Succeeded","output":{output},"isError":false}},"correlation":{{"strategy":"call_id","confidence":1.0,"candidates":1,"eventsMerged":2,"duplicates":0,"attempts":1,"key":"k"}},"replay":"free","attributes":{{"env":"KEY=sk-abcdefghijklmnopqrstuvwx"}}}}"#,
            "a".repeat(64)
        );
        serde_json::from_str(&text).unwrap()
    }

    /// A pattern that matches short runs densely would make a value many times its size; such a
    /// value is redacted whole, and the record stays about the size it was.
    #[test]
    fn redaction_does_not_grow_a_value_past_its_bound() {
        let rules = Redaction::new(&[], &["[0-9]".into()]).unwrap();
        let digits = "1".repeat(200_000);
        let many = vec![json!("7"); 20_000];
        let mut r = record(json!({"d": digits, "n": "pin 1234"}), json!(many));
        r.attributes = Some(Map::from_iter([(
            "a".to_owned(),
            json!("2".repeat(200_000)),
        )]));
        r.status.reason = Some("3".repeat(200_000));
        assert!(rules.apply(&mut r));
        let input = r.spec.input.as_ref().unwrap().to_value();
        // The long text is a value of its own that outgrew the bound: it is redacted whole.
        assert_eq!(input["d"], json!(REDACTED));
        assert_eq!(
            input["n"],
            json!("pin [REDACTED][REDACTED][REDACTED][REDACTED]")
        );
        // Twenty thousand strings that each grow: the document outgrew it.
        assert_eq!(
            r.status.output.as_ref().unwrap().to_value(),
            json!(REDACTED)
        );
        assert_eq!(r.attributes.as_ref().unwrap()["a"], json!(REDACTED));
        assert_eq!(r.status.reason.as_deref(), Some(REDACTED));
        let written = serde_json::to_string(&r).unwrap().len();
        assert!(written < 100_000, "{written}");
        // A pattern that shortens what it matches is never bounded.
        let rules = Redaction::new(&[], &["sk-[a-z]{30,}".into()]).unwrap();
        let mut r = record(
            json!({"k": "sk-".to_owned() + &"a".repeat(300_000)}),
            json!(1),
        );
        rules.apply(&mut r);
        assert_eq!(
            r.spec.input.as_ref().unwrap().to_value(),
            json!({"k": REDACTED})
        );
    }

    #[test]
    fn pointers_and_patterns_replace_secrets_and_say_where() {
        let rules = Redaction::new(
            &["/password".into(), "/headers/Authorization".into()],
            &["sk-[A-Za-z0-9]{20,}".into()],
        )
        .unwrap();
        let mut r = record(
            json!({"user": "u", "password": "hunter2", "headers": {"Authorization": "Bearer x"}, "note": "key sk-abcdefghijklmnopqrstuvwx here"}),
            json!({"password": "hunter2", "ok": true}),
        );
        let checksum = r.checksum.clone();
        assert!(rules.apply(&mut r));
        let text = String::from_utf8(r.encode()).unwrap();
        for secret in ["hunter2", "Bearer x", "sk-abcdefghijklmnopqrstuvwx"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(
            r.spec.input.as_ref().unwrap().to_value(),
            json!({"user": "u", "password": REDACTED, "headers": {"Authorization": REDACTED}, "note": "key [REDACTED] here"})
        );
        assert_eq!(
            r.checksum, checksum,
            "the checksum is the original arguments'"
        );
        assert_eq!(
            r.redacted,
            [
                "spec.input/password",
                "spec.input/headers/Authorization",
                "spec.input",
                "status.output/password",
                "attributes"
            ]
        );
        // Again: nothing new to say.
        let before = r.redacted.clone();
        rules.apply(&mut r);
        assert_eq!(r.redacted, before);
    }

    #[test]
    fn nothing_to_redact_leaves_the_record_alone() {
        let rules = Redaction::new(&["/password".into()], &["sk-[0-9]{30}".into()]).unwrap();
        let mut r = record(json!({"user": "u"}), json!("fine"));
        let before = r.clone();
        assert!(!rules.apply(&mut r));
        assert_eq!(r.spec, before.spec);
        assert!(r.redacted.is_empty());
    }

    #[test]
    fn rules_apply_beside_what_a_value_cannot_hold() {
        let rules = Redaction::new(&["/password".into()], &[]).unwrap();
        let odd = |text: &str| Json::parse(text).unwrap();
        for args in [
            r#"{"password":"hunter2","x":"\ud800"}"#,
            r#"{"password":"hunter2","n":1e400}"#,
            &format!(
                r#"{{"password":"hunter2","deep":{}{}}}"#,
                "[".repeat(130),
                "]".repeat(130)
            ),
        ] {
            let mut r = record(json!({}), json!("fine"));
            r.spec.input = Some(odd(args));
            assert!(rules.apply(&mut r), "{args}");
            let text = String::from_utf8(r.encode()).unwrap();
            assert!(!text.contains("hunter2"), "{text}");
            assert_eq!(
                r.spec.input.as_ref().unwrap().to_value()["password"],
                json!(REDACTED)
            );
            assert!(r.redacted.contains(&"spec.input/password".to_owned()));
        }
        // Nothing to redact: the odd text stays exactly as sent.
        let mut r = record(json!({}), json!("fine"));
        r.spec.input = Some(odd(r#"{"user":"u","x":"\ud800"}"#));
        assert!(!rules.apply(&mut r));
        assert_eq!(
            r.spec.input.as_ref().unwrap().as_str(),
            r#"{"user":"u","x":"\ud800"}"#
        );
        // A secret below the 127 levels the lossy reading keeps is still found by a pattern.
        let rules = Redaction::new(&[], &["sk-[a-z]{20}".into()]).unwrap();
        let deep = format!(
            r#"{{"x":"\ud800","d":{}"sk-abcdefghijklmnopqrst"{}}}"#,
            "[".repeat(130),
            "]".repeat(130)
        );
        let mut r = record(json!({}), json!("fine"));
        r.spec.input = Some(odd(&deep));
        assert!(rules.apply(&mut r));
        let text = String::from_utf8(r.encode()).unwrap();
        assert!(!text.contains("sk-abcdefghijklmnopqrst"), "{text}");
    }

    #[test]
    fn attributes_that_repeat_the_call_and_reasons_that_quote_it_are_redacted() {
        use crate::event::{ApprovalDecision, HookVerdict};
        use crate::record::{ApprovalState, HookDecisionEntry};
        let rules = Redaction::new(&["/content".into()], &["hunter[0-9]".into()]).unwrap();
        let mut r = record(json!({"content": "top secret"}), json!("fine"));
        let attributes = r.attributes.get_or_insert_with(Map::new);
        attributes.insert(
            "toolUseResult".into(),
            json!({"type": "create", "filePath": "/a", "content": "top secret"}),
        );
        r.status.hook_decisions.push(HookDecisionEntry {
            hook: "PreToolUse".into(),
            decision: HookVerdict::Deny,
            policy_id: None,
            policy_version: None,
            reason: Some("blocked: echo hunter2 > /etc/passwd".into()),
            at: crate::Timestamp::from_millis(0),
        });
        r.spec.approval = Some(ApprovalState {
            required: true,
            status: ApprovalDecision::Denied,
            requested_at: None,
            approved_by: Some("hunter7".into()),
            approved_at: None,
            reason: Some("no, hunter2 stays out".into()),
        });
        assert!(rules.apply(&mut r));
        let text = String::from_utf8(r.encode()).unwrap();
        for secret in ["top secret", "hunter2", "hunter7"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        for place in [
            "spec.input/content",
            "attributes.toolUseResult/content",
            "spec.approval.reason",
            "spec.approval.approvedBy",
            "status.hookDecisions[0].reason",
        ] {
            assert!(
                r.redacted.contains(&place.to_owned()),
                "{place}: {:?}",
                r.redacted
            );
        }
        assert_eq!(
            r.attributes.as_ref().unwrap()["toolUseResult"]["filePath"],
            json!("/a")
        );
    }

    #[test]
    fn bad_rules_are_named() {
        let e = Redaction::new(&["password".into()], &[]).unwrap_err();
        assert!(e.contains("`password`"), "{e}");
        let e = Redaction::new(&[], &["(unclosed".into()]).unwrap_err();
        assert!(e.contains("(unclosed"), "{e}");
    }
}
