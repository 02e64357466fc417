//! OpenAI: Chat Completions (`chat`) and the Responses API (`responses`), one file each.

mod chat;
mod exchange;
mod responses;

pub(crate) use chat::chat;
pub(crate) use responses::responses;
