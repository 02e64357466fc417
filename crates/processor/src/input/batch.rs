//! Input batches: what the consumer thread hands a partition task.
//!
//! The consumer thread copies each message's key and payload out of librdkafka into an
//! [`InBatch`] — one buffer per batch, the messages back to back — so a message costs no allocation
//! of its own and librdkafka's memory is released at once. Spent batches go back to the consumer
//! thread through the [`BatchPool`].

use std::sync::Mutex;

/// One input message, borrowed from its [`InBatch`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct InMsg<'a> {
    /// 0 = announce topic, 1 = completion topic.
    pub topic: u16,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub payload: Option<&'a [u8]>,
    pub timestamp_ms: Option<i64>,
}

impl InMsg<'_> {
    /// The topic as an index of per-topic arrays (0 announce, 1 completion).
    pub fn topic_index(&self) -> usize {
        usize::from(self.topic.min(1))
    }
}

/// Where a message's key and payload lie in its batch's buffer.
#[derive(Debug, Clone, Copy)]
struct InMeta {
    topic: u16,
    offset: i64,
    timestamp_ms: Option<i64>,
    key: Option<(usize, usize)>,
    payload: Option<(usize, usize)>,
}

/// Input messages of one partition, detached from librdkafka: the keys and payloads of
/// all of them are copied back to back into one buffer.
#[derive(Debug)]
pub(crate) struct InBatch {
    partition: i32,
    data: Vec<u8>,
    msgs: Vec<InMeta>,
}

/// What a message counts for the in-flight byte limit beyond its key and payload.
const MSG_OVERHEAD: usize = 64;

/// Bytes of keys and payloads one batch holds: the consumer thread starts a new batch rather than
/// grow one, so a buffer is allocated once at this size and never reallocated (growing a buffer
/// by doubling copies it and touches twice the memory; a burst of a fast partition is megabytes).
pub(crate) const BATCH_BYTES: usize = 256 * 1024;

impl InBatch {
    pub fn new(partition: i32) -> Self {
        InBatch {
            partition,
            data: Vec::with_capacity(BATCH_BYTES),
            msgs: Vec::with_capacity(BATCH_BYTES / 256),
        }
    }

    /// Whether `bytes` more fit without growing the buffer (an empty batch takes anything: a
    /// message larger than [`BATCH_BYTES`] gets a batch of its own).
    pub fn has_room(&self, bytes: usize) -> bool {
        self.msgs.is_empty() || self.data.len() + bytes <= self.data.capacity()
    }

    pub fn push(
        &mut self,
        topic: u16,
        offset: i64,
        timestamp_ms: Option<i64>,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
    ) {
        let mut put = |bytes: Option<&[u8]>| {
            bytes.map(|b| {
                let start = self.data.len();
                self.data.extend_from_slice(b);
                (start, self.data.len())
            })
        };
        let key = put(key);
        let payload = put(payload);
        self.msgs.push(InMeta {
            topic,
            offset,
            timestamp_ms,
            key,
            payload,
        });
    }

    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// Messages per input topic.
    pub fn topic_counts(&self) -> [usize; 2] {
        let completions = self.msgs.iter().filter(|m| m.topic == 1).count();
        [self.msgs.len() - completions, completions]
    }

    /// Bytes counted against `max_inflight_bytes`: keys, payloads and a fixed overhead per message.
    pub fn size(&self) -> usize {
        self.data.len() + MSG_OVERHEAD * self.msgs.len()
    }

    /// Bytes counted for message `i`.
    pub fn msg_size(&self, i: usize) -> usize {
        let m = &self.msgs[i];
        let len = |r: Option<(usize, usize)>| r.map_or(0, |(a, b)| b - a);
        len(m.key) + len(m.payload) + MSG_OVERHEAD
    }

    /// Message `i`'s topic and timestamp: what the two topics are merged by.
    pub fn order_key(&self, i: usize) -> (u16, Option<i64>) {
        let m = &self.msgs[i];
        (m.topic, m.timestamp_ms)
    }

    pub fn get(&self, i: usize) -> InMsg<'_> {
        let m = self.msgs[i];
        let slice = |r: Option<(usize, usize)>| r.map(|(a, b)| &self.data[a..b]);
        InMsg {
            topic: m.topic,
            partition: self.partition,
            offset: m.offset,
            key: slice(m.key),
            payload: slice(m.payload),
            timestamp_ms: m.timestamp_ms,
        }
    }
}

/// Spent input batches, handed back from the partition tasks to the consumer thread for reuse:
/// memory fresh from the allocator costs page faults and the kernel's zeroing of every page, which
/// would be most of the consumer thread's CPU.
#[derive(Debug, Default)]
pub(crate) struct BatchPool {
    free: Mutex<Vec<InBatch>>,
}

/// Batches the pool keeps (8 MiB of buffers).
const POOL_KEEP: usize = 32;
/// Batches whose buffer grew beyond this (a single message larger than [`BATCH_BYTES`]) go back
/// to the allocator.
const POOL_MAX_BYTES: usize = 2 * BATCH_BYTES;

impl BatchPool {
    /// An empty batch for `partition`, reused if the pool has one.
    pub fn take(&self, partition: i32) -> InBatch {
        let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match reused {
            Some(mut batch) => {
                batch.partition = partition;
                batch
            }
            None => InBatch::new(partition),
        }
    }

    /// Gives a spent batch back.
    pub fn give(&self, mut batch: InBatch) {
        if batch.data.capacity() > POOL_MAX_BYTES {
            return;
        }
        batch.data.clear();
        batch.msgs.clear();
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < POOL_KEEP {
            free.push(batch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_takes_messages_until_its_buffer_is_full_and_never_grows() {
        let mut b = InBatch::new(0);
        let cap = b.data.capacity();
        assert!(cap >= BATCH_BYTES);
        let mut n = 0;
        while b.has_room(1000) {
            b.push(0, n, None, None, Some(&[b'x'; 1000]));
            n += 1;
        }
        assert_eq!(n as usize, cap / 1000);
        assert_eq!(
            b.data.capacity(),
            cap,
            "filled to the brim without a reallocation"
        );
        // An empty batch takes a message larger than a batch: it gets a batch of its own.
        let empty = InBatch::new(0);
        assert!(empty.has_room(BATCH_BYTES * 3));
    }

    #[test]
    fn spent_batches_come_back_empty_with_their_buffers() {
        let pool = BatchPool::default();
        let mut b = pool.take(3);
        for i in 0..1000 {
            b.push(0, i, Some(i), Some(b"k"), Some(&[b'x'; 500]));
        }
        let cap = b.data.capacity();
        pool.give(b);
        let b = pool.take(7);
        assert_eq!((b.partition, b.len(), b.size()), (7, 0, 0));
        assert_eq!(b.data.capacity(), cap, "the buffer is reused");
        // An outsized buffer goes back to the allocator; the pool keeps at most POOL_KEEP.
        let mut big = pool.take(1);
        big.push(1, 0, None, None, Some(&vec![0; POOL_MAX_BYTES + 1]));
        pool.give(big);
        assert!(pool.free.lock().unwrap().is_empty());
        for p in 0..(POOL_KEEP + 5) {
            pool.give(InBatch::new(p as i32));
        }
        assert_eq!(pool.free.lock().unwrap().len(), POOL_KEEP);
    }
}
