//! `toolcalls topics`: create the processor's topics, or check an existing layout.
//!
//! `create` makes the two input topics and the changelog with the same partition count (the
//! changelog compacted), the records topic compacted and the dead-letter topic with a week of
//! retention; topics that exist are left alone. `check` runs the startup check of `toolcalls run`
//! (co-partitioned inputs, a changelog with enough partitions).

use crate::say::say;
use anyhow::Context;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcalls_processor::config::{Topics, DEFAULT_BROKERS};
use toolcalls_processor::{Settings, TopicOutcome, TopicPlan};
use toolcalls_producer::BrokerWatch;
use toolcalls_settings::{ConfigFile, KeyValueParser};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Create the input, output and changelog topics.
    Create {
        /// Partitions of the input topics and the changelog
        #[arg(long, env = "TOOLCALLS_PARTITIONS", value_parser = clap::value_parser!(i32).range(1..), default_value_t = 6)]
        partitions: i32,
        /// Partitions of the records and dead-letter topics (default: --partitions)
        #[arg(long, env = "TOOLCALLS_OUTPUT_PARTITIONS", value_parser = clap::value_parser!(i32).range(1..))]
        output_partitions: Option<i32>,
        /// Replication factor of every topic (3 on a production cluster)
        #[arg(long, env = "TOOLCALLS_REPLICATION", value_parser = clap::value_parser!(i32).range(1..), default_value_t = 1)]
        replication: i32,
        #[command(flatten)]
        cluster: Cluster,
    },
    /// Check that the topics exist and are co-partitioned, as `toolcalls run` does at startup.
    Check {
        #[command(flatten)]
        cluster: Cluster,
    },
}

/// What `toolcalls topics` needs of the processor's settings — the cluster, the group (which
/// names the changelog) and the topic names — under the same flags, variables and config-file
/// keys as `toolcalls run`.
#[derive(Debug, clap::Args)]
struct Cluster {
    /// Kafka bootstrap servers
    #[arg(long, env = "TOOLCALLS_BROKERS", value_name = "HOSTS", default_value = DEFAULT_BROKERS)]
    brokers: String,
    /// The processor's consumer group: the changelog topic is `<group>-changelog` unless
    /// --changelog-topic names it
    #[arg(long, env = "TOOLCALLS_GROUP", default_value_t = Settings::default().group)]
    group: String,
    /// librdkafka property for the admin and metadata clients (TLS, SASL), repeatable:
    /// `--kafka security.protocol=SSL`; the variable takes a comma-separated list; the flags (or
    /// else the variable) go after the file's `[kafka]` table
    #[arg(long = "kafka", env = "TOOLCALLS_KAFKA", value_name = "KEY=VALUE", value_parser = KeyValueParser, value_delimiter = ',', hide_env_values = true)]
    kafka: Vec<(String, String)>,
    /// How long to wait for the brokers to answer (saying every 10 s why they do not), and for
    /// each request, in milliseconds
    #[arg(long, env = "TOOLCALLS_KAFKA_TIMEOUT_MS", value_name = "MS", default_value_t = Settings::default().kafka_timeout_ms)]
    kafka_timeout_ms: u64,
    #[command(flatten, next_help_heading = "Topics")]
    topics: Topics,
}

impl Cluster {
    /// The processor's settings these make, the file's `[kafka]` table before the `--kafka`
    /// values; checked.
    fn into_settings(self, file: &ConfigFile) -> anyhow::Result<Settings> {
        let settings = Settings {
            brokers: self.brokers,
            group: self.group,
            kafka: file.pairs("kafka").into_iter().chain(self.kafka).collect(),
            kafka_timeout_ms: self.kafka_timeout_ms,
            topics: self.topics,
            ..Settings::default()
        };
        settings.validate().context("reading the settings")?;
        Ok(settings)
    }
}

/// Waits for the brokers, at most `--kafka-timeout-ms`, saying on stderr (at once, then every
/// 10 s) what keeps them out of reach.
fn reach(settings: &Settings) -> anyhow::Result<()> {
    let watch = Arc::new(BrokerWatch::new(&settings.brokers, |notice| {
        say!("toolcalls topics: {notice}");
    }));
    let timeout = Duration::from_millis(settings.kafka_timeout_ms);
    toolcalls_processor::wait_for_brokers(settings, &watch, Some(Instant::now() + timeout))
        .with_context(|| {
            format!(
                "waiting for the Kafka brokers for at most --kafka-timeout-ms ({} ms)",
                settings.kafka_timeout_ms
            )
        })
}

pub fn main(args: Args, file: &ConfigFile) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match args.command {
        Command::Create {
            partitions,
            output_partitions,
            replication,
            cluster,
        } => {
            let settings = cluster.into_settings(file)?;
            reach(&settings)?;
            let plan = TopicPlan {
                partitions,
                output_partitions,
                replication,
            };
            let created = runtime.block_on(toolcalls_processor::create_topics(&settings, &plan))?;
            for (name, outcome) in created {
                match outcome {
                    TopicOutcome::Created => tell(format_args!("created {name}"))?,
                    TopicOutcome::AlreadyExists => tell(format_args!("exists  {name}"))?,
                }
            }
            let partitions = toolcalls_processor::topics::check_topics(&settings)?;
            tell(format_args!(
                "ok: input topics co-partitioned with {partitions} partitions"
            ))?;
        }
        Command::Check { cluster } => {
            let settings = cluster.into_settings(file)?;
            reach(&settings)?;
            let partitions = toolcalls_processor::topics::check_topics(&settings)?;
            tell(format_args!(
                "ok: input topics co-partitioned with {partitions} partitions"
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line of the answer on stdout; a stdout that cannot take it is an error, not a panic.
fn tell(line: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    use std::io::Write;
    writeln!(std::io::stdout(), "{line}").context("cannot write to stdout")
}
