//! Which instance owns a session: two instances of one group, asked through their query APIs with
//! a real `curl`. Each names the same partition and owner; the owner answers for the session's
//! pending calls, the other says where to ask instead of answering `[]`.

use crate::harness::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use toolcalls_producer::{partition_of, PublishSettings, Publisher};

/// `curl` of `url`, its body as JSON (or as a string when it is not JSON).
fn curl_json(url: &str) -> (u16, Value) {
    let (code, body) = curl(url, &[]);
    let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (code, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_says_which_one_owns_a_session() {
    let s = settings("owner");
    let partitions = 4;
    create_topics(&s, partitions).await;
    // Announces only: the calls stay pending. Published as `toolcalls ingest` publishes (murmur2).
    let (announces, _) = synth("owner", 8, 2);
    tokio::task::spawn_blocking({
        let s = s.clone();
        let announces = announces.clone();
        move || {
            let p = Publisher::new(PublishSettings {
                brokers: s.brokers.clone(),
                announce_topic: s.topics.announce.clone(),
                completion_topic: s.topics.completion.clone(),
                kafka: Vec::new(),
                flush_timeout: Duration::from_secs(30),
            })
            .expect("publisher");
            for e in &announces {
                p.send(e, &e.encode()).expect("send");
            }
            p.finish().expect("delivered")
        }
    })
    .await
    .unwrap();
    // The partitioner of the producers is the one the processor computes with.
    let mut placed = BTreeMap::new();
    for m in read_to_end(&s.topics.announce) {
        placed.insert(m.key_str(), m.partition);
    }
    assert_eq!(placed.len(), 8);
    for (session, partition) in &placed {
        assert_eq!(
            partition_of(session.as_bytes(), partitions),
            *partition,
            "{session}"
        );
    }

    let mut s0 = s.clone();
    s0.instance_id = "i0".into();
    let mut s1 = s.clone();
    s1.instance_id = "i1".into();
    let a = toolcalls_processor::start(s0, prometheus::Registry::new())
        .await
        .expect("start i0");
    let b = toolcalls_processor::start(s1, prometheus::Registry::new())
        .await
        .expect("start i1");
    let apis = [a.api_addr.unwrap(), b.api_addr.unwrap()];
    let ids = ["i0", "i1"];

    let answers = tokio::task::spawn_blocking(move || {
        // Once the group has settled, every session is pending on exactly one instance.
        let mut owners = BTreeMap::new();
        wait_until("each session pending on one instance", || {
            owners.clear();
            placed.keys().all(|session| {
                let here: Vec<usize> = (0..2)
                    .filter(|&i| {
                        let (code, body) =
                            curl_json(&format!("http://{}/v1/sessions/{session}/pending", apis[i]));
                        code == 200 && body["pending"].as_array().is_some_and(|p| p.len() == 2)
                    })
                    .collect();
                if here.len() == 1 {
                    owners.insert(session.clone(), here[0]);
                }
                here.len() == 1
            })
        });
        let mut answers = Vec::new();
        for (session, &owner) in &owners {
            let other = 1 - owner;
            let pending =
                |i: usize| curl_json(&format!("http://{}/v1/sessions/{session}/pending", apis[i]));
            let asked =
                |i: usize| curl_json(&format!("http://{}/v1/sessions/{session}/owner", apis[i]));
            answers.push((
                session.clone(),
                owner,
                pending(other),
                asked(owner),
                asked(other),
            ));
        }
        (answers, placed)
    })
    .await
    .unwrap();
    let (answers, placed) = answers;
    let owning: std::collections::BTreeSet<usize> = answers.iter().map(|a| a.1).collect();
    assert_eq!(owning.len(), 2, "both instances own sessions: {answers:?}");
    // The owner's name as the other instance gives it: from the group's description, which
    // Apache Kafka fills in and Tansu leaves without assignments (then the reason is given).
    let named = |v: &Value, owner: usize| match &v["owner"] {
        Value::Null => {
            let why = v["ownerUnknownBecause"].as_str().unwrap_or_default();
            assert!(why.contains("assignments"), "no owner and no reason: {v}");
        }
        o => assert_eq!(o["instanceId"], ids[owner], "{v}"),
    };
    for (session, owner, (code, body), (c0, here), (c1, there)) in &answers {
        let partition = placed[session];
        assert_eq!(
            *code, 421,
            "the other instance does not answer `[]`: {body}"
        );
        assert_eq!(body["partition"], partition, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains(&format!("partition {partition}")),
            "{body}"
        );
        named(body, *owner);
        assert_eq!((*c0, *c1), (200, 200));
        for (answer, is_here) in [(here, true), (there, false)] {
            assert_eq!(answer["partition"], partition, "{answer}");
            assert_eq!(answer["partitions"], partitions, "{answer}");
            assert_eq!(answer["here"], is_here, "{answer}");
            assert_eq!(
                answer["instanceId"],
                ids[if is_here { *owner } else { 1 - *owner }]
            );
        }
        assert_eq!(here["owner"]["instanceId"], ids[*owner], "{here}");
        named(there, *owner);
    }
    a.stop().await.expect("stop i0");
    b.stop().await.expect("stop i1");
}
