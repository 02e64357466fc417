//! Admission, the first step of every message: is it new, and is it known poison?
//!
//! Each input topic is applied in offset order from where the restored state ends, so a message
//! below the next expected offset was applied already (the consumer may deliver one again around
//! a seek): it is skipped. A message whose processing panicked before is poison: the rewind that
//! followed the panic brings it back, and it is dead-lettered instead of applied again.

use crate::input::batch::InMsg;
use std::any::Any;
use std::collections::HashMap;
use std::sync::Mutex;

/// Input positions (topic, offset) of one partition whose processing panicked, with the panic's
/// message.
pub(crate) type Poison = HashMap<(u16, i64), String>;

/// Input messages whose processing panicked, by partition: what every task's [`Admission`]
/// starts from after the rewind a panic causes.
#[derive(Debug, Default)]
pub(crate) struct PoisonRegistry(Mutex<HashMap<i32, Poison>>);

impl PoisonRegistry {
    /// The poison positions of `partition`.
    pub fn of(&self, partition: i32) -> Poison {
        self.lock().get(&partition).cloned().unwrap_or_default()
    }

    /// Processing `m` panicked with `why`.
    pub fn record(&self, m: &InMsg<'_>, why: String) {
        self.lock()
            .entry(m.partition)
            .or_default()
            .insert((m.topic, m.offset), why);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Poison>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The message of a caught panic, cut to 512 characters.
pub(super) fn panic_message(panic: &(dyn Any + Send)) -> String {
    let why = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    why.chars().take(512).collect()
}

/// What admission says about a message.
pub(super) enum Admit {
    /// New: decode and apply it.
    New,
    /// Already applied (an offset below the next expected one): skip it.
    Seen,
    /// Its processing panicked before: dead-letter it, with this description.
    Poison(String),
}

/// The input positions of one partition task: the next offset expected per topic, and the
/// poison it must not apply again.
pub(super) struct Admission {
    /// Next offset expected per input topic.
    next: [i64; 2],
    /// `next` as of the last checkpoint.
    reported: [i64; 2],
    /// Kafka timestamp of the last message admitted.
    last_timestamp_ms: Option<i64>,
    poison: Poison,
}

impl Admission {
    /// Expecting offsets `next` (where the restored state ends), with the known `poison`.
    pub fn new(next: [i64; 2], poison: Poison) -> Self {
        Admission {
            next,
            reported: next,
            last_timestamp_ms: None,
            poison,
        }
    }

    pub fn admit(&mut self, m: &InMsg<'_>) -> Admit {
        let t = m.topic_index();
        if m.offset < self.next[t] {
            return Admit::Seen;
        }
        self.next[t] = m.offset + 1;
        if let Some(ts) = m.timestamp_ms {
            self.last_timestamp_ms = Some(ts);
        }
        if !self.poison.is_empty() {
            if let Some(why) = self.poison.get(&(m.topic, m.offset)) {
                return Admit::Poison(format!(
                    "processing this event panicked ({why}); it is dead-lettered so that the partition goes on — a bug in the processor, please report it with this event"
                ));
            }
        }
        Admit::New
    }

    /// Next offsets to commit per input topic, where they moved since the last call.
    pub fn offsets_to_commit(&mut self) -> [Option<i64>; 2] {
        let offsets =
            std::array::from_fn(|t| (self.next[t] != self.reported[t]).then_some(self.next[t]));
        self.reported = self.next;
        offsets
    }

    pub fn last_timestamp_ms(&self) -> Option<i64> {
        self.last_timestamp_ms
    }
}
