//! Claude Code: session transcripts, `stream-json` output and hook payloads, one file each.
//!
//! All three share the source `claude-code`, so hook payloads and transcript rows of one session
//! correlate with each other.

mod content;
mod hooks;
mod stream_json;
mod transcript;

pub(crate) use hooks::hooks;
pub(crate) use stream_json::stream_json;
pub(crate) use transcript::transcript;
