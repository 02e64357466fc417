//! Records as OpenTelemetry spans, end to end: a real transcript through the processor, whose
//! spans a real Phoenix server (PyPI's `arize-phoenix`, installed by
//! `scripts/install-test-deps.sh`) receives over OTLP/HTTP and answers for on its REST API.

use crate::harness::*;
use crate::scratch::Scratch;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use toolcalls_adapters::{parse, Format, Options};

/// A Phoenix server on free ports with a database of its own, killed on drop.
struct Phoenix {
    child: Child,
    port: u16,
    _dir: Scratch,
}

impl Phoenix {
    fn start() -> Phoenix {
        let bin = workspace_root().join(".tools/phoenix/bin/phoenix");
        assert!(
            bin.exists(),
            "{} is missing: run scripts/install-test-deps.sh",
            bin.display()
        );
        let dir = Scratch::new("phoenix");
        let port = free_port();
        let log = std::fs::File::create(dir.join("phoenix.log")).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", &dir)
            // Phoenix notes its pid in the temporary directory, and a killed Phoenix leaves it.
            .env("TMPDIR", &dir)
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting phoenix");
        let mut phoenix = Phoenix {
            child,
            port,
            _dir: dir,
        };
        // Phoenix takes 15–30 s to start on this machine (database migrations, the UI).
        let deadline = std::time::Instant::now() + 3 * WAIT;
        while curl(&phoenix.url("/healthz"), &[]).0 != 200 {
            if let Some(status) = phoenix.child.try_wait().unwrap() {
                panic!("phoenix exited ({status}):\n{}", phoenix.log());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "phoenix did not answer on /healthz:\n{}",
                phoenix.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        phoenix
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.join("phoenix.log")).unwrap_or_default()
    }

    /// Every span of the default project, from Phoenix's REST API.
    fn spans(&self) -> Vec<Value> {
        let mut spans = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = self.url("/v1/projects/default/spans?limit=1000");
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let (status, body) = curl(&url, &[]);
            assert_eq!(status, 200, "{url}: {body}");
            let page: Value = serde_json::from_str(&body).expect("phoenix answers JSON");
            spans.extend(page["data"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return spans,
            }
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn metric(registry: &prometheus::Registry, name: &str, label: Option<&str>) -> f64 {
    registry
        .gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric())
        .filter(|m| label.is_none_or(|l| m.get_label().iter().any(|p| p.value() == l)))
        .map(|m| m.get_counter().get_value())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_is_a_span_in_phoenix() {
    let path = "claude-code/agentcmd-full-session-four.jsonl";
    let parsed = parse(
        Format::ClaudeCode,
        path,
        &fixture(path),
        &Options::default(),
    );
    assert!(parsed.errors.is_empty(), "{path}: {:?}", parsed.errors);
    // A secret in the arguments: the Bash commands are redacted before anything leaves.
    let commands: Vec<String> = parsed
        .events
        .iter()
        .filter_map(|e| match &e.body {
            toolcalls_model::EventBody::Announce(a) => a
                .args
                .as_ref()?
                .to_value()
                .get("command")?
                .as_str()
                .map(str::to_owned),
            _ => None,
        })
        .filter(|c| c.len() > 12)
        .collect();
    assert!(!commands.is_empty(), "the fixture runs Bash commands");

    let phoenix = tokio::task::spawn_blocking(Phoenix::start).await.unwrap();
    let mut s = settings("spans");
    s.spans.otlp_endpoint = Some(phoenix.url("/v1/traces"));
    s.redact.pointers = vec!["/command".into()];
    create_topics(&s, 2).await;
    produce_events(&s, &parsed.events);
    let registry = prometheus::Registry::new();
    let running = toolcalls_processor::start(s.clone(), registry.clone())
        .await
        .expect("start");

    let expected = toolcalls_core::replay(
        &s.core,
        parsed.events.clone(),
        toolcalls_core::FinishMode::Keep,
    )
    .records
    .len();
    let records: Vec<Value> = read_at_least(&s.topics.records, expected)
        .await
        .iter()
        .map(Msg::json)
        .collect();
    assert_eq!(records.len(), expected);

    let spans = tokio::task::spawn_blocking(move || {
        let mut spans = Vec::new();
        wait_until("phoenix to hold a span per record", || {
            spans = phoenix.spans();
            spans.len() >= expected
        });
        (spans, phoenix)
    })
    .await
    .unwrap();
    let (spans, phoenix) = spans;
    assert_eq!(spans.len(), expected, "one span per record, no more");
    assert_eq!(
        metric(&registry, "toolcalls_spans_exported_total", None),
        expected as f64
    );

    let by_record: BTreeMap<&str, &Value> = spans
        .iter()
        .map(|s| {
            (
                s["attributes"]["toolcalls.record.id"]
                    .as_str()
                    .expect("record id"),
                s,
            )
        })
        .collect();
    let mut traces = BTreeMap::new();
    let mut failed = 0;
    for r in &records {
        let id = r["metadata"]["name"].as_str().unwrap();
        let span = by_record
            .get(id)
            .unwrap_or_else(|| panic!("no span for record {id}"));
        let a = &span["attributes"];
        let tool = r["spec"]["toolRef"]["name"].as_str().unwrap();
        assert_eq!(span["name"], format!("execute_tool {tool}"), "{span}");
        assert_eq!(a["gen_ai.operation.name"], "execute_tool");
        assert_eq!(a["gen_ai.tool.name"], tool);
        assert_eq!(a["gen_ai.tool.call.id"], r["streamId"], "{span}");
        assert_eq!(a["gen_ai.conversation.id"], r["metadata"]["session"]);
        let session = r["metadata"]["session"].as_str().unwrap();
        let trace = toolcalls_processor::spans::session_trace(
            r["metadata"]["source"].as_str().unwrap(),
            session,
        )
        .to_string();
        assert_eq!(span["context"]["trace_id"], trace.as_str(), "{span}");
        traces.insert(trace, session);
        let ok = r["status"]["phase"] == "Succeeded" && r["status"]["isError"] != true;
        if !ok {
            failed += 1;
            assert_eq!(span["status_code"], "ERROR", "{span}");
            assert!(a["error.type"].is_string(), "{span}");
        } else {
            assert_ne!(span["status_code"], "ERROR", "{span}");
        }
        let time = |v: &Value| {
            toolcalls_model::Timestamp::parse_rfc3339(v.as_str().unwrap())
                .unwrap()
                .millis()
        };
        let start = r["status"]["startedAt"]
            .as_str()
            .map_or(time(&r["createdAt"]), |_| time(&r["status"]["startedAt"]));
        assert_eq!(time(&span["start_time"]), start, "{span}");
        if let Some(input) = r["spec"].get("input") {
            assert_eq!(
                a["gen_ai.tool.call.arguments"]
                    .as_str()
                    .and_then(|t| serde_json::from_str::<Value>(t).ok()),
                Some(input.clone()),
                "{span}"
            );
        }
    }
    assert!(
        failed > 0,
        "the fixture has failed calls, and they show as errors"
    );
    assert_eq!(traces.len(), 1, "one session, one trace: {traces:?}");

    let all = serde_json::to_string(&spans).unwrap();
    for c in &commands {
        assert!(
            !all.contains(c.as_str()),
            "a redacted command reached phoenix: {c}"
        );
    }
    assert!(all.contains("[REDACTED]"));
    running.stop().await.expect("clean stop");
    drop(phoenix);
}

/// A receiver that is down costs dropped spans, counted, and nothing else: every record is still
/// published, and the processor stops cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_drops_spans_not_records() {
    let mut s = settings("spans-down");
    let closed = free_port();
    s.spans.otlp_endpoint = Some(format!("http://127.0.0.1:{closed}"));
    s.spans.otlp_queue = 2;
    create_topics(&s, 2).await;
    let (announces, completions) = synth("spans-down", 3, 10);
    produce_events(&s, &announces);
    produce_events(&s, &completions);
    let registry = prometheus::Registry::new();
    let running = toolcalls_processor::start(s.clone(), registry.clone())
        .await
        .expect("start");
    let records = read_at_least(&s.topics.records, 30).await;
    assert_eq!(records.len(), 30);
    running.stop().await.expect("clean stop");
    let dropped = |reason| metric(&registry, "toolcalls_spans_dropped_total", Some(reason));
    assert_eq!(
        metric(&registry, "toolcalls_spans_exported_total", None),
        0.0
    );
    assert!(dropped("export_failed") > 0.0);
    assert_eq!(
        dropped("export_failed") + dropped("queue_full") + dropped("stopped"),
        30.0,
        "every span is exported or counted as dropped"
    );
}
