//! The progress line `toolcalls audit` shows on a terminal: what it reads, how far it is, how
//! fast — redrawn at most four times a second, and nothing at all when stderr is not a terminal
//! or with `--quiet`.

use std::io::Write;
use std::time::{Duration, Instant};

pub struct Progress {
    on: bool,
    what: String,
    /// How many there are to read, when known.
    total: Option<u64>,
    done: u64,
    started: Instant,
    last: Instant,
    shown: bool,
}

impl Progress {
    pub fn new(on: bool) -> Progress {
        let now = Instant::now();
        Progress {
            on,
            what: String::new(),
            total: None,
            done: 0,
            started: now,
            last: now,
            shown: false,
        }
    }

    /// Starts a new stage: reading `what`, `total` of them if known.
    pub fn stage(&mut self, what: impl Into<String>, total: Option<u64>) {
        self.clear();
        self.what = what.into();
        self.total = total;
        self.done = 0;
        self.started = Instant::now();
        self.last = self.started;
    }

    /// One more read.
    #[inline]
    pub fn tick(&mut self) {
        self.done += 1;
        if self.on && self.done % 1024 == 0 {
            self.draw(false);
        }
    }

    fn draw(&mut self, force: bool) {
        let now = Instant::now();
        if !force && now.duration_since(self.last) < Duration::from_millis(250) {
            return;
        }
        self.last = now;
        self.shown = true;
        let secs = now.duration_since(self.started).as_secs_f64().max(1e-9);
        let rate = self.done as f64 / secs;
        let line = match self.total {
            Some(total) if total > 0 => {
                let share = (self.done as f64 / total as f64).min(1.0);
                let filled = (share * 30.0) as usize;
                format!(
                    "{:<24} [{}{}] {:>3.0}% {}/{} ({:.0}/s)",
                    self.what,
                    "=".repeat(filled),
                    " ".repeat(30 - filled),
                    share * 100.0,
                    self.done,
                    total,
                    rate
                )
            }
            _ => format!("{:<24} {} ({:.0}/s)", self.what, self.done, rate),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }

    /// Removes the line (before the report, or the next stage).
    pub fn clear(&mut self) {
        if self.shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.shown = false;
        }
    }
}
