//! The two input topics of a partition are applied merged by message timestamp, whatever order
//! the broker serves them in (Tansu serves a partition's whole announce backlog before the first
//! completion). Traffic whose outcome depends on that order must give the records of the events
//! applied in the order they were written.

use crate::harness::*;
use std::collections::BTreeSet;
use std::time::Duration;
use toolcalls_core::{Correlator, Effects, Position};
use toolcalls_model::{Event, EventKind};

/// Sessions of an id-less command run again and again (`ls /`, same arguments): run again after
/// its result came back, it is a new call; announced again while the first is pending, it is a
/// retry of that call. Every call takes 300 ms, the next starts a second after the last.
fn repeated_calls(prefix: &str, sessions: usize, calls: usize) -> Vec<Event> {
    let mut events = Vec::new();
    for s in 0..sessions {
        for c in 0..calls {
            let t = 1_767_225_600_000i64 + (c as i64) * 1000 + s as i64;
            let at = toolcalls_model::Timestamp::from_millis(t).to_rfc3339();
            let done = toolcalls_model::Timestamp::from_millis(t + 300).to_rfc3339();
            let a = format!(
                r#"{{"v":1,"kind":"announce","source":"synth","session":"{prefix}-s{s}","time":"{at}","tool":"ls","args":{{"path":"/"}}}}"#
            );
            let d = format!(
                r#"{{"v":1,"kind":"completion","source":"synth","session":"{prefix}-s{s}","time":"{done}","tool":"ls","result":{{"run":{c}}}}}"#
            );
            events.push(Event::decode(a.as_bytes()).expect("valid announce"));
            events.push(Event::decode(d.as_bytes()).expect("valid completion"));
        }
    }
    events.sort_by_key(|e| e.time);
    events
}

fn is_completion(e: &Event) -> bool {
    matches!(e.kind(), EventKind::Completion | EventKind::ExecutionEnd)
}

/// What a record says: its id, phase, output and how it was matched (strategy, confidence, how
/// many pending calls were candidates).
fn summary(json: &serde_json::Value) -> String {
    format!(
        "{} {} {} {}",
        json["metadata"]["name"],
        json["status"]["phase"],
        json["status"]["output"],
        json["correlation"]
    )
}

/// How many of `a`'s records `b` lacks.
fn missing(a: &BTreeSet<String>, b: &BTreeSet<String>) -> usize {
    a.difference(b).count()
}

/// The records of the events applied by one correlator in the order given, each topic's
/// offsets counted in that order.
fn correlate(s: &toolcalls_processor::config::Settings, events: &[&Event]) -> BTreeSet<String> {
    let mut next = [0i64; 2];
    let at: Vec<Position> = events
        .iter()
        .map(|e| {
            let t = usize::from(is_completion(e));
            next[t] += 1;
            Position::new(t as u16, next[t] - 1)
        })
        .collect();
    correlate_at(s, events, &at)
}

/// The records of `events` applied by one correlator in the order given, each at its position.
fn correlate_at(
    s: &toolcalls_processor::config::Settings,
    events: &[&Event],
    at: &[Position],
) -> BTreeSet<String> {
    let mut c = Correlator::new(s.core.clone());
    let mut fx = Effects::default();
    for (e, &pos) in events.iter().zip(at) {
        c.apply((*e).clone(), pos, &mut fx);
    }
    fx.records
        .iter()
        .map(|r| summary(&serde_json::to_value(r).unwrap()))
        .collect()
}

/// Starts a processor on `s` and checks that its records are `want`, the records of the events
/// in the order they happened; returns it running.
async fn processor_records_are(
    s: &toolcalls_processor::config::Settings,
    want: &BTreeSet<String>,
) -> toolcalls_processor::Running {
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let records = tokio::task::spawn_blocking({
        let (topic, n) = (s.topics.records.clone(), want.len());
        move || read_until(&topic, |r| r.len() >= n)
    })
    .await
    .unwrap();
    let got: BTreeSet<_> = records.iter().map(|r| summary(&r.json())).collect();
    assert!(
        got == *want,
        "the records of the events in the order they happened: {} of {} differ, e.g. {:?} instead of {:?}",
        missing(want, &got),
        want.len(),
        got.difference(want).next(),
        want.difference(&got).next()
    );
    running
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_two_topics_are_applied_in_timestamp_order() {
    timestamp_order(settings("align")).await;
}

/// Back-pressure holds a partition's input back without giving up the order: with room for a
/// handful of messages per partition, the topic the task waits for is still read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_pressure_keeps_timestamp_order() {
    let mut s = settings("align-bp");
    s.max_inflight_messages = 8;
    s.max_inflight_bytes = 4096;
    timestamp_order(s).await;
}

async fn timestamp_order(mut s: toolcalls_processor::config::Settings) {
    // Long enough that only the input itself (or the consumer's statistics) ends a wait.
    s.align_wait_ms = 60_000;
    create_topics(&s, 1).await;
    let events = repeated_calls(&s.group, 4, 50);

    // The order matters: applied topic by topic, the records differ.
    let in_order = correlate(&s, &events.iter().collect::<Vec<_>>());
    let (completions, announces): (Vec<&Event>, Vec<&Event>) =
        events.iter().partition(|e| is_completion(e));
    let topic_by_topic = correlate(&s, &[announces, completions].concat());
    assert_eq!(in_order.len(), 200, "every call gets its own result");
    assert!(
        missing(&in_order, &topic_by_topic) > 100,
        "the traffic is order-sensitive: {:?}",
        topic_by_topic.difference(&in_order).next()
    );

    // Written in event order, one millisecond apart.
    produce_events_timed(&s, &events);
    let running = processor_records_are(&s, &in_order).await;
    stop_in_time(running).await;
}

/// Live, an agent's announce and result go to two topics milliseconds apart, and the result may
/// reach the broker and the processor first, with the announce on its way. It waits for it:
/// statistics from before the announce came say the announce topic is caught up, and must not
/// be taken for the announce topic having nothing older. Applied first, the result and its copy
/// would make a waiting result with a duplicate (three events merged), not a call whose copy
/// of the result comes late (two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_comes_before_its_announce_live_waits_for_it() {
    let mut s = settings("align-live");
    // Long enough that a wait ends by the announce arriving, however slow the machine.
    s.align_wait_ms = 4_000;
    create_topics(&s, 1).await;
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let ops = running.http_addr;
    wait_until_async("ready", || async move {
        http_get(ops, "/readyz").await.0 == 200
    })
    .await;
    let sessions = 5;
    let producer = producer();
    for n in 0..sessions {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let line = |kind: &str, at: i64, extra: &str| {
            let time = toolcalls_model::Timestamp::from_millis(at).to_rfc3339();
            format!(
                r#"{{"v":1,"kind":"{kind}","source":"live","session":"live-{n}","callId":"c","time":"{time}"{extra}}}"#
            )
        };
        let result = line("completion", now + 1, r#","result":"ok""#);
        let announce = line("announce", now, r#","tool":"T","args":{}"#);
        let key = format!("live-{n}");
        for (topic, payload, at) in [
            (&s.topics.completion, &result, now + 1),
            (&s.topics.completion, &result, now + 1),
            (&s.topics.announce, &announce, now),
        ] {
            let record = rdkafka::producer::BaseRecord::to(topic)
                .key(&key)
                .payload(payload)
                .timestamp(at);
            producer.send(record).expect("enqueue");
            // The result is at the broker before the announce is sent.
            rdkafka::producer::Producer::flush(&producer, Duration::from_secs(30)).expect("flush");
        }
    }
    let records = tokio::task::spawn_blocking({
        let topic = s.topics.records.clone();
        move || read_until(&topic, |r| r.len() >= sessions)
    })
    .await
    .unwrap();
    for r in &records {
        let json = r.json();
        let merged = (
            &json["correlation"]["eventsMerged"],
            &json["correlation"]["duplicates"],
        );
        assert_eq!(
            merged,
            (&serde_json::json!(2), &serde_json::json!(0)),
            "{}",
            json["metadata"]["session"]
        );
    }
    stop_in_time(running).await;
}

/// The merge takes a topic partition to deliver messages in the order they were stamped, which
/// several producers writing one partition break: another producer's newer announce comes
/// before this one's older one. The processor counts and says it, with how far behind the late
/// message was and the option that copes with it; a message in order after it is not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_stamped_out_of_order_is_said_with_the_window_it_needs() {
    let s = settings("align-stamps");
    create_topics(&s, 1).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let announce = |session: &str, at: i64| {
        let time = toolcalls_model::Timestamp::from_millis(at).to_rfc3339();
        format!(
            r#"{{"v":1,"kind":"announce","source":"two","session":"{session}","callId":"c","time":"{time}","tool":"T","args":{{}}}}"#
        )
    };
    let producer = producer();
    // One producer's announce stamped 1.5 s after another's, delivered first; then one in order.
    for (session, at) in [("b", now + 1_500), ("a", now), ("c", now + 2_000)] {
        let payload = announce(session, at);
        let record = rdkafka::producer::BaseRecord::to(&s.topics.announce)
            .key(session)
            .payload(&payload)
            .timestamp(at);
        producer.send(record).expect("enqueue");
        rdkafka::producer::Producer::flush(&producer, Duration::from_secs(30)).expect("flush");
    }
    let proc = Proc::spawn(&s, "stamps", None);
    proc.wait_for_line("input out of timestamp order");
    let said = proc
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("input out of timestamp order"))
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(said.len(), 1, "{said:#?}");
    for want in [
        "behind_ms=1500",
        "messages=1",
        "max_disorder_ms=0",
        "--max-disorder",
    ] {
        assert!(said[0].contains(want), "{want}: {}", said[0]);
    }
    // Counted once: the message after it is in order, and the completion topic saw nothing.
    let count = |metrics: &str, topic: &str| {
        let series = format!("toolcalls_input_out_of_order_total{{topic=\"{topic}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&series)?.parse::<u64>().ok())
    };
    let http = proc.http;
    wait_until_async("all three announces applied", || async move {
        let (_, metrics) = http_get(http, "/metrics").await;
        metrics.contains("toolcalls_state_pending_calls{partition=\"0\"} 3")
    })
    .await;
    let (_, metrics) = http_get(http, "/metrics").await;
    assert_eq!(count(&metrics, &s.topics.announce), Some(1), "{metrics}");
    assert_eq!(count(&metrics, &s.topics.completion), Some(0), "{metrics}");
}

/// Two producers write the same partition, one of them 2.5 s behind: its announces reach the
/// announce topic after the other's newer ones, so that topic is not in timestamp order and the
/// merge alone would apply its results before their announces. With the reorder window as wide
/// as that, the processor gives the records of the events in the order they happened, and the
/// input counts as in order for the window (nothing out of order beyond it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_producers_on_one_partition_pair_as_they_happened_with_the_window() {
    let mut s = settings("align-two");
    s.core.max_disorder_ms = 3_000;
    create_topics(&s, 1).await;
    let events = repeated_calls(&s.group, 4, 50);
    let late =
        |e: &Event| e.session.as_str().ends_with("-s2") || e.session.as_str().ends_with("-s3");
    let arrival = |e: &Event| e.time.millis() + if late(e) { 2_500 } else { 0 };
    let (completions, mut announces): (Vec<&Event>, Vec<&Event>) =
        events.iter().partition(|e| is_completion(e));
    announces.sort_by_key(|e| arrival(e));

    // The merge of the two topics by timestamp, as the aligner makes it of a backlog, applies
    // some results before their announces: the records differ from those of the events in order.
    let merged = {
        let (mut a, mut c) = (announces.iter().peekable(), completions.iter().peekable());
        let mut out = Vec::new();
        loop {
            let take_announce = match (a.peek(), c.peek()) {
                (Some(x), Some(y)) => x.time <= y.time,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            out.push(*if take_announce { a.next() } else { c.next() }.unwrap());
        }
        out
    };
    let mut plain = s.clone();
    plain.core.max_disorder_ms = 0;
    // Each event at its offset in the topic it was written to, as the processor numbers them.
    let offset_of = |e: &Event| {
        let (t, topic) = if is_completion(e) {
            (1u16, &completions)
        } else {
            (0, &announces)
        };
        let i = topic.iter().position(|x| std::ptr::eq(*x, e)).unwrap();
        Position::new(t, i as i64)
    };
    let in_order = correlate_at(
        &plain,
        &events.iter().collect::<Vec<_>>(),
        &events.iter().map(offset_of).collect::<Vec<_>>(),
    );
    let by_merge = correlate_at(
        &plain,
        &merged,
        &merged.iter().map(|e| offset_of(e)).collect::<Vec<_>>(),
    );
    assert!(
        missing(&in_order, &by_merge) > 10,
        "the interleaving changes the records without the window: {} differ",
        missing(&in_order, &by_merge)
    );

    let producer = producer();
    for e in announces.iter().chain(&completions) {
        let topic = if is_completion(e) {
            &s.topics.completion
        } else {
            &s.topics.announce
        };
        let payload = e.encode();
        let record = rdkafka::producer::BaseRecord::to(topic)
            .key(e.session.as_str())
            .payload(&payload)
            .timestamp(e.time.millis());
        producer.send(record).expect("enqueue");
    }
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(30)).expect("flush");
    let running = processor_records_are(&s, &in_order).await;
    let (_, metrics) = http_get(running.http_addr, "/metrics").await;
    let series = format!(
        "toolcalls_input_out_of_order_total{{topic=\"{}\"}} 0",
        s.topics.announce
    );
    assert!(metrics.contains(&series), "within the window: {metrics}");
    stop_in_time(running).await;
}
