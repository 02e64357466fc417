//! The query API is a listener of its own, behind a bearer token when one is set; the
//! operations listener serves only metrics and health. Driven with a real `curl`.

use crate::harness::*;
use toolcalls_processor::Secret;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_api_needs_its_token_and_lives_apart_from_metrics() {
    let mut s = settings("api");
    let token = "t0ken-for-the-api-test";
    s.api_token = Some(Secret(token.into()));
    create_topics(&s, 2).await;
    let (announces, _) = synth("api", 1, 2);
    let session = announces[0].session.as_str().to_owned();
    produce_events(&s, &announces);
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let api = running.api_addr.expect("the query API is on");
    let ops = running.http_addr;
    let pending = format!("http://{api}/v1/sessions/{session}/pending");
    let bearer = format!("Authorization: Bearer {token}");

    let (status, body) = tokio::task::spawn_blocking({
        let (pending, bearer) = (pending.clone(), bearer.clone());
        move || {
            let mut answer = (0, String::new());
            wait_until("both calls pending", || {
                answer = curl(&pending, &["-H", &bearer]);
                answer.1.matches("\"metadata\":{\"name\"").count() >= 2
            });
            answer
        }
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body.matches("\"metadata\":{\"name\"").count(),
        2,
        "two calls pending: {body}"
    );

    let (by_call, no_source, (without, wrong, on_ops, metrics_on_api, metrics)) =
        tokio::task::spawn_blocking({
            let pending = pending.clone();
            let session = session.clone();
            move || {
                let call = format!("http://{api}/v1/sessions/{session}/calls/call-1");
                (
                    curl(&format!("{call}?source=synth"), &["-H", &bearer]),
                    curl(&call, &["-H", &bearer]),
                    (
                        curl(&pending, &[]),
                        curl(&pending, &["-H", "Authorization: Bearer not-the-token"]),
                        curl(&format!("http://{ops}/v1/sessions/x/pending"), &[]),
                        curl(&format!("http://{api}/metrics"), &["-H", &bearer]),
                        curl(&format!("http://{ops}/metrics"), &[]),
                    ),
                )
            }
        })
        .await
        .unwrap();
    assert_eq!(
        by_call.0, 200,
        "a call by its source, session and call id: {}",
        by_call.1
    );
    assert!(
        by_call.1.contains("\"streamId\":\"call-1\""),
        "{}",
        by_call.1
    );
    assert_eq!(no_source.0, 400, "{}", no_source.1);
    assert!(no_source.1.contains("source"), "{}", no_source.1);
    assert_eq!(without.0, 401, "no token: {}", without.1);
    assert!(without.1.contains("--api-token"), "{}", without.1);
    assert!(!without.1.contains(&session), "{}", without.1);
    assert_eq!(wrong.0, 401, "a wrong token: {}", wrong.1);
    assert_eq!(
        on_ops.0, 404,
        "the metrics listener serves no query: {}",
        on_ops.1
    );
    assert_eq!(metrics_on_api.0, 404, "the query API serves no metrics");
    assert_eq!(metrics.0, 200);
    running.stop().await.expect("clean stop");
}

/// A session's pending calls come back with their arguments as the agent sent them, on both
/// routes: numbers past a double (`1e400`, long integers), a lone surrogate escape and deep
/// nesting are valid JSON the records keep verbatim, which the answer must not rewrite or choke
/// on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_calls_are_answered_with_their_arguments_verbatim() {
    let s = settings("api-verbatim");
    create_topics(&s, 1).await;
    let deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
    let args = [
        r#"{"b":1,"a":12345678901234567890123456789,"e":1.10}"#.to_owned(),
        r#"{"c":1e400}"#.to_owned(),
        r#"{"d":"\ud800"}"#.to_owned(),
        format!(r#"{{"deep":{deep}}}"#),
    ];
    let events: Vec<toolcalls_model::Event> = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let line = format!(
                r#"{{"v":1,"kind":"announce","source":"app","session":"odd","callId":"k{i}","time":"2026-01-01T00:00:0{i}Z","tool":"T","args":{a}}}"#
            );
            toolcalls_model::Event::decode(line.as_bytes()).unwrap()
        })
        .collect();
    produce_events(&s, &events);
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let api = running.api_addr.expect("the query API is on");
    // Counted in the text: a `serde_json::Value` cannot hold these answers either.
    let last = std::sync::Mutex::new((0, String::new()));
    wait_until_async("four calls pending", || {
        let last = &last;
        async move {
            let answer = http_get(api, "/v1/sessions/odd/pending").await;
            let all = answer.1.matches(r#""metadata":{"name""#).count() == 4;
            *last.lock().unwrap() = answer;
            all
        }
    })
    .await;
    let (status, pending) = last.into_inner().unwrap();
    assert_eq!(status, 200, "{pending}");
    for (i, a) in args.iter().enumerate() {
        let input = format!(r#""input":{a}"#);
        assert!(pending.contains(&input), "{input} in {pending}");
        let (status, call) =
            http_get(api, &format!("/v1/sessions/odd/calls/k{i}?source=app")).await;
        assert_eq!(status, 200, "{call}");
        assert!(call.contains(&input), "{input} in {call}");
    }
    // An empty `thread=` is no thread, as a client that always sends it means.
    let (status, call) = http_get(api, "/v1/sessions/odd/calls/k0?source=app&thread=").await;
    assert_eq!(status, 200, "{call}");
    // A path or query the API cannot read is answered in JSON too.
    for path in [
        "/v1/sessions/%FF/pending",
        "/v1/sessions/odd/calls/k0?source=app&source=app",
    ] {
        let (status, body) = http_get(api, path).await;
        assert_eq!(status, 400, "{path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert!(v["error"].is_string(), "{path}: {body}");
    }
    // So are a route it does not have and a method other than GET.
    let (unknown, post) = tokio::task::spawn_blocking(move || {
        (
            curl(&format!("http://{api}/v1/nope"), &[]),
            curl(
                &format!("http://{api}/v1/sessions/odd/pending"),
                &["-X", "POST"],
            ),
        )
    })
    .await
    .unwrap();
    for ((status, body), want) in [(unknown, 404), (post, 405)] {
        assert_eq!(status, want, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert!(v["error"].is_string(), "{body}");
    }
    running.stop().await.expect("clean stop");
}

/// A secret in a call's arguments and result reaches neither the records topic, nor the query
/// API, nor the logs, once redaction rules name it; the checksum is the original's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redaction_keeps_secrets_out_of_records_queries_and_logs() {
    let mut s = settings("redact");
    s.redact.pointers = vec!["/password".into()];
    s.redact.patterns = vec!["sk-live-[A-Za-z0-9]+".into()];
    create_topics(&s, 2).await;
    let (password, key) = ("pw-0f9e8d7c6b5a", "sk-live-4242abcdXYZ");
    let line = |kind: &str, call: &str, extra: &str| {
        format!(
            r#"{{"v":1,"kind":"{kind}","source":"app","session":"redact-s","callId":"{call}","time":"2026-01-01T00:00:0{}Z",{extra}}}"#,
            if kind == "announce" { 0 } else { 1 }
        )
    };
    let args = format!(r#""tool":"http","args":{{"password":"{password}","cmd":"curl -H {key}"}}"#);
    let events: Vec<toolcalls_model::Event> = [
        line("announce", "c1", &args),
        line(
            "completion",
            "c1",
            &format!(r#""result":"sent with {key}""#),
        ),
        line("announce", "c2", &args),
    ]
    .iter()
    .map(|l| toolcalls_model::Event::decode(l.as_bytes()).unwrap())
    .collect();
    let checksum =
        toolcalls_core::replay(&s.core, events.clone(), toolcalls_core::FinishMode::Keep).records
            [0]
        .checksum
        .clone();
    produce_events(&s, &events);
    let proc = Proc::spawn(&s, "i0", None);
    let records = read_at_least(&s.topics.records, 1).await;
    let record = String::from_utf8_lossy(records[0].payload.as_deref().unwrap()).into_owned();
    let api = {
        let log = proc.log.clone();
        let mut found = None;
        wait_until_async("the query API's address", || {
            found = crate::cluster::logged_api_addr(&log);
            std::future::ready(found.is_some())
        })
        .await;
        found.unwrap()
    };
    wait_pending("the second call pending", api, "redact-s", 1).await;
    let (_, pending) = http_get(api, "/v1/sessions/redact-s/pending").await;
    let logs = proc.log.lock().unwrap().join("\n");
    for (what, text) in [("record", &record), ("query", &pending), ("logs", &logs)] {
        assert!(!text.contains(password), "{what}: {text}");
        assert!(!text.contains(key), "{what}: {text}");
    }
    let parsed: toolcalls_model::ToolCallRecord = serde_json::from_str(&record).unwrap();
    assert_eq!(
        parsed.checksum, checksum,
        "the checksum is the original arguments'"
    );
    assert_eq!(
        parsed.redacted,
        ["spec.input/password", "spec.input", "status.output"]
    );
    assert!(pending.contains("\"redacted\""), "{pending}");
}

/// Both listeners close a connection that does not send its request within
/// `--http-read-timeout-ms`, and serve at most `--http-max-connections` at once: a client that
/// opens connections and sends nothing takes neither the process's descriptors nor the
/// listener for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_clients_are_cut_off_on_both_listeners() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;
    let mut s = settings("api-slow");
    s.http_read_timeout_ms = 300;
    s.http_max_connections = 1;
    create_topics(&s, 1).await;
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let listeners = [
        running.http_addr,
        running.api_addr.expect("the query API is on"),
    ];
    tokio::task::spawn_blocking(move || {
        for addr in listeners {
            // A request whose headers never end, then one that sends nothing: each connection is
            // closed (a server that kept it open would fail the 20 s read).
            for sent in [&b"GET /healthz HTTP/1.1\r\nHost: x\r\n"[..], b""] {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                c.write_all(sent).unwrap();
                let mut got = Vec::new();
                match c.read_to_end(&mut got) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                    Err(e) => panic!("{addr} kept a slow connection open: {e}"),
                }
                assert!(!got.starts_with(b"HTTP/1.1 200"), "{addr}: {got:?}");
            }
            // Once they are gone, the one slot serves again.
            wait_until("the listener to serve again", || {
                curl(&format!("http://{addr}/healthz"), &[]).0 != 0
            });
            // A client that sends requests and never reads the answers is cut off too, once an
            // answer has waited the read timeout to be taken, and the slot serves again.
            let out = std::process::Command::new("python3")
                .args(["-c", NEVER_READS, &addr.to_string()])
                .output()
                .expect("python3");
            let said = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                said.trim(),
                "cut",
                "{addr}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_ne!(curl(&format!("http://{addr}/healthz"), &[]).0, 0, "{addr}");
        }
    })
    .await
    .unwrap();
    running.stop().await.expect("clean stop");
}

/// Connects to ADDR with a small receive buffer, sends pipelined requests and never reads an
/// answer: prints `cut` once the server closes the connection, `held` if it still holds it after
/// 20 s.
const NEVER_READS: &str = r#"
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
s.connect((host, int(port)))
s.settimeout(1)
request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 200
end = time.time() + 20
while time.time() < end:
    try:
        s.sendall(request)
    except socket.timeout:
        continue
    except OSError:
        print("cut")
        sys.exit(0)
print("held")
"#;
