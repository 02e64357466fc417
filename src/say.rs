//! Lines for the user on stderr that never stop the process. A follower runs for days; when its
//! stderr goes away (the pipe to a log collector closed) it must go on following, where
//! `eprintln!` would panic at its next message.

/// `eprintln!` that ignores a stderr it cannot write to.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub(crate) use say;
