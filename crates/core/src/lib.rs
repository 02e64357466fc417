//! The correlation core of toolcalls.
//!
//! One [`Correlator`] per input partition turns a stream of v1 [`Event`]s into ToolCall records. It
//! does no I/O and reads no clock: events, their input [`Position`]s and, for idle partitions, a
//! punctuation time come in; records and changelog operations come out.
//!
//! # Rules
//!
//! Everything happens inside a *scope* `(source, session, thread)`; native ids are never compared
//! across scopes. A completion is linked to a pending call by the first rule that finds one — same
//! call id, same checksum, same tool (first in, first out), or, for a completion with no hint at
//! all, the oldest pending call — and otherwise waits for its announce. The rules in full, their
//! limits and confidence values, and what repeats, idempotency keys, facts, deadlines and stream
//! time do: docs/ARCHITECTURE.md, "Correlation (crates/core)".
//!
//! # Invariants
//!
//! - Every input event is accounted for: its [`Outcome`] says whether it was merged, is pending,
//!   was a duplicate, or was rejected with a reason.
//! - Every announce ends in exactly one terminal record (Succeeded, Failed, Denied, Interrupted,
//!   TimedOut, Evicted), every unmatched completion in one `Orphaned` record (or `Evicted` when the
//!   state cap pushes it out). Records are published once; a later revision only follows when an
//!   idempotent retry collapses into a record already published.
//! - State is bounded by `max_pending`: over the cap the oldest pending entries are closed as
//!   `Evicted` records, never dropped silently.
//! - State is event-sourced: [`Correlator::take_changelog`] returns the entries changed since the
//!   last call, each with the input position that last changed it, and [`Correlator::restore`]
//!   rebuilds an identical correlator from the latest value of every key.

mod codec;
mod config;
mod correlator;
mod decimal;
mod replay;
mod state;
mod step;

pub use codec::CodecError;
pub use config::Config;
pub use correlator::{Correlator, RestoreError};
pub use replay::{replay, FinishMode, Replay};
pub use state::{ChangelogOp, MAX_LISTED_REPEATS};
pub use step::{refusal_explained, Effects, Outcome, Position, Released, REFUSAL_REASONS};

#[cfg(doc)]
use toolcalls_model::Event;
