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
    /// 128 levels or more) is redacted by the pointers through its lossy reading
    /// ([`Json::to_value`]), so that such a value elsewhere in the document cannot keep them
    /// from applying; when one matches, the record carries that reading (the surrogate as
    /// U+FFFD, the number as `null`, what nests deeper than 127 levels as `null`). Otherwise the
    /// patterns are applied to every string of the raw text, at any depth: each decoded first
    /// (an escape such as `\u0049` or `\/` hides nothing) and replaced in place when one
    /// matches, so the rest of the text stays exactly as sent.
    fn json(&self, json: &mut Json, name: &str, what: &mut Vec<String>) {
        let (mut value, exact) = match json.try_to_value() {
            Ok(value) => (value, true),
            Err(_) => (json.to_value(), false),
        };
        let mut changed = self.pointers_into(&mut value, name, what);
        if !exact && !changed {
            // No rule needs the lossy reading: the patterns keep the text exact.
            if let Some(clean) = self.strings_of_text(json.as_str()) {
                *json = clean;
                what.push(name.to_owned());
            }
            return;
        }
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
        }
    }

    /// JSON text with the patterns applied to each of its strings (keys too), decoded, and
    /// written back in place; `None` when none matched.
    fn strings_of_text(&self, text: &str) -> Option<Json> {
        Json::parse(&self.strings_in(text)?).ok()
    }

    /// Any text with the patterns applied to each JSON string in it, decoded, and written back
    /// in place; `None` when none matched. Scanning stops at the first `"` that opens no JSON
    /// string.
    pub(crate) fn strings_in(&self, text: &str) -> Option<String> {
        let mut out = String::with_capacity(text.len());
        let mut changed = false;
        let mut rest = text;
        while let Some(start) = rest.find('"') {
            let Some(len) = crate::jsonscan::string_len(&rest.as_bytes()[start..]) else {
                break;
            };
            out.push_str(&rest[..start]);
            let (token, after) = rest[start..].split_at(len);
            let redacted = match Json::parse(token).map(|j| j.to_value()) {
                Ok(Value::String(mut decoded)) => self.string(&mut decoded).then_some(decoded),
                _ => None,
            };
            match redacted {
                Some(clean) => {
                    changed = true;
                    out.push_str(&Value::String(clean).to_string());
                }
                None => out.push_str(token),
            }
            rest = after;
        }
        out.push_str(rest);
        changed.then_some(out)
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
            Value::String(s) => self.string(s),
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
    /// Applies the patterns to a string value; one that holds JSON text (arguments sent
    /// encoded) has them applied to its strings too, decoded, so that an escape inside it hides
    /// nothing. Whether it changed.
    fn string(&self, s: &mut String) -> bool {
        if let Some(clean) = self.text(s) {
            *s = clean;
            return true;
        }
        let t = s.trim_start();
        if !(t.starts_with('{') || t.starts_with('[')) {
            return false;
        }
        match Json::parse(s) {
            Ok(held) => match self.strings_of_text(held.as_str()) {
                Some(clean) => {
                    *s = clean.as_str().to_owned();
                    true
                }
                None => false,
            },
            Err(_) => false,
        }
    }

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

    /// A JSON escape hides no secret from the patterns: not below the 127 levels a tree holds,
    /// where the raw text's strings are decoded one by one (the value keeps its shape), and not
    /// inside arguments sent as JSON text.
    #[test]
    fn escaped_secrets_are_redacted_at_any_depth() {
        let rules = Redaction::new(
            &[],
            &[
                "AKIA[0-9A-Z]{16}".into(),
                "ghp_[A-Za-z0-9]{36}".into(),
                "://[^:/\\s]+:[^@/\\s]+@".into(),
            ],
        )
        .unwrap();
        let secrets = [
            r"AKIA\u0049OSFODNN7EXAMPLE",
            r"\u0067hp_abcdefghijklmnopqrstuvwxyz0123456789",
            r"https:\/\/user:pw@host\/x",
        ];
        for secret in secrets {
            let deep = format!(
                r#"{{"{secret}":1,"d":{}"{secret}"{}}}"#,
                "[".repeat(130),
                "]".repeat(130)
            );
            let mut r = record(json!({}), json!("fine"));
            r.spec.input = Some(Json::parse(&deep).unwrap());
            assert!(rules.apply(&mut r), "{secret}");
            let input = r.spec.input.as_ref().unwrap().as_str().to_owned();
            for gone in ["EXAMPLE", "pw@", "0123456789"] {
                assert!(!input.contains(gone), "{gone} in {input}");
            }
            assert!(input.starts_with("{\""), "{input}");
            let strings = input.matches("[REDACTED]").count();
            assert_eq!(
                strings, 2,
                "the key and the string 130 levels down: {input}"
            );
            assert!(input.contains(&format!("{}\"", "[".repeat(130))), "{input}");
            assert_eq!(r.redacted, ["spec.input"]);
            // Arguments sent as JSON text, the secret escaped inside it.
            let encoded = serde_json::to_string(&format!(r#"{{"cmd":"{secret}"}}"#)).unwrap();
            let mut r = record(json!({}), json!("fine"));
            r.spec.input = Some(Json::parse(&encoded).unwrap());
            assert!(rules.apply(&mut r), "{encoded}");
            let held = r.spec.input.as_ref().unwrap().to_value();
            let inner: Value = serde_json::from_str(held.as_str().unwrap()).unwrap();
            let cmd = inner["cmd"].as_str().unwrap();
            assert!(cmd.contains(REDACTED), "{secret}: {cmd}");
            for gone in ["EXAMPLE", "pw@", "0123456789"] {
                assert!(!cmd.contains(gone), "{gone} in {cmd}");
            }
        }
        // Shallow and plain, nothing changes shape or spelling where nothing matched.
        let mut r = record(json!({}), json!("fine"));
        let deep = format!(
            r#"{{"a":"\/ok","d":{}1{}}}"#,
            "[".repeat(130),
            "]".repeat(130)
        );
        r.spec.input = Some(Json::parse(&deep).unwrap());
        assert!(!rules.apply(&mut r));
        assert_eq!(r.spec.input.as_ref().unwrap().as_str(), deep);
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
