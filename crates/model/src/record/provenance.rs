//! A record's provenance: the input positions of the events merged into it.
//!
//! The correlation core numbers its inputs (`input` 0, 1, … and an offset in each); the runtime
//! that feeds it knows what they are and names them before it publishes the record:
//!
//! - the processor: `{"topic": "toolcalls.announce", "partition": 3, "offsets": [1200, 1201]}`;
//! - `toolcalls local` on v1 events: `{"file": "session.jsonl", "lines": [3, 7]}` (1-based lines);
//! - `toolcalls local --format F`: `{"file": "rollout.jsonl", "events": [1, 2]}`, the event's
//!   1-based number among the events the adapter made of the file (its line in the output of
//!   `toolcalls ingest --format F --out - FILE`).
//!
//! A record lists one entry per input it has events from, inputs in the order the core numbers
//! them, positions ascending within each. `toolcalls audit` reconciles these positions against
//! the inputs (docs/OPERATIONS.md, "Auditing the ledger").

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The input positions merged into a record, one [`Origin`] per input.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Provenance(pub Vec<Origin>);

/// The positions of one input merged into a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Origin {
    /// A topic partition of the processor's input, and offsets in it.
    Topic(TopicOffsets),
    /// A file of v1 events (`toolcalls local`), and line numbers in it.
    Lines(FileLines),
    /// A native file read through an adapter (`toolcalls local --format`), and event numbers.
    Events(FileEvents),
    /// As the core numbers inputs, before the runtime named it (never on a published record).
    Input(InputOffsets),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicOffsets {
    /// Shared: every record of a partition names the same topics.
    pub topic: Arc<str>,
    pub partition: i32,
    pub offsets: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLines {
    /// Shared: every record of a run names the same files.
    pub file: Arc<str>,
    /// 1-based.
    pub lines: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEvents {
    /// Shared, as [`FileLines::file`].
    pub file: Arc<str>,
    /// 1-based.
    pub events: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputOffsets {
    pub input: u16,
    pub offsets: Vec<i64>,
}

impl Provenance {
    /// The provenance of `(input, offset)` positions, in any order, repeats allowed. One
    /// allocation per input and one for the list (the correlator makes one per record).
    pub fn from_positions(positions: &mut [(u16, i64)]) -> Provenance {
        positions.sort_unstable();
        let mut origins = Vec::with_capacity(match positions {
            [] => 0,
            [first, .., last] if first.0 != last.0 => 2,
            _ => 1,
        });
        let mut rest = &positions[..];
        while let Some(&(input, _)) = rest.first() {
            let n = rest.iter().take_while(|p| p.0 == input).count();
            let mut offsets: Vec<i64> = Vec::with_capacity(n);
            for &(_, offset) in &rest[..n] {
                if offsets.last() != Some(&offset) {
                    offsets.push(offset);
                }
            }
            origins.push(Origin::Input(InputOffsets { input, offsets }));
            rest = &rest[n..];
        }
        Provenance(origins)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds position `offset` of input `input` to a provenance the runtime has not named yet.
    pub fn insert(&mut self, input: u16, offset: i64) {
        let at = self.0.iter().position(|o| match o {
            Origin::Input(o) => o.input >= input,
            _ => false,
        });
        if let Some(Origin::Input(o)) = at.map(|i| &mut self.0[i]) {
            if o.input == input {
                if let Err(i) = o.offsets.binary_search(&offset) {
                    o.offsets.insert(i, offset);
                }
                return;
            }
        }
        self.0.insert(
            at.unwrap_or(self.0.len()),
            Origin::Input(InputOffsets {
                input,
                offsets: vec![offset],
            }),
        );
    }

    /// Names the inputs the core numbered: `name(input, offsets)` says what each is.
    pub fn name(&mut self, mut name: impl FnMut(u16, Vec<i64>) -> Origin) {
        for origin in &mut self.0 {
            if let Origin::Input(o) = origin {
                let offsets = std::mem::take(&mut o.offsets);
                *origin = name(o.input, offsets);
            }
        }
    }

    /// How many positions it lists.
    pub fn len(&self) -> usize {
        self.0.iter().map(|o| o.positions().len()).sum()
    }
}

impl Origin {
    /// The offsets, lines or event numbers.
    pub fn positions(&self) -> &[i64] {
        match self {
            Origin::Topic(t) => &t.offsets,
            Origin::Lines(f) => &f.lines,
            Origin::Events(f) => &f.events,
            Origin::Input(i) => &i.offsets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn positions_group_by_input_in_order() {
        let mut p = Provenance::from_positions(&mut [(1, 9), (0, 5), (0, 2), (1, 9), (0, 5)]);
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!([{"input": 0, "offsets": [2, 5]}, {"input": 1, "offsets": [9]}])
        );
        assert_eq!(p.len(), 3);
        p.insert(0, 3);
        p.insert(1, 9);
        p.insert(2, 0);
        p.insert(0, 1);
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!([{"input": 0, "offsets": [1, 2, 3, 5]}, {"input": 1, "offsets": [9]}, {"input": 2, "offsets": [0]}])
        );
        let mut q = Provenance::from_positions(&mut [(3, 1)]);
        q.insert(1, 4);
        assert_eq!(
            serde_json::to_value(&q).unwrap(),
            json!([{"input": 1, "offsets": [4]}, {"input": 3, "offsets": [1]}])
        );
        assert!(Provenance::from_positions(&mut []).is_empty());
    }

    #[test]
    fn named_shapes_round_trip() {
        let mut p = Provenance::from_positions(&mut [(0, 12), (1, 40), (1, 41)]);
        p.name(|input, offsets| match input {
            0 => Origin::Topic(TopicOffsets {
                topic: "toolcalls.announce".into(),
                partition: 3,
                offsets,
            }),
            _ => Origin::Lines(FileLines {
                file: "a.jsonl".into(),
                lines: offsets,
            }),
        });
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(
            text,
            r#"[{"topic":"toolcalls.announce","partition":3,"offsets":[12]},{"file":"a.jsonl","lines":[40,41]}]"#
        );
        let back: Provenance = serde_json::from_str(&text).unwrap();
        assert_eq!(back, p);
        let events: Provenance =
            serde_json::from_str(r#"[{"file":"r.jsonl","events":[1]},{"input":0,"offsets":[2]}]"#)
                .unwrap();
        assert!(matches!(events.0[0], Origin::Events(_)));
        assert!(matches!(events.0[1], Origin::Input(_)));
        // An origin of no known shape is refused.
        assert!(serde_json::from_str::<Provenance>(r#"[{"file":"x","lines":[1],"y":1}]"#).is_err());
        assert!(serde_json::from_str::<Provenance>(r#"[{"topic":"t","offsets":[1]}]"#).is_err());
    }
}
