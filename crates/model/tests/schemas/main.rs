//! The JSON Schemas in `schemas/` are the contract other teams code against; this test keeps them and
//! the Rust wire types in step.
//!
//! - Every example in `schemas/examples/valid/` validates against its own schema and against
//!   `event.schema.json` (records: `toolcall-record.schema.json`), decodes in Rust, and re-encodes to
//!   JSON that validates again. The file name's prefix (`<kind>-…`, `record-…`) names the schema.
//! - Every example in `schemas/examples/invalid/` fails both the schema and the Rust decode, for the
//!   reason listed in [`INVALID_EXAMPLES`](examples::INVALID_EXAMPLES).
//! - Drift: fully populated events and records built in Rust validate; each schema's properties are
//!   exactly the keys Rust writes (nested objects too); deleting fields, adding fields of other kinds
//!   and replacing values with wrong ones are accepted or refused alike by schema and decoder. The few
//!   places where the two cannot (or do not yet) agree are the [`Divergence`](divergence::Divergence)s, each pinned by
//!   `known_divergences_are_still_real` so that an entry goes when the Rust side changes.
//!
//! Validation runs with format assertion on (`date-time`, `uuid`), as a strict consumer would.
//!
//! The checks are in `files` (the schema files), `examples` and `drift`; the others are their
//! tools: `documents` (the schemas, loaded), `target` (what a document is, and how both sides
//! judge it), `full` (fully populated values), `json_path` and `divergence`.

mod divergence;
mod documents;
mod drift;
mod examples;
mod files;
mod full;
mod json_path;
mod target;

pub(crate) const SCHEMA_BASE: &str = "https://toolcalls.dev/schemas/v1/";
pub(crate) const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
/// Schema name of the umbrella event schema (`oneOf` the eight kinds).
pub(crate) const EVENT: &str = "event";
/// Schema name of the ToolCall record schema.
pub(crate) const RECORD: &str = "toolcall-record";

/// Panics with every failure at once, so one run names every broken file.
pub(crate) fn report(what: &str, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} {what}:\n  - {}",
        failures.len(),
        failures.join("\n  - ")
    );
}
