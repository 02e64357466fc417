//! One correlator and what it does with the events of its sessions: apply them, account for
//! their outcomes, name, redact and encode the records it publishes — into an [`Out`] per
//! chunk, each record and message tagged with the input line that caused it.

use super::dead_letters::DeadLetter;
use super::input::{Item, Located};
use super::output::{Note, Out};
use super::summary::Summary;
use std::sync::Arc;
use toolcalls_core::{Config, Correlator, Effects, FinishMode, Outcome, Position};
use toolcalls_model::record::{FileEvents, FileLines, Origin};
use toolcalls_model::redact::Redaction;
use toolcalls_model::{Phase, ToolCallRecord};

/// The tag of what the end of the input makes.
pub(super) const END_TAG: u32 = 0;

/// What every thread shares: the rules, the inputs' names, what to do with bad input and with
/// calls still pending at the end.
pub(super) struct Setup {
    pub config: Config,
    pub redaction: Redaction,
    pub names: InputNames,
    pub strict: bool,
    pub at_end: FinishMode,
}

/// The inputs as messages and the records' provenance name them: a v1 event by its file and
/// line (the position's offset), an event an adapter made by its file and 1-based number (the
/// offset is its 0-based index).
pub(super) struct InputNames {
    /// Shared with every record's provenance.
    pub names: Vec<Arc<str>>,
    pub native: bool,
}

impl InputNames {
    fn get(&self, topic: u16) -> &str {
        self.names.get(usize::from(topic)).map_or("?", |name| name)
    }

    /// The line, or the 1-based event number, at `pos`, as the records' provenance says it.
    fn number(&self, pos: Position) -> i64 {
        if self.native {
            pos.offset + 1
        } else {
            pos.offset
        }
    }

    fn name(&self, record: &mut ToolCallRecord) {
        record.provenance.name(|input, offsets| {
            let file = match self.names.get(usize::from(input)) {
                Some(name) => Arc::clone(name),
                None => "?".into(),
            };
            if self.native {
                let events = offsets.into_iter().map(|i| i + 1).collect();
                Origin::Events(FileEvents { file, events })
            } else {
                Origin::Lines(FileLines {
                    file,
                    lines: offsets,
                })
            }
        });
    }
}

/// A `--strict` stop: the fatal message is in the output.
pub(super) struct Stop;

/// A correlator over the sessions given to it, in input order.
pub(super) struct Worker<'a> {
    correlator: Correlator,
    effects: Effects,
    pub summary: Summary,
    setup: &'a Setup,
}

impl<'a> Worker<'a> {
    pub fn new(setup: &'a Setup) -> Self {
        Worker {
            correlator: Correlator::without_changelog(setup.config.clone()),
            effects: Effects::default(),
            summary: Summary::default(),
            setup,
        }
    }

    /// Takes one item of the input: applies its event, or counts the bad line and puts its
    /// message in `out` (a `--strict` stop when the message is fatal).
    pub fn take(&mut self, item: Item, out: &mut Out) -> Result<(), Stop> {
        match item {
            Item::Event(event) => self.apply(event, out),
            Item::Bad(note) => {
                self.summary.bad_lines += 1;
                let fatal = note.fatal.is_some();
                out.notes.push(note);
                if fatal {
                    return Err(Stop);
                }
                Ok(())
            }
        }
    }

    /// Applies an event (tagged `tag` in its chunk, from position `pos` of the input) and
    /// writes what it publishes to `out`.
    pub fn apply(
        &mut self,
        Located { tag, pos, event }: Located,
        out: &mut Out,
    ) -> Result<(), Stop> {
        self.summary.events += 1;
        out.events += 1;
        let outcome = self.correlator.apply(event, pos, &mut self.effects);
        if outcome != Outcome::Held {
            self.account(tag, pos, outcome, out)?;
        }
        self.account_released(tag, out)?;
        self.write_records(tag, out);
        Ok(())
    }

    /// The input has ended: applies what the reorder window holds and closes calls still
    /// pending as `--at-end` says, into `out`.
    pub fn finish(&mut self, out: &mut Out) -> Result<(), Stop> {
        // Nothing held can be overtaken any more.
        self.correlator.release_all(&mut self.effects);
        self.account_released(END_TAG, out)?;
        match self.setup.at_end {
            FinishMode::Deadlines => self.correlator.end_of_input(&mut self.effects),
            FinishMode::Interrupt => {
                self.correlator
                    .close_all(Phase::Interrupted, "input ended", &mut self.effects)
            }
            FinishMode::Keep => self.summary.still_pending = self.correlator.pending_len() as u64,
        }
        self.write_records(END_TAG, out);
        Ok(())
    }

    /// The first `n` pending calls and waiting results, oldest first (for `--at-end keep`).
    pub fn pending(&self, n: usize) -> Vec<ToolCallRecord> {
        self.correlator.pending_views().take(n).collect()
    }

    /// Counts what became of the event at `pos`; a refusal is reported (and ends the run under
    /// `--strict`).
    fn account(
        &mut self,
        tag: u32,
        pos: Position,
        outcome: Outcome,
        out: &mut Out,
    ) -> Result<(), Stop> {
        self.summary.outcomes.add(outcome.label(), 1);
        if let Outcome::Rejected(reason) = outcome {
            self.summary.rejected.add(reason, 1);
            let strict = self.setup.strict;
            let names = &self.setup.names;
            let (name, line) = (names.get(pos.topic), names.number(pos));
            let explained = toolcalls_core::refusal_explained(reason);
            out.notes.push(Note {
                tag,
                text: format!(
                    "{name}:{line}: event refused by the correlator ({reason}): {explained}"
                ),
                fatal: strict.then(|| {
                    format!("{name}:{line}: event refused ({reason}); stopping because of --strict")
                }),
                dead: DeadLetter {
                    input: pos.topic,
                    offset: Some(pos.offset),
                    reason: reason.into(),
                    error: format!("event refused by the correlator: {explained}"),
                },
            });
            if strict {
                return Err(Stop);
            }
        }
        Ok(())
    }

    /// Accounts for the events the reorder window applied in this step.
    fn account_released(&mut self, tag: u32, out: &mut Out) -> Result<(), Stop> {
        let mut released = std::mem::take(&mut self.effects.released);
        for r in released.drain(..) {
            self.account(tag, r.pos, r.outcome, out)?;
        }
        self.effects.released = released;
        Ok(())
    }

    fn write_records(&mut self, tag: u32, out: &mut Out) {
        for mut record in self.effects.records.drain(..) {
            self.setup.names.name(&mut record);
            self.setup.redaction.apply(&mut record);
            self.summary.record(&record);
            record.encode_into(&mut out.bytes);
            out.bytes.push(b'\n');
            out.end_record(tag);
        }
    }
}
