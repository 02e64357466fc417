//! How deep the values an adapter copies into an event's maps may nest, so that every event it
//! makes decodes (docs/ADAPTERS.md, "Valid JSON a tree cannot hold").

use serde_json::{Map, Value};

/// How many levels a value of an event's `attributes` (or an announce's `hookContext`) may nest:
/// a message is read 127 levels deep, and the event and the map take two of them. A native
/// record may nest its values one or two levels deeper than that (it is read 127 levels deep
/// itself), and the event would not decode.
pub(crate) const MAP_VALUE_DEPTH: usize = 125;

/// Replaces each value of `map` that nests deeper than [`MAP_VALUE_DEPTH`] with a string saying
/// so: the event keeps its call and the rest of what it says, and the record shows what was left
/// out.
pub(crate) fn bound_depth(map: &mut Map<String, Value>) {
    for value in map.values_mut() {
        if nests_deeper_than(value, MAP_VALUE_DEPTH) {
            *value = Value::String(format!(
                "(omitted: nests deeper than the {MAP_VALUE_DEPTH} levels an event may carry here)"
            ));
        }
    }
}

/// Whether `value` nests more than `limit` levels of arrays and objects (without recursion).
fn nests_deeper_than(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 1)];
    while let Some((v, level)) = stack.pop() {
        match v {
            Value::Array(_) | Value::Object(_) if level > limit => return true,
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, level + 1))),
            Value::Object(o) => stack.extend(o.values().map(|c| (c, level + 1))),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Format, Options};
    use toolcalls_model::Event;

    /// A transcript row may nest its `toolUseResult` as deep as the row itself is read (127
    /// levels); copied into the event's attributes it would sit two levels deeper than an event
    /// is read. The event keeps its result and says what it left out; a value that fits stays.
    #[test]
    fn attributes_too_deep_for_an_event_are_left_out_and_said_so() {
        let nested = |levels: usize| format!("{}null{}", "[".repeat(levels), "]".repeat(levels));
        let rows = |levels: usize| {
            [
                r#"{"type":"assistant","timestamp":"2026-01-05T10:00:01.000Z","message":{"id":"m","content":[{"type":"tool_use","id":"toolu_a","name":"Read","input":{}}]}}"#.to_owned(),
                format!(
                    r#"{{"type":"user","timestamp":"2026-01-05T10:00:02.000Z","message":{{"content":[{{"type":"tool_result","tool_use_id":"toolu_a","content":"body"}}]}},"toolUseResult":{}}}"#,
                    nested(levels)
                ),
            ]
            .join("\n")
        };
        for (levels, kept) in [
            (MAP_VALUE_DEPTH, true),
            (MAP_VALUE_DEPTH + 1, false),
            (126, false),
        ] {
            let input = rows(levels);
            let p = crate::parse(
                Format::ClaudeCode,
                "t.jsonl",
                input.as_bytes(),
                &Options::default(),
            );
            assert!(p.errors.is_empty(), "{levels}: {:?}", p.errors);
            let done = p
                .events
                .iter()
                .find(|e| e.kind() == toolcalls_model::EventKind::Completion);
            let done = done.unwrap_or_else(|| panic!("{levels}: a completion"));
            let back = Event::decode(&done.encode()).unwrap_or_else(|e| panic!("{levels}: {e}"));
            assert_eq!(&back, done, "{levels}: reads back as it was");
            let value = &done.attributes.as_ref().unwrap()["toolUseResult"];
            assert_eq!(value.is_array(), kept, "{levels}: {value}");
            if !kept {
                assert!(
                    value
                        .as_str()
                        .unwrap()
                        .starts_with("(omitted: nests deeper"),
                    "{value}"
                );
            }
        }
    }
}
