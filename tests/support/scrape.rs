//! Metrics of a running binary, as Prometheus scrapes them, with real `curl`.

use std::process::Command;

/// The metrics at `addr` (host:port), as Prometheus would scrape them.
pub fn scrape(addr: &str) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5"])
        .arg(format!("http://{addr}/metrics"))
        .output()
        .expect("curl is installed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of the first line of the exposition `text` that starts with `series`.
pub fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Where `child`, a follower or receiver started with `--metrics-addr 127.0.0.1:0` and its
/// stderr piped, serves its metrics, from its log (`bound=`); the rest of its log is read and
/// dropped from then on, so that it never blocks on a full pipe.
pub fn metrics_addr(child: &mut std::process::Child) -> String {
    use std::io::{BufRead, BufReader};
    let mut log = BufReader::new(child.stderr.take().expect("stderr piped"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut said = String::new();
    while std::time::Instant::now() < deadline {
        let mut line = String::new();
        if log.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(i) = line.find("bound=") {
            let addr = line[i + 6..].split_whitespace().next().map(str::to_owned);
            std::thread::spawn(move || for _ in log.lines() {});
            return addr.expect("an address after bound=");
        }
        said.push_str(&line);
    }
    panic!("it says where its metrics are, never:\n{said}");
}
