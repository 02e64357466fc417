//! A partition task's clocks: the wall clock, read once per chunk of input, and what punctuation
//! needs to move an idle partition's stream time on.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use toolcalls_core::Correlator;
use toolcalls_model::Timestamp;

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(super) struct Clock {
    /// Wall clock (ms since the epoch) as last read.
    now_ms: i64,
    /// Wall time of the last event or punctuation that moved stream time.
    anchor: Instant,
    /// No event arrived since the last punctuation.
    idle_since_tick: bool,
    /// Wall time each input topic last delivered a message (or the task started).
    topic_seen_at: [Instant; 2],
    /// An input topic quiet this long no longer holds stream time back.
    input_idle: Duration,
}

impl Clock {
    pub fn new(input_idle: Duration) -> Self {
        Clock {
            now_ms: wall_ms(),
            anchor: Instant::now(),
            idle_since_tick: false,
            topic_seen_at: [Instant::now(); 2],
            input_idle,
        }
    }

    /// The wall clock as last read by [`Clock::read`].
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// Reads the wall clock.
    pub fn read(&mut self) {
        self.now_ms = wall_ms();
    }

    /// Input topic `topic` delivered a message, taken at `at`.
    pub fn topic_seen(&mut self, topic: u16, at: Instant) {
        if let Some(seen) = self.topic_seen_at.get_mut(usize::from(topic)) {
            *seen = at;
        }
    }

    /// Events were applied: stream time moved with them.
    pub fn events_applied(&mut self) {
        self.anchor = Instant::now();
        self.idle_since_tick = false;
    }

    /// At a punctuation: where the partition's stream time moves to, if anywhere.
    ///
    /// Stream time is the watermark of both input topics; one that has delivered nothing for
    /// `input_idle` (while the other may flow) no longer holds it back. And an idle partition
    /// moves on by the wall time that passed since its last event, so deadlines fire without new
    /// input.
    pub fn punctuate(&mut self, correlator: &Correlator) -> Option<Timestamp> {
        let quiet = self.topic_seen_at.map(|t| t.elapsed() >= self.input_idle);
        let mut target = None;
        if quiet[0] || quiet[1] {
            target = correlator.max_event_time();
        }
        if self.idle_since_tick {
            if let Some(base) = target.or(correlator.stream_time()) {
                let elapsed = u64::try_from(self.anchor.elapsed().as_millis()).unwrap_or(u64::MAX);
                target = Some(base.plus_millis(elapsed));
                self.anchor = Instant::now();
            }
        }
        self.idle_since_tick = true;
        target
    }
}
