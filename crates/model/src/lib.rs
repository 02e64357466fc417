//! Wire types of toolcalls.
//!
//! This crate is the contract between adapter producers, the processor and downstream consumers:
//!
//! - [`event`]: the v1 input events (`announce`, `completion`, lifecycle events) as they travel on
//!   the input topics, one JSON object per message. Decoding validates the envelope and the fields
//!   each kind requires, so a message either becomes an [`Event`] or a [`DecodeError`] whose text
//!   is the dead-letter reason.
//! - [`record`]: the ToolCall record the processor publishes, shaped after the joch.dev ToolCall
//!   resource (`spec` / `status`) with the nhtio stream fields and correlation metadata.
//! - [`ids`]: newtypes for every identifier, and the deterministic record id.
//! - [`checksum`]: `sha256(canonicalStringify({tool, args}))`, bit-exact with @nhtio/adk.
//! - [`time`](mod@crate::time): event time as milliseconds since the Unix epoch, RFC 3339 on the wire.
//!
//! The JSON Schemas in `schemas/` describe the same shapes for other teams; a test keeps the two in
//! step.

pub mod bom;
pub mod canonical;
mod canonical_direct;
pub mod checksum;
pub mod event;
pub mod ids;
mod jsnumber;
pub mod json;
mod jsonscan;
mod jsonwrite;
mod jsstring;
mod jstext;
pub mod record;
pub mod redact;
#[cfg(test)]
mod test_json;
pub mod time;

pub use checksum::{checksum_of, checksum_of_json, Checksum, ChecksumError};
pub use event::{
    Announce, Approval, ApprovalDecision, Completion, DecodeError, Event, EventBody, EventKind,
    ExecutionEnd, ExecutionStart, HookDecision, HookVerdict, SideEffectLevel, SideEffects, TurnEnd,
    WIRE_VERSION,
};
pub use ids::{CallId, RecordId, SessionId, Source, ThreadId, TurnId};
pub use json::Json;
pub use record::{
    ApprovalState, Correlation, HookDecisionEntry, Metadata, Phase, Ref, ReplayPolicy, Spec,
    Status, Strategy, ToolCallRecord,
};
pub use time::Timestamp;
