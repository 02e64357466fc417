//! The Kafka timestamp of the last message each partition processed, shared between the
//! partition tasks and the consumer thread.

use std::collections::HashMap;
use std::sync::Mutex;

/// The Kafka timestamp of the last message each partition's task processed: written by the
/// tasks, read by the consumer thread to say how far behind a partition is in seconds.
#[derive(Default)]
pub(crate) struct ProcessedTimes(Mutex<HashMap<i32, i64>>);

impl ProcessedTimes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, i64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set(&self, partition: i32, timestamp_ms: i64) {
        self.lock().insert(partition, timestamp_ms);
    }

    pub fn get(&self, partition: i32) -> Option<i64> {
        self.lock().get(&partition).copied()
    }

    pub fn forget(&self, partition: i32) {
        self.lock().remove(&partition);
    }
}
