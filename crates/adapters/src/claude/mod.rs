//! Claude Code: session transcripts, `stream-json` output and hook payloads, one file each.
//!
//! All three share the source `claude-code`, so hook payloads and transcript rows of one session
//! correlate with each other.

mod content;
mod hooks;
mod stream_json;
mod transcript;

pub(crate) use hooks::Hooks;
pub(crate) use stream_json::StreamJson;
pub(crate) use transcript::Transcript;
