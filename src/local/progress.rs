//! A progress line on a terminal for long inputs, at most twice a second.

use std::io::Write;
use std::time::{Duration, Instant};

pub(super) struct Progress {
    on: bool,
    started: Instant,
    last: Instant,
    /// The event count when the clock was last read.
    checked: u64,
    shown: bool,
}

impl Progress {
    pub fn new(on: bool) -> Self {
        let now = Instant::now();
        Progress {
            on,
            started: now,
            last: now,
            checked: 0,
            shown: false,
        }
    }

    /// `events` events have been applied so far; the clock is read every 4,096 of them.
    pub fn tick(&mut self, events: u64) {
        if !self.on || events < self.checked + 4096 {
            return;
        }
        self.checked = events;
        let now = Instant::now();
        if now.duration_since(self.last) < Duration::from_millis(500) {
            return;
        }
        self.last = now;
        self.shown = true;
        let secs = now.duration_since(self.started).as_secs_f64().max(1e-9);
        // Ignored when stderr is gone: progress never stops the run.
        let _ = write!(
            std::io::stderr(),
            "\r{events} events, {:.0} events/s",
            events as f64 / secs
        );
    }

    /// Clears the progress line, for the summary to take its place.
    pub fn done(&self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}
