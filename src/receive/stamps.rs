//! The receive times of hook payloads without one of their own: no two payloads of a session get
//! the same millisecond. A payload without an id is known from its copies by its tool, checksum
//! and time (docs/ARCHITECTURE.md, Correlation → Repeats), so two identical calls a client posts
//! at once, stamped alike, would be taken for one call delivered twice.

use std::collections::HashMap;
use std::sync::Mutex;
use toolcalls_model::Timestamp;

/// Sessions remembered at most before those whose last stamp is over a second old are let go.
const SWEEP_AT: usize = 4_096;

/// The last millisecond given to each session lately.
#[derive(Default)]
pub struct Stamps {
    last: Mutex<HashMap<String, i64>>,
}

impl Stamps {
    /// The first of `lines` consecutive milliseconds for a request of `sessions`: `now`, or the
    /// millisecond after the last one any of them was given, whichever is later.
    pub fn reserve(&self, sessions: &[String], lines: usize, now: Timestamp) -> Timestamp {
        let now = now.millis();
        let lines = i64::try_from(lines.max(1)).unwrap_or(i64::MAX);
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.len() >= SWEEP_AT {
            last.retain(|_, &mut at| at >= now.saturating_sub(1_000));
        }
        let start = sessions
            .iter()
            .filter_map(|s| last.get(s.as_str()))
            .map(|&at| at.saturating_add(1))
            .fold(now, i64::max);
        let end = start.saturating_add(lines - 1);
        for session in sessions {
            last.insert(session.clone(), end);
        }
        Timestamp::from_millis(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_of_one_session_at_once_get_milliseconds_of_their_own() {
        let stamps = Stamps::default();
        let now = Timestamp::from_millis(1_000_000);
        let s = |name: &str| vec![name.to_owned()];
        let firsts: Vec<i64> = (0..5)
            .map(|_| stamps.reserve(&s("a"), 1, now).millis())
            .collect();
        assert_eq!(
            firsts,
            [1_000_000, 1_000_001, 1_000_002, 1_000_003, 1_000_004]
        );
        // Another session is not held back by the first.
        assert_eq!(stamps.reserve(&s("b"), 1, now).millis(), 1_000_000);
        // A request of three lines takes three milliseconds; one of two sessions, after both.
        assert_eq!(stamps.reserve(&s("b"), 3, now).millis(), 1_000_001);
        let both = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(stamps.reserve(&both, 1, now).millis(), 1_000_005);
        // Once the clock is past them, it is the clock again.
        let later = Timestamp::from_millis(2_000_000);
        assert_eq!(stamps.reserve(&s("a"), 1, later).millis(), 2_000_000);
    }

    #[test]
    fn sessions_long_quiet_are_let_go() {
        let stamps = Stamps::default();
        for i in 0..SWEEP_AT {
            stamps.reserve(&[format!("s{i}")], 1, Timestamp::from_millis(0));
        }
        stamps.reserve(&["new".to_owned()], 1, Timestamp::from_millis(5_000));
        assert_eq!(stamps.last.lock().unwrap().len(), 1);
    }
}
