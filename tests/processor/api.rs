//! The query API is a listener of its own, behind a bearer token when one is set; the
//! operations listener serves only metrics and health. Driven with a real `curl`.

use crate::harness::*;
use std::process::Command;
use toolcalls_processor::Secret;

/// `curl` the URL with these extra arguments: (HTTP status, body).
fn curl(url: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "10"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

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

    let (body, status) = tokio::task::spawn_blocking({
        let (pending, bearer) = (pending.clone(), bearer.clone());
        move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let (status, body) = curl(&pending, &["-H", &bearer]);
                if body.matches("\"metadata\":{\"name\"").count() >= 2
                    || std::time::Instant::now() > deadline
                {
                    return (body, status);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
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

    let (without, wrong, on_ops, metrics_on_api, metrics) = tokio::task::spawn_blocking({
        let pending = pending.clone();
        move || {
            (
                curl(&pending, &[]),
                curl(&pending, &["-H", "Authorization: Bearer not-the-token"]),
                curl(&format!("http://{ops}/v1/sessions/x/pending"), &[]),
                curl(&format!("http://{api}/metrics"), &["-H", &bearer]),
                curl(&format!("http://{ops}/metrics"), &[]),
            )
        }
    })
    .await
    .unwrap();
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
