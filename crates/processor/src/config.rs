//! Configuration of the processor: each setting declared once.
//!
//! [`Settings`] is both what the runtime reads and the options of `toolcalls run`: each field's
//! flag, `TOOLCALLS_*` environment variable, default and help text are its clap attributes, and
//! `toolcalls_settings` makes it a key of the `--config` file too (precedence: flag, variable,
//! file, default). [`RunArgs`] adds the correlation rules and resolves both into one checked
//! [`Settings`], built once and passed down.

use crate::core_settings::CoreArgs;
use crate::error::Error;
use crate::redact_settings::RedactArgs;
pub use crate::secret::Secret;
use crate::spans::settings::SpanArgs;
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use toolcalls_settings::{ConfigFile, KeyValueParser};

/// Default bootstrap servers, of the processor and of `toolcalls ingest`.
pub const DEFAULT_BROKERS: &str = "localhost:9092";
/// Largest record the processor publishes (librdkafka `message.max.bytes` of its producer); the
/// records and dead-letter topics are created to accept it.
pub const MAX_OUTPUT_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// What a record's fields other than its arguments, result, attributes and facts take at most:
/// ids, times, references, correlation, provenance (a call's events, positions).
const RECORD_FRAME_BYTES: usize = 1 << 20;
/// Default input topic of announces, of the processor and of `toolcalls ingest`.
pub const DEFAULT_ANNOUNCE_TOPIC: &str = "toolcalls.announce";
/// Default input topic of completions, of the processor and of `toolcalls ingest`.
pub const DEFAULT_COMPLETION_TOPIC: &str = "toolcalls.completion";

/// Delivery guarantee of the output topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Guarantee {
    /// One transaction per batch: records, changelog, dead letters and input offsets commit
    /// together. Downstream readers must use `isolation.level=read_committed`.
    #[default]
    ExactlyOnce,
    /// Outputs are flushed before offsets are committed; after a crash a batch may be published
    /// again (with the same record keys, so a compacted records topic converges).
    AtLeastOnce,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Topic names: `[topics]` in the config file.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[group(id = "topics")]
pub struct Topics {
    /// Input topic of announces and turn, approval and hook events
    #[arg(long = "announce-topic", env = "TOOLCALLS_ANNOUNCE_TOPIC", value_name = "TOPIC", default_value = DEFAULT_ANNOUNCE_TOPIC)]
    pub announce: String,
    /// Input topic of completions and execution ends; must have as many partitions as the
    /// announce topic
    #[arg(long = "completion-topic", env = "TOOLCALLS_COMPLETION_TOPIC", value_name = "TOPIC", default_value = DEFAULT_COMPLETION_TOPIC)]
    pub completion: String,
    /// Output topic of ToolCall records, keyed by record id
    #[arg(
        long = "records-topic",
        env = "TOOLCALLS_RECORDS_TOPIC",
        value_name = "TOPIC",
        default_value = "toolcalls.records"
    )]
    pub records: String,
    /// Dead-letter topic: every message that could not be processed, with reason headers
    #[arg(
        long = "dlq-topic",
        env = "TOOLCALLS_DLQ_TOPIC",
        value_name = "TOPIC",
        default_value = "toolcalls.dlq"
    )]
    pub dlq: String,
    /// Compacted topic with each partition's pending state, for restore (default:
    /// `<group>-changelog`)
    #[arg(
        long = "changelog-topic",
        env = "TOOLCALLS_CHANGELOG_TOPIC",
        value_name = "TOPIC",
        default_value = "",
        hide_default_value = true
    )]
    pub changelog: String,
}

impl Default for Topics {
    fn default() -> Self {
        toolcalls_settings::defaults()
    }
}

/// Everything the runtime needs, resolved; also the options of `toolcalls run`.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct Settings {
    /// Kafka bootstrap servers (`bootstrap.servers`)
    #[arg(long, env = "TOOLCALLS_BROKERS", value_name = "HOSTS", default_value = DEFAULT_BROKERS)]
    pub brokers: String,
    /// Consumer group id; also names the changelog topic and the transactional id
    #[arg(long, env = "TOOLCALLS_GROUP", default_value = "toolcalls")]
    pub group: String,
    /// Stable id of this instance, unique in the group (default: the host name); the
    /// transactional id is `<group>-<instance-id>`, so a restarted instance fences its own
    /// unfinished transaction at once
    #[arg(long, env = "TOOLCALLS_INSTANCE_ID", default_value_t = default_instance_id())]
    pub instance_id: String,
    /// `exactly-once` (one transaction per batch) or `at-least-once` (idempotent record keys)
    #[arg(long, env = "TOOLCALLS_GUARANTEE", value_enum, default_value_t = Guarantee::ExactlyOnce)]
    pub guarantee: Guarantee,
    /// How often a batch is committed (one transaction), in milliseconds
    #[arg(
        long,
        env = "TOOLCALLS_COMMIT_INTERVAL_MS",
        value_name = "MS",
        default_value_t = 100
    )]
    pub commit_interval_ms: u64,
    /// How often idle partitions move their stream time on by the wall clock, in milliseconds
    #[arg(
        long,
        env = "TOOLCALLS_PUNCTUATION_INTERVAL_MS",
        value_name = "MS",
        default_value_t = 1000
    )]
    pub punctuation_interval_ms: u64,
    /// An input topic silent this long (ms, wall clock) while the partition's other topic
    /// delivers no longer holds stream time back (stream time is otherwise the watermark of both
    /// input topics)
    #[arg(
        long,
        env = "TOOLCALLS_INPUT_IDLE_MS",
        value_name = "MS",
        default_value_t = 5000
    )]
    pub input_idle_ms: u64,
    /// The two input topics of a partition are applied merged by message timestamp; a message
    /// waits at most this long (ms) after it arrived for the other topic, while that topic may
    /// still deliver older messages (from half of it on, statistics that show the topic caught
    /// up end the wait). 0 applies input in arrival order
    #[arg(
        long,
        env = "TOOLCALLS_ALIGN_WAIT_MS",
        value_name = "MS",
        default_value_t = 500
    )]
    pub align_wait_ms: u64,
    /// Larger input messages go to the dead-letter topic (`too_large`)
    #[arg(long, env = "TOOLCALLS_MAX_MESSAGE_BYTES", value_name = "BYTES", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), default_value_t = 1024 * 1024)]
    pub max_message_bytes: usize,
    /// Events dated this far (ms) ahead of the wall clock go to the dead-letter topic
    /// (`far_future`): they would move stream time and time out every pending call
    #[arg(long, env = "TOOLCALLS_MAX_FUTURE_SKEW_MS", value_name = "MS", default_value_t = 24 * 3600 * 1000)]
    pub max_future_skew_ms: u64,
    /// A partition is not read while this many of its messages wait (librdkafka then stops
    /// fetching it once its prefetch queue is full)
    #[arg(
        long,
        env = "TOOLCALLS_MAX_INFLIGHT_MESSAGES",
        value_name = "N",
        default_value_t = 100_000
    )]
    pub max_inflight_messages: usize,
    /// No partition is read while this many input bytes wait
    #[arg(long, env = "TOOLCALLS_MAX_INFLIGHT_BYTES", value_name = "BYTES", default_value_t = 256 * 1024 * 1024)]
    pub max_inflight_bytes: usize,
    /// Upper bound for reading a changelog partition to its end, in milliseconds
    #[arg(
        long,
        env = "TOOLCALLS_RESTORE_TIMEOUT_MS",
        value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..),
        default_value_t = 120_000
    )]
    pub restore_timeout_ms: u64,
    /// Timeout of blocking Kafka calls (commit, offsets, metadata) and of the producer's
    /// requests (its `socket.timeout.ms`, unless --kafka sets it), in milliseconds
    #[arg(
        long,
        env = "TOOLCALLS_KAFKA_TIMEOUT_MS",
        value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..),
        default_value_t = 30_000
    )]
    pub kafka_timeout_ms: u64,
    /// `transaction.timeout.ms` of the producer; also how long an abort is retried while the
    /// broker does not answer, before the processor stops with an error
    #[arg(
        long,
        env = "TOOLCALLS_TRANSACTION_TIMEOUT_MS",
        value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..),
        default_value_t = 60_000
    )]
    pub transaction_timeout_ms: u64,
    /// Address of the operations listener: /metrics, /healthz, /readyz (give 0.0.0.0:9464 for a
    /// scraper on another host)
    #[arg(long, env = "TOOLCALLS_HTTP_ADDR", value_name = "ADDR", default_value_t = SocketAddr::from(([127, 0, 0, 1], 9464)))]
    pub http_addr: SocketAddr,
    /// Address of the query API (/v1/…), a listener of its own; off unless set. It answers with
    /// tool inputs and results, so an address beyond loopback needs --api-token
    #[arg(long, env = "TOOLCALLS_API_ADDR", value_name = "ADDR")]
    pub api_addr: Option<SocketAddr>,
    /// Bearer token the query API requires (`Authorization: Bearer <token>`); required when
    /// --api-addr is not a loopback address. Prefer the variable (or a file) to the flag, which
    /// other users of the host can see
    #[arg(
        long,
        env = "TOOLCALLS_API_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub api_token: Option<Secret>,
    /// How long a client of the operations listener or the query API may take to send a
    /// request's headers; a connection that sends nothing for that long is closed
    #[arg(
        long,
        env = "TOOLCALLS_HTTP_READ_TIMEOUT_MS",
        value_name = "MS",
        default_value_t = 10_000
    )]
    pub http_read_timeout_ms: u64,
    /// Connections the operations listener, and the query API, each serve at once (at most
    /// 1048576); more wait to be accepted until one ends
    #[arg(
        long,
        env = "TOOLCALLS_HTTP_MAX_CONNECTIONS",
        value_name = "N",
        default_value_t = 256
    )]
    pub http_max_connections: usize,
    /// Log format; the level comes from RUST_LOG (default `info`)
    #[arg(long, env = "TOOLCALLS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// librdkafka property for every client (TLS, SASL, tuning), after the processor's own,
    /// repeatable: `--kafka security.protocol=SSL`; the variable takes a comma-separated list;
    /// the flags (or else the variable) go after the file's `[kafka]` table
    #[arg(long = "kafka", env = "TOOLCALLS_KAFKA", value_name = "KEY=VALUE", value_parser = KeyValueParser, value_delimiter = ',', hide_env_values = true)]
    pub kafka: Vec<(String, String)>,
    /// Test hook: stop dead at a named point (see `failpoint.rs`). Never set it in production.
    #[arg(long, env = "TOOLCALLS_FAILPOINT", hide = true)]
    pub failpoint: Option<String>,
    #[command(flatten, next_help_heading = "Topics")]
    pub topics: Topics,
    /// The correlation rules: [`CoreArgs`] on the command line, set by [`RunArgs::into_settings`].
    #[arg(skip)]
    pub core: toolcalls_core::Config,
    /// The redaction rules: [`RedactArgs`] on the command line, set by
    /// [`RunArgs::into_settings`].
    #[arg(skip)]
    pub redact: RedactArgs,
    /// Span export: [`SpanArgs`] on the command line, set by [`RunArgs::into_settings`].
    #[arg(skip)]
    pub spans: SpanArgs,
}

/// The declared defaults of every option, whatever the environment says.
impl Default for Settings {
    fn default() -> Self {
        toolcalls_settings::defaults()
    }
}

fn default_instance_id() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "0".into())
}

impl Settings {
    pub fn changelog_topic(&self) -> String {
        if self.topics.changelog.is_empty() {
            format!("{}-changelog", self.group)
        } else {
            self.topics.changelog.clone()
        }
    }

    pub fn transactional_id(&self) -> String {
        format!("{}-{}", self.group, self.instance_id)
    }

    /// Checks the settings make sense together; the message says which one to change.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if self.brokers.trim().is_empty() {
            return bad(
                "--brokers is empty; give bootstrap servers as host:port[,host:port]".into(),
            );
        }
        if self.group.is_empty() || self.instance_id.is_empty() {
            return bad("--group and --instance-id must not be empty".into());
        }
        let t = &self.topics;
        let names = [&t.announce, &t.completion, &t.records, &t.dlq];
        if names.iter().any(|n| n.is_empty()) {
            return bad("topic names must not be empty".into());
        }
        if t.announce == t.completion {
            return bad("the announce and completion topics must differ".into());
        }
        let changelog = self.changelog_topic();
        if [&t.announce, &t.completion]
            .iter()
            .any(|n| **n == t.records || **n == t.dlq || **n == changelog)
        {
            return bad(
                "an output topic (records, dlq, changelog) must not be an input topic".into(),
            );
        }
        if self.commit_interval_ms == 0 || self.punctuation_interval_ms == 0 {
            return bad(
                "--commit-interval-ms and --punctuation-interval-ms must be greater than 0".into(),
            );
        }
        if self.max_inflight_messages == 0 || self.max_inflight_bytes == 0 {
            return bad(
                "--max-inflight-messages and --max-inflight-bytes must be greater than 0".into(),
            );
        }
        // A record holds a call's arguments, its result and the attributes of the result's
        // event (each at most one input message) and its facts; it must fit in a message of
        // the records and changelog topics, or the partition could not go on.
        let largest_record = self
            .max_message_bytes
            .saturating_mul(3)
            .saturating_add(self.core.max_facts_bytes)
            .saturating_add(RECORD_FRAME_BYTES);
        if largest_record > MAX_OUTPUT_MESSAGE_BYTES {
            return bad(format!(
                "a record could take {largest_record} bytes (3 × --max-message-bytes {} + --max-facts-bytes {} + {RECORD_FRAME_BYTES} for its other fields), more than the {} a record may be; lower either",
                self.max_message_bytes,
                self.core.max_facts_bytes,
                MAX_OUTPUT_MESSAGE_BYTES
            ));
        }
        if self.http_read_timeout_ms == 0 || self.http_max_connections == 0 {
            return bad(
                "--http-read-timeout-ms and --http-max-connections must be greater than 0".into(),
            );
        }
        if self.http_max_connections > crate::listener::MAX_CONNECTIONS {
            return bad(format!(
                "--http-max-connections must be at most {}",
                crate::listener::MAX_CONNECTIONS
            ));
        }
        if let Some(token) = &self.api_token {
            token.check_token("--api-token").map_err(Error::Config)?;
        }
        if let Some(addr) = self.api_addr {
            if !addr.ip().is_loopback() && self.api_token.is_none() {
                return bad(format!(
                    "--api-addr {addr} is reachable beyond this host, and the query API answers with tool inputs and results: set --api-token (TOOLCALLS_API_TOKEN), or bind it to 127.0.0.1"
                ));
            }
        }
        self.core.validate().map_err(Error::Config)?;
        self.redact.resolve().map_err(Error::Config)?;
        self.spans.validate().map_err(Error::Config)?;
        toolcalls_producer::check_kafka_properties(&self.kafka).map_err(Error::Config)?;
        toolcalls_producer::keeps_acknowledged_delivery(&self.kafka).map_err(Error::Config)?;
        for (k, _) in &self.kafka {
            if matches!(
                k.as_str(),
                "group.id" | "transactional.id" | "enable.auto.commit" | "isolation.level"
            ) {
                return bad(format!(
                    "--kafka {k}=… is managed by the processor; use the dedicated option instead (--group, --instance-id, --guarantee)"
                ));
            }
        }
        Ok(())
    }
}

/// The options of `toolcalls run` (and `toolcalls topics`): the processor's settings and the
/// correlation rules.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub settings: Settings,
    #[command(flatten, next_help_heading = "Correlation rules")]
    pub core: CoreArgs,
    #[command(flatten, next_help_heading = "Redaction")]
    pub redact: RedactArgs,
    #[command(flatten, next_help_heading = "OpenTelemetry spans")]
    pub spans: SpanArgs,
}

impl RunArgs {
    /// The settings with the correlation rules and the config file's `[kafka]` table (before
    /// the `--kafka` values), checked.
    pub fn into_settings(self, file: &ConfigFile) -> Result<Settings, Error> {
        let mut s = self.settings;
        s.core = self.core.resolve().map_err(Error::Config)?;
        s.redact = self.redact.with_file(file);
        s.spans = self.spans;
        let file_headers = file.pairs("otlp_header").into_iter();
        s.spans.otlp_header = file_headers
            .map(|(k, v)| (k, Secret(v)))
            .chain(s.spans.otlp_header)
            .collect();
        s.kafka = file.pairs("kafka").into_iter().chain(s.kafka).collect();
        s.validate()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn settings(argv: &[&str]) -> Result<Settings, String> {
        let (cli, file) =
            toolcalls_settings::try_parse_from::<Cli, _, _>(std::iter::once(&"x").chain(argv))
                .map_err(|e| e.to_string())?;
        cli.run.into_settings(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn flags_override_file_override_defaults() {
        let dir =
            std::env::temp_dir().join(format!("toolcalls-processor-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(
            &path,
            r#"
brokers = "file:9092"
group = "g-file"
commit_interval_ms = 250
[topics]
announce = "a"
completion = "c"
[core]
call_timeout = "5s"
[kafka]
"security.protocol" = "SSL"
"linger.ms" = 5
"#,
        )
        .unwrap();
        let s = settings(&[
            "--config",
            path.to_str().unwrap(),
            "--group",
            "g-flag",
            "--kafka",
            "client.id=me",
            "--turn-grace",
            "7ms",
        ])
        .unwrap();
        assert_eq!(s.brokers, "file:9092");
        assert_eq!(s.group, "g-flag");
        assert_eq!(s.commit_interval_ms, 250);
        assert_eq!(s.topics.announce, "a");
        assert_eq!(
            s.topics.records, "toolcalls.records",
            "a [topics] table keeps defaults for names it omits"
        );
        assert_eq!(s.core.call_timeout_ms, 5000);
        assert_eq!(s.core.turn_grace_ms, 7);
        assert_eq!(s.changelog_topic(), "g-flag-changelog");
        assert!(s
            .kafka
            .contains(&("security.protocol".into(), "SSL".into())));
        assert!(s.kafka.contains(&("linger.ms".into(), "5".into())));
        assert_eq!(s.kafka.last(), Some(&("client.id".into(), "me".into())));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn defaults_are_the_declared_ones() {
        let s = Settings::default();
        assert_eq!(
            (s.brokers.as_str(), s.group.as_str(), s.guarantee),
            ("localhost:9092", "toolcalls", Guarantee::ExactlyOnce)
        );
        assert_eq!(
            (
                s.commit_interval_ms,
                s.max_message_bytes,
                s.max_inflight_bytes
            ),
            (100, 1 << 20, 256 << 20)
        );
        assert_eq!(s.http_addr, SocketAddr::from(([127, 0, 0, 1], 9464)));
        assert!(s.api_addr.is_none() && s.api_token.is_none());
        assert_eq!(s.topics, Topics::default());
        assert_eq!(
            (s.topics.announce.as_str(), s.changelog_topic()),
            ("toolcalls.announce", "toolcalls-changelog".to_owned())
        );
        assert_eq!(s.core, toolcalls_core::Config::default());
        assert!(s.kafka.is_empty() && s.failpoint.is_none() && !s.instance_id.is_empty());
        assert!(s.validate().is_ok());
    }

    #[test]
    fn refuses_managed_kafka_keys_and_bad_pairs() {
        let e = settings(&["--kafka", "group.id=x"]).unwrap_err();
        assert!(e.contains("--group"), "{e}");
        assert!(settings(&["--kafka", "novalue"]).is_err());
        let e = settings(&["--kafka", "acks=1"]).unwrap_err();
        assert!(e.contains("acks=all"), "{e}");
    }

    #[test]
    fn refuses_more_connections_than_a_listener_can_count() {
        assert!(settings(&["--http-max-connections", "1048576"]).is_ok());
        let e = settings(&["--http-max-connections", "2305843009213693952"]).unwrap_err();
        assert!(e.contains("at most 1048576"), "{e}");
    }

    #[test]
    fn an_exposed_query_api_needs_a_token() {
        let e = settings(&["--api-addr", "0.0.0.0:9465"]).unwrap_err();
        assert!(e.contains("--api-token"), "{e}");
        let token = "s3cret-of-20-chars!!";
        assert!(settings(&["--api-addr", "0.0.0.0:9465", "--api-token", token]).is_ok());
        assert!(settings(&["--api-token", "s3cret"]).is_err());
        assert!(settings(&["--api-addr", "127.0.0.1:9465"]).is_ok());
        assert!(settings(&["--api-token", " "]).is_err());
    }

    #[test]
    fn refuses_limits_that_would_let_a_record_outgrow_the_records_topic() {
        // 3 × 3 MiB + 4 MiB + 1 MiB fits in 16 MiB; 3 × 4 MiB + 4 MiB + 1 MiB does not.
        assert!(settings(&["--max-message-bytes", "3145728"]).is_ok());
        let e = settings(&["--max-message-bytes", "4194304"]).unwrap_err();
        assert!(
            e.contains("--max-message-bytes") && e.contains("--max-facts-bytes"),
            "{e}"
        );
        assert!(settings(&["--max-facts-bytes", "12582912"]).is_ok());
        assert!(settings(&["--max-facts-bytes", "12582913"]).is_err());
        assert!(settings(&[
            "--max-facts-bytes",
            "1048576",
            "--max-message-bytes",
            "4194304"
        ])
        .is_ok());
    }

    #[test]
    fn refuses_an_input_topic_as_output() {
        let mut s = Settings::default();
        s.topics.records = s.topics.announce.clone();
        assert!(s.validate().is_err());
    }
}
