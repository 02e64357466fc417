//! The follower fed mutated transcripts as an agent writes them: in pieces cut anywhere, polled
//! between pieces, at times cut to nothing and written again, at times restarted on its
//! checkpoints (a third of the restarts with its digest log removed or cut short). Nothing may panic, and what it delivers is what one read of the final file gives:
//! the same events, each as many times, for a file read line by line (through a `Stream`); for a
//! file parsed whole at each change — a document, which may change between saves, or a line
//! format whose events depend on what follows them (an ADK call held until its arguments come is
//! announced as it stands when the file ends there) — at least every event of the final read.
//!
//! `TOOLCALLS_FUZZ_CASES` / `TOOLCALLS_FUZZ_SECS` / `TOOLCALLS_FUZZ_SEED` as for every fuzz test
//! (`scripts/fuzz.sh` is the long run).

use crate::fuzz_support as support;

use super::checkpoint::Store;
use super::scan::Target;
use super::{complete, Follower, Outlet, Settings};
use crate::follow::metrics::FollowMetrics;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::Rng;
use toolcalls_adapters::{Format, Options, Stream};
use toolcalls_model::redact::Redaction;

/// What the followers of one case wrote, shared by the follower and its restarts.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Sink {
    /// The lines written, sorted: a multiset to compare.
    fn lines(&self) -> Vec<String> {
        let bytes = self.0.lock().unwrap().clone();
        let mut lines: Vec<String> = String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort_unstable();
        lines
    }
}

/// A follower of `root` as `format`, writing to `sink`, its checkpoints in `checkpoints` (none:
/// no store).
fn follower(root: &Path, format: Format, checkpoints: Option<&Path>, sink: &Sink) -> Follower {
    Follower {
        s: Settings {
            paths: vec![root.to_owned()],
            format: Some(format),
            options: Options::default(),
            redaction: Redaction::default(),
            strict: false,
            checkpoint_dir: checkpoints.map(Path::to_owned),
            poll_interval: Duration::from_millis(1),
            once: false,
            metrics_addr: None,
        },
        targets: vec![Target::Dir(root.to_owned())],
        store: checkpoints.map(|d| Store::open(d).expect("a checkpoint directory")),
        saved: HashMap::new(),
        files: HashMap::new(),
        unreadable: HashMap::new(),
        out: Outlet::Lines(Box::new(sink.clone())),
        own_dirs: Vec::new(),
        aliases: HashSet::new(),
        metrics: FollowMetrics::new(),
    }
}

/// One poll, every file free to be read again at once (a document that changed is otherwise read
/// no sooner than three times its last read took).
fn poll(f: &mut Follower) {
    for t in f.files.values_mut() {
        t.not_before = None;
    }
    f.poll(&AtomicBool::new(false))
        .expect("a follower writing to memory does not fail");
}

/// A follower restarted on its checkpoints, as after a kill between two polls.
fn restarted(root: &Path, format: Format, checkpoints: &Path, sink: &Sink) -> Follower {
    let mut f = follower(root, format, Some(checkpoints), sink);
    let saved = f
        .store
        .as_ref()
        .unwrap()
        .load()
        .expect("the checkpoints load");
    f.saved = saved.into_iter().map(|cp| (cp.path.clone(), cp)).collect();
    f
}

/// Removes the digest log in `checkpoints`, or cuts it to fewer whole digests; whether there was
/// one with digests to damage.
fn damage_a_digest_log(rng: &mut Rng, checkpoints: &Path) -> bool {
    let Some(log) = std::fs::read_dir(checkpoints)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "digests"))
    else {
        return false;
    };
    let digests = std::fs::metadata(&log).unwrap().len() / 8;
    if digests == 0 {
        return false;
    }
    if rng.chance(50) {
        std::fs::remove_file(&log).unwrap();
    } else {
        let keep = rng.below(digests as usize) as u64;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .and_then(|f| f.set_len(keep * 8))
            .unwrap();
    }
    true
}

/// Follows `bytes` written as file `name` in random pieces (chosen by `rng`), then checks what
/// was delivered against one read of the whole file.
fn follow_in_pieces(rng: &mut Rng, name: &str, format: Format, bytes: &[u8]) {
    let root = tempfile::tempdir().unwrap();
    let checkpoints = tempfile::tempdir().unwrap();
    let file = root.path().join(name);
    let sink = Sink::default();
    let mut f = follower(root.path(), format, Some(checkpoints.path()), &sink);
    let mut cuts: Vec<usize> = (0..1 + rng.below(5))
        .map(|_| rng.below(bytes.len() + 1))
        .collect();
    cuts.push(bytes.len());
    cuts.sort_unstable();
    let mut written = 0;
    // A digest log damaged at a restart is made good from the checkpoint's position by the next
    // read, when the file still holds what was read; a file cut before that read has nothing to
    // make it good from, and sends its events again, as documented: then only the superset holds.
    let (mut damaged, mut resent) = (false, false);
    for cut in cuts {
        if rng.chance(15) && written > 0 {
            resent |= damaged;
            // Cut to nothing, then written again up to where it was, in two pieces.
            std::fs::write(&file, b"").unwrap();
            poll(&mut f);
            for piece in [rng.below(written + 1), written] {
                std::fs::write(&file, &bytes[..piece]).unwrap();
                poll(&mut f);
            }
        }
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .unwrap();
        out.write_all(&bytes[written..cut]).unwrap();
        drop(out);
        if cut > written {
            damaged = false;
        }
        written = cut;
        poll(&mut f);
        if rng.chance(20) {
            drop(f);
            if rng.chance(33) {
                damaged |= damage_a_digest_log(rng, checkpoints.path());
            }
            f = restarted(root.path(), format, checkpoints.path(), &sink);
            poll(&mut f);
        }
    }
    poll(&mut f);
    drop(f);

    let whole = Sink::default();
    let mut once = follower(root.path(), format, None, &whole);
    poll(&mut once);
    let (got, want) = (sink.lines(), whole.lines());
    let read_line_by_line = !complete::is_document(format, bytes)
        && Stream::new(format, name, &Options::default()).is_some();
    if !read_line_by_line || resent {
        let mut left: Vec<&String> = got.iter().collect();
        for event in &want {
            let Some(i) = left.iter().position(|e| *e == event) else {
                panic!("{format}: an event of the final read was not delivered: {event}");
            };
            left.swap_remove(i);
        }
    } else {
        assert_eq!(
            got.len(),
            want.len(),
            "{format}: delivered {} events in pieces, {} read whole",
            got.len(),
            want.len()
        );
        assert_eq!(
            got, want,
            "{format}: other events in pieces than read whole"
        );
    }
}

/// The inputs to mutate: the adapters' samples and the shared recordings, by name.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<(PathBuf, Vec<u8>)> =
        support::shared_fixtures(root, "follow fuzz").unwrap_or_default();
    for path in support::files_under(&root.join("crates/adapters/tests/data")) {
        if let Ok(bytes) = std::fs::read(&path) {
            files.push((path, bytes));
        }
    }
    files
        .into_iter()
        // Large recordings are cut to their first lines: the mutations matter, not the length.
        .map(|(path, bytes)| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let keep = if bytes.len() > 32 * 1024 {
                bytes[..32 * 1024]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(bytes.len(), |i| i + 1)
            } else {
                bytes.len()
            };
            (name, bytes[..keep].to_vec())
        })
        .filter(|(name, _)| {
            Path::new(name)
                .extension()
                .is_some_and(|e| e == "jsonl" || e == "json" || e == "ndjson")
        })
        .collect()
}

#[test]
fn no_file_written_in_pieces_panics_the_follower_and_it_delivers_what_a_whole_read_gives() {
    let corpus = corpus();
    assert!(corpus.len() >= 10, "the adapters' samples are missing");
    let raw: Vec<Vec<u8>> = corpus.iter().map(|(_, b)| b.clone()).collect();
    let odd = support::odd_values();
    let budget = support::Budget::from_env(150);
    // The case's file name and format, which `run` does not pass on.
    let chosen: RefCell<(String, Format)> = RefCell::new((String::new(), Format::ALL[0]));
    support::run(
        "follow",
        &budget,
        |rng, _case| {
            let (name, bytes) = rng.pick(&corpus).clone();
            let mutated = if rng.chance(10) {
                bytes
            } else {
                support::mutate(rng, &bytes, &raw, &odd)
            };
            let format =
                Format::detect_file(&name, &mutated).unwrap_or_else(|| *rng.pick(&Format::ALL));
            *chosen.borrow_mut() = (name, format);
            mutated
        },
        |input| {
            let (name, format) = chosen.borrow().clone();
            // The pieces follow from the input, so that a saved input replays its case.
            let seed = input.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            follow_in_pieces(&mut Rng::new(seed), &name, format, input);
        },
    );
}
