//! SIGKILL at four points of the batch cycle (and two in at-least-once mode), restart, and check
//! downstream.
//!
//! The first instance processes all announces and the first half of the results, and is killed at
//! its second hit of the failpoint; a restarted instance (same instance id, so it fences the
//! unfinished transaction) restores the pending calls from the changelog and finishes the rest.
//! Downstream (read_committed) must then hold every expected record key, as a distinct record, in
//! one version. Tansu shows aborted transactions to read_committed readers, so a batch that was
//! aborted (or fenced) can be seen next to its committed replay: the test allows such copies only
//! when they are byte-identical to the committed record, and counts them.

use crate::harness::*;

fn kill_and_restart(point: &str) {
    kill_and_restart_with(point, toolcalls_processor::Guarantee::ExactlyOnce);
}

fn kill_and_restart_with(point: &str, guarantee: toolcalls_processor::Guarantee) {
    let mut s = settings(&format!("kill-{point}"));
    s.commit_interval_ms = 50;
    s.guarantee = guarantee;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(create_topics(&s, 2));
    let (announces, completions) = synth(point, 6, 16);
    let half = completions.len() / 2;
    let want = expected_phases(&s.core, announces.iter().chain(&completions).cloned());
    assert_eq!(want.len(), completions.len());

    let quarter = half / 2;
    let mut first = Proc::spawn(&s, "i0", Some(&format!("{point}:2")));
    first.wait_for_line("processor started");
    // A first committed batch with records, then the batch the kill lands in.
    produce_events(&s, &announces);
    produce_events(&s, &completions[..quarter]);
    if point != "after_consume" {
        // The batch of the first quarter must be closed — its offsets committed — before the next
        // quarter is sent, so that the next quarter makes a batch of its own. That its records
        // can be read downstream is not enough: at-least-once, they are readable before their
        // batch commits.
        let (a, c) = (announces.len() as i64, quarter as i64);
        wait_until("the first batch with records to commit", || {
            committed_total(&s.group, &s.topics.announce) >= a
                && committed_total(&s.group, &s.topics.completion) >= c
        });
    }
    produce_events(&s, &completions[quarter..half]);
    first.wait_for_line(&format!("FAILPOINT {point}"));
    first.kill();

    produce_events(&s, &completions[half..]);
    let mut second = Proc::spawn(&s, "i0", None);
    let records_topic = s.topics.records.clone();
    let want_keys = want.clone();
    read_until(&records_topic, |r| {
        let keys: std::collections::BTreeSet<String> = r.iter().map(Msg::key_str).collect();
        want_keys.keys().all(|k| keys.contains(k))
    });
    assert!(
        second.terminate().success(),
        "the restarted processor did not shut down cleanly"
    );
    let records = read_to_end(&s.topics.records);
    let duplicates = check_downstream(&records, &want, false);
    eprintln!(
        "kill at {point} ({guarantee:?}): {} records, {duplicates} identical copies of replayed batches",
        records.len()
    );
    let dlq = read_to_end(&s.topics.dlq);
    assert!(
        dlq.is_empty(),
        "good input was dead-lettered: {:?}",
        dlq.first().map(|m| &m.headers)
    );
}

#[test]
fn sigkill_after_consume() {
    kill_and_restart("after_consume");
}

#[test]
fn sigkill_after_produce() {
    kill_and_restart("after_produce");
}

#[test]
fn sigkill_after_send_offsets() {
    kill_and_restart("after_send_offsets");
}

#[test]
fn sigkill_during_commit() {
    kill_and_restart("during_commit");
}

// At-least-once: outputs are flushed before offsets are committed, so a kill after producing
// replays the batch; the replay must give byte-identical records under the same keys, and the
// state written past the committed offsets must be ignored on restore.
#[test]
fn at_least_once_sigkill_after_consume() {
    kill_and_restart_with("after_consume", toolcalls_processor::Guarantee::AtLeastOnce);
}

#[test]
fn at_least_once_sigkill_after_produce() {
    kill_and_restart_with("after_produce", toolcalls_processor::Guarantee::AtLeastOnce);
}
