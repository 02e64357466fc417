//! The processor benchmark (issue 3 item 11): end to end through a broker against a plain
//! consume → produce copy, restore rate, memory per pending call. Results and their reading:
//! benches/processor/README.md. Not part of `cargo test`; `benches/processor/run.sh` starts a
//! Tansu broker on 127.0.0.1 and runs every part:
//!
//! ```text
//! cargo bench -p toolcalls-benches --bench processor -- memory [--calls 500000] [--variant bare|args|idless]
//! cargo bench -p toolcalls-benches --bench processor -- restore [--calls 300000] [--rounds 3]
//! cargo bench -p toolcalls-benches --bench processor -- e2e --brokers 127.0.0.1:PORT [--calls 200000] [--partitions 4] [--rounds 3] [--graces long|default] [--broker-pid PID]
//!     [--only copy-eos,processor-eos,copy-alo,processor-alo] [--timeline MS] [--align-wait-ms MS]
//! cargo bench -p toolcalls-benches --bench processor -- broker-restore --brokers 127.0.0.1:PORT [--calls 200000] [--partitions 4] [--samples 2] [--broker-pid PID]
//! cargo bench -p toolcalls-benches --bench processor -- latency --brokers 127.0.0.1:PORT [--rate 20000] [--seconds 10] [--partitions 4] [--commit-interval-ms MS]
//! ```

mod copy;
mod cpu;
mod e2e;
mod gen;
mod kafka;
mod latency;
mod memory;
mod restore;

use std::collections::HashMap;

/// The allocator of the `toolcalls` binary (src/main.rs), so the processor runs here as
/// it runs there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Args {
    command: String,
    flags: HashMap<String, String>,
}

impl Args {
    fn parse() -> Args {
        // `cargo bench` appends `--bench`; ignore it.
        let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
        let command = it.next().unwrap_or_default();
        let mut flags = HashMap::new();
        while let Some(k) = it.next() {
            let Some(name) = k.strip_prefix("--") else {
                usage(&format!("unexpected argument `{k}`"));
            };
            let Some(v) = it.next() else {
                usage(&format!("--{name} needs a value"));
            };
            flags.insert(name.to_owned(), v);
        }
        Args { command, flags }
    }

    fn get<T: std::str::FromStr>(&self, name: &str, default: T) -> T {
        match self.flags.get(name) {
            None => default,
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| usage(&format!("--{name} {v}: not a valid value"))),
        }
    }

    /// `--broker-pid`: the broker's process, for CPU accounting (optional).
    fn broker_pid(&self) -> Option<u32> {
        self.flags.get("broker-pid").and_then(|p| p.parse().ok())
    }

    fn brokers(&self) -> String {
        let b = self
            .flags
            .get("brokers")
            .cloned()
            .unwrap_or_else(|| usage("--brokers 127.0.0.1:PORT is required"));
        if !b.starts_with("127.0.0.1:") {
            usage("--brokers must be a loopback address (127.0.0.1:PORT)");
        }
        b
    }
}

fn usage(why: &str) -> ! {
    eprintln!("{why}\nusage: processor memory|restore|e2e|broker-restore|latency [--flag value ...] (see benches/processor/README.md)");
    std::process::exit(2)
}

fn runtime() -> tokio::runtime::Runtime {
    // What `toolcalls run` builds: one worker per core.
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn main() {
    let args = Args::parse();
    // The processor runs in this process: RUST_LOG shows its logs (and librdkafka's) on stderr.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("machine: {cores} cores available");
    if cfg!(debug_assertions) {
        println!(
            "debug build: this run shows that the bench works and passes its checks; its rates are \
             not measurements (benches/processor/run.sh builds the bench profile)"
        );
    }
    match args.command.as_str() {
        "memory" => {
            let variant = args.get("variant", "bare".to_owned());
            let variant = memory::Variant::parse(&variant)
                .unwrap_or_else(|| usage("--variant is bare, args or idless"));
            memory::run(args.get("calls", 500_000), variant);
        }
        "restore" => restore::pure(args.get("calls", 300_000), args.get("rounds", 3), 11),
        "e2e" => {
            let plan = e2e::Plan {
                brokers: args.brokers(),
                calls: args.get("calls", 200_000),
                partitions: args.get("partitions", 4),
                rounds: args.get("rounds", 3),
                seed: 42,
                long_graces: match args.get("graces", "long".to_owned()).as_str() {
                    "long" => true,
                    "default" => false,
                    _ => usage("--graces is long or default"),
                },
                broker_pid: args.broker_pid(),
                only: args
                    .flags
                    .get("only")
                    .map(|o| o.split(',').map(str::to_owned).collect())
                    .unwrap_or_default(),
                timeline: args
                    .flags
                    .contains_key("timeline")
                    .then(|| std::time::Duration::from_millis(args.get("timeline", 100))),
                align_wait_ms: args
                    .flags
                    .contains_key("align-wait-ms")
                    .then(|| args.get("align-wait-ms", 0)),
            };
            let rt = runtime();
            e2e::run(&rt, &plan);
            rt.shutdown_timeout(std::time::Duration::from_secs(10));
        }
        "broker-restore" => {
            let rt = runtime();
            restore::broker(
                &rt,
                &args.brokers(),
                args.get("calls", 200_000),
                args.get("partitions", 4),
                args.get("samples", 2),
                11,
                args.broker_pid(),
            );
            rt.shutdown_timeout(std::time::Duration::from_secs(10));
        }
        "latency" => {
            let rt = runtime();
            latency::run(
                &rt,
                &latency::Plan {
                    brokers: args.brokers(),
                    rate: args.get("rate", 20_000),
                    seconds: args.get("seconds", 10),
                    partitions: args.get("partitions", 4),
                    warmup_seconds: 1,
                    commit_interval_ms: args
                        .flags
                        .contains_key("commit-interval-ms")
                        .then(|| args.get("commit-interval-ms", 100)),
                },
            );
            rt.shutdown_timeout(std::time::Duration::from_secs(10));
        }
        other => usage(&format!("unknown command `{other}`")),
    }
}
