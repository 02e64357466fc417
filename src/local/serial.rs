//! `--threads 1`: one correlator on the calling thread, which reads, decodes, correlates and
//! writes in turn — the input in its order, records as they come.

use super::input::{each_item, Reader};
use super::output::{write_chunk, Out, Sinks};
use super::progress::Progress;
use super::summary::Summary;
use super::worker::{Setup, Worker};
use toolcalls_model::ToolCallRecord;

/// Runs the input through one correlator; returns the summary and (for `--at-end keep`) the
/// first 20 entries still pending.
pub(super) fn run(
    mut reader: Reader,
    setup: &Setup,
    sinks: &mut Sinks<'_>,
    progress: &mut Progress,
) -> anyhow::Result<(Summary, Vec<ToolCallRecord>)> {
    let mut worker = Worker::new(setup);
    // One output buffer for every chunk: grown once, not from empty at every chunk.
    let mut out = Out::default();
    while let Some(chunk) = reader.next_chunk()? {
        out.clear();
        let _stopped = each_item(chunk, &setup.names.names, setup.strict, |item| {
            worker.take(item, &mut out)
        });
        // A stop is in the notes: writing them returns its error.
        write(sinks, &mut out, setup)?;
        progress.tick(worker.summary.events);
    }
    out.clear();
    let _stopped = worker.finish(&mut out);
    write(sinks, &mut out, setup)?;
    let pending = worker.pending(20);
    Ok((std::mem::take(&mut worker.summary), pending))
}

/// Writes the one thread's output of a chunk.
fn write(sinks: &mut Sinks<'_>, out: &mut Out, setup: &Setup) -> anyhow::Result<()> {
    write_chunk(
        sinks,
        Vec::new(),
        std::slice::from_mut(out),
        &setup.redaction,
    )
}
