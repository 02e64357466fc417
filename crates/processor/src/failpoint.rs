//! Test hook: stop dead at a named point so a test can SIGKILL the process exactly there.
//!
//! `TOOLCALLS_FAILPOINT=<name>[:<n>]` arms the point `<name>` for its `n`-th hit (default 1). At that
//! hit the process writes `FAILPOINT <name>` to stderr and, for a stopping point, parks the calling
//! thread forever; the test harness sees the line and kills the process with SIGKILL. Points:
//!
//! - `after_consume`: a partition task received a batch and has not processed it;
//! - `after_produce`: the batch's outputs are flushed to the broker, offsets not yet sent;
//! - `after_send_offsets`: offsets are in the transaction, the commit not yet asked for;
//! - `during_commit`: announced (without stopping) while the commit is in flight;
//! - `panic_in_apply`: a partition task panics while applying its `n`-th input message.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct Failpoints {
    armed: Option<(String, u64)>,
    hits: AtomicU64,
}

impl Failpoints {
    pub fn parse(spec: Option<&str>) -> Self {
        let armed = spec
            .filter(|s| !s.is_empty())
            .map(|s| match s.split_once(':') {
                Some((name, n)) => (name.to_owned(), n.parse().unwrap_or(1).max(1)),
                None => (s.to_owned(), 1),
            });
        Failpoints {
            armed,
            hits: AtomicU64::new(0),
        }
    }

    fn reached(&self, name: &str) -> bool {
        match &self.armed {
            Some((armed, n)) if armed == name => self.hits.fetch_add(1, Ordering::AcqRel) + 1 == *n,
            _ => false,
        }
    }

    /// Stops the calling thread forever at the armed hit.
    pub fn stop(&self, name: &str) {
        if self.reached(name) {
            announce(name);
            loop {
                std::thread::park();
            }
        }
    }

    /// Panics at the armed hit (after announcing it).
    pub fn panic(&self, name: &str) {
        if self.reached(name) {
            announce(name);
            panic!("failpoint {name}");
        }
    }

    /// Announces the armed hit and goes on (the harness kills the process while it continues).
    pub fn announce(&self, name: &str) {
        if self.reached(name) {
            announce(name);
        }
    }
}

fn announce(name: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "FAILPOINT {name}");
    let _ = err.flush();
}
