//! What transcript rows and stream-json lines share: the message content of a row.

use serde_json::Value;

use crate::common::Ctx;

/// The `message.content` of a transcript row or stream-json line (`unit`) of type `kind`; without
/// one, the row is reported as truncated.
pub(super) fn message_content<'r>(
    ctx: &mut Ctx,
    line: usize,
    row: &'r Value,
    kind: &str,
    unit: &str,
) -> Option<&'r Value> {
    let content = row.get("message").and_then(|m| m.get("content"));
    if content.is_none() {
        ctx.error(
            line,
            format!("{kind} {unit} has no `message.content`; the {unit} is truncated"),
        );
    }
    content
}
