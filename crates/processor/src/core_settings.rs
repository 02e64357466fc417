//! The correlation rules as options of `toolcalls run` and `toolcalls local`: flags,
//! `TOOLCALLS_*` environment variables and the `[core]` table of the config file, with
//! `toolcalls_core::Config`'s defaults.
//!
//! Precedence, highest first: command-line flag, environment variable, config file, default.

use toolcalls_core::Config;
use toolcalls_settings::Dur;

/// The correlation rules' knobs (`[core]` in the config file).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[group(id = "core")]
pub struct CoreArgs {
    /// A call with no result this long after its announce is closed as TimedOut
    #[arg(long, env = "TOOLCALLS_CALL_TIMEOUT", value_name = "DURATION", default_value_t = Dur::from_millis(Config::default().call_timeout_ms))]
    pub call_timeout: Dur,
    /// After turn_end / turn_aborted or a denial, pending calls wait this long before they close
    /// as Interrupted / Denied
    #[arg(long, env = "TOOLCALLS_TURN_GRACE", value_name = "DURATION", default_value_t = Dur::from_millis(Config::default().turn_grace_ms))]
    pub turn_grace: Dur,
    /// A result whose announce has not arrived waits this long before it is published as
    /// Orphaned
    #[arg(long, env = "TOOLCALLS_ORPHAN_GRACE", value_name = "DURATION", default_value_t = Dur::from_millis(Config::default().orphan_grace_ms))]
    pub orphan_grace: Dur,
    /// Announces sharing an idempotency key this close together collapse into one record
    #[arg(long, env = "TOOLCALLS_IDEMPOTENCY_WINDOW", value_name = "DURATION", default_value_t = Dur::from_millis(Config::default().idempotency_window_ms))]
    pub idempotency_window: Dur,
    /// How long closed call ids are remembered so late repeats count as duplicates; an event no
    /// call holds that is stamped this long before its session's latest is taken as such a
    /// repeat (late). Keep it at least --call-timeout
    #[arg(long, env = "TOOLCALLS_DEDUPE_WINDOW", value_name = "DURATION", default_value_t = Dur::from_millis(Config::default().dedupe_window_ms))]
    pub dedupe_window: Dur,
    /// A session that sent nothing for this long of wall clock goes idle: its deadlines then
    /// follow the partition's stream time instead of its own events' time (the processor only;
    /// local mode has no wall clock)
    #[arg(long, env = "TOOLCALLS_SESSION_IDLE", value_name = "DURATION", default_value_t = Dur::from_millis(Config::default().session_idle_ms))]
    pub session_idle: Dur,
    /// The reorder window: events are held until their session has shown an event this much
    /// later in event time (or, in the processor, for this long of wall clock; or the input
    /// ends) and applied in event-time order, so results that arrive up to this far out of
    /// order pair as they would in order. It delays every event by up to this much; 0 applies
    /// events as they arrive
    #[arg(long, env = "TOOLCALLS_MAX_DISORDER", value_name = "DURATION", default_value_t = Dur::from_millis(Config::default().max_disorder_ms))]
    pub max_disorder: Dur,
    /// Most pending calls and waiting results per partition; over it the oldest are closed as
    /// Evicted
    #[arg(long, env = "TOOLCALLS_MAX_PENDING", value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), default_value_t = Config::default().max_pending)]
    pub max_pending: usize,
    /// Most bytes of pending state per partition (calls and waiting results with their
    /// arguments and results, and their share of the indexes); over it the oldest are closed as
    /// Evicted
    #[arg(long, env = "TOOLCALLS_MAX_PENDING_BYTES", value_name = "BYTES", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), default_value_t = Config::default().max_pending_bytes)]
    pub max_pending_bytes: usize,
    /// Most closed call ids remembered per partition for de-duplication
    #[arg(long, env = "TOOLCALLS_MAX_REMEMBERED", value_name = "N", default_value_t = Config::default().max_remembered)]
    pub max_remembered: usize,
    /// Most sessions per partition noted after every call of theirs was forgotten (about 190
    /// bytes each): their events delivered again, a file read again days later, are then late
    /// instead of calls opened a second time. Past it, the sessions that forgot longest ago go
    #[arg(long, env = "TOOLCALLS_MAX_FORGOTTEN_SESSIONS", value_name = "N", default_value_t = Config::default().max_forgotten_sessions)]
    pub max_forgotten_sessions: usize,
    /// Most bytes the facts of one call may take in its record (hook decisions, approvals,
    /// execution timing, the attributes its events bring), besides its arguments and result; a
    /// fact past it is refused (dead-lettered as call_too_large), so that every record fits in a
    /// Kafka message
    #[arg(long, env = "TOOLCALLS_MAX_FACTS_BYTES", value_name = "BYTES", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), default_value_t = Config::default().max_facts_bytes)]
    pub max_facts_bytes: usize,
}

/// `toolcalls_core::Config`'s defaults.
impl Default for CoreArgs {
    fn default() -> Self {
        toolcalls_settings::defaults()
    }
}

impl CoreArgs {
    /// The correlation rules, checked. `input_topics` keeps its default: the processor, which
    /// reads two, sets it.
    pub fn resolve(&self) -> Result<Config, String> {
        if self.call_timeout.millis() == 0 {
            return Err(
                "--call-timeout (TOOLCALLS_CALL_TIMEOUT, `call_timeout` in [core]) must be greater than 0"
                    .into(),
            );
        }
        let config = Config {
            call_timeout_ms: self.call_timeout.millis(),
            turn_grace_ms: self.turn_grace.millis(),
            orphan_grace_ms: self.orphan_grace.millis(),
            idempotency_window_ms: self.idempotency_window.millis(),
            dedupe_window_ms: self.dedupe_window.millis(),
            max_pending: self.max_pending,
            max_pending_bytes: self.max_pending_bytes,
            session_idle_ms: self.session_idle.millis(),
            max_disorder_ms: self.max_disorder.millis(),
            max_remembered: self.max_remembered,
            max_forgotten_sessions: self.max_forgotten_sessions,
            max_facts_bytes: self.max_facts_bytes,
            ..Config::default()
        };
        config
            .validate()
            .map_err(|e| format!("invalid correlation settings: {e}"))?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        core: CoreArgs,
    }

    fn core(file: &str, argv: &[&str]) -> Result<Config, String> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "toolcalls-core-settings-{}-{n}.toml",
            std::process::id()
        ));
        std::fs::write(&path, file).unwrap();
        let args = ["x", "--config", path.to_str().unwrap()]
            .into_iter()
            .chain(argv.iter().copied());
        let parsed = toolcalls_settings::try_parse_from::<Cli, _, _>(args);
        std::fs::remove_file(&path).unwrap();
        parsed.map_err(|e| e.to_string())?.0.core.resolve()
    }

    #[test]
    fn defaults_are_the_cores() {
        assert_eq!(CoreArgs::default().resolve(), Ok(Config::default()));
        assert_eq!(
            CoreArgs::default().call_timeout.to_string(),
            "30m",
            "shown in --help as the core's default"
        );
    }

    #[test]
    fn flags_override_file_override_defaults() {
        let c = core(
            "[core]\ncall_timeout = \"1m\"\nturn_grace = 500\nmax_pending = 7\n",
            &["--turn-grace", "2s"],
        )
        .unwrap();
        assert_eq!(c.call_timeout_ms, 60_000);
        assert_eq!(c.turn_grace_ms, 2_000);
        assert_eq!(c.max_pending, 7);
        assert_eq!(c.orphan_grace_ms, Config::default().orphan_grace_ms);
        let e = core("[core]\nbogus = 1\n", &[]).unwrap_err();
        assert!(e.contains("bogus") && e.contains("[core]"), "{e}");
        let e = core("", &["--max-pending", "0"]).unwrap_err();
        assert!(e.contains("--max-pending"), "{e}");
    }
}
