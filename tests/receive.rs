//! `toolcalls receive` against a real broker, driven as agents drive it:
//!
//! - a real `curl` posts each Claude Code hook payload of a hook log (deploy/demo's) as a hook
//!   command does, one request per payload; the OpenTelemetry Python SDK's OTLP/HTTP exporter
//!   posts GenAI `execute_tool` spans (protobuf, gzip); `curl` posts OTLP JSON (deflate) and v1
//!   events. The
//!   processor's records equal those of `toolcalls ingest` of the same payloads (the hook
//!   records up to their times: hook payloads carry none, the receiver stamps the receive time
//!   where ingest stamps the line number);
//! - bad payloads are answered 400 with the reason and publish nothing, a body over the limit
//!   (as sent or decompressed) 413, an encoding the receiver does not read 415, a request
//!   without the token 401; a listener beyond loopback without a token is refused.
//!
//! Needs `curl` and the OpenTelemetry SDK that scripts/install-test-deps.sh installs under
//! .tools/otel.

#[path = "processor/harness.rs"]
#[allow(dead_code)]
mod harness;

#[path = "support/scratch.rs"]
mod scratch;

use harness::*;
use scratch::Scratch;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use toolcalls_processor::Settings;

/// A `toolcalls receive` child process, its stderr collected; killed on drop.
struct Receiver {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    url: String,
    metrics: Option<String>,
}

impl Receiver {
    fn start(s: &Settings, extra: &[&str]) -> Receiver {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .env_clear()
            .env("RUST_LOG", "info")
            .args([
                "receive",
                "--listen",
                "127.0.0.1:0",
                "--metrics-addr",
                "127.0.0.1:0",
                "--brokers",
                &s.brokers,
                "--announce-topic",
                &s.topics.announce,
                "--completion-topic",
                &s.topics.completion,
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("toolcalls receive");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut r = Receiver {
            child,
            log,
            url: String::new(),
            metrics: None,
        };
        let after = |log: &[String], needle: &str| {
            log.iter()
                .find_map(|l| l.split_once(needle).map(|(_, a)| a.trim().to_owned()))
        };
        wait_until("the receiver to listen", || {
            assert!(
                r.child.try_wait().unwrap().is_none(),
                "the receiver exited: {}",
                r.log_text()
            );
            after(&r.log.lock().unwrap(), "listening on ").is_some()
        });
        let log = r.log.lock().unwrap().clone();
        r.url = format!("http://{}", after(&log, "listening on ").unwrap());
        r.metrics = after(&log, "metrics on ");
        r
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// SIGTERM: it finishes what is in flight, flushes and exits 0.
    fn stop(mut self) {
        Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        let mut status = None;
        wait_until("the receiver to exit after SIGTERM", || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        assert!(
            status.unwrap().success(),
            "receiver exited {status:?}: {}",
            self.log_text()
        );
        wait_until("the receiver's last words", || {
            self.log_text().contains("stopped")
        });
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `curl` gave: the HTTP status, the body, and curl's own exit status.
struct Curl {
    status: u16,
    /// The body as text (lossy), and as it came.
    body: String,
    raw: Vec<u8>,
    ok: bool,
}

/// `curl -sS ARGS… URL` with `stdin` as its standard input; the status comes from `-w`.
fn curl(args: &[&str], url: &str, stdin: &[u8]) -> Curl {
    let mut child = Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "60"])
        .args(args)
        .arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl (is it installed?)");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let at = out.stdout.iter().rposition(|&b| b == b'\n').unwrap();
    let (raw, code) = (&out.stdout[..at], &out.stdout[at + 1..]);
    Curl {
        status: String::from_utf8_lossy(code).trim().parse().unwrap_or(0),
        body: String::from_utf8_lossy(raw).into_owned(),
        raw: raw.to_vec(),
        ok: out.status.success(),
    }
}

fn python_otel() -> PathBuf {
    let p = workspace_root().join(".tools/otel/bin/python");
    assert!(
        p.exists(),
        "no OpenTelemetry SDK at {}: run scripts/install-test-deps.sh",
        p.display()
    );
    p
}

/// Makes GenAI `execute_tool` spans with the OpenTelemetry Python SDK: exports the first batch
/// with its OTLP/HTTP protobuf exporter, gzip-compressed, to `endpoint` (failing unless the
/// export succeeded),
/// and writes both batches as OTLP JSON lines, the second pretty-printed, for ingest and curl.
const OTEL_SCRIPT: &str = r#"
import json, sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.trace import Status, StatusCode

endpoint, token, exported_path, pretty_path = sys.argv[1:5]

def spans(conversation, prefix):
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("toolcalls-receive-test")
    def tool(name, call_id, args):
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                 "gen_ai.conversation.id": conversation, "gen_ai.agent.name": "weather-bot",
                 "gen_ai.tool.call.arguments": json.dumps(args)}
        if call_id:
            attrs["gen_ai.tool.call.id"] = call_id
        return tracer.start_as_current_span("execute_tool " + name, attributes=attrs)
    with tracer.start_as_current_span("invoke_agent weather-bot",
                                      attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tool("get_weather", prefix + "_1", {"city": "Paris"}) as s:
            s.set_attribute("gen_ai.tool.call.result", '{"temp": 21}')
            s.set_attribute("attempt", 1)
        with tool("send_email", prefix + "_2", {"to": "ops@example.com"}) as s:
            s.set_status(Status(StatusCode.ERROR, "smtp unreachable"))
            s.set_attribute("error.type", "ConnectionError")
        with tool("lookup", None, {"q": "umbrella"}):
            pass
    provider.shutdown()
    return memory.get_finished_spans()

def any_value(v):
    if isinstance(v, bool): return {"boolValue": v}
    if isinstance(v, int): return {"intValue": str(v)}
    if isinstance(v, float): return {"doubleValue": v}
    return {"stringValue": str(v)}

def otlp_json(batch):
    out = []
    for s in batch:
        span = {"traceId": format(s.context.trace_id, "032x"), "spanId": format(s.context.span_id, "016x"),
                "name": s.name, "startTimeUnixNano": str(s.start_time), "endTimeUnixNano": str(s.end_time),
                "attributes": [{"key": k, "value": any_value(v)} for k, v in s.attributes.items()],
                "status": {"code": s.status.status_code.value, "message": s.status.description or ""}}
        if s.parent is not None:
            span["parentSpanId"] = format(s.parent.span_id, "016x")
        out.append(span)
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "toolcalls-receive-test"}, "spans": out}]}]}

exported = spans("conv-py", "call_py")
headers = {"Authorization": "Bearer " + token} if token else None
result = OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=30,
                          compression=Compression.Gzip).export(exported)
if result != SpanExportResult.SUCCESS:
    sys.exit("the OTLP export failed: %s" % result)
with open(exported_path, "w") as f:
    f.write(json.dumps(otlp_json(exported)) + "\n")
with open(pretty_path, "w") as f:
    f.write(json.dumps(otlp_json(spans("conv-json", "call_js")), indent=2))
"#;

/// A record as both runs can compare it: without where its inputs were read from, and, for the
/// hook records, without its times (the receive time against ingest's line numbers).
fn comparable(bytes: &[u8]) -> (String, String) {
    let mut r: Value = serde_json::from_slice(bytes).unwrap();
    r.as_object_mut().unwrap().remove("provenance");
    let key = format!(
        "{}/{}/{}",
        r["metadata"]["source"].as_str().unwrap(),
        r["metadata"]["session"].as_str().unwrap(),
        r["correlation"]["key"].as_str().unwrap_or("")
    );
    if r["metadata"]["source"] == "claude-code" {
        untimed(&mut r);
    }
    (key, r.to_string())
}

/// Every time in `v` (an RFC 3339 string, or a duration in ms) made the same.
fn untimed(v: &mut Value) {
    match v {
        Value::String(s) if toolcalls_model::Timestamp::parse_rfc3339(s).is_ok() => {
            *s = "<time>".into()
        }
        Value::Array(a) => a.iter_mut().for_each(untimed),
        Value::Object(o) => {
            for (k, v) in o.iter_mut() {
                if k == "durationMs" {
                    *v = Value::from(0);
                } else {
                    untimed(v);
                }
            }
        }
        _ => {}
    }
}

/// Starts a processor on `s`'s topics, waits until it committed every input, returns its
/// records.
fn records(s: &Settings) -> BTreeMap<String, String> {
    let inputs = sent(s) as i64;
    let _running = Proc::spawn(s, "i0", None);
    wait_until("every input committed", || {
        committed_total(&s.group, &s.topics.announce)
            + committed_total(&s.group, &s.topics.completion)
            == inputs
    });
    read_to_end(&s.topics.records)
        .iter()
        .map(|m| comparable(m.payload.as_deref().unwrap()))
        .collect()
}

fn sent(s: &Settings) -> usize {
    read_to_end(&s.topics.announce).len() + read_to_end(&s.topics.completion).len()
}

fn topics(name: &str) -> Settings {
    let s = settings(name);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(create_topics(&s, 2));
    s
}

fn ingest(s: &Settings, format: &str, files: &[&Path]) {
    let mut args = vec![
        "ingest".to_owned(),
        "-q".into(),
        "--format".into(),
        format.into(),
        "--brokers".into(),
        s.brokers.clone(),
        "--announce-topic".into(),
        s.topics.announce.clone(),
        "--completion-topic".into(),
        s.topics.completion.clone(),
    ];
    args.extend(files.iter().map(|f| f.display().to_string()));
    toolcalls_ok(&args);
}

#[test]
fn hooks_spans_and_events_give_the_records_of_ingest() {
    let received = topics("recv");
    let once = topics("once");
    let work = Scratch::new("receive");
    let r = Receiver::start(&received, &[]);

    // The hook log of the demo, one payload per request, as Claude Code's hook command posts it.
    let hook_log = workspace_root().join("deploy/demo/claude-code-hooks.jsonl");
    let hooks_url = format!("{}/v1/hooks/claude-code", r.url);
    let payloads = std::fs::read(&hook_log).unwrap();
    let mut posted = 0;
    for payload in payloads.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let c = curl(&["-f", "--data-binary", "@-"], &hooks_url, payload);
        assert!(
            c.ok && c.status == 204 && c.body.is_empty(),
            "{} {}",
            c.status,
            c.body
        );
        posted += 1;
    }
    assert_eq!(posted, 14);

    // Spans from the OpenTelemetry SDK's OTLP/HTTP exporter (protobuf, gzip), then OTLP JSON by
    // curl (deflate).
    let exported = work.join("exported.jsonl");
    let pretty = work.join("pretty.json");
    let out = Command::new(python_otel())
        .env_clear()
        .arg("-c")
        .arg(OTEL_SCRIPT)
        .arg(format!("{}/v1/traces", r.url))
        .arg("")
        .args([&exported, &pretty])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the OpenTelemetry SDK: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deflated = {
        use std::io::Write as _;
        let mut w = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        w.write_all(&std::fs::read(&pretty).unwrap()).unwrap();
        w.finish().unwrap()
    };
    let c = curl(
        &[
            "-H",
            "Content-Type: application/json",
            "-H",
            "Content-Encoding: deflate",
            "--data-binary",
            "@-",
        ],
        &format!("{}/v1/traces", r.url),
        &deflated,
    );
    assert_eq!((c.status, c.body.as_str()), (200, "{}"));

    // v1 events as JSON lines, one request.
    let (announces, completions) = synth("recv-events", 2, 3);
    let events: Vec<_> = announces.into_iter().chain(completions).collect();
    let lines: Vec<u8> = events
        .iter()
        .flat_map(|e| [e.encode(), b"\n".to_vec()].concat())
        .collect();
    let c = curl(
        &["--data-binary", "@-"],
        &format!("{}/v1/events", r.url),
        &lines,
    );
    assert_eq!(
        (c.status, c.body.as_str()),
        (200, r#"{"accepted":12}"#),
        "{}",
        c.body
    );

    let metrics = http_text(r.metrics.as_deref().unwrap());
    for line in [
        r#"toolcalls_receive_requests_total{route="hooks/claude-code",status="204"} 14"#,
        r#"toolcalls_receive_requests_total{route="traces",status="200"} 2"#,
        r#"toolcalls_receive_events_total{route="traces"} 12"#,
        r#"toolcalls_receive_events_total{route="events"} 12"#,
        // The series the alerts watch are there before their first count.
        r#"toolcalls_receive_requests_total{route="hooks/claude-code",status="503"} 0"#,
        r#"toolcalls_receive_requests_total{route="traces",status="401"} 0"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    r.stop();

    // The same payloads through `toolcalls ingest`, and the v1 events as they are.
    ingest(&once, "claude-code-hooks", &[&hook_log]);
    ingest(&once, "otel", &[&exported, &pretty]);
    produce_events(&once, &events);
    assert_eq!(sent(&received), sent(&once), "as many events both ways");

    let want = records(&once);
    let got = records(&received);
    let by_source = |m: &BTreeMap<String, String>, source: &str| {
        m.keys().filter(|k| k.starts_with(source)).count()
    };
    // The demo: four calls succeed, one fails; the one denied and the one still running when
    // the turn ends have no record before the turn's grace (a month here). Three calls per batch
    // of spans; six synthetic calls.
    assert_eq!(
        (
            by_source(&want, "claude-code/"),
            by_source(&want, "otel/"),
            by_source(&want, "synth/")
        ),
        (5, 6, 6),
        "records: {:?}",
        want.keys().collect::<Vec<_>>()
    );
    let mut problems = Vec::new();
    for (key, record) in &want {
        match got.get(key) {
            Some(g) if g == record => {}
            Some(g) => problems.push(format!("{key}:\n  ingest  {record}\n  receive {g}")),
            None => problems.push(format!("{key}: missing from the received run")),
        }
    }
    for key in got.keys().filter(|k| !want.contains_key(*k)) {
        problems.push(format!("{key}: only in the received run"));
    }
    assert!(
        problems.is_empty(),
        "{} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// `GET url`: the body of a 200.
fn http_text(url: &str) -> String {
    let c = curl(&[], url, b"");
    assert_eq!(c.status, 200, "{}", c.body);
    c.body
}

#[test]
fn bad_payloads_are_refused_and_publish_nothing() {
    let s = topics("recv-bad");
    let token = "t0ken-for-the-test";
    let r = Receiver::start(
        &s,
        &[
            "--token",
            token,
            "--max-body-bytes",
            "4096",
            "--kafka",
            "message.max.bytes=2000",
        ],
    );
    let auth = format!("Authorization: Bearer {token}");
    let hook = r#"{"session_id":"bad","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_bad_1"}"#;
    let event = r#"{"v":1,"kind":"announce","source":"t","session":"bad","callId":"c1","time":"2026-01-01T00:00:00Z","tool":"ls"}"#;
    let url = |route: &str| format!("{}{route}", r.url);

    // No token, a wrong one: 401, whatever the route.
    for route in ["/v1/hooks/claude-code", "/v1/traces", "/v1/events"] {
        let c = curl(&["--data-binary", "@-"], &url(route), hook.as_bytes());
        assert_eq!(c.status, 401, "{route}: {}", c.body);
        assert!(c.body.contains("--token"), "{}", c.body);
        let c = curl(
            &["-H", "Authorization: Bearer wrong", "--data-binary", "@-"],
            &url(route),
            hook.as_bytes(),
        );
        assert_eq!(c.status, 401, "{route}: {}", c.body);
    }
    assert!(
        !r.log_text().contains(token),
        "the token is never logged:\n{}",
        r.log_text()
    );

    let post = |route: &str, headers: &[&str], body: &[u8]| {
        let mut args = vec!["-H", auth.as_str(), "--data-binary", "@-"];
        for h in headers {
            args.extend(["-H", h]);
        }
        curl(&args, &url(route), body)
    };
    let reason = |c: &Curl| -> String {
        let v: Value = serde_json::from_str(&c.body).unwrap_or_else(|_| panic!("{}", c.body));
        v["error"].as_str().unwrap().to_owned()
    };
    // A good payload beside a bad one: 400 naming the bad one, and nothing published.
    let c = post(
        "/v1/hooks/claude-code",
        &[],
        format!("{hook}\n{{\"session_id\":\"bad\",\"tool_name\":\"Bash\"}}\n").as_bytes(),
    );
    assert_eq!(c.status, 400);
    assert!(
        reason(&c).contains("request:2") && reason(&c).contains("hook_event_name"),
        "{}",
        c.body
    );
    let c = post("/v1/hooks/claude-code", &[], b"{not json");
    assert_eq!(c.status, 400);
    assert!(reason(&c).contains("not JSON"), "{}", c.body);
    let c = post(
        "/v1/events",
        &[],
        format!("{event}\n{{\"v\":1,\"kind\":\"announce\"}}\n").as_bytes(),
    );
    assert_eq!(c.status, 400);
    assert!(reason(&c).starts_with("line 2: "), "{}", c.body);
    let nameless = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[
        {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"execute_tool get","startTimeUnixNano":"1775044801000000000","endTimeUnixNano":"1775044802000000000"},
        {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b175","name":"x","startTimeUnixNano":"1775044801000000000","endTimeUnixNano":"1775044802000000000","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}}]}]}]}]}"#;
    let c = post(
        "/v1/traces",
        &["Content-Type: application/json"],
        nameless.as_bytes(),
    );
    assert_eq!(c.status, 400);
    assert!(reason(&c).contains("names no tool"), "{}", c.body);
    let c = post("/v1/traces", &["Content-Type: application/json"], b"[1]");
    assert_eq!(c.status, 400);
    assert!(reason(&c).contains("resourceSpans"), "{}", c.body);
    // A refused protobuf request is answered with a protobuf `google.rpc.Status`, as OTLP/HTTP
    // asks (its field 2, the message, is all an exporter logs).
    #[derive(Clone, PartialEq, prost::Message)]
    struct Status {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }
    // Its code is the gRPC code of the HTTP status: 3 (INVALID_ARGUMENT) for 400 and 415, 16
    // (UNAUTHENTICATED) for 401; never 0, which says OK.
    let status_of = |c: &Curl| -> String {
        use prost::Message as _;
        let status = Status::decode(&c.raw[..])
            .unwrap_or_else(|e| panic!("not a google.rpc.Status ({e}): {}", c.body));
        let code = match c.status {
            400 | 415 => 3,
            401 => 16,
            other => panic!("{other}"),
        };
        assert_eq!(status.code, code, "{}", c.body);
        status.message
    };
    let protobuf = "Content-Type: application/x-protobuf";
    let c = post("/v1/traces", &[protobuf], b"\x0a\xff\xff\xff");
    assert_eq!(c.status, 400);
    assert!(status_of(&c).contains("protobuf"), "{}", c.body);
    let c = post(
        "/v1/traces",
        &[protobuf, "Content-Encoding: br"],
        b"\x1f\x8b",
    );
    assert_eq!(c.status, 415);
    assert!(
        status_of(&c).contains("`br` is not supported"),
        "{}",
        c.body
    );
    let c = curl(
        &["-H", protobuf, "--data-binary", "@-"],
        &url("/v1/traces"),
        b"",
    );
    assert_eq!(c.status, 401);
    assert!(status_of(&c).contains("--token"), "{}", c.body);
    // The adapters' advice to a user of files is not given to a request.
    let c = post("/v1/hooks/claude-code", &[], b"{\"session_id\":");
    assert_eq!(c.status, 400);
    assert!(
        reason(&c).contains("not JSON") && !reason(&c).contains("--format"),
        "{}",
        c.body
    );
    // Another path, or another method, is answered with why, as every refusal is.
    let c = post("/v1/hooks/claude-code/", &[], hook.as_bytes());
    assert_eq!(c.status, 404);
    assert!(
        reason(&c).contains("no route /v1/hooks/claude-code/"),
        "{}",
        c.body
    );
    let c = curl(&["-H", auth.as_str()], &url("/v1/events"), b"");
    assert_eq!(c.status, 405);
    assert!(reason(&c).contains("send POST"), "{}", c.body);
    // Every route reads gzip and deflate, and nothing else: a body that is not what its
    // Content-Encoding says is 400, one that decompresses past --max-body-bytes 413 (a bomb of
    // zeros costs the receiver the limit), an encoding it does not read 415.
    let gzip = |bytes: &[u8]| {
        use std::io::Write as _;
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        w.write_all(bytes).unwrap();
        w.finish().unwrap()
    };
    for route in ["/v1/hooks/claude-code", "/v1/events"] {
        let c = post(route, &["Content-Encoding: gzip"], hook.as_bytes());
        assert_eq!(c.status, 400, "{route}: {}", c.body);
        assert!(reason(&c).contains("not valid gzip"), "{}", c.body);
        let c = post(
            route,
            &["Content-Encoding: deflate"],
            &gzip(hook.as_bytes()),
        );
        assert_eq!(c.status, 400, "{route}: {}", c.body);
        let c = post(route, &["Content-Encoding: gzip"], &gzip(&[b' '; 1 << 20]));
        assert_eq!(c.status, 413, "{route}: {}", c.body);
        assert!(
            reason(&c).contains("decompresses to more than 4096"),
            "{}",
            c.body
        );
        let c = post(route, &["Content-Encoding: zstd"], hook.as_bytes());
        assert_eq!(c.status, 415, "{route}: {}", c.body);
        assert!(
            reason(&c).contains("gzip, deflate or uncompressed"),
            "{}",
            c.body
        );
    }
    // Every Content-Encoding line counts: a body compressed twice is not read once.
    let twice = gzip(&gzip(hook.as_bytes()));
    let c = post(
        "/v1/hooks/claude-code",
        &["Content-Encoding: gzip", "Content-Encoding: gzip"],
        &twice,
    );
    assert_eq!(c.status, 415, "{}", c.body);
    assert!(reason(&c).contains("more than once"), "{}", c.body);
    // A body said to be over the limit is refused at once, not waited for.
    let c = post(
        "/v1/hooks/claude-code",
        &["Content-Length: 50000000"],
        hook.as_bytes(),
    );
    assert_eq!(c.status, 413, "{}", c.body);
    // Unknown encodings: 415.
    let c = post(
        "/v1/traces",
        &["Content-Type: text/plain"],
        nameless.as_bytes(),
    );
    assert_eq!(c.status, 415, "{}", c.body);
    let c = post(
        "/v1/traces",
        &[
            "Content-Type: application/json",
            "Content-Encoding: compress",
        ],
        nameless.as_bytes(),
    );
    assert_eq!(c.status, 415, "{}", c.body);
    assert!(reason(&c).contains("`compress`"), "{}", c.body);
    // Over --max-body-bytes: 413.
    let big = format!("{event}\n").repeat(4096 / event.len() + 1);
    let c = post("/v1/events", &[], big.as_bytes());
    assert_eq!(c.status, 413, "{}", c.body);
    assert!(reason(&c).contains("4096"), "{}", c.body);
    // An event larger than a Kafka message may be (message.max.bytes): 413 as well, and nothing
    // of the request published, not even the event before it.
    let large = event.replace("\"c1\"", "\"c2\"").replace(
        "\"tool\":\"ls\"",
        &format!(
            "\"tool\":\"ls\",\"args\":{{\"p\":\"{}\"}}",
            "x".repeat(2_500)
        ),
    );
    let c = post("/v1/events", &[], format!("{event}\n{large}\n").as_bytes());
    assert_eq!(c.status, 413, "{}", c.body);
    assert!(
        reason(&c).contains("larger than a Kafka message may be here (2000 bytes"),
        "{}",
        c.body
    );
    // So is one whose key and payload are a few bytes under it: librdkafka counts a record's
    // framing too (up to 36 bytes). Refused as too large, not answered 503 "retry" for ever.
    let padded = |n: usize| {
        event.replace("\"c1\"", "\"c3\"").replace(
            "\"tool\":\"ls\"",
            &format!("\"tool\":\"ls\",\"args\":{{\"p\":\"{}\"}}", "x".repeat(n)),
        )
    };
    let sent = |n: usize| {
        let e = toolcalls_model::Event::decode(padded(n).as_bytes()).unwrap();
        "bad".len() + e.encode().len()
    };
    let n = 2000 - 10 - sent(0);
    assert_eq!(sent(n), 1990);
    let c = post("/v1/events", &[], padded(n).as_bytes());
    assert_eq!(c.status, 413, "{}", c.body);

    // Then one good request: once it is acknowledged, its event is all the topics hold.
    let c = post("/v1/events", &[], event.as_bytes());
    assert_eq!((c.status, c.body.as_str()), (200, r#"{"accepted":1}"#));
    let announces = read_to_end(&s.topics.announce);
    assert_eq!(announces.len(), 1, "only the good request was published");
    assert_eq!(
        toolcalls_model::Event::decode(announces[0].payload.as_deref().unwrap()).unwrap(),
        toolcalls_model::Event::decode(event.as_bytes()).unwrap()
    );
    assert!(read_to_end(&s.topics.completion).is_empty());

    let metrics = http_text(r.metrics.as_deref().unwrap());
    for line in [
        r#"toolcalls_receive_requests_total{route="hooks/claude-code",status="401"} 2"#,
        r#"toolcalls_receive_requests_total{route="hooks/claude-code",status="400"} 5"#,
        r#"toolcalls_receive_requests_total{route="traces",status="415"} 3"#,
        r#"toolcalls_receive_requests_total{route="events",status="413"} 4"#,
        r#"toolcalls_receive_events_total{route="events"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    r.stop();
}

/// With redaction rules the receiver publishes no secret: a hook payload's arguments and result
/// and a v1 event's reason reach the topics redacted, the announce under the checksum of its
/// original arguments.
#[test]
fn secrets_are_redacted_before_they_are_published() {
    let s = topics("recv-redact");
    let r = Receiver::start(
        &s,
        &[
            "--redact-pointer",
            "/api_key",
            "--redact-pattern",
            "tok-[0-9a-f]{16}",
            "--kafka",
            "message.max.bytes=20000",
        ],
    );
    let (by_pointer, by_pattern) = ("hunter2-but-longer", "tok-0123456789abcdef");
    let args =
        format!(r#"{{"command":"curl -H 'X-Token: {by_pattern}' x","api_key":"{by_pointer}"}}"#);
    let pre = format!(
        r#"{{"session_id":"red","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{args},"tool_use_id":"toolu_red_1"}}"#
    );
    let post = format!(
        r#"{{"session_id":"red","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{args},"tool_response":{{"stdout":"{by_pattern}"}},"tool_use_id":"toolu_red_1"}}"#
    );
    for payload in [&pre, &post] {
        let url = format!("{}/v1/hooks/claude-code", r.url);
        let c = curl(&["-f", "--data-binary", "@-"], &url, payload.as_bytes());
        assert_eq!(c.status, 204, "{}", c.body);
    }
    let turn_end = format!(
        r#"{{"v":1,"kind":"turn_end","source":"t","session":"red","time":"2026-01-01T00:00:00Z","reason":"typed {by_pattern}"}}"#
    );
    let c = curl(
        &["--data-binary", "@-"],
        &format!("{}/v1/events", r.url),
        turn_end.as_bytes(),
    );
    assert_eq!(c.status, 200, "{}", c.body);

    let published: Vec<toolcalls_model::Event> = read_to_end(&s.topics.announce)
        .into_iter()
        .chain(read_to_end(&s.topics.completion))
        .map(|m| {
            let payload = m.payload.as_deref().unwrap();
            let text = String::from_utf8_lossy(payload);
            assert!(
                !text.contains(by_pointer) && !text.contains(by_pattern),
                "{text}"
            );
            toolcalls_model::Event::decode(payload).unwrap()
        })
        .collect();
    assert!(published.len() >= 3, "{published:?}");
    let announce = published
        .iter()
        .find_map(|e| match &e.body {
            toolcalls_model::EventBody::Announce(a) => Some(a),
            _ => None,
        })
        .expect("the PreToolUse announce");
    let original = toolcalls_model::Json::parse(&args).unwrap();
    assert_eq!(
        announce.checksum,
        Some(toolcalls_model::checksum::checksum_of_json(
            "Bash",
            Some(&original)
        )),
        "the checksum of the original arguments"
    );
    assert_eq!(
        announce.args.as_ref().unwrap().to_value()["api_key"],
        "[REDACTED]"
    );
    let metrics = http_text(r.metrics.as_deref().unwrap());
    for line in [
        r#"toolcalls_receive_events_redacted_total{route="hooks/claude-code"} 2"#,
        r#"toolcalls_receive_events_redacted_total{route="events"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }

    // A payload that cannot be read is answered with why, the secret it quotes redacted.
    let bad = format!(
        r#"{{"tool_input":{{"command":"{by_pattern}"}},"session_id":"red","hook_event_name":"PreToolUse","tool_name":"Bash",}}"#
    );
    let url = format!("{}/v1/hooks/claude-code", r.url);
    let c = curl(&["--data-binary", "@-"], &url, bad.as_bytes());
    assert_eq!(c.status, 400, "{}", c.body);
    assert!(
        c.body.contains("not JSON")
            && c.body.contains("[REDACTED]")
            && !c.body.contains(by_pattern),
        "{}",
        c.body
    );
    // An event refused as too large was redacted, but never published: not counted.
    let large = pre.replace("curl -H", &format!("curl {} -H", "x".repeat(30_000)));
    let c = curl(&["--data-binary", "@-"], &url, large.as_bytes());
    assert_eq!(c.status, 413, "{}", c.body);
    let metrics = http_text(r.metrics.as_deref().unwrap());
    let line = r#"toolcalls_receive_events_redacted_total{route="hooks/claude-code"} 2"#;
    assert!(metrics.contains(line), "{line} in\n{metrics}");
    r.stop();
}

/// Identical hook payloads without a `tool_use_id` posted at once are as many calls: each is
/// stamped with a millisecond of its own in its session, or the processor would take those
/// stamped alike for one call delivered twice.
#[test]
fn identical_payloads_without_ids_posted_at_once_get_times_of_their_own() {
    let s = topics("recv-stamps");
    let r = Receiver::start(&s, &[]);
    let payload = r#"{"session_id":"same","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/a"}}"#;
    let url = format!("{}/v1/hooks/claude-code", r.url);
    let posts: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || curl(&["--data-binary", "@-"], &url, payload.as_bytes()))
        })
        .collect();
    for post in posts {
        let c = post.join().unwrap();
        assert_eq!(c.status, 204, "{}", c.body);
    }
    // A payload after a byte order mark, over several lines, is read as any other.
    let marked = format!(
        "\u{feff}{}",
        serde_json::to_string_pretty(&serde_json::from_str::<Value>(payload).unwrap())
            .unwrap()
            .replace("same", "marked")
    );
    let c = curl(&["--data-binary", "@-"], &url, marked.as_bytes());
    assert_eq!(c.status, 204, "{}", c.body);
    let events: Vec<toolcalls_model::Event> = read_to_end(&s.topics.announce)
        .iter()
        .map(|m| toolcalls_model::Event::decode(m.payload.as_deref().unwrap()).unwrap())
        .collect();
    let times: BTreeSet<String> = events
        .iter()
        .filter(|e| e.session.as_str() == "same")
        .map(|e| e.time.to_rfc3339())
        .collect();
    assert_eq!(times.len(), 8, "{times:?}");
    assert!(events.iter().any(|e| e.session.as_str() == "marked"));
    r.stop();
}

/// An event the brokers refuse as larger than its topic takes is answered 413, saying so, not
/// 503: a retry would be refused the same way. (librdkafka's mock cluster answers with the
/// broker's MSG_SIZE_TOO_LARGE: Tansu does not enforce a topic's `max.message.bytes`.)
#[test]
fn an_event_the_brokers_refuse_as_too_large_is_answered_413() {
    use rdkafka::mocking::MockCluster;
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    let cluster = MockCluster::new(1).expect("mock cluster");
    let mut s = settings("recv-refused");
    s.brokers = cluster.bootstrap_servers();
    for topic in [&s.topics.announce, &s.topics.completion] {
        cluster.create_topic(topic, 1, 1).expect("topic");
    }
    let r = Receiver::start(&s, &[]);
    cluster.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
    );
    let event = r#"{"v":1,"kind":"announce","source":"t","session":"big","callId":"c1","time":"2026-01-01T00:00:00Z","tool":"ls"}"#;
    let url = format!("{}/v1/events", r.url);
    let c = curl(&["--data-binary", "@-"], &url, event.as_bytes());
    assert_eq!(c.status, 413, "{}", c.body);
    assert!(
        c.body.contains("the announce event of session big")
            && c.body.contains("max.message.bytes"),
        "{}",
        c.body
    );
    // The refusal was the broker's answer to one request: the next is published.
    let c = curl(&["--data-binary", "@-"], &url, event.as_bytes());
    assert_eq!(c.status, 200, "{}", c.body);
    r.stop();
}

/// A receiver whose stderr is closed (the pipe to a log collector went away) goes on answering
/// and publishing: each line it logs used to panic the thread that logged it, the first one —
/// where it listens — the receiver itself.
#[test]
fn a_receiver_whose_stderr_is_closed_goes_on() {
    let s = topics("recv-deaf");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .env_clear()
        .env("RUST_LOG", "info")
        .args(["receive", "--listen", &listen, "--brokers", &s.brokers])
        .args(["--announce-topic", &s.topics.announce])
        .args(["--completion-topic", &s.topics.completion])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolcalls receive");
    drop(child.stderr.take());
    let event = r#"{"v":1,"kind":"announce","source":"t","session":"deaf","callId":"c1","time":"2026-01-01T00:00:00Z","tool":"ls"}"#;
    let url = format!("http://{listen}/v1/events");
    let mut answer = None;
    wait_until("the receiver to answer", || {
        assert!(child.try_wait().unwrap().is_none(), "the receiver stopped");
        let c = curl(&["--data-binary", "@-"], &url, event.as_bytes());
        answer = Some((c.status, c.body));
        c.status != 0
    });
    assert_eq!(
        answer,
        Some((200, r#"{"accepted":1}"#.to_owned())),
        "published"
    );
    assert_eq!(read_to_end(&s.topics.announce).len(), 1);
    assert!(child.try_wait().unwrap().is_none(), "still running");
    let _ = child.kill();
    let _ = child.wait();
}

/// A client cannot hold the receiver with a request it never finishes: headers not sent within
/// `--read-timeout` close the connection, a body not sent within it is answered 408, and past
/// `--max-connections` a new connection waits until one ends.
#[test]
fn slow_clients_are_cut_off_and_connections_are_capped() {
    use std::io::Read;
    use std::net::TcpStream;
    use std::time::Duration;
    let s = topics("recv-slow");
    let r = Receiver::start(&s, &["--read-timeout", "1s", "--max-connections", "2"]);
    let addr = r.url.trim_start_matches("http://").to_owned();
    let connect = || {
        let c = TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c
    };
    // Everything the server sends until it closes the connection (bounded by the read timeout
    // above: a server that never closes fails the read).
    let until_closed = |mut c: TcpStream| {
        let mut got = Vec::new();
        match c.read_to_end(&mut got) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("the receiver kept the connection open: {e}"),
        }
        String::from_utf8_lossy(&got).into_owned()
    };

    let mut headers_cut = connect();
    headers_cut
        .write_all(b"POST /v1/events HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let said = until_closed(headers_cut);
    assert!(!said.contains("200 OK"), "{said}");

    let mut body_cut = connect();
    body_cut
        .write_all(b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        .unwrap();
    let said = until_closed(body_cut);
    assert!(said.starts_with("HTTP/1.1 408"), "{said}");
    assert!(said.contains("--read-timeout"), "{said}");

    // Two connections that send nothing hold both slots; a third is served only once one ends.
    let r2 = Receiver::start(&s, &["--read-timeout", "60s", "--max-connections", "2"]);
    let addr = r2.url.trim_start_matches("http://").to_owned();
    let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    let mut third = TcpStream::connect(&addr).unwrap();
    third
        .write_all(b"GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let mut first = [0u8; 1];
    let early = third.read(&mut first);
    assert!(
        matches!(&early, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut),
        "answered while both slots were held: {early:?}"
    );
    drop(held);
    third
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let said = until_closed(third);
    assert!(said.starts_with("HTTP/1.1 404"), "{said}");
    r2.stop();
    r.stop();
}

/// Brokers restarted without the producer state they had (Tansu's memory storage; a cluster
/// that expired the producer id) answer every batch of the receiver's producer
/// `UNKNOWN_PRODUCER_ID`, which librdkafka retries for ever: the receiver replaces its producer
/// after three delivery timeouts without a delivery, and requests go through again.
#[test]
fn a_producer_the_restarted_brokers_no_longer_know_is_replaced() {
    let addr = format!("127.0.0.1:{}", free_port());
    let url = format!("tcp://{addr}");
    /// The test's own broker, which it kills and starts again; killed on drop.
    struct OwnBroker(Child);
    impl Drop for OwnBroker {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let start_broker = || {
        let child = Command::new(tansu_bin())
            .args(["broker", "--listener-url", &url])
            .args(["--advertised-listener-url", &url])
            .args(["--storage-engine", "memory://tansu/"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tansu");
        wait_until("the test's own broker to accept connections", || {
            std::net::TcpStream::connect(&addr).is_ok()
        });
        OwnBroker(child)
    };
    let mut s = settings("recv-lost");
    s.brokers = addr.clone();
    let make_topics = |s: &Settings| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(create_topics(s, 1));
    };
    let broker = start_broker();
    make_topics(&s);
    let r = Receiver::start(&s, &["--delivery-timeout", "2s"]);
    let event = r#"{"v":1,"kind":"announce","source":"t","session":"lost","callId":"c1","time":"2026-01-01T00:00:00Z","tool":"ls"}"#;
    let post = || {
        curl(
            &["--data-binary", "@-"],
            &format!("{}/v1/events", r.url),
            event.as_bytes(),
        )
    };
    let first = post();
    assert_eq!(first.status, 200, "{}", first.body);

    drop(broker);
    let _broker = start_broker();
    // Back, but without the topics: the refusal says so, not the connection refused before.
    let mut missing = String::new();
    wait_until("a refusal that names the missing topic", || {
        let c = post();
        assert_ne!(c.status, 200, "{}", c.body);
        missing = c.body;
        missing.contains("does not exist")
    });
    assert!(
        missing.contains("toolcalls topics create") && !missing.contains("refused"),
        "{missing}"
    );
    assert!(missing.contains(&s.topics.announce), "{missing}");
    // A request of results names the topic results go to.
    let result = r#"{"v":1,"kind":"completion","source":"t","session":"lost","callId":"c1","time":"2026-01-01T00:00:01Z","result":1}"#;
    let c = curl(
        &["--data-binary", "@-"],
        &format!("{}/v1/events", r.url),
        result.as_bytes(),
    );
    assert_eq!(c.status, 503, "{}", c.body);
    assert!(
        c.body
            .contains(&format!("topic `{}` does not exist", s.topics.completion)),
        "{}",
        c.body
    );
    make_topics(&s);
    let mut answers = Vec::new();
    wait_until("a request to go through to the restarted brokers", || {
        let c = post();
        answers.push(c.status);
        c.status == 200
    });
    assert!(
        r.log_text()
            .contains("replaced the Kafka producer with a new one"),
        "{answers:?}: {}",
        r.log_text()
    );
    r.stop();
}

#[test]
fn a_listener_beyond_loopback_needs_a_token() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .env_clear()
        .args([
            "receive",
            "--listen",
            "0.0.0.0:0",
            "--brokers",
            "127.0.0.1:1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--listen 0.0.0.0:0 is reachable beyond this host")
            && stderr.contains("set --token"),
        "{stderr}"
    );
}

/// The compose stack's stand-in for Claude Code's hooks (deploy/demo/hooks.sh) posts through a
/// receiver behind a token with a real `curl`, each round a session of its own: every payload is
/// accepted, and the topics hold each round's events, as `ingest` reads the hook log.
#[test]
fn the_demo_hooks_post_every_payload_through_the_receiver() {
    let s = topics("recv-demo-hooks");
    let token = "demo-hooks-token-0123456789";
    let dir = Scratch::new("demo-hooks");
    let token_file = dir.join("token");
    std::fs::write(&token_file, token).unwrap();
    let r = Receiver::start(&s, &["--token", token]);
    let posted = Command::new(workspace_root().join("deploy/demo/hooks.sh"))
        .arg(format!("{}/v1/hooks/claude-code", r.url))
        .arg(&token_file)
        .args(["2", "0"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&posted.stderr);
    assert!(posted.status.success(), "{said}");
    assert!(said.is_empty(), "every payload accepted: {said}");
    r.stop();

    let per_round = {
        let once = topics("recv-demo-hooks-ingest");
        ingest(
            &once,
            "claude-code-hooks",
            &[&workspace_root().join("deploy/demo/claude-code-hooks.jsonl")],
        );
        sent(&once)
    };
    assert!(per_round > 10, "{per_round} events a round");
    assert_eq!(sent(&s), 2 * per_round);
    let sessions: std::collections::BTreeSet<String> = read_to_end(&s.topics.announce)
        .iter()
        .map(|m| m.key_str().to_owned())
        .collect();
    assert_eq!(sessions.len(), 2, "a session a round: {sessions:?}");
}
