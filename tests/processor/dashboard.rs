//! Every PromQL expression of the Grafana dashboard (deploy/grafana/dashboards/toolcalls.json) and
//! of the alert rules (deploy/alerts.yml) returns data from a real Prometheus (Debian's
//! `prometheus`) that scraped a real run: two processor instances of one group, traffic that
//! completes calls, leaves calls pending and dead-letters a message, a rebalance whose new
//! owner restores pending calls from the changelog, a live follower (`ingest --follow`) that
//! delivers a file and leaves out an event too large for a Kafka message, and a receiver
//! (`receive`) that publishes a hook posted with `curl`.

use crate::harness::*;
use crate::scratch::Scratch;
use rdkafka::producer::{BaseRecord, Producer};
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What the dashboard's variables stand for in the test: every instance, and a rate window that
/// covers the whole run (Grafana's `$__rate_interval` is at least four scrape intervals; a window
/// longer than the run still sees every sample of it).
fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("${instance}", ".+")
        .replace("$instance", ".+")
        .replace("${follower}", ".+")
        .replace("$follower", ".+")
        .replace("${receiver}", ".+")
        .replace("$receiver", ".+")
}

/// The expressions of the dashboard: every panel target, and the instance variable's query.
/// `label_values(SELECTOR, LABEL)` is Grafana's, not PromQL: it is checked as SELECTOR, whose
/// series must carry LABEL.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {:?}: a target without expr", panel["title"]));
            out.push((substitute(expr), None));
        }
    }
    for var in dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
    {
        if var["type"] == "query" {
            let q = var["query"]["query"]
                .as_str()
                .or(var["query"].as_str())
                .expect("a variable query");
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or_else(|| panic!("variable query {q}: expected label_values(…)"));
            let (selector, label) = inner
                .rsplit_once(',')
                .expect("label_values(SELECTOR, LABEL)");
            out.push((selector.trim().to_owned(), Some(label.trim().to_owned())));
        }
    }
    out
}

/// The byte positions of `s` at its top level: outside parentheses, braces, brackets and strings.
fn top_level_positions(s: &str) -> Vec<usize> {
    let bytes = s.as_bytes();
    let mut depth = 0i32;
    let mut quote: Option<u8> = None;
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) => {
                if c == b'\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                b'"' | b'\'' | b'`' => quote = Some(c),
                b'(' | b'{' | b'[' => depth += 1,
                b')' | b'}' | b']' => depth -= 1,
                _ if depth == 0 => out.push(i),
                _ => {}
            },
        }
        i += 1;
    }
    out
}

/// `s` without one pair of parentheses around all of it.
fn unwrap_parens(s: &str) -> Option<&str> {
    let t = s.trim();
    if !(t.starts_with('(') && t.ends_with(')')) {
        return None;
    }
    // The opening parenthesis must close at the very end.
    let mut depth = 0;
    for (i, c) in t.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 && i != t.len() - 1 {
                    return None;
                }
            }
            _ => {}
        }
    }
    Some(&t[1..t.len() - 1])
}

/// Drops a leading vector-matching modifier (`on (…)`, `ignoring (…)`, `group_left (…)`,
/// `group_right (…)`, `bool`) from the right-hand side of a binary operator.
fn strip_modifiers(mut s: &str) -> &str {
    loop {
        let t = s.trim_start();
        let word = ["bool", "on", "ignoring", "group_left", "group_right"]
            .into_iter()
            .find(|w| {
                t.starts_with(w)
                    && t[w.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c == ' ' || c == '(')
            });
        let Some(word) = word else { return t };
        let rest = t[word.len()..].trim_start();
        s = if word == "bool" || !rest.starts_with('(') {
            rest
        } else {
            let close = rest.find(')').expect("a closing parenthesis");
            &rest[close + 1..]
        };
    }
}

/// The parts of an alert expression that must return data in a healthy run: each operand of its
/// top-level set operators (`and`, `or`, `unless`), with its comparison cut off. An alert fires on
/// what a comparison keeps, so in a healthy run the whole expression is legitimately empty; its
/// left-hand side is the measurement, and must not be.
fn operands(expr: &str) -> Vec<String> {
    if let Some(inner) = unwrap_parens(expr) {
        return operands(inner);
    }
    let positions = top_level_positions(expr);
    let bytes = expr.as_bytes();
    let is_word_boundary = |i: usize| i >= bytes.len() || matches!(bytes[i], b' ' | b'\n' | b'(');
    // Set operators at the top level, preceded by white space or a closing parenthesis.
    let mut cuts = Vec::new();
    for &i in &positions {
        for op in ["and", "or", "unless"] {
            if expr[i..].starts_with(op)
                && i > 0
                && matches!(bytes[i - 1], b' ' | b'\n' | b')')
                && is_word_boundary(i + op.len())
            {
                cuts.push((i, op.len()));
            }
        }
    }
    if !cuts.is_empty() {
        let mut out = Vec::new();
        let mut start = 0;
        for (at, len) in cuts {
            out.extend(operands(strip_modifiers(&expr[start..at])));
            start = at + len;
        }
        out.extend(operands(strip_modifiers(&expr[start..])));
        return out;
    }
    // A comparison at the top level: keep its measured side.
    for &i in &positions {
        let rest = &expr[i..];
        let op_len = ["==", "!=", ">=", "<="]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .map(str::len)
            .or_else(|| (rest.starts_with('>') || rest.starts_with('<')).then_some(1));
        if let Some(len) = op_len {
            let left = expr[..i].trim();
            let right = strip_modifiers(&expr[i + len..]).trim();
            let side = if left.parse::<f64>().is_ok() {
                right
            } else {
                left
            };
            return operands(side);
        }
    }
    vec![expr.trim().to_owned()]
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Evaluates `expr` now; the answer's `data.result`, or why there is none.
async fn query(prom: SocketAddr, expr: &str) -> Result<Vec<Value>, String> {
    if tokio::net::TcpStream::connect(prom).await.is_err() {
        return Err("prometheus is not listening yet".into());
    }
    let (status, body) = http_get(prom, &format!("/api/v1/query?query={}", encode(expr))).await;
    let v: Value =
        serde_json::from_str(&body).map_err(|e| format!("HTTP {status}: {e}: {body}"))?;
    if v["status"] != "success" {
        return Err(format!("HTTP {status}: {body}"));
    }
    v["data"]["result"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("not an instant vector: {body}"))
}

/// A finite sample value in `result` (Prometheus writes NaN and ±Inf as strings).
fn has_finite_value(result: &[Value]) -> bool {
    result.iter().any(|series| {
        series["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(f64::is_finite)
    })
}

/// Waits until `expr` returns at least one series with a finite value (and, with `label`, every
/// series carries that label); panics with the last answer after [`WAIT`].
async fn expect_data(prom: SocketAddr, expr: &str, label: Option<&str>) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let answer = query(prom, expr).await;
        let ok = match &answer {
            Ok(result) => {
                has_finite_value(result)
                    && label.is_none_or(|l| result.iter().all(|s| s["metric"][l].is_string()))
            }
            Err(_) => false,
        };
        if ok {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no data for `{expr}`{}: {answer:?}",
            label
                .map(|l| format!(" (with label {l})"))
                .unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The alerting rules Prometheus loaded, once each has been evaluated: (name, query, health).
async fn evaluated_rules(prom: SocketAddr) -> Vec<(String, String, String)> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (_, body) = http_get(prom, "/api/v1/rules?type=alert").await;
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        let all: Vec<&Value> = v["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().into_iter().flatten())
            .collect();
        let evaluated = |r: &&Value| {
            r["lastEvaluation"]
                .as_str()
                .is_some_and(|t| !t.starts_with("0001-"))
        };
        if !all.is_empty() && all.iter().all(evaluated) {
            return all
                .iter()
                .map(|r| {
                    let field = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
                    (field("name"), field("query"), field("health"))
                })
                .collect();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for prometheus to evaluate every alert rule: {body}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Publishes one announce per partition of the announce topic, with no result: calls every
/// partition keeps pending (and writes to its changelog). The key is the session, as the
/// processor requires; the partition is chosen, not hashed, so that every partition has one.
fn produce_pending(s: &toolcalls_processor::Settings, partitions: i32) {
    let p = producer();
    let t = toolcalls_model::Timestamp::from_millis(1_767_225_600_000).to_rfc3339();
    let payloads: Vec<(String, String)> = (0..partitions)
        .map(|part| {
            let session = format!("dash-pending-{part}");
            (
                session.clone(),
                format!(
                    r#"{{"v":1,"kind":"announce","source":"synth","session":"{session}","callId":"open-{part}","time":"{t}","tool":"Bash","args":{{"command":"sleep infinity"}}}}"#
                ),
            )
        })
        .collect();
    for (part, (session, payload)) in payloads.iter().enumerate() {
        p.send(
            BaseRecord::to(&s.topics.announce)
                .partition(part as i32)
                .key(session.as_str())
                .payload(payload.as_str()),
        )
        .map_err(|(e, _)| e)
        .expect("enqueue");
    }
    p.flush(Duration::from_secs(30)).expect("flush");
}

/// A running `toolcalls ingest --follow` or `toolcalls receive`, stopped when dropped.
struct Follower(std::process::Child);

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a follower of a file of Claude Code hook payloads in `dir`, publishing to the input
/// topics of `s` with a 2,000-byte message limit (one result is larger), its metrics on `addr`.
fn follow_hooks(s: &toolcalls_processor::Settings, dir: &std::path::Path, addr: &str) -> Follower {
    let lines = hooks_with_a_large_result("dash-follower");
    let sessions = dir.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(sessions.join("hooks.jsonl"), lines.join("\n") + "\n").unwrap();
    let log = std::fs::File::create(dir.join("follower.log")).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .env_clear()
        .args(["ingest", "--follow", "--format", "claude-code-hooks"])
        .args(["--brokers", &s.brokers])
        .args(["--announce-topic", &s.topics.announce])
        .args(["--completion-topic", &s.topics.completion])
        .args(["--kafka", "message.max.bytes=2000"])
        .args(["--metrics-addr", addr, "--poll-interval", "100ms"])
        .arg("--checkpoint-dir")
        .arg(dir.join("checkpoints"))
        .arg(&sessions)
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting the follower");
    Follower(child)
}

/// Starts a receiver publishing to the input topics of `s`, listening on `listen`, its metrics
/// on `metrics` (its log in `dir`).
fn receive(
    s: &toolcalls_processor::Settings,
    dir: &std::path::Path,
    (listen, metrics): (&str, &str),
) -> Follower {
    let log = std::fs::File::create(dir.join("receiver.log")).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .env_clear()
        .args(["receive", "--listen", listen, "--metrics-addr", metrics])
        .args(["--brokers", &s.brokers])
        .args(["--announce-topic", &s.topics.announce])
        .args(["--completion-topic", &s.topics.completion])
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting the receiver");
    Follower(child)
}

/// Reads the records topic until it holds `n` distinct record ids.
async fn wait_records(topic: &str, n: usize) {
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        read_until(&topic, |r| {
            r.iter().map(Msg::key_str).collect::<BTreeSet<_>>().len() >= n
        })
    })
    .await
    .expect("the reading thread");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_and_alert_expression_returns_data() {
    const PARTITIONS: i32 = 4;
    let mut base = settings("dash");
    // Span export on, to a port nobody listens on: the span series exist, and spans are dropped.
    base.spans.otlp_endpoint = Some(format!("http://127.0.0.1:{}/v1/traces", free_port()));
    create_topics(&base, PARTITIONS).await;
    let instance = |id: &str| {
        let mut s = base.clone();
        s.instance_id = id.into();
        s.http_addr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        s
    };
    let (sa, sb) = (instance("i0"), instance("i1"));
    let follower_addr = format!("127.0.0.1:{}", free_port());
    let receiver_addrs = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );

    // Prometheus scrapes both instances (the second is down until it starts), the follower and
    // the receiver (each down until it starts) every second, and evaluates deploy/alerts.yml
    // every second.
    let dir = Scratch::new("prometheus-dashboard");
    let config = dir.join("prometheus.yml");
    let rules = workspace_root().join("deploy/alerts.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: toolcalls\n    static_configs:\n      - targets: ['{}', '{}']\n\
             \x20 - job_name: toolcalls-producer\n    static_configs:\n      - targets: ['{}']\n\
             \x20 - job_name: toolcalls-receiver\n    static_configs:\n      - targets: ['{}']\n",
            rules.display(),
            sa.http_addr,
            sb.http_addr,
            follower_addr,
            receiver_addrs.1
        ),
    )
    .unwrap();
    let (prom_process, prom) = start_prometheus(&config, &dir).await;

    // The first instance, scraped before any traffic, so that every counter's rise is seen.
    let a = toolcalls_processor::start(sa.clone(), prometheus::Registry::new())
        .await
        .expect("start i0");
    let up_a = format!(r#"up{{job="toolcalls", instance="{}"}} == 1"#, sa.http_addr);
    let deadline = Instant::now() + WAIT;
    while !query(prom, &up_a).await.is_ok_and(|r| !r.is_empty()) {
        if Instant::now() >= deadline {
            let targets = http_get(prom, "/api/v1/targets").await.1;
            panic!("timed out waiting for prometheus to scrape i0; its targets say: {targets}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Completed calls, a call pending on every partition, and a message that is not JSON.
    let (announces, completions) = synth("dash1", 3, 3);
    produce_events(&base, &announces);
    produce_events(&base, &completions);
    produce_pending(&base, PARTITIONS);
    produce_raw(&base.topics.announce, Some(b"x"), Some(b"not json"));
    wait_records(&base.topics.records, 9).await;

    // The second instance joins: the partitions it takes over are restored from the changelog,
    // pending calls included.
    let b = toolcalls_processor::start(sb.clone(), prometheus::Registry::new())
        .await
        .expect("start i1");
    let reg_b = b.registry.clone();
    wait_until_async("i1 to own partitions, restored", || {
        let reg_b = reg_b.clone();
        async move {
            let sum = |name| toolcalls_processor::metrics::sum(&reg_b, name, &[]);
            sum("toolcalls_group_partitions_assigned") > 0.0
                && sum("toolcalls_ready") == 1.0
                && sum("toolcalls_restore_records_total") > 0.0
        }
    })
    .await;

    // More traffic, now spread over both instances, and another dead letter.
    let (announces, completions) = synth("dash2", 4, 3);
    produce_events(&base, &announces);
    produce_events(&base, &completions);
    produce_raw(&base.topics.completion, Some(b"y"), Some(b"{"));
    wait_records(&base.topics.records, 9 + 12).await;

    // A live follower delivers a file of hook payloads into the same topics; one result is larger
    // than its producer lets a message be, and is left out.
    let _follower = follow_hooks(&base, &dir, &follower_addr);
    expect_data(
        prom,
        r#"toolcalls_producer_events_sent_total{job="toolcalls-producer"} > 0"#,
        None,
    )
    .await;

    // A receiver publishes a hook payload posted to it.
    let _receiver = receive(&base, &dir, (&receiver_addrs.0, &receiver_addrs.1));
    let hook = r#"{"session_id":"dash-receiver","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/a"},"tool_use_id":"toolu_dash_r1"}"#;
    let url = format!("http://{}/v1/hooks/claude-code", receiver_addrs.0);
    tokio::task::spawn_blocking(move || {
        wait_until("the receiver to take a hook", || {
            curl(&url, &["--data-binary", hook]).0 == 204
        });
    })
    .await
    .unwrap();
    expect_data(
        prom,
        r#"toolcalls_receive_events_total{job="toolcalls-receiver"} > 0"#,
        None,
    )
    .await;

    // Every expression of the dashboard.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace_root().join("deploy/grafana/dashboards/toolcalls.json"))
            .expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() > 30, "{} dashboard queries", queries.len());
    for (expr, label) in &queries {
        expect_data(prom, expr, label.as_deref()).await;
    }

    // Every alert rule, as Prometheus loaded and evaluated it: healthy (no evaluation error),
    // and each measured operand returns data.
    let rules = evaluated_rules(prom).await;
    assert!(rules.len() >= 10, "{} alert rules loaded", rules.len());
    for (name, expr, health) in &rules {
        assert_eq!(health, "ok", "alert {name} (`{expr}`) is not healthy");
        let parts = operands(expr);
        assert!(!parts.is_empty(), "alert {name}: no operand in `{expr}`");
        for part in parts {
            expect_data(prom, &part, None).await;
        }
    }

    for running in [b, a] {
        stop_in_time(running).await;
    }
    drop(prom_process);
}

#[test]
fn alert_operands_are_the_measured_sides_of_each_comparison() {
    assert_eq!(
        operands(r#"up{job="toolcalls"} == 0"#),
        [r#"up{job="toolcalls"}"#]
    );
    assert_eq!(
        operands("sum by (reason) (rate(x_total[5m])) > 0"),
        ["sum by (reason) (rate(x_total[5m]))"]
    );
    // As Prometheus prints a rule with parentheses, a vector match and an `unless`.
    assert_eq!(
        operands(
            r#"(max by (instance, partition) (lag_records) > 0) and on (instance, partition) lag_seconds unless on (instance) (sum by (instance) (rate(input_total{kind!="invalid"}[5m])) > 0)"#
        ),
        [
            "max by (instance, partition) (lag_records)",
            "lag_seconds",
            r#"sum by (instance) (rate(input_total{kind!="invalid"}[5m]))"#,
        ]
    );
    assert_eq!(
        operands("max(bytes) > 0.8 * 268435456 or max(calls) > 0.8 * 100000"),
        ["max(bytes)", "max(calls)"]
    );
    // A number on the left: the measured side is the right one; `or` inside a metric name or a
    // label value is no operator.
    assert_eq!(
        operands(r#"300 < bool errors_total{reason="or"}"#),
        [r#"errors_total{reason="or"}"#]
    );
    assert_eq!(
        operands("histogram_quantile(0.99, sum by (instance, le) (rate(d_bucket[5m]))) > 1"),
        ["histogram_quantile(0.99, sum by (instance, le) (rate(d_bucket[5m])))"]
    );
}
