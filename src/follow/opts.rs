//! The options of `toolcalls ingest --follow`: `[follow]` in the config file.

use std::path::PathBuf;
use std::time::Duration;
use toolcalls_processor::LogFormat;
use toolcalls_settings::Dur;

/// `[follow]` in the config file.
#[derive(Debug, Clone, clap::Args)]
#[group(id = "follow")]
pub struct Opts {
    /// Keep reading: tail the files (and directories, and quoted globs such as
    /// `'~/.codex/sessions/**/rollout-*.jsonl'`) as agents write them, pick up new files, and
    /// publish only what is new; runs until stopped (see docs/OPERATIONS.md, "Following and checkpoints")
    // The id names the config key (`[follow] enabled`): a group and an option may not share a name.
    #[arg(id = "enabled", long = "follow", env = "TOOLCALLS_FOLLOW")]
    pub follow: bool,
    /// Where `--follow` keeps a checkpoint per file (what of it was delivered), so that a
    /// restart sends only what was not acknowledged; without it a restart sends every file again
    #[arg(long, env = "TOOLCALLS_CHECKPOINT_DIR", value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// How often `--follow` looks for new files and for files that changed
    #[arg(
        long,
        env = "TOOLCALLS_POLL_INTERVAL",
        value_name = "DURATION",
        default_value_t = Dur(Duration::from_millis(250))
    )]
    pub poll_interval: Dur,
    /// With `--follow`: look once, deliver what is new (checkpoints kept) and exit, instead of
    /// following until stopped — for runs from cron or a batch job
    #[arg(long, env = "TOOLCALLS_FOLLOW_ONCE")]
    pub once: bool,
    /// Serve the follower's metrics (`GET /metrics`: events read, sent, left out and redacted
    /// per format, bytes behind per file, send errors, last checkpoint time) and `GET /healthz`
    /// on this address; off unless set
    #[arg(long, env = "TOOLCALLS_FOLLOW_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Log format of `--follow`; the level comes from RUST_LOG (default `info`, `warn` with -q)
    #[arg(long, env = "TOOLCALLS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}
