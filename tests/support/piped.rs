//! Running a command the way a test reads it: standard input closed, standard output and error
//! each read on a thread of its own (so a full pipe never stalls the child), the run bounded.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a command printed and how it ended.
pub struct Ran {
    /// The command, as the messages name it.
    pub what: String,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Ran {
    /// Everything, for an assertion's message.
    pub fn show(&self) -> String {
        format!(
            "{}: exit {} after {:.1} s\n--- stdout\n{}\n--- stderr\n{}",
            self.what,
            self.code,
            self.took.as_secs_f64(),
            self.stdout,
            self.stderr
        )
    }
}

/// Runs `command` to its end; kills it and panics, naming it `what`, once it has run `bound`.
pub fn run_piped(mut command: Command, what: &str, bound: Duration) -> Ran {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = pipe.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            panic!("{what} did not finish within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ran {
        what: what.to_owned(),
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        took: started.elapsed(),
    }
}
