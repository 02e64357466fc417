//! Configuration of the processor: defaults, then a TOML file, then environment variables and flags.
//!
//! [`RunArgs`] is the clap surface (`toolcalls run --help`); every flag has an environment variable
//! `TOOLCALLS_*`. [`RunArgs::into_settings`] layers it over the file given with `--config` and the
//! defaults into one [`Settings`], built once and passed down.

use crate::error::Error;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Delivery guarantee of the output topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, Default)]
#[serde(rename_all = "kebab-case")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Topic names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Topics {
    pub announce: String,
    pub completion: String,
    pub records: String,
    pub dlq: String,
    /// Empty means `<group>-changelog`.
    pub changelog: String,
}

impl Default for Topics {
    fn default() -> Self {
        Topics {
            announce: "toolcalls.announce".into(),
            completion: "toolcalls.completion".into(),
            records: "toolcalls.records".into(),
            dlq: "toolcalls.dlq".into(),
            changelog: String::new(),
        }
    }
}

/// Everything the runtime needs, resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// `bootstrap.servers`.
    pub brokers: String,
    /// Consumer group id; also the prefix of the changelog topic and the transactional id.
    pub group: String,
    /// Stable id of this instance; `transactional.id = <group>-<instance_id>`, so a restarted
    /// instance fences its own unfinished transaction at once. Must differ between instances.
    pub instance_id: String,
    pub topics: Topics,
    pub guarantee: Guarantee,
    /// How often a batch is committed (one transaction).
    pub commit_interval_ms: u64,
    /// How often idle partitions are advanced by wall clock.
    pub punctuation_interval_ms: u64,
    /// An input topic of a partition that delivered nothing for this long (wall clock) no longer
    /// holds the partition's stream time back (stream time is otherwise the watermark of both
    /// input topics).
    pub input_idle_ms: u64,
    /// How long (ms, wall clock) a partition's message waits for the other input topic, which
    /// may still deliver older messages, before it is applied out of timestamp order; 0 applies
    /// input in arrival order.
    pub align_wait_ms: u64,
    /// Input messages larger than this go to the dead-letter topic (`too_large`).
    pub max_message_bytes: usize,
    /// Events whose time is this far ahead of the wall clock go to the dead-letter topic
    /// (`far_future`): they would move stream time and time out every pending call.
    pub max_future_skew_ms: u64,
    /// A partition is not read while this many of its messages wait to be processed.
    pub max_inflight_messages: usize,
    /// No partition is read while this many bytes of input wait to be processed.
    pub max_inflight_bytes: usize,
    /// Upper bound for reading a changelog partition to its end.
    pub restore_timeout_ms: u64,
    /// Timeout of blocking Kafka calls (commit, offsets, metadata).
    pub kafka_timeout_ms: u64,
    /// `transaction.timeout.ms` of the producer; also how long an abort is retried while the
    /// broker does not answer.
    pub transaction_timeout_ms: u64,
    /// Where `/metrics`, `/healthz`, `/readyz` and `/v1/...` are served.
    pub http_addr: SocketAddr,
    pub log_format: LogFormat,
    /// Correlation rules.
    pub core: toolcalls_core::Config,
    /// librdkafka properties applied to every client (TLS, SASL, tuning), after ours.
    pub kafka: Vec<(String, String)>,
    /// Test hook: stop dead at a named point (see `failpoint.rs`). Never set it in production.
    #[serde(skip)]
    pub failpoint: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            brokers: "localhost:9092".into(),
            group: "toolcalls".into(),
            instance_id: default_instance_id(),
            topics: Topics::default(),
            guarantee: Guarantee::ExactlyOnce,
            commit_interval_ms: 100,
            punctuation_interval_ms: 1000,
            input_idle_ms: 5000,
            align_wait_ms: 500,
            max_message_bytes: 1024 * 1024,
            max_future_skew_ms: 24 * 3600 * 1000,
            max_inflight_messages: 100_000,
            max_inflight_bytes: 256 * 1024 * 1024,
            restore_timeout_ms: 120_000,
            kafka_timeout_ms: 30_000,
            transaction_timeout_ms: 60_000,
            http_addr: SocketAddr::from(([0, 0, 0, 0], 9464)),
            log_format: LogFormat::Text,
            core: toolcalls_core::Config::default(),
            kafka: Vec::new(),
            failpoint: None,
        }
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
        self.core.validate().map_err(Error::Config)?;
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

/// Parses `key=value`.
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!(
            "`{s}` is not key=value (e.g. --kafka security.protocol=SSL)"
        )),
    }
}

/// Flags of `toolcalls run`. Unset flags fall back to the `--config` file, then to defaults.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// TOML file with settings (same names as the flags, with underscores; `[topics]`, `[core]`,
    /// `[kafka]` tables).
    #[arg(long, env = "TOOLCALLS_CONFIG")]
    pub config: Option<PathBuf>,
    /// Kafka bootstrap servers [default: localhost:9092]
    #[arg(long, env = "TOOLCALLS_BROKERS")]
    pub brokers: Option<String>,
    /// Consumer group id; also names the changelog topic and the transactional id
    /// [default: toolcalls]
    #[arg(long, env = "TOOLCALLS_GROUP")]
    pub group: Option<String>,
    /// Stable, unique id of this instance (default: the host name).
    #[arg(long, env = "TOOLCALLS_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// Input topic of announce events [default: toolcalls.announce]
    #[arg(long, env = "TOOLCALLS_ANNOUNCE_TOPIC")]
    pub announce_topic: Option<String>,
    /// Input topic of completions and the other events; must have as many partitions as the
    /// announce topic [default: toolcalls.completion]
    #[arg(long, env = "TOOLCALLS_COMPLETION_TOPIC")]
    pub completion_topic: Option<String>,
    /// Output topic of ToolCall records, keyed by record id [default: toolcalls.records]
    #[arg(long, env = "TOOLCALLS_RECORDS_TOPIC")]
    pub records_topic: Option<String>,
    /// Dead-letter topic: every message that could not be processed, with reason headers
    /// [default: toolcalls.dlq]
    #[arg(long, env = "TOOLCALLS_DLQ_TOPIC")]
    pub dlq_topic: Option<String>,
    /// Compacted topic with each partition's pending state, for restore [default: <group>-changelog]
    #[arg(long, env = "TOOLCALLS_CHANGELOG_TOPIC")]
    pub changelog_topic: Option<String>,
    /// `exactly-once` (one transaction per batch) or `at-least-once` (idempotent record keys)
    /// [default: exactly-once]
    #[arg(long, env = "TOOLCALLS_GUARANTEE", value_enum)]
    pub guarantee: Option<Guarantee>,
    /// How often a batch is committed, in milliseconds [default: 100]
    #[arg(long, env = "TOOLCALLS_COMMIT_INTERVAL_MS")]
    pub commit_interval_ms: Option<u64>,
    /// How often idle partitions move their stream time on by the wall clock, in milliseconds
    /// [default: 1000]
    #[arg(long, env = "TOOLCALLS_PUNCTUATION_INTERVAL_MS")]
    pub punctuation_interval_ms: Option<u64>,
    /// An input topic silent this long (ms, wall clock) while the partition's other topic
    /// delivers no longer holds stream time back [default: 5000]
    #[arg(long, env = "TOOLCALLS_INPUT_IDLE_MS")]
    pub input_idle_ms: Option<u64>,
    /// The two input topics of a partition are applied merged by message timestamp; a message
    /// waits at most this long (ms) for a topic that delivered within that time and may still
    /// deliver older messages. 0 applies input in arrival order [default: 500]
    #[arg(long, env = "TOOLCALLS_ALIGN_WAIT_MS")]
    pub align_wait_ms: Option<u64>,
    /// Larger input messages go to the dead-letter topic (`too_large`) [default: 1048576]
    #[arg(long, env = "TOOLCALLS_MAX_MESSAGE_BYTES")]
    pub max_message_bytes: Option<usize>,
    /// Events dated this far ahead of the wall clock go to the dead-letter topic (`far_future`)
    /// [default: 86400000]
    #[arg(long, env = "TOOLCALLS_MAX_FUTURE_SKEW_MS")]
    pub max_future_skew_ms: Option<u64>,
    /// A partition is not read while this many of its messages wait (librdkafka then stops
    /// fetching it once its prefetch queue is full) [default: 100000]
    #[arg(long, env = "TOOLCALLS_MAX_INFLIGHT_MESSAGES")]
    pub max_inflight_messages: Option<usize>,
    /// No partition is read while this many input bytes wait [default: 268435456]
    #[arg(long, env = "TOOLCALLS_MAX_INFLIGHT_BYTES")]
    pub max_inflight_bytes: Option<usize>,
    /// Upper bound for reading a changelog partition to its end, in milliseconds [default: 120000]
    #[arg(long, env = "TOOLCALLS_RESTORE_TIMEOUT_MS")]
    pub restore_timeout_ms: Option<u64>,
    /// Timeout of blocking Kafka calls (commit, offsets, metadata), in milliseconds
    /// [default: 30000]
    #[arg(long, env = "TOOLCALLS_KAFKA_TIMEOUT_MS")]
    pub kafka_timeout_ms: Option<u64>,
    /// `transaction.timeout.ms` of the producer; also how long an abort is retried while the
    /// broker does not answer, before the processor stops with an error [default: 60000]
    #[arg(long, env = "TOOLCALLS_TRANSACTION_TIMEOUT_MS")]
    pub transaction_timeout_ms: Option<u64>,
    /// Address of the HTTP server: /metrics, /healthz, /readyz, /v1/… [default: 0.0.0.0:9464]
    #[arg(long, env = "TOOLCALLS_HTTP_ADDR")]
    pub http_addr: Option<SocketAddr>,
    /// Log format: `text` or `json` [default: text]; the level comes from RUST_LOG
    #[arg(long, env = "TOOLCALLS_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    #[command(flatten)]
    pub core: crate::core_settings::CoreArgs,
    /// librdkafka property for every client, repeatable: `--kafka security.protocol=SSL`.
    /// The environment variable takes a comma-separated list.
    #[arg(long = "kafka", env = "TOOLCALLS_KAFKA", value_name = "KEY=VALUE", value_parser = parse_key_value, value_delimiter = ',')]
    pub kafka: Vec<(String, String)>,
    #[arg(long, env = "TOOLCALLS_FAILPOINT", hide = true)]
    pub failpoint: Option<String>,
}

/// The `--config` file: the same settings, all optional, `[kafka]` as a table of strings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    brokers: Option<String>,
    group: Option<String>,
    instance_id: Option<String>,
    #[serde(default)]
    topics: Option<Topics>,
    guarantee: Option<Guarantee>,
    commit_interval_ms: Option<u64>,
    punctuation_interval_ms: Option<u64>,
    input_idle_ms: Option<u64>,
    align_wait_ms: Option<u64>,
    max_message_bytes: Option<usize>,
    max_future_skew_ms: Option<u64>,
    max_inflight_messages: Option<usize>,
    max_inflight_bytes: Option<usize>,
    restore_timeout_ms: Option<u64>,
    kafka_timeout_ms: Option<u64>,
    transaction_timeout_ms: Option<u64>,
    http_addr: Option<SocketAddr>,
    log_format: Option<LogFormat>,
    core: Option<crate::core_settings::CoreFile>,
    #[serde(default)]
    kafka: std::collections::BTreeMap<String, toml::Value>,
    /// `toolcalls local`'s table: the same file serves every subcommand.
    #[serde(default, rename = "local")]
    _local: Option<toml::Value>,
    /// `toolcalls ingest`'s table.
    #[serde(default, rename = "ingest")]
    _ingest: Option<toml::Value>,
}

impl RunArgs {
    /// Defaults, then the file, then env and flags.
    pub fn into_settings(self) -> Result<Settings, Error> {
        let file = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Error::Config(format!("cannot read config file {}: {e}", path.display()))
                })?;
                toml::from_str::<FileSettings>(&text)
                    .map_err(|e| Error::Config(format!("config file {}: {e}", path.display())))?
            }
            None => FileSettings::default(),
        };
        let mut s = Settings::default();
        macro_rules! layer {
            ($($field:ident),*) => {$(
                if let Some(v) = self.$field.clone().or(file.$field) { s.$field = v; }
            )*};
        }
        layer!(
            brokers,
            group,
            instance_id,
            guarantee,
            commit_interval_ms,
            punctuation_interval_ms,
            input_idle_ms,
            align_wait_ms,
            max_message_bytes,
            max_future_skew_ms,
            max_inflight_messages,
            max_inflight_bytes,
            restore_timeout_ms,
            kafka_timeout_ms,
            transaction_timeout_ms,
            http_addr,
            log_format
        );
        if let Some(t) = file.topics {
            s.topics = t;
        }
        s.core = self
            .core
            .resolve(&file.core.unwrap_or_default())
            .map_err(Error::Config)?;
        for (field, flag) in [
            (&mut s.topics.announce, self.announce_topic),
            (&mut s.topics.completion, self.completion_topic),
            (&mut s.topics.records, self.records_topic),
            (&mut s.topics.dlq, self.dlq_topic),
            (&mut s.topics.changelog, self.changelog_topic),
        ] {
            if let Some(v) = flag {
                *field = v;
            }
        }
        for (k, v) in file.kafka {
            let v = match v {
                toml::Value::String(s) => s,
                other => other.to_string(),
            };
            s.kafka.push((k, v));
        }
        s.kafka.extend(self.kafka);
        s.failpoint = self.failpoint;
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
[local]
at_end = "keep"
[ingest]
drop_ids = true
"#,
        )
        .unwrap();
        let cli = Cli::try_parse_from([
            "x",
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
        let s = cli.run.into_settings().unwrap();
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
    }

    #[test]
    fn refuses_managed_kafka_keys_and_bad_pairs() {
        let cli = Cli::try_parse_from(["x", "--kafka", "group.id=x"]).unwrap();
        let e = cli.run.into_settings().unwrap_err().to_string();
        assert!(e.contains("--group"), "{e}");
        assert!(Cli::try_parse_from(["x", "--kafka", "novalue"]).is_err());
    }

    #[test]
    fn refuses_an_input_topic_as_output() {
        let mut s = Settings::default();
        s.topics.records = s.topics.announce.clone();
        assert!(s.validate().is_err());
    }
}
