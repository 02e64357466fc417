//! Where a producer command publishes: the processor's cluster and input topics, with the
//! processor's keys in the config file (top-level `brokers`, `[kafka]`, `[topics]`). Shared by
//! `toolcalls ingest` and `toolcalls receive`.

use std::time::Duration;
use toolcalls_processor::config;
use toolcalls_settings::ConfigFile;

/// Where the events go: the processor's cluster and input topics.
#[derive(Debug, clap::Args)]
pub struct Publish {
    /// Kafka bootstrap servers
    #[arg(long, env = "TOOLCALLS_BROKERS", value_name = "HOSTS", default_value = config::DEFAULT_BROKERS)]
    pub brokers: String,
    /// librdkafka property for the producer, repeatable: `--kafka security.protocol=SSL` (the
    /// default partitioner is `murmur2_random`; all producers of the input topics must use the
    /// same one); the variable takes a comma-separated list; the flags (or else the variable) go
    /// after the file's `[kafka]` table
    #[arg(long = "kafka", env = "TOOLCALLS_KAFKA", value_name = "KEY=VALUE", value_parser = toolcalls_settings::KeyValueParser, value_delimiter = ',', hide_env_values = true)]
    pub kafka: Vec<(String, String)>,
    #[command(flatten)]
    pub topics: InputTopics,
}

/// The processor's input topics: `[topics]` in the config file.
#[derive(Debug, clap::Args)]
#[group(id = "topics")]
pub struct InputTopics {
    /// Topic for announces and turn, approval and hook events
    #[arg(long = "announce-topic", env = "TOOLCALLS_ANNOUNCE_TOPIC", value_name = "TOPIC", default_value = config::DEFAULT_ANNOUNCE_TOPIC)]
    pub announce: String,
    /// Topic for completions and execution ends
    #[arg(long = "completion-topic", env = "TOOLCALLS_COMPLETION_TOPIC", value_name = "TOPIC", default_value = config::DEFAULT_COMPLETION_TOPIC)]
    pub completion: String,
}

impl Publish {
    /// The producer's settings: the file's `[kafka]` table first, then the flags (they win).
    pub fn settings(
        &self,
        file: &ConfigFile,
        delivery_timeout: Duration,
    ) -> toolcalls_producer::PublishSettings {
        toolcalls_producer::PublishSettings {
            brokers: self.brokers.clone(),
            announce_topic: self.topics.announce.clone(),
            completion_topic: self.topics.completion.clone(),
            kafka: file
                .pairs("kafka")
                .into_iter()
                .chain(self.kafka.clone())
                .collect(),
            flush_timeout: delivery_timeout,
        }
    }
}
