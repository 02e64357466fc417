//! Files read as they grow: the line formats, one complete line at a time.

use crate::common::{lines, Ctx};
use crate::line_reader::LineReader;
use crate::{Format, Options, Parsed};

/// The reader of `format` when it is a line format.
pub(crate) fn line_reader(format: Format) -> Option<Box<dyn LineReader>> {
    Some(match format {
        Format::ClaudeCode => Box::<crate::claude::Transcript>::default(),
        Format::ClaudeCodeStream => Box::<crate::claude::StreamJson>::default(),
        Format::ClaudeCodeHooks => Box::<crate::claude::Hooks>::default(),
        Format::Codex => Box::<crate::codex::Rollout>::default(),
        Format::CodexExec => Box::<crate::codex::ExecJson>::default(),
        Format::Mcp => Box::<crate::mcp::McpLog>::default(),
        _ => return None,
    })
}

/// A file of a line format parsed as it grows, so that what is appended costs only its own
/// parse: [`Stream::push`] the bytes as they arrive, get the events of the lines they complete.
/// The events of a file pushed in any pieces are those [`crate::parse`] gives for it whole (a last
/// line without its newline is read once it has one).
///
/// ```
/// use toolcalls_adapters::{parse, Format, Options, Stream};
/// let file = b"{\"session_id\":\"s\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{}}\n";
/// let mut stream = Stream::new(Format::ClaudeCodeHooks, "hooks.jsonl", &Options::default()).unwrap();
/// assert!(stream.push(&file[..20]).events.is_empty(), "half a line waits");
/// let rest = stream.push(&file[20..]);
/// assert_eq!(rest.events, parse(Format::ClaudeCodeHooks, "hooks.jsonl", file, &Options::default()).events);
/// ```
pub struct Stream {
    ctx: Ctx,
    reader: Box<dyn LineReader>,
    /// Lines read so far.
    lines: usize,
    /// The start of a line whose newline has not arrived.
    partial: Vec<u8>,
}

impl Stream {
    /// A stream for `format`; `None` for formats that are not read line by line (documents such as
    /// Gemini CLI sessions, API bodies and streams, OpenTelemetry exports, ADK bus logs, whose
    /// events can depend on what follows them): parse those whole with [`crate::parse`].
    pub fn new(format: Format, name: &str, opts: &Options) -> Option<Stream> {
        Some(Stream {
            ctx: Ctx::new(format, name, opts),
            reader: line_reader(format)?,
            lines: 0,
            partial: Vec::new(),
        })
    }

    /// Reads the next `bytes` of the file and returns the events, errors and skipped rows of the
    /// lines they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Parsed {
        let Some(last) = bytes.iter().rposition(|&b| b == b'\n') else {
            self.partial.extend_from_slice(bytes);
            return self.ctx.take();
        };
        let (complete, rest) = bytes.split_at(last + 1);
        if self.partial.is_empty() {
            self.read(complete);
        } else {
            let mut joined = std::mem::take(&mut self.partial);
            joined.extend_from_slice(complete);
            self.read(&joined);
        }
        self.partial.extend_from_slice(rest);
        self.ctx.take()
    }

    /// `complete` ends with a newline: every line in it is whole. The first holds the file from
    /// its start, where `parse` skips a byte order mark.
    fn read(&mut self, complete: &[u8]) {
        let complete = if self.lines == 0 {
            toolcalls_model::bom::strip(complete)
        } else {
            complete
        };
        let body = &complete[..complete.len() - 1];
        for (i, bytes) in lines(body) {
            self.reader.line(&mut self.ctx, self.lines + i, bytes);
        }
        self.lines += body.split(|&b| b == b'\n').count();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    /// Every way of cutting `input` in two, and one byte at a time, gives what `parse` gives.
    fn same_in_pieces(format: Format, input: &str) {
        let opts = Options::default();
        let whole = parse(format, "f.jsonl", input.as_bytes(), &opts);
        assert!(!whole.events.is_empty(), "{format}: nothing to compare");
        let bytes = input.as_bytes();
        let read = |pieces: &[&[u8]]| {
            let mut s = Stream::new(format, "f.jsonl", &opts).unwrap();
            let mut all = Parsed::default();
            for p in pieces {
                let got = s.push(p);
                all.events.extend(got.events);
                all.errors.extend(got.errors);
                all.skipped += got.skipped;
            }
            all
        };
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(read(&[a, b]), whole, "{format}, cut at {cut}");
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(read(&bytewise), whole, "{format}, byte by byte");
    }

    #[test]
    fn a_byte_order_mark_at_the_start_is_skipped_in_any_pieces() {
        let call = r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_1","timestamp":"2026-01-01T00:00:00Z"}"#;
        let plain = format!("{call}\nnot json\n{call}\n");
        let marked = format!("\u{feff}{plain}");
        same_in_pieces(Format::ClaudeCodeHooks, &marked);
        let opts = Options::default();
        let (with, without) = (
            parse(Format::ClaudeCodeHooks, "f.jsonl", marked.as_bytes(), &opts),
            parse(Format::ClaudeCodeHooks, "f.jsonl", plain.as_bytes(), &opts),
        );
        assert_eq!(with, without);
        assert_eq!((with.events.len(), with.errors[0].line), (2, 2));
        // Only at the start of the file: a marked line after it is a bad line.
        let later = format!("{plain}\u{feff}{call}\n");
        let p = parse(Format::ClaudeCodeHooks, "f.jsonl", later.as_bytes(), &opts);
        assert_eq!((p.events.len(), p.errors.len()), (2, 2));
    }

    #[test]
    fn id_less_repeats_are_stamped_apart_across_pieces() {
        // The same id-less call twice at the same time: the second moves on by a millisecond,
        // whichever piece it arrives in.
        let call = r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"timestamp":"2026-01-01T00:00:00Z"}"#;
        same_in_pieces(
            Format::ClaudeCodeHooks,
            &format!("{call}\n{call}\nnot json\n"),
        );
    }

    #[test]
    fn ids_reused_inside_a_scope_are_renamed_across_pieces() {
        let exec = [
            r#"{"type":"thread.started","thread_id":"t1"}"#,
            r#"{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"ls"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"ls","exit_code":0}}"#,
            r#"{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"pwd"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"pwd","exit_code":1}}"#,
        ];
        same_in_pieces(Format::CodexExec, &(exec.join("\n") + "\n"));
        let mcp = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"p":"a"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"p":"b"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#,
        ];
        same_in_pieces(Format::Mcp, &(mcp.join("\n") + "\n"));
    }

    #[test]
    fn a_progress_row_rides_on_the_result_that_follows_it_across_pieces() {
        let rows = [
            r#"{"type":"user","sessionId":"s","uuid":"p1","timestamp":"2026-01-05T10:00:00Z","message":{"content":"go"}}"#,
            r#"{"type":"assistant","sessionId":"s","uuid":"a1","timestamp":"2026-01-05T10:00:01Z","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"make"}}]}}"#,
            r#"{"type":"progress","sessionId":"s","parentToolUseID":"toolu_1","data":{"type":"bash_progress","output":"cc"}}"#,
            r#"{"type":"user","sessionId":"s","timestamp":"2026-01-05T10:00:09Z","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}}"#,
            r#"{"type":"progress","sessionId":"s","parentToolUseID":"toolu_1","data":{"type":"hook_progress","hookEvent":"PostToolUse"}}"#,
        ];
        let input = rows.join("\n") + "\n";
        same_in_pieces(Format::ClaudeCode, &input);
        let p = parse(
            Format::ClaudeCode,
            "f.jsonl",
            input.as_bytes(),
            &Options::default(),
        );
        let done = &p.events[1];
        let progress = &done.attributes.as_ref().unwrap()["progress"];
        assert_eq!(
            progress.as_array().unwrap().len(),
            1,
            "only the row before the result"
        );
        assert_eq!(progress[0]["output"], "cc");
        assert!(
            p.events[0].attributes.is_none(),
            "the announce is as it was read"
        );
        assert_eq!(p.skipped, 3, "the prompt and both progress rows");
    }

    #[test]
    fn formats_read_whole_have_no_stream() {
        for f in Format::ALL {
            let line = matches!(
                f,
                Format::ClaudeCode
                    | Format::ClaudeCodeStream
                    | Format::ClaudeCodeHooks
                    | Format::Codex
                    | Format::CodexExec
                    | Format::Mcp
            );
            assert_eq!(
                Stream::new(f, "x", &Options::default()).is_some(),
                line,
                "{f}"
            );
        }
    }
}
