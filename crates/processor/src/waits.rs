//! How long the commits and aborts under way have waited: the coordinator marks them
//! (`coordinator::stall`), the readiness answer and a watchdog read them.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Commits and aborts under way, and since when (the first of them).
pub(crate) struct Waits {
    base: Instant,
    depth: AtomicU32,
    /// Milliseconds since `base` plus one when the first began; 0 while none is under way.
    since: AtomicU64,
}

impl Default for Waits {
    fn default() -> Self {
        Waits {
            base: Instant::now(),
            depth: AtomicU32::new(0),
            since: AtomicU64::new(0),
        }
    }
}

impl Waits {
    /// A commit or abort begins.
    pub fn begin(&self) {
        if self.depth.fetch_add(1, Ordering::AcqRel) == 0 {
            self.since.store(self.millis() + 1, Ordering::Release);
        }
    }

    /// One ends.
    pub fn end(&self) {
        if self.depth.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.since.store(0, Ordering::Release);
        }
    }

    /// How long the oldest under way has waited, once that is `after` or more: the processor is
    /// stalled on the brokers.
    pub fn stalled(&self, after: Duration) -> Option<Duration> {
        self.waited().filter(|w| *w >= after)
    }

    /// How long the oldest commit or abort under way has waited.
    pub fn waited(&self) -> Option<Duration> {
        let since = self.since.load(Ordering::Acquire);
        (since > 0).then(|| {
            let now = self.millis();
            Duration::from_millis(now.saturating_sub(since - 1))
        })
    }

    fn millis(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_counts_from_the_first_of_those_under_way_to_the_end_of_the_last() {
        let waits = Waits::default();
        assert_eq!(waits.waited(), None);
        waits.begin();
        waits.begin();
        assert!(waits.waited().is_some());
        assert_eq!(waits.stalled(Duration::from_secs(3600)), None);
        assert!(waits.stalled(Duration::ZERO).is_some());
        waits.end();
        assert!(waits.waited().is_some(), "one still under way");
        waits.end();
        assert_eq!(waits.waited(), None);
    }
}
