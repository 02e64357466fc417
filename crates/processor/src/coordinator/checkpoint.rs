//! One checkpoint: every active partition task is asked for its report; together the reports
//! are the batch to commit.

use crate::partition::{Checkpointed, PartitionMsg};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Checkpoint requests sent to the tasks, their reports not yet in.
#[derive(Default)]
pub(super) struct Asked {
    waiting: Vec<oneshot::Receiver<Checkpointed>>,
    resumes: Vec<(i32, oneshot::Sender<()>)>,
    /// A task was gone before it could be asked.
    dead: bool,
}

impl Asked {
    /// Asks the task of `partition` to checkpoint.
    pub fn ask(&mut self, partition: i32, task: &mpsc::UnboundedSender<PartitionMsg>) {
        let (reply, report) = oneshot::channel();
        let (resume_tx, resume) = oneshot::channel();
        if task
            .send(PartitionMsg::Checkpoint { reply, resume })
            .is_ok()
        {
            self.waiting.push(report);
            self.resumes.push((partition, resume_tx));
        } else {
            self.dead = true;
        }
    }

    /// No task was asked, and none was found gone: nothing to commit.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty() && !self.dead
    }

    /// The reports, or why the batch cannot commit (a task died, or a produce call of the
    /// batch was refused). The tasks are not resumed then: they stop.
    pub async fn collect(self) -> Result<Batch, String> {
        let mut dead = self.dead;
        let mut reports = Vec::with_capacity(self.waiting.len());
        for report in self.waiting {
            match report.await {
                Ok(r) => reports.push(r),
                Err(_) => dead = true,
            }
        }
        let error = reports
            .iter()
            .find_map(|r: &Checkpointed| r.error.as_ref().map(|e| e.to_string()));
        if dead || error.is_some() {
            return Err(error.unwrap_or_else(|| "a partition task died".into()));
        }
        Ok(Batch {
            reports,
            resumes: self.resumes,
        })
    }
}

/// The reports of every task at one checkpoint: what the batch holds.
pub(super) struct Batch {
    reports: Vec<Checkpointed>,
    resumes: Vec<(i32, oneshot::Sender<()>)>,
}

impl Batch {
    /// Messages the tasks handed to the producer.
    pub fn produced(&self) -> usize {
        self.reports.iter().map(|r| r.produced).sum()
    }

    /// Records and dead letters among them.
    pub fn outputs(&self) -> usize {
        self.reports.iter().map(|r| r.outputs).sum()
    }

    /// The spans of the batch's records (span export on).
    pub fn take_spans(&mut self) -> impl Iterator<Item = opentelemetry_sdk::trace::SpanData> + '_ {
        self.reports
            .iter_mut()
            .flat_map(|r| std::mem::take(&mut r.spans))
    }

    /// The next input offsets to commit, of the partitions whose offsets moved.
    pub fn offsets(&self, input_topics: &[Arc<str>; 2]) -> TopicPartitionList {
        let mut offsets = TopicPartitionList::new();
        for r in &self.reports {
            for (t, next) in r.offsets.iter().enumerate() {
                if let Some(next) = next {
                    let _ = offsets.add_partition_offset(
                        &input_topics[t],
                        r.partition,
                        Offset::Offset(*next),
                    );
                }
            }
        }
        offsets
    }

    /// The batch committed: the tasks hand over what they held back, except those of `stopping`
    /// partitions (being revoked).
    pub fn resume(self, stopping: &[i32]) {
        for (p, resume) in self.resumes {
            if !stopping.contains(&p) {
                let _ = resume.send(());
            }
        }
    }
}
