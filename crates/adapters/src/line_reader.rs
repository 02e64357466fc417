//! What a line format's adapter is: a reader of one line at a time.

use crate::common::{lines, Ctx};

/// A format read one line at a time, keeping between lines what it must remember (turns, pending
/// tool names, renamed ids). An event it emits for a line is final: no later line changes it, so
/// reading a file in pieces gives what reading it whole gives.
pub(crate) trait LineReader: Send {
    /// Reads line number `line` (1-based), without its line ending.
    fn line(&mut self, ctx: &mut Ctx, line: usize, bytes: &[u8]);
}

/// Reads every line of `input`.
pub(crate) fn read_lines(ctx: &mut Ctx, input: &[u8], reader: &mut dyn LineReader) {
    for (line, bytes) in lines(input) {
        reader.line(ctx, line, bytes);
    }
}
