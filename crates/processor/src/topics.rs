//! Creating the topics and checking them at startup.
//!
//! The two input topics must have the same partition count (co-partitioned): partition `p` of both
//! feeds the same correlator. The changelog has that many partitions too (changelog partition `p`
//! holds the state of input partition `p`) and is compacted. Records are keyed by record id and
//! compacted (one record per call survives); dead letters are kept for a week by default.

use crate::client::base_config;
use crate::config::Settings;
use crate::error::Error;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;
use std::time::Duration;

use crate::config::MAX_OUTPUT_MESSAGE_BYTES;

/// How `toolcalls topics create` lays the topics out.
#[derive(Debug, Clone)]
pub struct TopicPlan {
    /// Partitions of the input topics and the changelog.
    pub partitions: i32,
    /// Partitions of the records and dead-letter topics (default: `partitions`).
    pub output_partitions: Option<i32>,
    pub replication: i32,
}

/// What happened to one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicOutcome {
    Created,
    AlreadyExists,
}

/// One topic to create: name, partitions, configs.
pub type PlannedTopic = (String, i32, Vec<(&'static str, String)>);

/// The topics of `settings` with their partitions and configs.
pub fn planned_topics(settings: &Settings, plan: &TopicPlan) -> Vec<PlannedTopic> {
    let out = plan.output_partitions.unwrap_or(plan.partitions);
    let max_bytes = MAX_OUTPUT_MESSAGE_BYTES.to_string();
    let t = &settings.topics;
    vec![
        (t.announce.clone(), plan.partitions, vec![]),
        (t.completion.clone(), plan.partitions, vec![]),
        (
            settings.changelog_topic(),
            plan.partitions,
            vec![
                ("cleanup.policy", "compact".into()),
                ("max.message.bytes", max_bytes.clone()),
            ],
        ),
        (
            t.records.clone(),
            out,
            vec![
                ("cleanup.policy", "compact".into()),
                ("max.message.bytes", max_bytes.clone()),
            ],
        ),
        (
            t.dlq.clone(),
            out,
            vec![
                ("retention.ms", (7 * 24 * 3600 * 1000u64).to_string()),
                ("max.message.bytes", max_bytes),
            ],
        ),
    ]
}

/// Creates the input, output and changelog topics; existing topics are left as they are.
pub async fn create_topics(
    settings: &Settings,
    plan: &TopicPlan,
) -> Result<Vec<(String, TopicOutcome)>, Error> {
    if plan.partitions < 1 || plan.replication < 1 {
        return Err(Error::Config(
            "--partitions and --replication must be at least 1".into(),
        ));
    }
    let admin: AdminClient<DefaultClientContext> = base_config(settings, "admin")
        .create()
        .map_err(|e| Error::kafka("creating the admin client", e))?;
    let planned = planned_topics(settings, plan);
    let new: Vec<NewTopic<'_>> = planned
        .iter()
        .map(|(name, partitions, configs)| {
            configs.iter().fold(
                NewTopic::new(name, *partitions, TopicReplication::Fixed(plan.replication)),
                |t, (k, v)| t.set(k, v),
            )
        })
        .collect();
    let options = AdminOptions::new()
        .operation_timeout(Some(Duration::from_millis(settings.kafka_timeout_ms)));
    let results = admin
        .create_topics(&new, &options)
        .await
        .map_err(|e| Error::kafka("creating topics", e))?;
    let mut out = Vec::new();
    for r in results {
        match r {
            Ok(name) => out.push((name, TopicOutcome::Created)),
            Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => {
                out.push((name, TopicOutcome::AlreadyExists))
            }
            Err((name, code)) => {
                return Err(Error::Config(format!(
                    "creating topic `{name}` failed: {code}"
                )));
            }
        }
    }
    Ok(out)
}

/// Partition counts of the topics the processor uses, checked: inputs co-partitioned, the
/// changelog present with at least as many partitions. Returns the input partition count.
pub fn check_topics(settings: &Settings) -> Result<i32, Error> {
    let consumer: BaseConsumer = base_config(settings, "metadata")
        .create()
        .map_err(|e| Error::kafka("creating the metadata client", e))?;
    let timeout = Duration::from_millis(settings.kafka_timeout_ms);
    let count = |topic: &str| -> Result<i32, Error> {
        let md = consumer
            .fetch_metadata(Some(topic), timeout)
            .map_err(|e| Error::kafka("fetching topic metadata", e))?;
        match md.topics().first() {
            Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                Ok(t.partitions().len() as i32)
            }
            _ => Err(Error::MissingTopic {
                topic: topic.to_owned(),
            }),
        }
    };
    let t = &settings.topics;
    let announce = count(&t.announce)?;
    let completion = count(&t.completion)?;
    if announce != completion {
        return Err(Error::NotCoPartitioned(format!(
            "`{}` has {announce} partitions and `{}` has {completion}; both input topics need the same count so that a session's events meet in one partition. \
             Add partitions to the smaller one (`kafka-topics --alter --partitions {}`, which moves sessions and is only safe while the topics are empty or drained), \
             or recreate the topics with `toolcalls topics create --partitions N`",
            t.announce,
            t.completion,
            announce.max(completion)
        )));
    }
    let changelog = settings.changelog_topic();
    let log = count(&changelog)?;
    if log < announce {
        return Err(Error::NotCoPartitioned(format!(
            "the changelog `{changelog}` has {log} partitions but the input topics have {announce}; it needs one partition per input partition. \
             Add partitions to it or recreate it with `toolcalls topics create`"
        )));
    }
    count(&t.records)?;
    count(&t.dlq)?;
    Ok(announce)
}
