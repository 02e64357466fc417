//! CPU accounting of a measured interval from /proc: this process (the processor or the copy and
//! their librdkafka threads), the broker, everything else on the machine, and idle time. The
//! machine is shared; a run during which other processes took CPU is slower than the code is.
//! This process's CPU is also split by thread: a thread is serial, so the busiest thread of a run
//! bounds its rate on any number of cores (`Usage::describe_threads`).

use std::time::{Duration, Instant};

/// Clock ticks per second of /proc (USER_HZ; 100 on every Linux this runs on).
const HZ: f64 = 100.0;

#[derive(Debug, Clone)]
pub struct Mark {
    at: Instant,
    busy: u64,
    idle: u64,
    me: Ticks,
    broker: u64,
    /// This process's threads: id, role (see [`role`]) and CPU ticks.
    threads: Vec<(u64, String, u64)>,
}

/// A process's CPU ticks, user and system, and its minor page faults.
#[derive(Debug, Clone, Copy, Default)]
struct Ticks {
    user: u64,
    system: u64,
    faults: u64,
}

/// CPU seconds spent during an interval.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub wall: Duration,
    pub me: f64,
    /// Of `me`, in the kernel (mostly zeroing fresh pages: see `faults`).
    pub me_system: f64,
    /// Minor page faults of this process.
    pub faults: u64,
    pub broker: f64,
    pub others: f64,
    pub idle: f64,
    /// This process's CPU by thread role, busiest role first.
    pub threads: Vec<Role>,
}

/// The threads of one role (same name but for a number) during an interval.
#[derive(Debug, Clone, Default)]
pub struct Role {
    pub name: String,
    pub threads: usize,
    /// CPU seconds of all of them.
    pub total: f64,
    /// CPU seconds of the busiest one.
    pub busiest: f64,
}

impl Usage {
    pub fn describe(&self, events: usize) -> String {
        let per = |s: f64| s * 1e6 / events as f64;
        format!(
            "CPU over {:.2}s: this process {:.2}s ({:.1} us/item; user {:.1}, kernel {:.1}; {} page faults), broker {:.2}s ({:.1} us/item), other processes {:.2}s, idle {:.2}s",
            self.wall.as_secs_f64(),
            self.me,
            per(self.me),
            per(self.me - self.me_system),
            per(self.me_system),
            self.faults,
            self.broker,
            per(self.broker),
            self.others,
            self.idle
        )
    }
}

impl Usage {
    /// This process's CPU by thread role, per item: `copy 1×0.41s (0.98 us/item)`, and for roles
    /// of several threads the busiest one too. A thread runs on one core at a time, so the busiest
    /// thread's time per item bounds the rate whatever the number of cores.
    pub fn describe_threads(&self, events: usize) -> String {
        let per = |s: f64| s * 1e6 / events as f64;
        let roles: Vec<String> = self
            .threads
            .iter()
            .filter(|r| r.total > 0.0)
            .map(|r| {
                if r.threads == 1 {
                    format!("{} {:.2}s ({:.2} us/item)", r.name, r.total, per(r.total))
                } else {
                    format!(
                        "{} {}x {:.2}s ({:.2} us/item; busiest thread {:.2})",
                        r.name,
                        r.threads,
                        r.total,
                        per(r.total),
                        per(r.busiest)
                    )
                }
            })
            .collect();
        format!("CPU by thread: {}", roles.join(", "))
    }
}

/// A thread's role: its name without the number librdkafka appends (`rdk:broker12` is
/// `rdk:broker`); the bench's main thread is `main`.
fn role(comm: &str, own: &str) -> String {
    let name = comm.trim();
    if name == own {
        return "main".to_owned();
    }
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-')
        .to_owned()
}

fn thread_ticks() -> Vec<(u64, String, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let own = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid: u64 = e.file_name().to_str()?.parse().ok()?;
        let path = e.path();
        let comm = std::fs::read_to_string(path.join("comm")).ok()?;
        let t = proc_ticks(path.join("stat").to_str()?);
        Some((tid, role(&comm, own.trim()), t.user + t.system))
    })
    .collect()
}

fn roles(start: &[(u64, String, u64)], end: &[(u64, String, u64)]) -> Vec<Role> {
    let mut roles: Vec<Role> = Vec::new();
    for (tid, name, ticks) in end {
        // A thread born during the interval counts from zero; one that ended is not seen.
        let before = start
            .iter()
            .find(|(t, _, _)| t == tid)
            .map_or(0, |&(_, _, b)| b);
        let secs = ticks.saturating_sub(before) as f64 / HZ;
        let i = match roles.iter().position(|r| &r.name == name) {
            Some(i) => i,
            None => {
                roles.push(Role {
                    name: name.clone(),
                    ..Role::default()
                });
                roles.len() - 1
            }
        };
        let r = &mut roles[i];
        r.threads += 1;
        r.total += secs;
        r.busiest = r.busiest.max(secs);
    }
    roles.sort_by(|a, b| b.total.total_cmp(&a.total));
    roles
}

fn proc_ticks(path: &str) -> Ticks {
    // minflt is field 10, utime and stime are 14 and 15; the command name (field 2) may hold
    // spaces.
    let Ok(stat) = std::fs::read_to_string(path) else {
        return Ticks::default();
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Ticks::default();
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ticks {
        user: field(11),
        system: field(12),
        faults: field(7),
    }
}

fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal (guest time is inside user)
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    let idle = at(3) + at(4);
    (busy, idle)
}

pub fn mark(broker_pid: Option<u32>) -> Mark {
    let (busy, idle) = machine_ticks();
    Mark {
        at: Instant::now(),
        busy,
        idle,
        me: proc_ticks("/proc/self/stat"),
        broker: broker_pid.map_or(0, |p| {
            let t = proc_ticks(&format!("/proc/{p}/stat"));
            t.user + t.system
        }),
        threads: thread_ticks(),
    }
}

pub fn since(start: &Mark, broker_pid: Option<u32>) -> Usage {
    let end = mark(broker_pid);
    let s = |a: u64, b: u64| b.saturating_sub(a) as f64 / HZ;
    let me = s(start.me.user + start.me.system, end.me.user + end.me.system);
    let broker = s(start.broker, end.broker);
    Usage {
        wall: end.at - start.at,
        me,
        me_system: s(start.me.system, end.me.system),
        faults: end.me.faults.saturating_sub(start.me.faults),
        broker,
        others: (s(start.busy, end.busy) - me - broker).max(0.0),
        idle: s(start.idle, end.idle),
        threads: roles(&start.threads, &end.threads),
    }
}
