//! `toolcalls ingest --follow` against a real broker, killed with SIGKILL at seeded random moments
//! and restarted while real transcripts are being written, gives the processor the records a
//! one-shot `toolcalls ingest` of the finished files gives it:
//!
//! - a Claude Code projects folder: a transcript appended line by line (lines written in two
//!   pieces, so the follower meets half lines), and a second one that appears half way;
//! - a Gemini CLI session rewritten whole at every save (in place, so the follower meets
//!   half-written documents, or by rename), each call first saved `executing` and then with its
//!   result, followed through a glob;
//! - a Codex rollout written half way, truncated to nothing, and written again from its start.
//!
//! Records are compared without their provenance (where their inputs were read from) and their
//! count of repeats: the unacknowledged tail a killed follower sends again is counted there.

#[path = "processor/harness.rs"]
#[allow(dead_code)]
mod harness;

#[path = "support/scratch.rs"]
mod scratch;

use harness::*;
use scratch::Scratch;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use toolcalls_model::ToolCallRecord;
use toolcalls_processor::Settings;

const SEED: u64 = 0x5eed_f011;
/// SIGKILLs per scenario.
const KILLS: usize = 6;

/// splitmix64: the pauses and kill moments, the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One write of a scenario.
enum Action {
    /// Append bytes to a file (created if need be).
    Append(PathBuf, Vec<u8>),
    /// Cut a file to nothing.
    Truncate(PathBuf),
    /// Write a whole file in place (truncate, then two pieces).
    Rewrite(PathBuf, Vec<u8>),
    /// Write a whole file beside it and rename it over.
    Replace(PathBuf, Vec<u8>),
}

impl Action {
    fn run(&self, rng: &mut Rng) {
        let pause = |rng: &mut Rng| {
            std::thread::sleep(std::time::Duration::from_micros(rng.below(4000)));
        };
        match self {
            Action::Append(path, bytes) => {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap();
                let cut = rng.below(bytes.len() as u64) as usize;
                f.write_all(&bytes[..cut]).unwrap();
                pause(rng);
                f.write_all(&bytes[cut..]).unwrap();
            }
            Action::Truncate(path) => {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .unwrap()
                    .set_len(0)
                    .unwrap();
            }
            Action::Rewrite(path, bytes) => {
                let mut f = std::fs::File::create(path).unwrap();
                let cut = rng.below(bytes.len() as u64) as usize;
                f.write_all(&bytes[..cut]).unwrap();
                pause(rng);
                f.write_all(&bytes[cut..]).unwrap();
            }
            Action::Replace(path, bytes) => {
                let tmp = path.with_file_name(".saving.tmp");
                std::fs::write(&tmp, bytes).unwrap();
                std::fs::rename(&tmp, path).unwrap();
            }
        }
    }
}

/// `bytes` as lines, each with its newline.
fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// A follower process with its stderr in a file of its own.
struct Follower {
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Follower {
    fn new(s: &Settings, target: &Path, checkpoints: &Path, log: PathBuf) -> Follower {
        let args = [
            "ingest",
            "--follow",
            "--poll-interval",
            "20ms",
            "--checkpoint-dir",
            checkpoints.to_str().unwrap(),
            "--brokers",
            &s.brokers,
            "--announce-topic",
            &s.topics.announce,
            "--completion-topic",
            &s.topics.completion,
            target.to_str().unwrap(),
        ]
        .map(str::to_owned)
        .to_vec();
        let mut f = Follower {
            args,
            log,
            child: None,
        };
        f.start();
        f
    }

    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        self.child = Some(
            Command::new(env!("CARGO_BIN_EXE_toolcalls"))
                .env_clear()
                .env("RUST_LOG", "info")
                .args(&self.args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("toolcalls ingest --follow"),
        );
    }

    /// SIGKILL, once the follower runs (it said so), then a new follower.
    fn kill_and_restart(&mut self, starts: usize) {
        wait_until("the follower to start", || {
            std::fs::read_to_string(&self.log)
                .unwrap_or_default()
                .matches("following")
                .count()
                >= starts
        });
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        self.start();
    }

    fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// SIGTERM: it finishes what it is at and exits 0.
    fn stop(&mut self) {
        let mut child = self.child.take().unwrap();
        Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        let mut status = None;
        wait_until("the follower to exit after SIGTERM", || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        assert!(
            status.unwrap().success(),
            "follower exited {status:?}: {}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Whether the checkpoints say every file in `done` was read to its end (`size` bytes) and
/// delivered.
fn caught_up(checkpoints: &Path, done: &[(PathBuf, u64)]) -> bool {
    let Ok(entries) = std::fs::read_dir(checkpoints) else {
        return false;
    };
    let mut at: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for e in entries.flatten() {
        if e.path().extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let Ok(bytes) = std::fs::read(e.path()) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        at.insert(
            v["path"].as_str().unwrap().to_owned(),
            (v["position"].as_u64().unwrap(), v["size"].as_u64().unwrap()),
        );
    }
    done.iter().all(|(p, size)| {
        let p = std::path::absolute(p).unwrap();
        at.get(p.to_str().unwrap()) == Some(&(*size, *size))
    })
}

/// Runs `actions` with seeded pauses (up to `max_pause`) while a follower follows `target`, SIGKILLing it at
/// [`KILLS`] seeded moments; then waits until the files are delivered and stops it.
fn scenario(
    name: &str,
    s: &Settings,
    work: &Path,
    target: &Path,
    actions: &[Action],
    max_pause: std::time::Duration,
    rng: &mut Rng,
) -> String {
    let checkpoints = work.join(format!("{name}.checkpoints"));
    let log = work.join(format!("{name}.log"));
    let mut follower = Follower::new(s, target, &checkpoints, log.clone());
    let mut kills: Vec<usize> = Vec::new();
    while kills.len() < KILLS {
        let at = rng.below(actions.len() as u64) as usize;
        if !kills.contains(&at) {
            kills.push(at);
        }
    }
    let mut starts = 1;
    for (i, action) in actions.iter().enumerate() {
        action.run(rng);
        std::thread::sleep(max_pause.mul_f64(rng.below(1000) as f64 / 1000.0));
        if kills.contains(&i) {
            follower.kill_and_restart(starts);
            starts += 1;
        }
        assert!(
            follower.alive(),
            "{name}: the follower exited: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    let mut files: Vec<PathBuf> = actions
        .iter()
        .map(|a| match a {
            Action::Append(p, _)
            | Action::Truncate(p)
            | Action::Rewrite(p, _)
            | Action::Replace(p, _) => p.clone(),
        })
        .collect();
    files.sort();
    files.dedup();
    let done: Vec<(PathBuf, u64)> = files
        .into_iter()
        .map(|p| {
            let size = std::fs::metadata(&p).unwrap().len();
            (p, size)
        })
        .collect();
    wait_until(
        &format!("{name}: the follower to deliver every file"),
        || caught_up(&checkpoints, &done),
    );
    follower.stop();
    let log = std::fs::read_to_string(&log).unwrap();
    let runs = log.matches("following").count();
    assert_eq!(
        runs,
        KILLS + 1,
        "{name}: one start per kill, and the first:\n{log}"
    );
    log
}

/// A record as the two runs can compare it: without where its inputs were read from, and
/// without its counts of events merged and repeated, returned beside it. What a killed follower
/// sent again adds to those counts; so does a row that changed after it was sent (a Claude Code
/// progress row attached to its call's announce while the result was still to come), which the
/// follower sends again as it now reads.
fn comparable(r: &ToolCallRecord) -> (String, (String, u32)) {
    let mut r = r.clone();
    let merged = r.correlation.events_merged;
    r.provenance = Default::default();
    r.correlation.duplicates = 0;
    r.correlation.events_merged = 0;
    let key = format!(
        "{}/{}/{}",
        r.metadata.source, r.metadata.session, r.correlation.key
    );
    (key, (serde_json::to_string(&r).unwrap(), merged))
}

/// Starts a processor on `s`'s topics, waits until it committed every input, returns its
/// records.
fn records(s: &Settings) -> BTreeMap<String, (String, u32)> {
    let inputs =
        (read_to_end(&s.topics.announce).len() + read_to_end(&s.topics.completion).len()) as i64;
    let _running = Proc::spawn(s, "i0", None);
    wait_until("every input committed", || {
        committed_total(&s.group, &s.topics.announce)
            + committed_total(&s.group, &s.topics.completion)
            == inputs
    });
    read_to_end(&s.topics.records)
        .iter()
        .map(|m| comparable(&serde_json::from_slice(m.payload.as_deref().unwrap()).unwrap()))
        .collect()
}

/// The Gemini CLI session as saved along the way: the messages so far, each message with calls
/// first saved with its calls still `executing`, then done; the last save is the file itself.
fn gemini_saves(fixture: &[u8]) -> Vec<Vec<u8>> {
    let doc: serde_json::Value = serde_json::from_slice(fixture).unwrap();
    let messages = doc["messages"].as_array().unwrap();
    let mut saves = Vec::new();
    for i in 1..=messages.len() {
        let mut save = doc.clone();
        let mut upto: Vec<serde_json::Value> = messages[..i].to_vec();
        if upto[i - 1].get("toolCalls").is_some() {
            let mut executing = save.clone();
            executing["lastUpdated"] = upto[i - 1]["timestamp"].clone();
            let mut last = upto[i - 1].clone();
            for call in last["toolCalls"].as_array_mut().unwrap() {
                let call = call.as_object_mut().unwrap();
                call.remove("result");
                call.remove("timestamp");
                call.insert("status".into(), "executing".into());
            }
            let mut partial = upto.clone();
            partial[i - 1] = last;
            executing["messages"] = partial.into();
            saves.push(serde_json::to_vec_pretty(&executing).unwrap());
        }
        // Each save stamps the session anew, near its start: the fingerprint changes.
        save["lastUpdated"] = upto[i - 1]["timestamp"].clone();
        save["messages"] = std::mem::take(&mut upto).into();
        saves.push(serde_json::to_vec_pretty(&save).unwrap());
    }
    saves.pop();
    saves.push(fixture.to_vec());
    saves
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_killed_at_random_gives_the_records_of_a_one_shot_ingest() {
    let root = workspace_root().join("../shared/fixtures");
    if !root.exists() {
        eprintln!(
            "SKIPPED: {} is missing; this test reads the shared fixtures beside the project",
            root.display()
        );
        return;
    }
    tokio::task::spawn_blocking(move || run(&root))
        .await
        .unwrap();
}

fn ms(n: u64) -> std::time::Duration {
    std::time::Duration::from_millis(n)
}

fn run(root: &Path) {
    let followed = settings("follow");
    let oneshot = settings("oneshot");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(create_topics(&followed, 2));
    rt.block_on(create_topics(&oneshot, 2));
    let work = Scratch::new("follow");
    let mut rng = Rng(SEED);
    let four = "claude-code/agentcmd-full-session-four.jsonl";
    let spotter = "claude-code/spotter-tool-heavy.jsonl";
    let gemini = "gemini-cli/agentcmd-session-981c87cb.json";
    let codex = "codex/agentcmd-rollout-01997ea4.jsonl";

    // A Claude Code projects folder: one transcript appended line by line, a second one (in a
    // subfolder, as subagent files are) starting half way and growing alongside.
    let projects = work.join("projects");
    let (a, b) = (
        projects.join("-home-me-shop/four.jsonl"),
        projects.join("-home-me-shop/four/subagents/agent-spotter.jsonl"),
    );
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    let (la, lb) = (lines(&fixture(four)), lines(&fixture(spotter)));
    let mut actions = Vec::new();
    let half = la.len() / 2;
    for (i, line) in la.iter().enumerate() {
        actions.push(Action::Append(a.clone(), line.clone()));
        if i >= half && i - half < lb.len() {
            actions.push(Action::Append(b.clone(), lb[i - half].clone()));
        }
    }
    for line in lb.iter().skip(la.len() - half) {
        actions.push(Action::Append(b.clone(), line.clone()));
    }
    scenario(
        "claude-code",
        &followed,
        &work,
        &projects,
        &actions,
        ms(8),
        &mut rng,
    );

    // A Gemini CLI chats folder, followed through a glob; every save rewrites the session.
    let chats = work.join("gemini/tmp/cde6558/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let session = chats.join("session-981c87cb.json");
    let actions: Vec<Action> = gemini_saves(&fixture(gemini))
        .into_iter()
        .map(|save| match rng.below(2) {
            0 => Action::Rewrite(session.clone(), save),
            _ => Action::Replace(session.clone(), save),
        })
        .collect();
    assert!(actions.len() > 20, "{} saves", actions.len());
    let glob = work.join("gemini/tmp/*/chats/session-*.json");
    let log = scenario(
        "gemini-cli",
        &followed,
        &work,
        &glob,
        &actions,
        ms(40),
        &mut rng,
    );
    assert!(
        log.contains("another file at this path") && log.contains("rewritten or truncated"),
        "saves by rename and in place were both seen:\n{log}"
    );

    // A Codex rollout written to two thirds, truncated, and written again from its start.
    let rollout = work.join("rollout-2025-09-24T20-12-23-01997ea4.jsonl");
    let lc = lines(&fixture(codex));
    let mut actions: Vec<Action> = lc[..lc.len() * 2 / 3]
        .iter()
        .map(|l| Action::Append(rollout.clone(), l.clone()))
        .collect();
    actions.push(Action::Truncate(rollout.clone()));
    actions.extend(
        lc.iter()
            .map(|l| Action::Append(rollout.clone(), l.clone())),
    );
    let log = scenario(
        "codex",
        &followed,
        &work,
        &rollout,
        &actions,
        ms(8),
        &mut rng,
    );
    assert!(log.contains("rewritten or truncated"), "{log}");

    // The one-shot ingest of the finished files.
    for (format, file) in [
        ("claude-code", four),
        ("claude-code", spotter),
        ("gemini-cli", gemini),
        ("codex", codex),
    ] {
        let path = root.join(file);
        toolcalls_ok(&[
            "ingest",
            "-q",
            "--format",
            format,
            "--brokers",
            &oneshot.brokers,
            "--announce-topic",
            &oneshot.topics.announce,
            "--completion-topic",
            &oneshot.topics.completion,
            path.to_str().unwrap(),
        ]);
    }

    let sent = |s: &Settings| {
        read_to_end(&s.topics.announce).len() + read_to_end(&s.topics.completion).len()
    };
    let (sent_follow, sent_once) = (sent(&followed), sent(&oneshot));
    eprintln!(
        "the followers sent {sent_follow} events, the one-shot ingest {sent_once}: {} sent again",
        sent_follow as i64 - sent_once as i64
    );
    assert!(sent_follow >= sent_once);
    // Without checkpoints every restart would send its files again: 18 restarts, hundreds.
    assert!(
        sent_follow - sent_once < sent_once / 4,
        "only unacknowledged tails and changed rows are sent again"
    );

    let want = records(&oneshot);
    let got = records(&followed);
    assert!(want.len() > 50, "{} records", want.len());
    let mut problems = Vec::new();
    for (key, (record, merged)) in &want {
        match got.get(key) {
            Some((g, more)) if g == record && more >= merged => {}
            Some((g, more)) => problems.push(format!(
                "{key}: one-shot ({merged} events merged) {record}\n  followed ({more}) {g}"
            )),
            None => problems.push(format!("{key}: missing from the followed run")),
        }
    }
    for key in got.keys().filter(|k| !want.contains_key(*k)) {
        problems.push(format!("{key}: only in the followed run"));
    }
    assert!(
        problems.is_empty(),
        "{} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
