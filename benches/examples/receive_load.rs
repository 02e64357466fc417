//! A load generator for `toolcalls receive`: small Claude Code hook posts (a PreToolUse, then the
//! PostToolUse of the same call, ~300 bytes each) over keep-alive HTTP/1.1 connections, each
//! connection one request at a time, as many connections as asked. Prints requests per second,
//! the statuses, and latency percentiles. benches/receive/run.sh runs it against a receiver on
//! a real broker (benches/README.md, "Receiver").
//!
//! ```sh
//! cargo run --release -p toolcalls-benches --example receive_load -- \
//!     --url http://127.0.0.1:4319 --connections 256 --seconds 10
//! ```
//!
//! It runs on one thread (a current-thread runtime) so that it takes at most one core from the
//! receiver and the broker it measures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Opts {
    addr: String,
    connections: usize,
    seconds: u64,
    token: Option<String>,
}

fn opts() -> Opts {
    let mut o = Opts {
        addr: "127.0.0.1:4319".into(),
        connections: 128,
        seconds: 10,
        token: std::env::var("TOOLCALLS_RECEIVE_TOKEN").ok(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--url" => {
                let url = value();
                o.addr = url
                    .trim_start_matches("http://")
                    .trim_end_matches('/')
                    .to_owned();
            }
            "--connections" => o.connections = value().parse().expect("--connections N"),
            "--seconds" => o.seconds = value().parse().expect("--seconds N"),
            other => panic!(
                "unknown argument {other}; takes --url URL --connections N --seconds N (token: TOOLCALLS_RECEIVE_TOKEN)"
            ),
        }
    }
    o
}

/// What one connection did.
#[derive(Default)]
struct Tally {
    statuses: BTreeMap<u16, u64>,
    latencies_us: Vec<u32>,
}

fn request(addr: &str, token: Option<&str>, body: &str) -> Vec<u8> {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "POST /v1/hooks/claude-code HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one response; returns its status.
async fn response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<u16> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status: u16 = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or(std::io::ErrorKind::InvalidData)?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap_or(0));
    while buf.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.drain(..head_end + length);
    Ok(status)
}

async fn connection(o: &Opts, id: usize, until: Instant) -> std::io::Result<Tally> {
    let mut stream = TcpStream::connect(&o.addr).await?;
    stream.set_nodelay(true)?;
    let mut tally = Tally::default();
    let mut buf = Vec::with_capacity(8192);
    let session = format!("load-{}-{id}", std::process::id());
    let mut n = 0u64;
    while Instant::now() < until {
        let call = n / 2;
        let body = if n % 2 == 0 {
            format!(
                r#"{{"session_id":"{session}","cwd":"/home/dev/shop","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"ls -la src/{call}"}},"tool_use_id":"toolu_{id}_{call}"}}"#
            )
        } else {
            format!(
                r#"{{"session_id":"{session}","cwd":"/home/dev/shop","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{{"command":"ls -la src/{call}"}},"tool_response":{{"stdout":"ok","stderr":"","interrupted":false}},"tool_use_id":"toolu_{id}_{call}"}}"#
            )
        };
        let start = Instant::now();
        stream
            .write_all(&request(&o.addr, o.token.as_deref(), &body))
            .await?;
        let status = response(&mut stream, &mut buf).await?;
        let us = start.elapsed().as_micros();
        tally
            .latencies_us
            .push(u32::try_from(us).unwrap_or(u32::MAX));
        *tally.statuses.entry(status).or_default() += 1;
        n += 1;
    }
    Ok(tally)
}

fn main() {
    let o = opts();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let o = std::sync::Arc::new(o);
    let start = Instant::now();
    let until = start + Duration::from_secs(o.seconds);
    let tallies = runtime.block_on(async {
        let tasks: Vec<_> = (0..o.connections)
            .map(|id| {
                let o = o.clone();
                tokio::spawn(async move { connection(&o, id, until).await })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(tally) => out.push(tally),
                Err(e) => eprintln!("a connection failed: {e}"),
            }
        }
        out
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    let mut lat: Vec<u32> = Vec::new();
    for t in tallies {
        for (s, n) in t.statuses {
            *statuses.entry(s).or_default() += n;
        }
        lat.extend(t.latencies_us);
    }
    lat.sort_unstable();
    let total = lat.len();
    let pct = |p: f64| {
        lat.get(((total as f64 * p) as usize).min(total.saturating_sub(1)))
            .map_or(0.0, |&us| f64::from(us) / 1000.0)
    };
    println!(
        "{total} requests in {elapsed:.1} s over {} connections: {:.0} requests/s; statuses {statuses:?}; latency ms p50 {:.1} p90 {:.1} p99 {:.1} max {:.1}",
        o.connections,
        total as f64 / elapsed,
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
    if statuses.keys().any(|s| *s != 204) || total == 0 {
        std::process::exit(1);
    }
}
