//! The event as one line of JSON: [`Event::encode`], written straight into a buffer, byte for
//! byte what serde_json writes for it (a test holds the two equal). Arguments and results are
//! copied as they stand; serde_json would read them again to write them as raw values.

use super::wire::Fields;
use super::Event;
use crate::jsonwrite::{key, Writer};
use serde::{Serialize, Serializer};

impl Event {
    /// Encodes the event as one line of JSON.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// [`encode`](Self::encode), appended to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let f = self.fields();
        let verbatim = |json: Option<&crate::json::Json>| json.map_or(0, |j| j.as_str().len());
        out.reserve(256 + verbatim(f.args) + verbatim(f.result));
        let mut w = Writer::new(std::mem::take(out));
        f.write_json(&mut w);
        *out = w.into_inner();
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.fields().serialize(s)
    }
}

impl Fields<'_> {
    /// The fields in [`Fields`]' order (serde's), each only when set.
    fn write_json(&self, w: &mut Writer) {
        let mut o = w.object();
        o.key(key!("v")).int(i64::from(self.v));
        o.key(key!("kind")).quoted(self.kind.as_str());
        o.key(key!("source")).str(self.source);
        o.key(key!("session")).str(self.session);
        o.str_if_some(key!("thread"), self.thread);
        o.str_if_some(key!("turn"), self.turn);
        o.str_if_some(key!("callId"), self.call_id);
        o.key(key!("time")).time(self.time);
        o.value_if_some(key!("attributes"), self.attributes);
        o.str_if_some(key!("tool"), self.tool);
        if let Some(args) = self.args {
            o.key(key!("args")).raw(args.as_str());
        }
        if let Some(c) = self.checksum {
            // Hex digits only.
            o.key(key!("checksum")).quoted(c.as_str());
        }
        o.value_if_some(key!("sideEffects"), self.side_effects);
        o.str_if_some(key!("agent"), self.agent);
        o.str_if_some(key!("execution"), self.execution);
        o.value_if_some(key!("hookContext"), self.hook_context);
        if let Some(result) = self.result {
            o.key(key!("result")).raw(result.as_str());
        }
        if let Some(b) = self.is_error {
            o.key(key!("isError")).bool(b);
        }
        if let Some(b) = self.cancelled {
            o.key(key!("cancelled")).bool(b);
        }
        o.time_if_some(key!("startedAt"), self.started_at);
        if let Some(d) = self.duration_ms {
            o.key(key!("durationMs")).value(&d);
        }
        o.str_if_some(key!("reason"), self.reason);
        // A decision's name needs no escaping.
        if let Some(d) = self.decision {
            o.key(key!("decision")).quoted(d);
        }
        o.str_if_some(key!("by"), self.by);
        o.str_if_some(key!("hook"), self.hook);
        o.str_if_some(key!("policyId"), self.policy_id);
        o.str_if_some(key!("policyVersion"), self.policy_version);
        o.end();
    }
}

#[cfg(test)]
mod tests {
    use super::Event;
    use crate::test_json::json_value;
    use proptest::prelude::*;
    use serde_json::json;

    /// Writes what serde_json writes for the same event, and what decodes to the same event.
    fn agree(event: &Event) {
        let encoded = event.encode();
        let by_serde = serde_json::to_vec(event).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&encoded),
            String::from_utf8_lossy(&by_serde)
        );
        assert_eq!(&Event::decode(&encoded).unwrap(), event);
    }

    fn event(value: serde_json::Value) -> Event {
        Event::decode(value.to_string().as_bytes()).unwrap_or_else(|e| panic!("{value}: {e}"))
    }

    #[test]
    fn every_kind_as_serde_writes_it() {
        let sum = "ab".repeat(32);
        let time = "2026-05-10T10:00:00.067Z";
        for value in [
            json!({"v":1,"kind":"announce","source":"s","session":"x\n\"y\"","thread":"t","turn":"u","callId":"c","time":time,
                   "attributes":{"b":[1,2.5,null],"a":"é"},"tool":"Bash","args":{"command":"ls\t-la","n":1e300},"checksum":sum,
                   "sideEffects":{"level":"write","idempotent":false,"idempotencyKey":"k"},"agent":"a","execution":"e","hookContext":{"h":1}}),
            json!({"v":1,"kind":"completion","source":"s","session":"x","time":time,"callId":"c","tool":"t","args":null,
                   "result":"out\u{0}\u{2028}","isError":true,"cancelled":true,"startedAt":"2026-05-10T09:59:59Z","durationMs":18446744073709551615u64}),
            json!({"v":1,"kind":"completion","source":"s","session":"x","time":time,"callId":"c","result":[],"isError":false,"cancelled":false}),
            json!({"v":1,"kind":"execution_start","source":"s","session":"x","time":time,"checksum":sum,"tool":"t"}),
            json!({"v":1,"kind":"execution_end","source":"s","session":"x","time":time,"checksum":sum,"isError":true,"startedAt":time,"durationMs":5}),
            json!({"v":1,"kind":"turn_end","source":"s","session":"x","time":time,"reason":"done"}),
            json!({"v":1,"kind":"turn_aborted","source":"s","session":"x","time":time}),
            json!({"v":1,"kind":"approval","source":"s","session":"x","time":time,"tool":"t","args":{},"decision":"approved","by":"me","reason":"ok"}),
            json!({"v":1,"kind":"hook_decision","source":"s","session":"x","time":time,"checksum":sum,"hook":"PreToolUse","decision":"deny",
                   "policyId":"p","policyVersion":"1","reason":"no"}),
        ] {
            agree(&event(value));
        }
        // Arguments JavaScript reads and serde_json's tree does not, kept as sent.
        let text = format!(
            r#"{{"v":1,"kind":"announce","source":"s","session":"x","time":"{time}","tool":"t","args":{{"a":"\ud800","b":1e400}}}}"#
        );
        agree(&Event::decode(text.as_bytes()).unwrap());
    }

    proptest! {
        #[test]
        fn any_event_as_serde_writes_it(
            text in "(\\PC|[\"\\\\/\u{0}-\u{1f}\u{7f}\u{2028}])+",
            args in json_value(),
            result in json_value(),
            kind in prop::sample::select(vec!["announce", "completion"]),
            flags in any::<(bool, bool, Option<u64>)>(),
        ) {
            let mut value = json!({
                "v": 1, "kind": kind, "source": text, "session": text, "turn": text, "callId": text,
                "time": "2026-05-10T10:00:00.067Z", "tool": text, "args": args,
            });
            if kind == "completion" {
                value["result"] = result;
                value["isError"] = json!(flags.0);
                value["cancelled"] = json!(flags.1);
                if let Some(d) = flags.2 {
                    value["durationMs"] = json!(d);
                }
            } else {
                value["agent"] = json!(text);
            }
            agree(&event(value));
        }
    }
}
