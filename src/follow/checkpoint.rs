//! Checkpoints of `ingest --follow`: per followed file, which file it was (device, inode,
//! fingerprint), how far it was read, and the digests of the events of it the broker
//! acknowledged. Per followed path under `--checkpoint-dir`: a small JSON file written atomically
//! (a temporary file, fsync, rename, fsync of the directory), and a log of digests, 8 bytes each,
//! to which each step appends (fsync) the digests it delivered, so that a step costs what it
//! delivered rather than all the file ever did. Both are written only after the broker
//! acknowledged every event they count, the digests first: a crash between the two leaves digests
//! of events delivered, which is what they say.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The version of the checkpoint format this build writes. Version 1 kept the digests inside the
/// JSON file; it is still read.
const VERSION: u32 = 2;

/// What is kept of one followed file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub version: u32,
    /// The path it was followed under.
    pub path: String,
    pub dev: u64,
    pub ino: u64,
    /// SHA-256 (first 8 bytes, hex) of the file's first `fingerprint_len` bytes.
    pub fingerprint: String,
    pub fingerprint_len: usize,
    /// Bytes read into events: the complete lines, or the whole document, as last parsed.
    pub position: u64,
    /// SHA-256 (first 8 bytes, hex) of the `tail_len` bytes before `position` (at most 256):
    /// the end of what was read, which a file rewritten in place with the same start and no
    /// shorter no longer has. Absent from checkpoints written before it was kept.
    #[serde(default)]
    pub tail: String,
    #[serde(default)]
    pub tail_len: usize,
    /// Size and modification time when last read: unchanged means nothing new.
    pub size: u64,
    pub mtime_ns: i64,
    /// The format it was read as.
    pub format: Option<String>,
    /// The path its events were first read under. A format without sessions of its own takes a
    /// file's session from the file's name (docs/ADAPTERS.md): a renamed file is read under this
    /// name, so that its events keep their session and what was delivered is not sent again
    /// under another. Absent from checkpoints written before it was kept: then `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named: Option<String>,
    /// Events the last parse gave (for people reading the checkpoint).
    pub events: u64,
    /// Every event delivered and acknowledged, as [`Delivered`] keeps them: in the digest log
    /// (version 1: here).
    #[serde(default, skip_serializing)]
    pub delivered: Delivered,
    /// How many digests the log held when this was written. Absent from checkpoints written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digests: Option<u64>,
    /// Read with a digest log that holds fewer digests than it did (removed, or cut short by
    /// something other than this program): what the file held up to `position` is delivered,
    /// and is taken as such if the file still holds it.
    #[serde(skip)]
    pub digests_lost: bool,
}

/// The digests of the events delivered from one file, each as many times as it was delivered
/// (a file may hold an event twice). Kept as sorted hex strings.
///
/// A file at rest needs none of them, and a follower of many files would hold every event they
/// ever gave: its digests stay in the log until the file is read ([`Delivered::on_disk`]), and
/// go back there when it rests again ([`Delivered::put_away`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delivered {
    counts: HashMap<u64, u32>,
    /// The sum of `counts`: how many digests the log holds.
    total: u64,
    /// `counts` are not read from the log (they are all in it).
    on_disk: bool,
}

impl Delivered {
    /// The `total` digests of a log, left in it.
    pub fn on_disk(total: u64) -> Delivered {
        Delivered {
            counts: HashMap::new(),
            total,
            on_disk: true,
        }
    }

    /// Whether the digests are in the log only (to be read with [`Store::delivered`]).
    pub fn is_on_disk(&self) -> bool {
        self.on_disk
    }

    /// Lets go of the digests in memory; the log holds every one of them.
    pub fn put_away(&mut self) {
        self.counts = HashMap::new();
        self.on_disk = true;
    }

    /// How many times an event with this digest was delivered.
    pub fn count(&self, digest: u64) -> u32 {
        debug_assert!(!self.on_disk, "digests read before they were loaded");
        self.counts.get(&digest).copied().unwrap_or(0)
    }

    /// One more delivery of `digest` (appended to the log when the checkpoint is saved).
    pub fn add(&mut self, digest: u64) {
        if !self.on_disk {
            *self.counts.entry(digest).or_default() += 1;
        }
        self.total += 1;
    }

    /// Raises the count of each digest of `held` to at least what `held` says: the events a
    /// file held when they are known delivered some other way than by their digests.
    pub fn cover(&mut self, held: &HashMap<u64, u32>) {
        for (&digest, &n) in held {
            let count = self.counts.entry(digest).or_default();
            if *count < n {
                self.total += u64::from(n - *count);
                *count = n;
            }
        }
    }

    /// Distinct digests kept.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Every digest kept, counted as many times as it was delivered.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Keeps only the digests `keep` names: for a file whose events were rewritten many times
    /// over, so that its checkpoint does not grow without bound.
    pub fn retain(&mut self, keep: &HashMap<u64, u32>) {
        self.counts.retain(|d, _| keep.contains_key(d));
        self.total = self.counts.values().map(|&n| u64::from(n)).sum();
    }

    fn each(&self) -> impl Iterator<Item = u64> + '_ {
        self.counts
            .iter()
            .flat_map(|(d, n)| std::iter::repeat_n(*d, *n as usize))
    }
}

impl Serialize for Delivered {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut all: Vec<u64> = self.each().collect();
        all.sort_unstable();
        s.collect_seq(all.iter().map(|d| format!("{d:016x}")))
    }
}

impl<'de> Deserialize<'de> for Delivered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Delivered::default();
        for hex in Vec::<String>::deserialize(d)? {
            let digest = u64::from_str_radix(&hex, 16).map_err(serde::de::Error::custom)?;
            out.add(digest);
        }
        Ok(out)
    }
}

fn encode_digests(digests: impl Iterator<Item = u64>) -> Vec<u8> {
    digests.flat_map(u64::to_be_bytes).collect()
}

/// The checkpoint directory.
pub struct Store {
    dir: PathBuf,
    /// `DIR/.lock`, locked exclusively while the store is open: two followers writing one
    /// directory's checkpoints would each send what the other delivered.
    _lock: std::fs::File,
}

impl Store {
    /// Opens (creating) `dir`.
    pub fn open(dir: &Path) -> anyhow::Result<Store> {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot create the checkpoint directory {}; check --checkpoint-dir",
                dir.display()
            )
        })?;
        let path = dir.join(".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}; check --checkpoint-dir", path.display()))?;
        match fs4::FileExt::try_lock(&lock) {
            Ok(()) => {}
            Err(fs4::TryLockError::WouldBlock) => anyhow::bail!(
                "another `toolcalls ingest --follow` uses the checkpoint directory {}; give each follower a --checkpoint-dir of its own",
                dir.display()
            ),
            Err(fs4::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
        // A directory whose lock can be opened but where no file can be made (a lock left by
        // another user) would fail at the first checkpoint, after the events went out: every
        // restart would send them again. Found out before anything is sent.
        let probe = dir.join(".write-test");
        std::fs::write(&probe, b"")
            .and_then(|()| std::fs::remove_file(&probe))
            .with_context(|| {
                format!(
                    "cannot write in the checkpoint directory {}; check its owner and mode (--checkpoint-dir)",
                    dir.display()
                )
            })?;
        Ok(Store {
            dir: dir.to_owned(),
            _lock: lock,
        })
    }

    /// Every checkpoint in the directory. One that cannot be read is said and left out: its file
    /// is then read from its start again, and what the digest log beside it names
    /// ([`Store::delivered`]) is not sent again.
    pub fn load(&self) -> anyhow::Result<Vec<Checkpoint>> {
        let mut out = Vec::new();
        let entries = std::fs::read_dir(&self.dir)
            .with_context(|| format!("cannot read {}", self.dir.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            match std::fs::read(&path)
                .map_err(anyhow::Error::from)
                .and_then(|b| Ok(serde_json::from_slice::<Checkpoint>(&b)?))
            {
                Ok(mut cp) if cp.version == VERSION => {
                    let logged = self.logged(&cp.path)?;
                    cp.digests_lost = match cp.digests {
                        Some(n) => logged < n,
                        None => logged == 0 && cp.events > 0,
                    };
                    if cp.digests_lost {
                        tracing::warn!(
                            checkpoint = %path.display(),
                            file = %cp.path,
                            digests = logged,
                            written = cp.digests,
                            "the digest log holds fewer digests than were written to it (removed or cut short); what the file held up to its checkpoint's position is taken as delivered if it still holds it, and sent again if not"
                        );
                    }
                    cp.delivered = Delivered::on_disk(logged);
                    out.push(cp);
                }
                Ok(cp) if cp.version == 1 => {
                    // Its digests move to the log; later steps append to it.
                    self.save_all(&cp)?;
                    out.push(cp);
                }
                Ok(cp) => tracing::warn!(
                    checkpoint = %path.display(),
                    version = cp.version,
                    "checkpoint of another version than {VERSION}; ignored (its file is read again from its start, and what its digest log names is not sent again)"
                ),
                Err(e) => tracing::warn!(
                    checkpoint = %path.display(),
                    error = %e,
                    "cannot read checkpoint; ignored (its file is read again from its start, and what its digest log names is not sent again)"
                ),
            }
        }
        Ok(out)
    }

    /// Appends `fresh` to the digest log of `cp`'s file, then writes `cp`.
    pub fn save(&self, cp: &Checkpoint, fresh: &[u64]) -> anyhow::Result<()> {
        if !fresh.is_empty() {
            let path = self.log_of(&cp.path);
            let append = || -> std::io::Result<()> {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)?;
                // A digest cut short by a crash (or a full disk) is dropped first: appended after
                // it, every later digest would be read at the wrong offset.
                let len = f.metadata()?.len();
                if len % 8 != 0 {
                    tracing::warn!(
                        digests = %path.display(),
                        bytes = len % 8,
                        "the digest log ends in part of a digest (a crash while writing it); cut back to its last whole one"
                    );
                    f.set_len(len - len % 8)?;
                }
                f.write_all(&encode_digests(fresh.iter().copied()))?;
                f.sync_data()
            };
            append().with_context(|| format!("cannot write the digests {}", path.display()))?;
        }
        self.write_head(cp)
    }

    /// Writes `cp` with its digest log anew (digests pruned, or taken as delivered); a log whose
    /// digests are not in memory is left as it is.
    pub fn save_all(&self, cp: &Checkpoint) -> anyhow::Result<()> {
        if cp.delivered.is_on_disk() {
            return self.write_head(cp);
        }
        let all = cp.delivered.each();
        let target = self.log_of(&cp.path);
        self.write_atomically(&target, &encode_digests(all))?;
        self.write_head(cp)
    }

    /// Moves the checkpoint of `from` to `cp.path`.
    pub fn rename(&self, from: &str, cp: &Checkpoint) -> anyhow::Result<()> {
        if cp.delivered.is_on_disk() {
            let (old, new) = (self.log_of(from), self.log_of(&cp.path));
            match std::fs::rename(&old, &new) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| {
                        format!("cannot move {} to {}", old.display(), new.display())
                    })
                }
                _ => {}
            }
        }
        self.save_all(cp)?;
        self.remove(from)
    }

    /// How many whole digests the log of `path` holds, without reading them.
    fn logged(&self, path: &str) -> anyhow::Result<u64> {
        let file = self.log_of(path);
        match std::fs::metadata(&file) {
            Ok(m) => Ok(m.len() / 8),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
        }
    }

    /// What the digest log of `path` says was delivered, whether or not its checkpoint can be
    /// read.
    pub fn delivered(&self, path: &str) -> anyhow::Result<Delivered> {
        let mut out = Delivered::default();
        for d in self.read_digests(path)? {
            out.add(d);
        }
        Ok(out)
    }

    /// The digests logged for `path`; a digest cut short by a crash is left out.
    fn read_digests(&self, path: &str) -> anyhow::Result<Vec<u64>> {
        let file = self.log_of(path);
        match std::fs::read(&file) {
            Ok(bytes) => Ok(bytes
                .chunks_exact(8)
                .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
                .collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
        }
    }

    /// Writes `cp` atomically: a crash leaves the old checkpoint or the new one, never a mix.
    fn write_head(&self, cp: &Checkpoint) -> anyhow::Result<()> {
        // Not a clone of `cp`: its digests, which the head leaves out, can be many.
        let mut head = serde_json::to_value(cp)?;
        head["version"] = VERSION.into();
        head["digests"] = cp.delivered.total().into();
        let json = serde_json::to_vec(&head)?;
        self.write_atomically(&self.file_of(&cp.path), &json)
    }

    /// Replaces `target` with `bytes`: a temporary file, fsync, rename, fsync of the directory.
    fn write_atomically(&self, target: &Path, bytes: &[u8]) -> anyhow::Result<()> {
        let mut tmp = target.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, target)?;
            // The rename itself is durable once the directory is.
            std::fs::File::open(&self.dir)?.sync_all()
        };
        write().with_context(|| format!("cannot write the checkpoint {}", target.display()))
    }

    /// Removes the checkpoint of `path` (its file was followed under another name since).
    pub fn remove(&self, path: &str) -> anyhow::Result<()> {
        for file in [self.log_of(path), self.file_of(path)] {
            match std::fs::remove_file(&file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e)
                        .with_context(|| format!("cannot remove the checkpoint of {path}"))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The digest log beside the checkpoint of `path`.
    fn log_of(&self, path: &str) -> PathBuf {
        self.file_of(path).with_extension("digests")
    }

    /// `<dir>/<first 16 hex digits of SHA-256 of the path>.json`.
    fn file_of(&self, path: &str) -> PathBuf {
        let d = Sha256::digest(path.as_bytes());
        let name: String = d.iter().take(8).map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_round_trips_and_replaces_the_old_one() {
        let dir = std::env::temp_dir().join(format!("toolcalls-cp-{}", std::process::id()));
        let store = Store::open(&dir).unwrap();
        let mut cp = Checkpoint {
            path: "/x/a.jsonl".into(),
            position: 10,
            ..Checkpoint::default()
        };
        store.save(&cp, &[7, 7]).unwrap();
        cp.position = 20;
        store.save(&cp, &[u64::MAX]).unwrap();
        store.save(&cp, &[]).unwrap();
        let loaded = store.load().unwrap();
        assert_eq!(loaded.len(), 1, "one file per path");
        assert_eq!(loaded[0].position, 20);
        assert_eq!(
            store.delivered("/x/a.jsonl").unwrap().count(7),
            2,
            "appended twice"
        );
        assert_eq!(store.delivered("/x/a.jsonl").unwrap().count(u64::MAX), 1);

        // A crash in the middle of an append leaves a digest cut short: it is not one, and the
        // next append goes after the last whole one.
        let log = store.log_of("/x/a.jsonl");
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        assert_eq!(store.delivered("/x/a.jsonl").unwrap().len(), 2);
        store.save(&cp, &[5]).unwrap();
        let loaded = store.load().unwrap();
        let delivered = store.delivered("/x/a.jsonl").unwrap();
        assert_eq!(delivered.count(5), 1, "read at its offset");
        assert_eq!(delivered.count(7), 2);
        store.remove("/x/a.jsonl").unwrap();
        store.save(&cp, &[7, 7]).unwrap();
        store.save(&cp, &[u64::MAX]).unwrap();

        // A rename moves the digests with the checkpoint.
        let mut moved = loaded[0].clone();
        moved.path = "/x/b.jsonl".into();
        store.rename("/x/a.jsonl", &moved).unwrap();
        let loaded = store.load().unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].path, "/x/b.jsonl");
        assert_eq!(store.delivered("/x/b.jsonl").unwrap().count(7), 2);
        store.remove("/x/b.jsonl").unwrap();
        assert!(store.load().unwrap().is_empty());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "only the lock is left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_digest_log_with_fewer_digests_than_written_is_said_lost() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut cp = Checkpoint {
            path: "/x/a.jsonl".into(),
            position: 10,
            events: 3,
            ..Checkpoint::default()
        };
        for d in [1, 2, 2] {
            cp.delivered.add(d);
        }
        store.save(&cp, &[1, 2, 2]).unwrap();
        let loaded = store.load().unwrap();
        assert_eq!(loaded[0].digests, Some(3));
        assert!(!loaded[0].digests_lost);
        let log = store.log_of("/x/a.jsonl");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .and_then(|f| f.set_len(16))
            .unwrap();
        assert!(store.load().unwrap()[0].digests_lost, "cut short");
        std::fs::remove_file(&log).unwrap();
        assert!(store.load().unwrap()[0].digests_lost, "removed");
        // Written before the count was kept: lost when it has none and the file gave events.
        let mut head: serde_json::Value =
            serde_json::from_slice(&std::fs::read(store.file_of("/x/a.jsonl")).unwrap()).unwrap();
        head.as_object_mut().unwrap().remove("digests");
        std::fs::write(store.file_of("/x/a.jsonl"), head.to_string()).unwrap();
        assert!(store.load().unwrap()[0].digests_lost, "older checkpoint");
    }

    #[test]
    fn a_version_1_checkpoint_keeps_its_digests() {
        let dir = std::env::temp_dir().join(format!("toolcalls-cp1-{}", std::process::id()));
        let store = Store::open(&dir).unwrap();
        let v1 = r#"{"version":1,"path":"/x/a.jsonl","dev":1,"ino":2,"fingerprint":"00","fingerprintLen":1,"position":5,"size":5,"mtimeNs":0,"format":"claude-code","events":2,"delivered":["0000000000000007","0000000000000007"]}"#;
        std::fs::write(store.file_of("/x/a.jsonl"), v1).unwrap();
        let loaded = store.load().unwrap();
        assert_eq!(loaded[0].delivered.count(7), 2);
        // Later steps only append: the old digests must be in the log by now.
        store.save(&loaded[0], &[9]).unwrap();
        let again = store.load().unwrap();
        let delivered = store.delivered("/x/a.jsonl").unwrap();
        assert_eq!((delivered.count(7), delivered.count(9)), (2, 1));
        assert_eq!(again[0].version, VERSION);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
