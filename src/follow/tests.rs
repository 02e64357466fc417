//! The follower polled by hand: what it sends for files written, cut, linked, rewritten and
//! restarted on.

use super::*;
use std::io::Write as _;

/// A follower of `file` writing to nowhere, its checkpoints in `dir`.
fn follower(file: &Path, dir: &Path) -> Follower {
    Follower {
        s: Settings {
            paths: vec![file.to_owned()],
            format: Some(Format::ClaudeCode),
            options: Options::default(),
            redaction: Redaction::default(),
            strict: false,
            checkpoint_dir: Some(dir.to_owned()),
            poll_interval: Duration::from_millis(10),
            once: false,
            metrics_addr: None,
        },
        targets: vec![Target::File(file.to_owned())],
        store: Some(Store::open(dir).unwrap()),
        saved: HashMap::new(),
        files: HashMap::new(),
        unreadable: HashMap::new(),
        out: Outlet::Lines(Box::new(std::io::sink())),
        own_dirs: Vec::new(),
        aliases: HashSet::new(),
        metrics: FollowMetrics::new(),
    }
}

/// A file that grew between the poll's look at it and its read is read past the size the
/// look saw; once nothing more comes, its checkpoint names the size it now has, so that a
/// restart takes it for unchanged.
#[test]
fn a_file_read_past_the_size_its_poll_saw_is_checkpointed_at_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    let sample = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/adapters/tests/data/claude-subagent-agent-a3f9c1e.jsonl"),
    )
    .unwrap();
    let lines: Vec<&[u8]> = sample.split_inclusive(|&b| b == b'\n').collect();
    let (first, rest) = lines.split_at(lines.len() / 2);
    std::fs::write(&file, first.concat()).unwrap();
    let mut f = follower(&file, &dir.path().join("checkpoints"));
    let seen_before = Stat::of(&std::fs::metadata(&file).unwrap());
    // The agent writes on between the look and the read.
    let mut w = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    std::io::Write::write_all(&mut w, &rest.concat()).unwrap();
    drop(w);
    f.step(&file, seen_before).unwrap();
    let now = Stat::of(&std::fs::metadata(&file).unwrap());
    f.step(&file, now).unwrap();
    let saved = f.store.as_ref().unwrap().load().unwrap();
    let cp = &saved[0];
    assert_eq!(cp.position, sample.len() as u64, "read to its end");
    assert_eq!(
        (cp.size, cp.mtime_ns),
        (now.size, now.mtime_ns),
        "the checkpoint names the file as it is"
    );
}

/// What a follower writes, kept for the test to read.
#[derive(Clone, Default)]
struct Written(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Written {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A follower of `file` that tells its format and writes to what it returns.
fn detecting_follower(file: &Path, dir: &Path) -> (Follower, Written) {
    let mut f = follower(file, &dir.join("checkpoints"));
    f.s.format = None;
    let written = Written::default();
    f.out = Outlet::Lines(Box::new(written.clone()));
    (f, written)
}

/// A Claude Code transcript of the adapters' samples.
fn transcript() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/adapters/tests/data/claude-subagent-agent-a3f9c1e.jsonl"),
    )
    .unwrap()
}

/// A transcript saved with a byte order mark is told apart and followed as one without: the
/// same events, when it is written in two pieces, the first cutting the mark.
#[test]
fn a_file_saved_with_a_byte_order_mark_is_followed_as_without() {
    let sample = transcript().into_bytes();
    let marked = [&toolcalls_model::bom::UTF8_BOM[..], &sample].concat();
    let follow = |bytes: &[u8], cut: usize| {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        let (mut f, written) = detecting_follower(&file, dir.path());
        for piece in [&bytes[..cut], bytes] {
            std::fs::write(&file, piece).unwrap();
            f.step(&file, Stat::of(&std::fs::metadata(&file).unwrap()))
                .unwrap();
        }
        let out = written.0.lock().unwrap().clone();
        out
    };
    let plain = follow(&sample, sample.len() / 2);
    assert!(plain.split(|&b| b == b'\n').count() > 2, "no events");
    assert_eq!(follow(&marked, 2), plain);
    assert_eq!(follow(&marked, marked.len() / 2), plain);
}

/// A transcript saved as UTF-16 is said once and left, not read as lines that would every
/// one be bad; converted, it is read.
#[test]
fn a_file_in_utf16_is_left_until_it_is_utf8() {
    let sample = transcript();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    let (mut f, written) = detecting_follower(&file, dir.path());
    let utf16: Vec<u8> = format!("\u{feff}{sample}")
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    for _ in 0..2 {
        std::fs::write(&file, &utf16).unwrap();
        f.step(&file, Stat::of(&std::fs::metadata(&file).unwrap()))
            .unwrap();
    }
    assert!(written.0.lock().unwrap().is_empty());
    assert_eq!(f.files[&file].said.len(), 1, "said once");
    std::fs::write(&file, &sample).unwrap();
    f.step(&file, Stat::of(&std::fs::metadata(&file).unwrap()))
        .unwrap();
    assert!(!written.0.lock().unwrap().is_empty(), "read once UTF-8");
}

#[test]
fn the_streams_of_files_at_rest_are_let_go() {
    let opts = Options::default();
    let stream = || Stream::new(Format::ClaudeCode, "a.jsonl", &opts);
    let start = Instant::now();
    let now = start + STREAM_IDLE;
    let mut files: HashMap<PathBuf, Tracked> = HashMap::new();
    files.insert(
        "idle".into(),
        Tracked {
            stream: stream(),
            read_at: Some(start),
            ..Tracked::default()
        },
    );
    files.insert(
        "busy".into(),
        Tracked {
            stream: stream(),
            read_at: Some(now - Duration::from_secs(1)),
            ..Tracked::default()
        },
    );
    for t in files.values_mut() {
        t.cp.delivered.add(7);
    }
    forget_idle(&mut files, now, true);
    assert!(files[Path::new("idle")].stream.is_none());
    assert!(files[Path::new("busy")].stream.is_some());
    assert!(files[Path::new("idle")].cp.delivered.is_on_disk());
    assert!(!files[Path::new("busy")].cp.delivered.is_on_disk());
    // Without a store, memory is where the digests are.
    files.get_mut(Path::new("idle")).unwrap().cp.delivered = Delivered::default();
    forget_idle(&mut files, now, false);
    assert!(!files[Path::new("idle")].cp.delivered.is_on_disk());
}

/// A file whose digests went back to their log while it rested, and one a restart left in the
/// log, send nothing again when they change: the digests are read back first.
#[test]
fn digests_put_away_are_read_back_when_the_file_changes() {
    let sample = transcript();
    let One {
        root: _root,
        _checkpoints: _cps,
        file,
        mut f,
        written,
        first,
    } = one_transcript_followed();
    forget_idle(&mut f.files, Instant::now() + STREAM_IDLE, true);
    assert!(f.files[&file].cp.delivered.is_on_disk());
    grow_and_check(&mut f, &file, &sample, (&written, &first));
    assert!(!f.files[&file].cp.delivered.is_on_disk(), "read back");
}

/// Writes `sample` followed by its calls under other ids as `file`, polls, and checks that the
/// follower has written (`written`, of which `first` before) one whole read of it: only the new
/// calls were sent.
fn grow_and_check(
    f: &mut Follower,
    file: &Path,
    sample: &str,
    (written, first): (&Written, &[String]),
) {
    let mut more = sample.to_owned();
    more.push_str(&sample.replace("toolu_", "toolu_x"));
    std::fs::write(file, &more).unwrap();
    poll(f);
    let all = read_whole("s.jsonl", more.as_bytes());
    assert!(all.len() > first.len());
    assert_wrote(written, &all, "what is new is sent");
}

/// A follower of everything under `root` (its checkpoints beside it), and what it wrote.
fn follower_of_dir(root: &Path, checkpoints: &Path) -> (Follower, Written) {
    let (mut f, written) = detecting_follower(root, checkpoints);
    f.targets = vec![Target::Dir(root.to_owned())];
    (f, written)
}

/// What `written` holds: one event a line.
fn events(written: &Written) -> Vec<String> {
    let bytes = written.0.lock().unwrap().clone();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// What a follower that finds `bytes` as file `name` at its first look sends: one read of
/// the whole file.
fn read_whole(name: &str, bytes: &[u8]) -> Vec<String> {
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join(name), bytes).unwrap();
    let (mut once, whole) = follower_of_dir(other.path(), &other.path().join("cp"));
    poll(&mut once);
    events(&whole)
}

/// Asserts that the follower wrote `expected`, by count first (events are long lines).
fn assert_wrote(written: &Written, expected: &[String], what: &str) {
    let got = events(written);
    assert_eq!(got.len(), expected.len(), "events written: {what}");
    assert_eq!(got, expected, "{what}");
}

fn poll(f: &mut Follower) {
    f.poll(&AtomicBool::new(false)).unwrap();
}

/// A follower of a directory holding one transcript, after its first poll.
struct One {
    root: tempfile::TempDir,
    _checkpoints: tempfile::TempDir,
    file: PathBuf,
    f: Follower,
    written: Written,
    /// What the first poll sent.
    first: Vec<String>,
}

fn one_transcript_followed() -> One {
    let root = tempfile::tempdir().unwrap();
    let checkpoints = tempfile::tempdir().unwrap();
    let file = root.path().join("s.jsonl");
    let (mut f, written) = follower_of_dir(root.path(), checkpoints.path());
    std::fs::write(&file, transcript()).unwrap();
    poll(&mut f);
    let first = events(&written);
    assert!(!first.is_empty());
    One {
        root,
        _checkpoints: checkpoints,
        file,
        f,
        written,
        first,
    }
}

/// A file cut to nothing and written again in pieces (line by line, as an agent that starts
/// its transcript again writes it) sends nothing it delivered before the cut: the lines
/// appended after the cut are checked as a whole read is.
#[test]
fn a_file_cut_and_written_again_in_pieces_sends_nothing_again() {
    let sample = transcript();
    // Bound, not `..`: the directories go when their binding does.
    let One {
        root: _root,
        _checkpoints: _cps,
        file,
        mut f,
        written,
        first,
    } = one_transcript_followed();
    assert!(first.len() > 4, "{} events", first.len());
    std::fs::write(&file, "").unwrap();
    poll(&mut f);
    let lines: Vec<&str> = sample.split_inclusive('\n').collect();
    for n in [1, lines.len() / 3, lines.len() / 2, lines.len()] {
        std::fs::write(&file, lines[..n].concat()).unwrap();
        poll(&mut f);
    }
    assert_wrote(&written, &first, "the same events, once");
    // What is new after the rewrite is sent.
    grow_and_check(&mut f, &file, &sample, (&written, &first));
}

/// A file removed and made again while the follower runs, or out of sight for a poll, keeps
/// what it delivered, as it would across a restart.
#[test]
fn a_file_removed_and_made_again_sends_nothing_again() {
    let sample = transcript();
    let One {
        root,
        _checkpoints: _cps,
        file,
        mut f,
        written,
        first,
    } = one_transcript_followed();
    std::fs::remove_file(&file).unwrap();
    poll(&mut f);
    assert!(f.files.is_empty(), "let go of");
    std::fs::write(&file, &sample).unwrap();
    poll(&mut f);
    assert_wrote(&written, &first, "made again");
    // Away and back under the same inode (its directory out of sight for a poll).
    let away = root.path().join("s.jsonl.away");
    std::fs::rename(&file, &away).unwrap();
    poll(&mut f);
    std::fs::rename(&away, &file).unwrap();
    poll(&mut f);
    assert_wrote(&written, &first, "back after a poll away");
}

/// A file under two paths (a symbolic link and a hard link beside it, a linked directory,
/// one that links back above itself) is followed once.
#[test]
fn a_file_under_several_paths_is_followed_once() {
    let sample = transcript();
    let root = tempfile::tempdir().unwrap();
    let cps = tempfile::tempdir().unwrap();
    let sessions = root.path().join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    let file = sessions.join("s.jsonl");
    std::fs::write(&file, &sample).unwrap();
    std::os::unix::fs::symlink(&file, root.path().join("link.jsonl")).unwrap();
    std::fs::hard_link(&file, root.path().join("hard.jsonl")).unwrap();
    std::os::unix::fs::symlink(&sessions, root.path().join("linked")).unwrap();
    std::os::unix::fs::symlink(root.path(), sessions.join("up")).unwrap();
    let (mut alone, once) = follower_of_dir(&sessions, cps.path());
    alone.store = None;
    poll(&mut alone);
    let expected = events(&once);
    assert!(!expected.is_empty());
    let (mut f, written) = follower_of_dir(root.path(), cps.path());
    poll(&mut f);
    assert_wrote(&written, &expected, "followed once");
    assert_eq!(f.files.len(), 1, "{:?}", f.files.keys().collect::<Vec<_>>());
    let (path, _) = f.files.iter().next().unwrap();
    assert!(
        [&file, &root.path().join("hard.jsonl")].contains(&path),
        "followed under a path that goes through no symbolic link: {}",
        path.display()
    );
    // A file found through a linked directory alone is followed.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("t.jsonl"), &sample).unwrap();
    std::os::unix::fs::symlink(other.path(), root.path().join("other")).unwrap();
    poll(&mut f);
    assert!(f.files.contains_key(&root.path().join("other/t.jsonl")));
}

/// A file rewritten in place with the same start and no shorter (an editor's save, a file
/// removed and made again on the same inode) is read again whole: read on from the old
/// position, it would lose the lines before it that changed and cut one in two.
#[test]
fn a_file_rewritten_in_place_with_the_same_start_is_read_again_whole() {
    let hooks = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/adapters/tests/data/claude-hooks.jsonl"),
    )
    .unwrap();
    let lines: Vec<&str> = hooks.split_inclusive('\n').collect();
    assert!(lines.len() >= 12);
    let root = tempfile::tempdir().unwrap();
    let cps = tempfile::tempdir().unwrap();
    let file = root.path().join("h.jsonl");
    let (mut f, written) = follower_of_dir(root.path(), cps.path());
    std::fs::write(&file, lines[..6].concat()).unwrap();
    poll(&mut f);
    let rewritten = [&lines[..3], &lines[9..12], &lines[3..9]].concat().concat();
    // In place: the same inode, the same first bytes, longer.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .and_then(|mut w| std::io::Write::write_all(&mut w, rewritten.as_bytes()))
        .unwrap();
    poll(&mut f);
    let mut whole = read_whole("h.jsonl", rewritten.as_bytes());
    let mut got = events(&written);
    whole.sort();
    got.sort();
    assert!(!whole.is_empty());
    assert_eq!(got, whole, "each event once, none lost");
}

/// A follower of `root` as `run` starts one: its checkpoints loaded.
fn started(root: &Path, checkpoints: &Path) -> (Follower, Written) {
    let (mut f, written) = follower_of_dir(root, checkpoints);
    let saved = f.store.as_ref().unwrap().load().unwrap();
    f.saved = saved.into_iter().map(|cp| (cp.path.clone(), cp)).collect();
    (f, written)
}

/// The digest logs in `checkpoints`.
fn logs(checkpoints: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(checkpoints)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "digests"))
        .collect()
}

/// A directory holding `content` as `s.jsonl`, followed by a follower that polled once and
/// stopped; its checkpoints, the file, and what it sent.
fn followed_and_stopped(
    content: &str,
) -> (tempfile::TempDir, tempfile::TempDir, PathBuf, Vec<String>) {
    let root = tempfile::tempdir().unwrap();
    let cps = tempfile::tempdir().unwrap();
    let file = root.path().join("s.jsonl");
    std::fs::write(&file, content).unwrap();
    let (mut f, written) = started(root.path(), cps.path());
    poll(&mut f);
    drop(f);
    let sent = events(&written);
    (root, cps, file, sent)
}

/// A digest log removed, or cut short, while the follower was stopped: what the file held
/// up to its checkpoint's position is not sent again when the file still holds it.
#[test]
fn a_lost_digest_log_sends_nothing_the_checkpoint_covers() {
    let sample = transcript();
    let lines: Vec<&str> = sample.split_inclusive('\n').collect();
    assert!(lines.len() >= 6);
    let half = lines[..lines.len() / 2].concat();
    let all = read_whole("s.jsonl", sample.as_bytes());
    for damage in ["removed", "cut short"] {
        let (root, cps, file, first) = followed_and_stopped(&half);
        assert!(!first.is_empty() && first.len() < all.len());
        let [log] = &logs(&cps.path().join("checkpoints"))[..] else {
            panic!("one digest log")
        };
        match damage {
            "removed" => std::fs::remove_file(log).unwrap(),
            _ => {
                let len = std::fs::metadata(log).unwrap().len();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(log)
                    .and_then(|f| f.set_len(len / 16 * 8))
                    .unwrap();
            }
        }
        std::fs::write(&file, &sample).unwrap();
        let (mut f, second) = started(root.path(), cps.path());
        poll(&mut f);
        let mut sent = first.clone();
        sent.extend(events(&second));
        assert_eq!(sent, all, "digest log {damage}: each event once");
        // The digests taken as delivered are written down: a third start sends nothing.
        drop(f);
        let later = format!("{sample}\n");
        std::fs::write(&file, later).unwrap();
        let (mut f, third) = started(root.path(), cps.path());
        poll(&mut f);
        assert_eq!(events(&third), Vec::<String>::new(), "digest log {damage}");
    }
}

/// When the file changed under a lost digest log, nothing tells what was delivered: its
/// events are sent again rather than any lost.
#[test]
fn a_lost_digest_log_and_a_changed_file_send_again() {
    let sample = transcript();
    let (root, cps, file, _) = followed_and_stopped(&sample);
    for log in logs(&cps.path().join("checkpoints")) {
        std::fs::remove_file(log).unwrap();
    }
    let changed = sample.replacen('{', "{ ", 1);
    std::fs::write(&file, &changed).unwrap();
    let (mut f, again) = started(root.path(), cps.path());
    poll(&mut f);
    assert_eq!(events(&again), read_whole("s.jsonl", changed.as_bytes()));
}

/// The same for a file whose start, as its checkpoint fingerprints it (256 bytes), reaches past
/// the lines read: a line half written when the checkpoint was taken.
#[test]
fn a_lost_digest_log_of_a_file_read_short_of_its_fingerprint_sends_nothing_again() {
    let line = |n: u32, p: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"tools/call\",\"params\":{{\"name\":\"read\",\"arguments\":{{\"p\":\"{p}\"}}}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":{n},\"result\":{{\"content\":[]}}}}\n"
        )
    };
    let (first, second) = (line(1, "a"), line(2, &"b".repeat(300)));
    let whole = format!("{first}{second}");
    assert!(first.len() < 256);
    let (root, cps, file, sent) = followed_and_stopped(&whole[..first.len() + 200]);
    assert_eq!(sent.len(), 2, "the first call");
    for log in logs(&cps.path().join("checkpoints")) {
        std::fs::remove_file(log).unwrap();
    }
    // Read again while the line is still half written, then once it is whole.
    let (mut f, again) = started(root.path(), cps.path());
    std::fs::write(&file, &whole[..first.len() + 250]).unwrap();
    poll(&mut f);
    std::fs::write(&file, &whole).unwrap();
    poll(&mut f);
    let mut all = sent;
    all.extend(events(&again));
    assert_eq!(
        all,
        read_whole("s.jsonl", whole.as_bytes()),
        "each event once"
    );
}

/// `codex exec --json` lines of one command run `n`.
fn exec_run(n: usize) -> String {
    format!(
        concat!(
            r#"{{"type":"thread.started","thread_id":"t{n}"}}"#,
            "\n",
            r#"{{"type":"turn.started"}}"#,
            "\n",
            r#"{{"type":"item.started","item":{{"id":"item_1","type":"command_execution","command":"ls {n}","aggregated_output":"","status":"in_progress"}}}}"#,
            "\n",
            r#"{{"type":"item.completed","item":{{"id":"item_1","type":"command_execution","command":"ls {n}","aggregated_output":"a\n","exit_code":0,"status":"completed"}}}}"#,
            "\n",
            r#"{{"type":"turn.completed","usage":{{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}}}"#,
            "\n"
        ),
        n = n
    )
}

/// A format without sessions of its own (`codex exec --json`) takes a file's session from its
/// name: a followed file renamed while the follower was stopped, and grown, is read under the
/// name it was first read under. What was delivered is not sent again under another session,
/// and what is new joins its session.
#[test]
fn a_renamed_file_keeps_the_session_its_name_gave_it() {
    let root = tempfile::tempdir().unwrap();
    let cps = tempfile::tempdir().unwrap();
    let first = root.path().join("run-a.jsonl");
    std::fs::write(&first, exec_run(1)).unwrap();
    let (mut f, written) = started(root.path(), cps.path());
    f.s.format = Some(Format::CodexExec);
    poll(&mut f);
    drop(f);
    let before = events(&written);
    assert!(!before.is_empty());

    let renamed = root.path().join("run-b.jsonl");
    std::fs::rename(&first, &renamed).unwrap();
    let whole = exec_run(1) + &exec_run(2);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&renamed)
        .unwrap()
        .write_all(exec_run(2).as_bytes())
        .unwrap();
    let (mut f, written) = started(root.path(), cps.path());
    f.s.format = Some(Format::CodexExec);
    poll(&mut f);
    let after = events(&written);
    let all: Vec<String> = before.iter().chain(&after).cloned().collect();
    // Every event once, as a read of the whole file under its first name gives them.
    let expected = read_whole("run-a.jsonl", whole.as_bytes());
    assert_eq!(all.len(), expected.len(), "sent: {all:#?}");
    assert_eq!(all, expected);
    assert!(
        after.iter().all(|e| e.contains(r#""session":"run-a""#)),
        "{after:#?}"
    );
}

/// A transcript whose first line is longer than the 64 KiB detection reads at least (a first
/// prompt with a large paste) is told once that line is complete, and followed.
#[test]
fn a_transcript_with_a_long_first_line_is_followed_once_the_line_is_complete() {
    let root = tempfile::tempdir().unwrap();
    let checkpoints = tempfile::tempdir().unwrap();
    let file = root.path().join("s.jsonl");
    let paste = "x".repeat(100_000);
    let first = format!(
        r#"{{"type":"user","sessionId":"s","uuid":"u0","timestamp":"2025-01-01T00:00:00Z","message":{{"role":"user","content":"{paste}"}}}}"#
    );
    let whole = format!("{first}\n{}", transcript());
    let (mut f, written) = follower_of_dir(root.path(), checkpoints.path());
    std::fs::write(&file, &whole.as_bytes()[..80_000]).unwrap();
    poll(&mut f);
    assert!(events(&written).is_empty(), "nothing to tell yet");
    std::fs::write(&file, &whole).unwrap();
    poll(&mut f);
    let expected = read_whole("s.jsonl", whole.as_bytes());
    assert!(!expected.is_empty());
    assert_wrote(&written, &expected, "the whole transcript, once told");
}

/// A file followed once with a --format that reads none of it, then without: it is read in the
/// format its start tells, not in the one its checkpoint remembers from the first run.
#[test]
fn a_format_forced_once_does_not_stay_with_the_file() {
    let root = tempfile::tempdir().unwrap();
    let cps = tempfile::tempdir().unwrap();
    let file = root.path().join("s.jsonl");
    std::fs::write(&file, transcript()).unwrap();
    let (mut f, written) = started(root.path(), cps.path());
    f.s.format = Some(Format::Codex);
    poll(&mut f);
    drop(f);
    assert!(events(&written).is_empty(), "none of it reads as codex");

    let more = transcript() + &transcript().replace("toolu_", "toolu_x");
    std::fs::write(&file, &more).unwrap();
    let (mut f, written) = started(root.path(), cps.path());
    poll(&mut f);
    assert_wrote(
        &written,
        &read_whole("s.jsonl", more.as_bytes()),
        "read as its start tells",
    );
}

/// `--out FILE` moved away while the follower runs (a log rotation): what was written stays in
/// the moved file, and the events that come next are written at FILE again, not into the
/// moved file where nobody looks for them.
#[test]
fn an_out_file_moved_away_is_written_at_its_path_again() {
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let file = root.path().join("s.jsonl");
    let out = elsewhere.path().join("events.jsonl");
    let (mut f, _) = follower_of_dir(root.path(), &elsewhere.path().join("cp"));
    f.out = Outlet::file(&out).unwrap();
    std::fs::write(&file, transcript()).unwrap();
    poll(&mut f);
    let first = std::fs::read_to_string(&out).unwrap();
    assert!(!first.is_empty());
    let rotated = elsewhere.path().join("events.jsonl.1");
    std::fs::rename(&out, &rotated).unwrap();
    let more = transcript() + &transcript().replace("toolu_", "toolu_x");
    std::fs::write(&file, &more).unwrap();
    poll(&mut f);
    assert_eq!(
        std::fs::read_to_string(&rotated).unwrap(),
        first,
        "left as it was"
    );
    let next = std::fs::read_to_string(&out).unwrap();
    let all: Vec<String> = first
        .lines()
        .chain(next.lines())
        .map(str::to_owned)
        .collect();
    assert_eq!(all, read_whole("s.jsonl", more.as_bytes()));
}

/// A transcript whose first line is still being written is waited for without a warning (the
/// usual state of a new one); a complete first line that tells no format is said.
#[test]
fn a_first_line_being_written_is_no_news_and_an_unknown_one_is_said() {
    let root = tempfile::tempdir().unwrap();
    let checkpoints = tempfile::tempdir().unwrap();
    let file = root.path().join("s.jsonl");
    let (mut f, written) = follower_of_dir(root.path(), checkpoints.path());
    let said = |f: &Follower| {
        f.files
            .get(&file)
            .is_some_and(|t| t.said.contains("format"))
    };
    std::fs::write(&file, r#"{"hello":"wor"#).unwrap();
    poll(&mut f);
    assert!(!said(&f), "half a line");
    std::fs::write(&file, "{\"hello\":\"world\"}\n").unwrap();
    poll(&mut f);
    assert!(said(&f), "a whole line no format knows");
    assert!(events(&written).is_empty());
}

/// A line written in pieces is read on from where the last poll stopped, not again from its
/// start: the follower holds what it read of it; a file cut within that line is read again from
/// the line's start. Either way the events are those of a whole read.
#[test]
fn a_line_written_in_pieces_is_read_once() {
    let sample = transcript();
    let lines: Vec<&str> = sample.split_inclusive('\n').collect();
    assert!(lines.len() > 4);
    let root = tempfile::tempdir().unwrap();
    let checkpoints = tempfile::tempdir().unwrap();
    let file = root.path().join("s.jsonl");
    let (mut f, written) = follower_of_dir(root.path(), checkpoints.path());
    let head = lines[..2].concat();
    std::fs::write(&file, &head).unwrap();
    poll(&mut f);
    let long = lines[2].as_bytes();
    let pieces = [long.len() / 4, long.len() / 2, long.len() - 1];
    let append = |bytes: &[u8]| {
        use std::io::Write as _;
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        w.write_all(bytes).unwrap();
    };
    let mut at = 0;
    for end in pieces {
        append(&long[at..end]);
        at = end;
        poll(&mut f);
        assert_eq!(f.files[&file].partial, long[..end], "held, read once");
    }
    // Cut within the line, then written again whole with the rest of the file.
    let f_len = head.len() + long.len() / 3;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(f_len as u64)
        .unwrap();
    poll(&mut f);
    append(&long[long.len() / 3..]);
    append(lines[3..].concat().as_bytes());
    poll(&mut f);
    assert!(f.files[&file].partial.is_empty());
    assert_wrote(
        &written,
        &read_whole("s.jsonl", sample.as_bytes()),
        "as a whole read",
    );
}
