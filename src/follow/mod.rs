//! `toolcalls ingest --follow`: tails agent transcripts as they are written and publishes what is
//! new, surviving its own restarts through per-file checkpoints.
//!
//! Every poll (`--poll-interval`) it finds the files again ([`scan`]), and reads each one whose
//! size, modification time or inode changed since it was last read: the part ready to be read
//! ([`complete`]: complete lines, or a complete document) goes through its adapter, and the events
//! not yet delivered from that file are published, confirmed by the broker, and only then written
//! down in the file's checkpoint ([`checkpoint`]).
//!
//! What is new is told two ways. A line format is read through a [`Stream`], kept while the file
//! only grows with the same first bytes: the next change reads the bytes after the checkpoint's
//! position and parses only them, and every event they give is new (a stream's events never
//! change). Any other format can give events that depend on what follows them (a Gemini CLI
//! session is rewritten whole at every save with a call's result merged into its message,
//! OpenTelemetry spans are sorted by time), so it is parsed whole at each change, and an event is
//! sent when the parse holds it more often than the checkpoint's digests say it was delivered. A
//! changed event is a new digest, sent again: a repeat under the same call id, which the
//! processor counts as a duplicate. A line-format file is parsed whole the same way when its
//! stream cannot go on: at the first look after a start, and after a truncation or rewrite.
//!
//! A file whose start changed (its fingerprint: the first 256 bytes) or that got shorter was
//! rewritten or truncated; it is parsed again from its start like any change, and its events
//! already delivered are not sent again. A path that holds another inode (a rotation, or a save
//! by rename) keeps the digests of the file it held; a file renamed to a path still followed
//! keeps its checkpoint; a file no longer found keeps its checkpoint for when it comes back. A
//! file found under several paths (links) is followed under one.

mod checkpoint;
mod complete;
#[cfg(test)]
mod fuzz;
mod identity;
mod metrics;
mod opts;
mod outlet;
mod scan;

pub use opts::Opts;
pub use outlet::Outlet;

use checkpoint::{Checkpoint, Delivered, Store};
use identity::Stat;
use metrics::FollowMetrics;
use scan::Target;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcalls_adapters::{parse, Format, Options, Parsed, Stream};
use toolcalls_model::redact::Redaction;
use toolcalls_model::Event;

/// What the follower is told.
pub struct Settings {
    /// Files, directories and globs.
    pub paths: Vec<PathBuf>,
    /// `None`: detected per file.
    pub format: Option<Format>,
    pub options: Options,
    /// Applied to every event before it is sent, and to the messages that quote a line.
    pub redaction: Redaction,
    pub strict: bool,
    pub checkpoint_dir: Option<PathBuf>,
    pub poll_interval: Duration,
    /// Look once, deliver what is new, and return.
    pub once: bool,
    /// Where to serve `/metrics`.
    pub metrics_addr: Option<std::net::SocketAddr>,
}

/// Follows until SIGINT or SIGTERM (then it finishes the file at hand and exits 0), or until an
/// event cannot be delivered (an error: the checkpoints keep what was, a restart goes on).
pub fn run(settings: Settings, outlet: Outlet) -> anyhow::Result<()> {
    if settings.paths.iter().any(|p| p.as_os_str() == "-") {
        anyhow::bail!("--follow reads files, not standard input (`-`)");
    }
    let store = match &settings.checkpoint_dir {
        Some(dir) => Some(Store::open(dir)?),
        None => {
            tracing::warn!("no --checkpoint-dir: a restart will send every file again; the processor drops the copies of calls it still remembers (a session's last --dedupe-window, and anything older while it goes on), not of sessions it has let go of: keep checkpoints with --checkpoint-dir");
            None
        }
    };
    let saved = match &store {
        Some(s) => s.load()?,
        None => Vec::new(),
    };
    let stop = stop_on_signal();
    let metrics = FollowMetrics::new();
    if let Some(addr) = settings.metrics_addr {
        let bound = metrics.serve(addr)?;
        tracing::info!(%bound, "serving the follower's metrics on /metrics");
    }
    let own_dirs = settings
        .checkpoint_dir
        .iter()
        .filter_map(|d| std::fs::metadata(d).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect();
    let mut f = Follower {
        // Absolute, so that a checkpoint names its file wherever the follower is started from.
        targets: settings
            .paths
            .iter()
            .map(|p| std::path::absolute(p).map(|p| Target::of(&p)))
            .collect::<Result<_, _>>()?,
        s: settings,
        store,
        saved: saved.into_iter().map(|cp| (cp.path.clone(), cp)).collect(),
        files: HashMap::new(),
        unreadable: HashMap::new(),
        own_dirs,
        out: outlet,
        aliases: HashSet::new(),
        metrics,
    };
    tracing::info!(
        paths = f.targets.len(),
        checkpoints = f.saved.len(),
        "following"
    );
    // A path mistyped would otherwise be followed in silence for ever.
    for target in &f.targets {
        if scan::files(std::slice::from_ref(target), &f.own_dirs)
            .files
            .is_empty()
        {
            tracing::warn!(path = %target, "nothing to follow there yet (no such file, or no file the pattern matches): followed once something is made there");
        }
    }
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        f.poll(&stop)?;
        if f.s.once {
            break;
        }
        let next = start + f.s.poll_interval;
        while !stop.load(Ordering::Relaxed) && Instant::now() < next {
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// One followed file.
#[derive(Default)]
struct Tracked {
    cp: Checkpoint,
    format: Option<Format>,
    /// The file as last looked at: unchanged, nothing to do.
    seen: Option<Stat>,
    /// Bad lines and notices already said, said once.
    said: HashSet<String>,
    /// A document that keeps changing is read again no sooner than this ([`REREAD_AFTER_WORK`]).
    not_before: Option<Instant>,
    /// A line format's parse of the file up to the checkpoint's position, which reads on from
    /// there at the next change.
    stream: Option<Stream>,
    /// What the stream read after the checkpoint's position and could not parse yet: the start
    /// of a line still being written. The next change is read from its end, so a long line
    /// written slowly is read once, not again from its start at every poll.
    partial: Vec<u8>,
    /// When the file was last read (found changed).
    read_at: Option<Instant>,
    /// Its last read failed.
    unreadable: bool,
    /// How many times the file holds each event (by digest) in its parse so far: the whole file
    /// at its last whole read, and what its stream read since. An event is sent when the file
    /// holds it more often than its checkpoint says it was delivered.
    held: HashMap<u64, u32>,
}

impl Tracked {
    /// The file was read: a later failure to read it is said again.
    fn read_again(&mut self) {
        if std::mem::take(&mut self.unreadable) {
            self.said.retain(|s| !s.starts_with("read "));
        }
    }
}

/// A stream is kept this long after its file last changed. It holds the adapter's state for the
/// whole file (ids seen, pending names), and a projects folder keeps every session it ever had:
/// streams of finished sessions are let go, and a file that changes again after that is read
/// whole once (its digests keep what was delivered) and streamed on from there. Its digests go
/// back to their log at the same time, for the same reason.
const STREAM_IDLE: Duration = Duration::from_secs(300);

/// Lets go of the streams of files that have not changed for [`STREAM_IDLE`], and with a
/// checkpoint store (`digests_logged`) of their digests in memory.
fn forget_idle(files: &mut HashMap<PathBuf, Tracked>, now: Instant, digests_logged: bool) {
    for t in files.values_mut() {
        if t.read_at
            .is_some_and(|at| now.duration_since(at) >= STREAM_IDLE)
        {
            t.stream = None;
            t.held = HashMap::new();
            if digests_logged && !t.cp.delivered.is_on_disk() {
                t.cp.delivered.put_away();
            }
        }
    }
}

/// A changed file is read again no sooner than this many times the time its last read took.
/// Every read parses the file from its start, so without it a large transcript that grows a
/// little at every poll would cost a parse of all of it at every poll (quadratic in its size);
/// with it one busy file takes at most about a quarter of the follower's time, and each read still
/// takes in all that was appended meanwhile, so the follower never falls behind for good: a large
/// file is delivered in fewer, larger steps.
const REREAD_AFTER_WORK: u32 = 3;

struct Follower {
    s: Settings,
    targets: Vec<Target>,
    store: Option<Store>,
    /// Checkpoints read at the start, by path, until their file is seen.
    saved: HashMap<String, Checkpoint>,
    files: HashMap<PathBuf, Tracked>,
    /// Paths the last scan could not look at, with the reason said for each.
    unreadable: HashMap<PathBuf, String>,
    /// Where events go; a file it writes to (`--out`) is never followed.
    out: Outlet,
    /// The checkpoint directory, never searched.
    own_dirs: Vec<(u64, u64)>,
    /// Paths said to be another path's file.
    aliases: HashSet<PathBuf>,
    metrics: FollowMetrics,
}

impl Follower {
    fn poll(&mut self, stop: &AtomicBool) -> anyhow::Result<()> {
        let found = scan::files(&self.targets, &self.own_dirs);
        self.note_unreadable(found.unreadable);
        let now: Vec<(PathBuf, Stat)> = found
            .files
            .into_iter()
            .filter_map(|p| std::fs::metadata(&p).ok().map(|m| (p, Stat::of(&m))))
            .collect();
        let now = self.one_path_per_file(now);
        self.follow_renames(&now)?;
        self.let_go_of_the_gone(&now);
        for (path, stat) in &now {
            if let Some(t) = self.files.get(path) {
                self.metrics.delivered_to(path, t.cp.position, stat.size);
            }
        }
        for (path, stat) in &now {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if let Err(e) = self.step(path, *stat) {
                self.metrics.send_errors.inc();
                return Err(e);
            }
            if let Some(t) = self.files.get(path) {
                self.metrics.delivered_to(path, t.cp.position, stat.size);
            }
        }
        forget_idle(&mut self.files, Instant::now(), self.store.is_some());
        let files_unreadable = self.files.values().filter(|t| t.unreadable).count();
        self.metrics
            .unreadable
            .set(i64::try_from(self.unreadable.len() + files_unreadable).unwrap_or(i64::MAX));
        Ok(())
    }

    /// Keeps one path per file, and none for the follower's own output: a file found under two
    /// paths (a symbolic or hard link beside it, a linked directory) would be sent twice. It is
    /// followed under the path it is followed under already, else one that goes through no
    /// symbolic link, else the first; the others are said once.
    fn one_path_per_file(&mut self, found: Vec<(PathBuf, Stat)>) -> Vec<(PathBuf, Stat)> {
        let mut kept: Vec<(PathBuf, Stat)> = Vec::with_capacity(found.len());
        let mut at: HashMap<(u64, u64), usize> = HashMap::with_capacity(found.len());
        // Looked up at every poll: a rotated --out is written at its path again.
        let own_output = self.out.file_identity();
        for (path, stat) in found {
            if own_output == Some(stat.inode()) {
                continue;
            }
            let Some(&i) = at.get(&stat.inode()) else {
                at.insert(stat.inode(), kept.len());
                kept.push((path, stat));
                continue;
            };
            let tracked = |p: &Path| {
                self.files
                    .get(p)
                    .is_some_and(|t| (t.cp.dev, t.cp.ino) == stat.inode())
            };
            let link = |p: &Path| std::fs::canonicalize(p).is_ok_and(|c| c != p);
            let other = &kept[i].0;
            let better = (tracked(&path), !link(&path)) > (tracked(other), !link(other));
            let alias = if better {
                std::mem::replace(&mut kept[i].0, path)
            } else {
                path
            };
            if self.aliases.insert(alias.clone()) {
                tracing::info!(path = %alias.display(), followed_as = %kept[i].0.display(), "the same file as another path; followed once");
            }
        }
        kept
    }

    /// Lets go of the files no longer found, keeping their checkpoints as those of a restart
    /// are kept: a file made again under the same path, or one whose directory could not be read
    /// for a poll, does not send again what was delivered.
    fn let_go_of_the_gone(&mut self, now: &[(PathBuf, Stat)]) {
        let present: HashSet<&PathBuf> = now.iter().map(|(p, _)| p).collect();
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        for path in gone {
            let t = self.files.remove(&path).expect("listed above");
            self.metrics.forget_file(&path);
            let mut cp = t.cp;
            if cp.ino != 0 || cp.delivered.total() > 0 {
                if self.store.is_some() {
                    cp.delivered.put_away();
                }
                self.saved.insert(cp.path.clone(), cp);
            }
        }
    }

    /// Says each path the scan could not look at, once (again when the reason changes), and
    /// when it can be looked at again: the files under it are not followed meanwhile.
    fn note_unreadable(&mut self, now: Vec<(PathBuf, std::io::Error)>) {
        let mut still = HashMap::with_capacity(now.len());
        for (path, e) in now {
            let why = e.to_string();
            if self.unreadable.get(&path) != Some(&why) {
                tracing::warn!(
                    path = %path.display(),
                    error = %why,
                    "cannot read a followed path; what is in it is not followed until it can be read, trying again at every poll"
                );
            }
            still.insert(path, why);
        }
        for path in self.unreadable.keys().filter(|p| !still.contains_key(*p)) {
            tracing::info!(path = %path.display(), "a followed path can be read again");
        }
        self.unreadable = still;
    }

    /// A file now under a path it was not followed under, while the path it was followed under
    /// holds it no longer, was renamed: it keeps its state (and checkpoint) under its new name.
    fn follow_renames(&mut self, now: &[(PathBuf, Stat)]) -> anyhow::Result<()> {
        let at: HashMap<&Path, (u64, u64)> =
            now.iter().map(|(p, s)| (p.as_path(), s.inode())).collect();
        for (path, stat) in now {
            let known = self
                .files
                .get(path)
                .map(|t| (t.cp.dev, t.cp.ino) == stat.inode());
            if known == Some(true) {
                continue;
            }
            let moved_from = self
                .files
                .iter()
                .find(|(p, t)| {
                    p.as_path() != path.as_path()
                        && (t.cp.dev, t.cp.ino) == stat.inode()
                        && at.get(p.as_path()) != Some(&stat.inode())
                })
                .map(|(p, _)| p.clone());
            let key = path.display().to_string();
            if let Some(old) = moved_from {
                let mut t = self.files.remove(&old).expect("found above");
                tracing::info!(from = %old.display(), to = %key, "renamed");
                let was = std::mem::replace(&mut t.cp.path, key);
                if let Some(store) = &self.store {
                    store.rename(&was, &t.cp)?;
                }
                self.files.insert(path.clone(), t);
            } else if known.is_none() && !self.saved.contains_key(&key) {
                // After a restart: a checkpoint of this inode under a path that holds it no more.
                let old = self
                    .saved
                    .iter()
                    .find(|(p, cp)| {
                        (cp.dev, cp.ino) == stat.inode()
                            && at.get(Path::new(p.as_str())) != Some(&stat.inode())
                    })
                    .map(|(p, _)| p.clone());
                if let Some(old) = old {
                    let mut cp = self.saved.remove(&old).expect("found above");
                    tracing::info!(from = %old, to = %key, "renamed while out of sight (the follower stopped, or the file not found for a while)");
                    cp.path = key.clone();
                    if let Some(store) = &self.store {
                        store.rename(&old, &cp)?;
                    }
                    self.saved.insert(key, cp);
                }
            }
        }
        Ok(())
    }

    /// Reads `path` when it changed, and publishes what it holds that was not delivered yet.
    fn step(&mut self, path: &Path, stat: Stat) -> anyhow::Result<()> {
        let name = path.display().to_string();
        if !self.files.contains_key(path) {
            let cp = match self.saved.remove(&name) {
                Some(cp) => cp,
                // A file never checkpointed, or whose checkpoint could not be read: the digest
                // log beside it still says what was delivered.
                None => Checkpoint {
                    path: name.clone(),
                    delivered: match &self.store {
                        Some(store) => store.delivered(&name)?,
                        None => Delivered::default(),
                    },
                    ..Checkpoint::default()
                },
            };
            // Measured from now on, also while its first delivery waits on the brokers.
            self.metrics.delivered_to(path, cp.position, stat.size);
            let t = Tracked {
                format: cp.format.as_deref().and_then(|f| f.parse().ok()),
                cp,
                ..Tracked::default()
            };
            self.files.insert(path.to_owned(), t);
        }
        let t = self.files.get_mut(path).expect("inserted above");
        if t.seen == Some(stat) {
            return Ok(());
        }
        let same_file = (t.cp.dev, t.cp.ino) == stat.inode();
        if t.seen.is_none() && same_file && t.cp.size == stat.size && t.cp.mtime_ns == stat.mtime_ns
        {
            // Unchanged since its checkpoint.
            t.seen = Some(stat);
            return Ok(());
        }
        if t.stream.is_some() && same_file && stat.size >= t.cp.position {
            let read = t.cp.position + t.partial.len() as u64;
            if stat.size < read {
                // Cut within the line being written: read it again from the position.
                t.partial.clear();
            }
            match appended(path, &t.cp, t.partial.len() as u64) {
                Ok(Some(tail)) => {
                    t.read_again();
                    t.seen = Some(stat);
                    t.read_at = Some(Instant::now());
                    return self.deliver_appended(path, stat, &tail);
                }
                // Rewritten or truncated: read whole below.
                Ok(None) => {
                    t.stream = None;
                    t.partial.clear();
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                // Not marked seen: tried again at every poll, so that a file whose permissions
                // are put right is read without waiting for it to change.
                Err(e) => {
                    if t.said.insert(format!("read {e}")) {
                        tracing::warn!(file = %name, error = %e, "cannot read a followed file; trying again at every poll");
                    }
                    t.unreadable = true;
                    return Ok(());
                }
            }
        }
        if t.not_before.is_some_and(|at| Instant::now() < at) {
            return Ok(());
        }
        let began = Instant::now();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                if t.said.insert(format!("read {e}")) {
                    tracing::warn!(file = %name, error = %e, "cannot read a followed file; trying again at every poll");
                }
                t.unreadable = true;
                return Ok(());
            }
        };
        t.read_again();
        t.seen = Some(stat);
        t.read_at = Some(began);
        if let Some(said) = crate::encoding::foreign(&name, &bytes) {
            if t.said.insert("encoding".into()) {
                tracing::warn!("{said}; skipped until it is");
            }
            return Ok(());
        }
        // --format first; then what the file's start tells, over the format its checkpoint
        // remembers (which an earlier --format may have forced on it); then that one, for a file
        // whose start fits several.
        let told = self
            .s
            .format
            .is_none()
            .then(|| Format::detect_file(&name, &bytes))
            .flatten();
        if let (Some(told), Some(was)) = (told, t.format) {
            // Another file at the path has its own format, which is no news (said below).
            if told != was && same_file {
                tracing::warn!(file = %name, format = told.name(), checkpoint = was.name(), "read in the format its start tells, not in the one its checkpoint remembers (an earlier --format?)");
            }
        }
        let Some(format) = self.s.format.or(told).or(t.format) else {
            // A first line still being written is the usual state of a new transcript, not news.
            if !first_line_unfinished(&bytes) && t.said.insert("format".into()) {
                tracing::warn!(file = %name, "cannot tell the format of the file yet; skipped until it can be told (or name it with --format, see docs/ADAPTERS.md)");
            }
            return Ok(());
        };
        self.metrics.format_seen(format.name());
        t.format = Some(format);
        let Some(ready) = complete::ready(format, &bytes) else {
            // Said once: a document caught half-written is read at its next change, but one
            // that stays broken would otherwise be waited for in silence.
            if complete::is_document(format, &bytes) && t.said.insert("incomplete".into()) {
                tracing::warn!(file = %name, format = format.name(), "not one complete JSON document yet; it is read once it is");
            }
            return Ok(());
        };
        if t.cp.ino != 0 && !same_file {
            tracing::info!(file = %name, "another file at this path (rotated or saved by rename); what it holds that was delivered is not sent again");
        } else if t.cp.fingerprint_len > 0
            && (!identity::same_start(&bytes, &t.cp.fingerprint, t.cp.fingerprint_len)
                || (ready as u64) < t.cp.position)
        {
            tracing::info!(file = %name, "rewritten or truncated; reading it again from its start, what was delivered is not sent again");
        }
        // The name it was first read under, which a renamed file keeps (`Checkpoint::named`);
        // another file at this path is read under the path.
        let named = match &t.cp.named {
            Some(first) if t.cp.ino == 0 || same_file => first.clone(),
            _ => name.clone(),
        };
        let read = |bytes: &[u8]| {
            // A line format is read through a stream kept for the next change, which then reads
            // only what was appended; a document is parsed whole at every change.
            let mut stream = (!complete::is_document(format, bytes))
                .then(|| Stream::new(format, &named, &self.s.options))
                .flatten();
            let parsed = match stream.as_mut() {
                Some(s) => s.push(bytes),
                None => parse(format, &named, bytes, &self.s.options),
            };
            (stream, parsed)
        };
        if t.cp.delivered.is_on_disk() {
            if let Some(store) = &self.store {
                t.cp.delivered = store.delivered(&name)?;
            }
        }
        let recovered = std::mem::take(&mut t.cp.digests_lost);
        if recovered {
            if same_file && still_holds_what_was_read(&bytes, ready, &t.cp) {
                let position = t.cp.position as usize;
                let (_, before) = read(&bytes[..position]);
                t.cp.delivered.cover(&held_by(&before.events));
                tracing::warn!(file = %name, position, "its digest log lost digests: the events of the file up to its checkpoint's position are taken as delivered");
            } else {
                tracing::warn!(file = %name, "its digest log lost digests and the file changed since its checkpoint: its events are sent again (the processor drops the repeats it still remembers)");
            }
        }
        let (stream, parsed) = read(&bytes[..ready]);
        if let (Some(forced), true) = (self.s.format, parsed.events.is_empty()) {
            // A format that reads every row as none of its own: said, as `ingest` says it.
            let told = Format::detect_file(&name, &bytes).filter(|&f| f != forced);
            if let Some(told) = told.filter(|_| t.said.insert("no events".into())) {
                tracing::warn!(file = %name, format = forced.name(), told = told.name(), "no events read in the format --format names; its start reads as another: give --format {} or leave it out", told.name());
            }
        }
        t.stream = stream;
        t.partial.clear();
        t.held.clear();
        let fresh = deliver(&mut self.out, (t, &name), &parsed, &self.s, &self.metrics)?;
        if t.stream.is_none() {
            if t.cp.delivered.len() > 4 * t.held.len() + 1024 {
                t.cp.delivered.retain(&t.held);
            }
            // A document is parsed whole again at its next change.
            t.held = HashMap::new();
        }
        let (print, print_len) = identity::fingerprint(&bytes);
        let (tail, tail_len) = identity::tail_print(&bytes[..ready]);
        t.cp = Checkpoint {
            path: name.clone(),
            dev: stat.dev,
            ino: stat.ino,
            fingerprint: print,
            fingerprint_len: print_len,
            position: ready as u64,
            tail,
            tail_len,
            size: stat.size,
            mtime_ns: stat.mtime_ns,
            format: Some(format.name().to_owned()),
            named: Some(named),
            events: parsed.events.len() as u64,
            delivered: std::mem::take(&mut t.cp.delivered),
            ..Checkpoint::default()
        };
        if t.stream.is_none() {
            t.not_before = Some(Instant::now() + began.elapsed() * REREAD_AFTER_WORK);
        }
        // The digests taken as delivered are in no log yet.
        let rewrite = t.stream.is_none() || recovered;
        self.save(path, format, &fresh, rewrite)
    }

    /// Publishes the events of the lines appended to a file read through its stream.
    fn deliver_appended(&mut self, path: &Path, stat: Stat, tail: &Tail) -> anyhow::Result<()> {
        let t = self.files.get_mut(path).expect("tracked by step");
        let (Some(stream), Some(format)) = (t.stream.as_mut(), t.format) else {
            return Ok(());
        };
        let Some(end) = tail.bytes.iter().rposition(|&b| b == b'\n') else {
            t.partial.extend_from_slice(&tail.bytes);
            // Nothing complete was appended. A checkpoint written while the file grew (its
            // stat taken before the read) names the size and time of then, past which it was
            // read: once the file is exactly what was delivered, the checkpoint says so, or a
            // restart would take the file for changed and read it whole again.
            if stat.size == t.cp.position
                && (t.cp.size, t.cp.mtime_ns) != (stat.size, stat.mtime_ns)
            {
                t.cp.size = stat.size;
                t.cp.mtime_ns = stat.mtime_ns;
                return self.save(path, format, &[], false);
            }
            return Ok(());
        };
        let mut lines = std::mem::take(&mut t.partial);
        lines.extend_from_slice(&tail.bytes[..=end]);
        t.partial = tail.bytes[end + 1..].to_vec();
        let parsed = stream.push(&lines);
        let name = path.display().to_string();
        // Checked as a whole read is: a file cut and written again line by line appends lines
        // it had before the cut.
        let fresh = deliver(&mut self.out, (t, &name), &parsed, &self.s, &self.metrics)?;
        t.cp.position += lines.len() as u64;
        let mut read_end = tail.before.clone();
        read_end.extend_from_slice(&lines);
        (t.cp.tail, t.cp.tail_len) = identity::tail_print(&read_end);
        t.cp.size = stat.size;
        t.cp.mtime_ns = stat.mtime_ns;
        t.cp.events += parsed.events.len() as u64;
        if let Some((print, len)) = &tail.fingerprint {
            t.cp.fingerprint.clone_from(print);
            t.cp.fingerprint_len = *len;
        }
        self.save(path, format, &fresh, false)
    }

    /// Writes down the checkpoint of `path` once `fresh` (the digests of the events just
    /// delivered) are acknowledged; `rewrite`: its digests were pruned, so they are written anew.
    fn save(
        &mut self,
        path: &Path,
        format: Format,
        fresh: &[u64],
        rewrite: bool,
    ) -> anyhow::Result<()> {
        let Some(t) = self.files.get(path) else {
            return Ok(());
        };
        if let Some(store) = &self.store {
            if rewrite {
                store.save_all(&t.cp)?;
            } else {
                store.save(&t.cp, fresh)?;
            }
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            self.metrics.checkpoint_time.set(now.as_secs_f64());
        }
        if !fresh.is_empty() {
            tracing::info!(
                file = %t.cp.path,
                format = format.name(),
                sent = fresh.len(),
                events = t.cp.events,
                position = t.cp.position,
                "delivered"
            );
        }
        Ok(())
    }
}

/// What was appended to a file read before, the fingerprint of its start when it now covers
/// more bytes than the checkpoint's, and the bytes just before the checkpoint's position (its
/// `tail_len`), which end what was read.
struct Tail {
    bytes: Vec<u8>,
    fingerprint: Option<(String, usize)>,
    before: Vec<u8>,
}

/// The bytes of `path` after the checkpoint's position and the `skip` bytes past it read already,
/// when the file still starts as it did and still holds, just before that position, the bytes
/// that ended what was read (`None`: it was rewritten or truncated).
fn appended(path: &Path, cp: &Checkpoint, skip: u64) -> std::io::Result<Option<Tail>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let mut head = Vec::with_capacity(identity::FINGERPRINT_BYTES);
    (&mut f)
        .take(identity::FINGERPRINT_BYTES as u64)
        .read_to_end(&mut head)?;
    if !identity::same_start(&head, &cp.fingerprint, cp.fingerprint_len) {
        return Ok(None);
    }
    let fingerprint = (cp.fingerprint_len < head.len()).then(|| identity::fingerprint(&head));
    let back = (cp.tail_len as u64).min(cp.position);
    f.seek(SeekFrom::Start(cp.position - back))?;
    let mut before = Vec::with_capacity(back as usize);
    (&mut f).take(back).read_to_end(&mut before)?;
    if cp.tail_len > 0 && identity::tail_print(&before) != (cp.tail.clone(), cp.tail_len) {
        return Ok(None);
    }
    if skip > 0 {
        f.seek(SeekFrom::Start(cp.position + skip))?;
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(Some(Tail {
        bytes,
        fingerprint,
        before,
    }))
}

/// Whether a file's `bytes` (of which the first `ready` are ready to be read) still hold,
/// unchanged, the bytes `cp` says were read into events: the same start (which may reach past
/// what was read) and the same bytes before its position.
fn still_holds_what_was_read(bytes: &[u8], ready: usize, cp: &Checkpoint) -> bool {
    let Ok(position) = usize::try_from(cp.position) else {
        return false;
    };
    cp.fingerprint_len > 0
        && cp.tail_len > 0
        && position <= ready
        && identity::same_start(bytes, &cp.fingerprint, cp.fingerprint_len)
        && identity::tail_print(&bytes[..position]) == (cp.tail.clone(), cp.tail_len)
}

/// How many times `events` hold each event, by digest.
fn held_by(events: &[Event]) -> HashMap<u64, u32> {
    let mut held = HashMap::new();
    for event in events {
        *held
            .entry(identity::event_digest(&event.encode()))
            .or_default() += 1;
    }
    held
}

/// Sends `event` of file `name` (`payload` is its encoding), redacted; one too large for a Kafka
/// message is said once and left out, as a bad line is (with `--strict` it stops the follower).
/// Whether it was sent.
///
/// The checkpoints know an event by the digest of what was read, not of what was sent: with
/// other redaction rules after a restart, a document read again does not send again the events
/// it delivered.
fn send(
    out: &mut Outlet,
    t: &mut Tracked,
    name: &str,
    event: &Event,
    payload: &[u8],
    s: &Settings,
    metrics: &FollowMetrics,
) -> anyhow::Result<bool> {
    let format = t.format.map_or("?", Format::name);
    let redacted = redacted(&s.redaction, event);
    let (event, payload) = match &redacted {
        Some((e, p)) => {
            metrics.redacted.with_label_values(&[format]).inc();
            (e, p.as_slice())
        }
        None => (event, payload),
    };
    let strict = s.strict;
    match out.send(event, payload) {
        Ok(()) => Ok(true),
        Err(e) if crate::left_out::is_too_large(&e) => {
            // Read, and left out: counted among the events read, as one the brokers refuse is.
            metrics.read.with_label_values(&[format]).inc();
            metrics
                .left_out
                .with_label_values(&[format, crate::left_out::TOO_LARGE])
                .inc();
            let said = crate::left_out::said(name, event, &e);
            if t.said.insert(said.clone()) {
                tracing::warn!("{said}");
            }
            if strict {
                anyhow::bail!("{said}; stopping because of --strict");
            }
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Says the bad lines of `parsed` (just read from file `name`), sends its events the file did
/// not deliver yet and waits for them to be acknowledged; their digests.
fn deliver(
    out: &mut Outlet,
    (t, name): (&mut Tracked, &str),
    parsed: &Parsed,
    s: &Settings,
    metrics: &FollowMetrics,
) -> anyhow::Result<Vec<u64>> {
    vet((t, name), parsed, s, metrics)?;
    let fresh = send_undelivered(out, (t, name), &parsed.events, s, metrics)?;
    let format = t.format.expect("a file is read once its format is known");
    confirm(out, metrics, format, &fresh, (t, name), s.strict)?;
    Ok(fresh)
}

/// Sends those of `events` (just read from file `name`) that the file, as read so far, holds
/// more often than it delivered them, and counts them held; the digests of those sent. A file
/// read again from its start (after a restart, a truncation, a rewrite) sends only what it did
/// not deliver, and so do the lines appended to it afterwards.
fn send_undelivered(
    out: &mut Outlet,
    (t, name): (&mut Tracked, &str),
    events: &[Event],
    s: &Settings,
    metrics: &FollowMetrics,
) -> anyhow::Result<Vec<u64>> {
    let mut fresh = Vec::new();
    for event in events {
        let payload = event.encode();
        let digest = identity::event_digest(&payload);
        let n = t.held.entry(digest).or_default();
        *n += 1;
        if *n > t.cp.delivered.count(digest) && send(out, t, name, event, &payload, s, metrics)? {
            fresh.push(digest);
        }
    }
    Ok(fresh)
}

/// `event` as it leaves, and its encoding, when the redaction rules change it.
fn redacted(rules: &Redaction, event: &Event) -> Option<(Event, Vec<u8>)> {
    if rules.is_empty() {
        return None;
    }
    let mut e = event.clone();
    rules.apply_event(&mut e).then(|| {
        let payload = e.encode();
        (e, payload)
    })
}

/// Says and counts each bad line once (through the redaction's patterns: the message may quote
/// the line), with `--strict` the first one stopping the follower.
fn vet(
    (t, name): (&mut Tracked, &str),
    parsed: &Parsed,
    s: &Settings,
    metrics: &FollowMetrics,
) -> anyhow::Result<()> {
    let format = t.format.map_or("?", Format::name);
    for e in &parsed.errors {
        // Read under the name it was first read under, said under the one it has now.
        let e = toolcalls_adapters::LineError {
            file: name.to_owned(),
            ..e.clone()
        };
        let said = s.redaction.in_text(&e.to_string()).into_owned();
        if t.said.insert(said.clone()) {
            metrics.bad_lines.with_label_values(&[format]).inc();
            tracing::warn!("{said}");
            if s.strict {
                anyhow::bail!("{said}; stopping because of --strict");
            }
        }
    }
    Ok(())
}

/// Waits for the broker to acknowledge the events of file `name` just handed over (`fresh`, their
/// digests), counts them, and notes them delivered in the file's checkpoint. Those the brokers
/// refused as too large are said once and left out, as those the producer refuses are
/// ([`send`]): noted too, so that they are not sent again.
fn confirm(
    out: &mut Outlet,
    metrics: &FollowMetrics,
    format: Format,
    fresh: &[u64],
    (t, name): (&mut Tracked, &str),
    strict: bool,
) -> anyhow::Result<()> {
    let sent = fresh.len();
    if sent == 0 {
        return Ok(());
    }
    metrics
        .read
        .with_label_values(&[format.name()])
        .inc_by(sent as u64);
    let refused = out.confirm()?;
    for r in &refused {
        metrics
            .left_out
            .with_label_values(&[format.name(), crate::left_out::REFUSED_TOO_LARGE])
            .inc();
        let said = crate::left_out::said_of_refused(name, r);
        if t.said.insert(said.clone()) {
            tracing::warn!("{said}");
        }
        if strict {
            anyhow::bail!("{said}; stopping because of --strict");
        }
    }
    metrics
        .sent
        .with_label_values(&[format.name()])
        .inc_by((sent - refused.len().min(sent)) as u64);
    for d in fresh {
        t.cp.delivered.add(*d);
    }
    Ok(())
}

/// Whether `bytes` hold nothing but whitespace, or a first line still being written: no newline
/// after it yet, and not one complete JSON value either (a document may end without one).
fn first_line_unfinished(bytes: &[u8]) -> bool {
    let Some(start) = bytes.iter().position(|b| !b.is_ascii_whitespace()) else {
        return true;
    };
    !bytes[start..].contains(&b'\n')
        && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes[start..]).is_err()
}

/// A flag raised at the first SIGINT or SIGTERM.
fn stop_on_signal() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build();
    let Ok(runtime) = runtime else {
        return stop;
    };
    // The handlers are installed before this returns, so a signal from now on stops cleanly.
    let term = runtime.block_on(async {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    });
    let int = runtime.block_on(async {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
    });
    if let (Ok(mut term), Ok(mut int)) = (term, int) {
        std::thread::spawn(move || {
            runtime.block_on(async {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            });
            flag.store(true, Ordering::Relaxed);
        });
    }
    stop
}

#[cfg(test)]
mod tests;
