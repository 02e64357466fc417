//! `--threads N`, N ≥ 2: N correlators, one per thread, each over the sessions placed on it.
//!
//! ```text
//!  reader thread ──► chunks (whole lines, in order) ──► a thread splits the next chunk's lines
//!                                                       by session into N shares
//!  thread w: decodes and applies share w of chunk 0, 1, 2 … in order, encodes its records into
//!            its output of the chunk, each tagged with the line that closed it
//!  calling thread: writes chunk 0, 1, 2 … once every thread has its output: the records merged
//!                  back into line order, the messages on stderr
//! ```
//!
//! A line's session is read from its text without decoding it (`Event::peek_scope`), so each
//! thread decodes the lines of its own sessions: an event is made, applied and dropped on one
//! thread, and its strings never move between cores (events handed between threads cost two
//! threads up to half again the CPU of one). A line the peek cannot read (not an object that
//! names both as strings: a bad line, mostly) is decoded while splitting and handed over as an
//! event or a message, as are a native format's events. Splitting is spread over the threads: a
//! thread that finds the chunk it needs next not yet split splits the next chunk, unless another
//! thread is splitting one. Chunks are split one at a time, in order, because a session is placed
//! on a thread when it is first seen (`placement.rs`): the placement is then the same on every
//! run of the input.
//!
//! A session's events all go to one correlator in input order, as the processor gives a
//! partition's correlator its sessions, so its records are those (and in the order) one
//! correlator gives. Records are written in the order of the lines that closed them, so the
//! output is what one thread writes, except what the end of the input closes: each thread's, in
//! thread order. At most `WINDOW_PER_THREAD` chunks per thread are read ahead of the writer.

use super::input::{
    each_item, is_blank, line_item, lines, Chunk, Item, LineChunk, Located, Reader,
};
use super::output::{write_chunk, Note, Out, Sinks};
use super::placement::Placement;
use super::progress::Progress;
use super::summary::Summary;
use super::worker::{Setup, Worker};
use anyhow::anyhow;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use toolcalls_model::record::Origin;
use toolcalls_model::redact::Redaction;
use toolcalls_model::{Event, ToolCallRecord};

/// Chunks in flight (read, split or applied but not yet written), per thread.
const WINDOW_PER_THREAD: usize = 4;

/// A line of a chunk of v1 lines on its way, undecoded, to the thread of its session: its tag
/// (its index in the chunk) and where its text lies.
struct Span {
    tag: u32,
    text: Range<usize>,
}

/// A thread's part of a chunk, each list in input order.
#[derive(Default)]
struct Share {
    /// Lines whose scope the peek read (nearly all): the thread decodes them.
    lines: Option<LineShare>,
    /// Events decoded while splitting: a native format's, and lines the peek could not read.
    events: Vec<Located>,
}

/// Lines of a chunk for one thread to decode (the chunk shared by the threads).
struct LineShare {
    chunk: Arc<LineChunk>,
    spans: Vec<Span>,
}

/// A chunk on its way from the reader to the writer.
struct Slot {
    /// Until a thread takes it to split it.
    chunk: Option<Chunk>,
    /// Once split: each thread's share (taken by the thread).
    shares: Option<Vec<Share>>,
    /// The messages about bad lines found while splitting.
    notes: Vec<Note>,
    bad_lines: u64,
    /// Each thread's output, once it has applied its share.
    outs: Vec<Option<Out>>,
    delivered: usize,
}

struct State {
    /// The number of the chunk in `slots[0]`.
    base: u64,
    slots: VecDeque<Slot>,
    /// The next chunk to split.
    next_split: u64,
    /// Where sessions go; taken by the thread splitting a chunk.
    placement: Option<Placement>,
    /// The reader has read everything (or failed: `read_error`).
    read_all: bool,
    read_error: Option<anyhow::Error>,
    /// The run ends early (`--strict`, a write error): every thread leaves.
    stop: bool,
    /// Per thread, outputs the writer has written and emptied, for the thread's next chunks:
    /// a fresh buffer per chunk cost page faults, and freeing it on the writer's thread costs
    /// the allocator a cross-thread free.
    spare: Vec<Vec<Out>>,
}

/// The state and one condition variable per kind of waiter, so that a change wakes only the
/// threads it can let on (waking every thread at every change cost more CPU in the kernel than
/// the threads spent waiting).
struct Shared {
    state: Mutex<State>,
    /// The reader waits for room in the window.
    room: Condvar,
    /// The threads wait for a chunk to split or their share of the next one.
    work: Condvar,
    /// The writer waits for every thread's output of the next chunk.
    done: Condvar,
    threads: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, on: &Condvar, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        on.wait(guard).unwrap_or_else(|e| e.into_inner())
    }

    fn stop(&self) {
        self.lock().stop = true;
        for cv in [&self.room, &self.work, &self.done] {
            cv.notify_all();
        }
    }
}

/// What a thread gets next.
enum Next {
    Share(Share),
    End,
    Stop,
}

/// What a thread hands back at the end: its output of the end of the input, its counts and
/// its first entries still pending.
type Finished = (Out, Summary, Vec<ToolCallRecord>);

/// Runs the input through `threads` correlators; returns the summary and (for `--at-end keep`)
/// the first 20 entries still pending.
pub(super) fn run(
    reader: Reader,
    setup: &Setup,
    threads: usize,
    sinks: &mut Sinks<'_>,
    progress: &mut Progress,
) -> anyhow::Result<(Summary, Vec<ToolCallRecord>)> {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            base: 0,
            slots: VecDeque::new(),
            next_split: 0,
            placement: Some(Placement::new(threads)),
            read_all: false,
            read_error: None,
            stop: false,
            spare: (0..threads).map(|_| Vec::new()).collect(),
        }),
        room: Condvar::new(),
        work: Condvar::new(),
        done: Condvar::new(),
        threads,
    });
    // Not joined: a read of standard input may block for good after a `--strict` stop.
    let reading = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("local-read".into())
        .spawn(move || read(reader, &reading))?;
    let finished = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|me| {
                let shared = &*shared;
                std::thread::Builder::new()
                    .name(format!("local-{me}"))
                    .spawn_scoped(s, move || work(me, shared, setup))
            })
            .collect::<Result<_, _>>()
            .map_err(|e| {
                // The threads started wait for work: let them go.
                shared.stop();
                anyhow!("cannot start {threads} threads ({e}); give fewer with --threads")
            })?;
        let written = write(&shared, sinks, progress, &setup.redaction);
        if written.is_err() {
            shared.stop();
        }
        let finished: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        written.map(|bad_lines| (bad_lines, finished))
    });
    let (bad_lines, finished) = finished?;
    let mut ends = Vec::with_capacity(threads);
    let mut summary = Summary {
        bad_lines,
        ..Summary::default()
    };
    let mut pending = Vec::new();
    for f in finished {
        let (out, s, p) = f.ok_or_else(|| anyhow!("a thread stopped before the end"))?;
        ends.push(out);
        summary.add(s);
        pending.extend(p);
    }
    // The end of the input: each thread's records in thread order — none if one was refused
    // under --strict, as one thread stops before writing any.
    let fatal = ends.iter().any(Out::fatal);
    for (w, out) in ends.iter_mut().enumerate() {
        let w = w as u32;
        if fatal {
            out.records.clear();
        }
        out.records.iter_mut().for_each(|r| r.0 = w);
        out.notes.iter_mut().for_each(|n| n.tag = w);
    }
    write_chunk(sinks, Vec::new(), &mut ends, &setup.redaction)?;
    // Oldest first, as one correlator lists them: by the input position of their first event.
    pending.sort_by_key(first_position);
    pending.truncate(20);
    Ok((summary, pending))
}

/// The reader thread: chunks into the window, in order.
fn read(mut reader: Reader, shared: &Shared) {
    let window = shared.threads * WINDOW_PER_THREAD;
    loop {
        let next = reader.next_chunk();
        let mut st = shared.lock();
        while st.slots.len() >= window && !st.stop {
            st = shared.wait(&shared.room, st);
        }
        if st.stop {
            return;
        }
        match next {
            Ok(Some(chunk)) => st.slots.push_back(Slot {
                chunk: Some(chunk),
                shares: None,
                notes: Vec::new(),
                bad_lines: 0,
                outs: (0..shared.threads).map(|_| None).collect(),
                delivered: 0,
            }),
            Ok(None) => st.read_all = true,
            Err(e) => {
                st.read_all = true;
                st.read_error = Some(e);
            }
        }
        let done = st.read_all;
        drop(st);
        shared.work.notify_all();
        if done {
            shared.done.notify_one();
            return;
        }
    }
}

/// Thread `me`: its share of every chunk in order, then the end of the input. `None` when the
/// run stopped early.
fn work(me: usize, shared: &Shared, setup: &Setup) -> Option<Finished> {
    let mut worker = Worker::new(setup);
    let mut out = Out::default();
    for k in 0.. {
        let share = match take_share(k, me, shared, setup) {
            Next::Share(share) => share,
            Next::End => break,
            Next::Stop => return None,
        };
        let stopped = apply_share(&mut worker, share, setup, &mut out);
        let mut st = shared.lock();
        let next = st.spare[me].pop().unwrap_or_default();
        let base = st.base;
        let slot = &mut st.slots[(k - base) as usize];
        slot.outs[me] = Some(std::mem::replace(&mut out, next));
        slot.delivered += 1;
        let all = slot.delivered == shared.threads;
        drop(st);
        if all {
            shared.done.notify_one();
        }
        if stopped {
            // The writer stops at the message.
            return None;
        }
    }
    out.clear();
    // A stop is in the notes.
    let _stopped = worker.finish(&mut out);
    let pending = worker.pending(20);
    Some((out, std::mem::take(&mut worker.summary), pending))
}

/// Decodes and applies thread `me`'s share of a chunk in input order; `true` when the run stops
/// in it (`--strict`: the fatal message is in `out`).
fn apply_share(worker: &mut Worker, share: Share, setup: &Setup, out: &mut Out) -> bool {
    let Share { lines, events } = share;
    let mut events = events.into_iter().peekable();
    if let Some(LineShare { chunk, spans }) = lines {
        let name = &setup.names.names[usize::from(chunk.topic)];
        for span in spans {
            while let Some(e) = events.next_if(|e| e.tag < span.tag) {
                if worker.apply(e, out).is_err() {
                    return true;
                }
            }
            let text = &chunk.bytes()[span.text];
            let i = span.tag as usize;
            let item = line_item(text, chunk.topic, chunk.first_line, i, name, setup.strict);
            if worker.take(item, out).is_err() {
                return true;
            }
        }
    }
    events.any(|e| worker.apply(e, out).is_err())
}

/// Thread `me`'s share of chunk `k`; while that chunk is not split yet, splits the next one
/// unless another thread is splitting.
fn take_share(k: u64, me: usize, shared: &Shared, setup: &Setup) -> Next {
    let mut st = shared.lock();
    loop {
        if st.stop {
            return Next::Stop;
        }
        let state = &mut *st;
        match state.slots.get_mut((k - state.base) as usize) {
            Some(Slot {
                shares: Some(shares),
                ..
            }) => return Next::Share(std::mem::take(&mut shares[me])),
            Some(_) => {}
            None if state.read_all && state.read_error.is_none() => return Next::End,
            None if state.read_all => return Next::Stop,
            None => {}
        }
        if let Some((j, chunk, mut placement)) = take_split(&mut st) {
            drop(st);
            let (shares, notes, bad_lines) = split(chunk, setup, &mut placement);
            st = shared.lock();
            st.placement = Some(placement);
            let base = st.base;
            let slot = &mut st.slots[(j - base) as usize];
            slot.shares = Some(shares);
            slot.notes = notes;
            slot.bad_lines = bad_lines;
            shared.work.notify_all();
            continue;
        }
        st = shared.wait(&shared.work, st);
    }
}

/// The next chunk to split, its number and the placement: `None` while another thread is
/// splitting one (so that chunks are split in order) or while the reader has none.
fn take_split(state: &mut State) -> Option<(u64, Chunk, Placement)> {
    let j = state.next_split;
    let slot = state.slots.get_mut((j - state.base) as usize)?;
    let placement = state.placement.take()?;
    let chunk = slot.chunk.take().expect("a chunk not yet split");
    state.next_split += 1;
    Some((j, chunk, placement))
}

/// A chunk split by thread, the messages about the bad lines found while splitting it and their
/// number.
fn split(chunk: Chunk, setup: &Setup, placement: &mut Placement) -> (Vec<Share>, Vec<Note>, u64) {
    let threads = placement.threads();
    // Sessions spread about evenly: a quarter more than an even share rarely grows.
    let per_thread = chunk.items() / threads + chunk.items() / threads / 4;
    let mut shares: Vec<Share> = (0..threads).map(|_| Share::default()).collect();
    let (mut notes, mut bad_lines) = (Vec::new(), 0);
    let mut route = |item: Item, shares: &mut [Share], placement: &mut Placement| match item {
        Item::Event(e) => {
            let w = placement.thread_of(e.event.source.as_str(), e.event.session.as_str());
            shares[w].events.push(e);
        }
        Item::Bad(note) => {
            bad_lines += 1;
            notes.push(note);
        }
    };
    match chunk {
        Chunk::Lines(chunk) => {
            let mut spans: Vec<Vec<Span>> = (0..threads)
                .map(|_| Vec::with_capacity(per_thread))
                .collect();
            let chunk = Arc::new(chunk);
            let (topic, first_line) = (chunk.topic, chunk.first_line);
            let name = &setup.names.names[usize::from(topic)];
            let mut at = 0;
            for (i, text) in lines(chunk.bytes()).enumerate() {
                let span = at..at + text.len();
                at = span.end;
                if is_blank(text) {
                    continue;
                }
                match Event::peek_scope(text) {
                    Some((source, session)) => {
                        spans[placement.thread_of(&source, &session)].push(Span {
                            tag: i as u32,
                            text: span,
                        })
                    }
                    None => route(
                        line_item(text, topic, first_line, i, name, setup.strict),
                        &mut shares,
                        placement,
                    ),
                }
            }
            for (share, spans) in shares.iter_mut().zip(spans) {
                if !spans.is_empty() {
                    let chunk = Arc::clone(&chunk);
                    share.lines = Some(LineShare { chunk, spans });
                }
            }
        }
        events => {
            shares.iter_mut().for_each(|s| s.events.reserve(per_thread));
            let names = &setup.names.names;
            let _ = each_item::<Infallible>(events, names, setup.strict, |item| {
                route(item, &mut shares, placement);
                Ok(())
            });
        }
    }
    (shares, notes, bad_lines)
}

/// The calling thread: writes the chunks in order as the threads finish them. Returns the
/// number of bad lines.
fn write(
    shared: &Shared,
    sinks: &mut Sinks<'_>,
    progress: &mut Progress,
    redaction: &Redaction,
) -> anyhow::Result<u64> {
    let (mut bad_lines, mut events) = (0, 0);
    loop {
        let mut st = shared.lock();
        let slot = loop {
            if st
                .slots
                .front()
                .is_some_and(|s| s.delivered == shared.threads)
            {
                st.base += 1;
                break st.slots.pop_front();
            }
            if st.slots.is_empty() && st.read_all {
                break None;
            }
            st = shared.wait(&shared.done, st);
        };
        let Some(slot) = slot else {
            return match st.read_error.take() {
                Some(e) => Err(e),
                None => Ok(bad_lines),
            };
        };
        drop(st);
        shared.room.notify_one();
        let mut outs: Vec<Out> = slot.outs.into_iter().flatten().collect();
        bad_lines += slot.bad_lines;
        events += outs.iter().map(|o| o.events).sum::<u64>();
        write_chunk(sinks, slot.notes, &mut outs, redaction)?;
        progress.tick(events);
        let mut st = shared.lock();
        for (spare, mut out) in st.spare.iter_mut().zip(outs) {
            out.clear();
            spare.push(out);
        }
    }
}

/// The input position of a pending entry's first event.
fn first_position(record: &ToolCallRecord) -> (u16, i64) {
    match record.provenance.0.first() {
        Some(Origin::Input(o)) => (o.input, o.offsets.first().copied().unwrap_or(i64::MAX)),
        _ => (u16::MAX, i64::MAX),
    }
}
