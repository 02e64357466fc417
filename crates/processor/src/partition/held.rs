//! The held-output store: what a partition task produces while the last checkpoint commits. It
//! belongs to the next transaction, so it waits here, in order, until that transaction has begun.
//!
//! Keys and payloads are copied back to back into pages of [`PAGE_BYTES`]: a long commit may hold
//! tens of megabytes, and pages grow the store without copying what it holds. As many pages as the
//! last commit used (at least [`KEEP_PAGES`]) are kept for the next one. Held bytes count in the
//! tasks' shared total until released or dropped (also when the task is aborted), which bounds
//! what all tasks hold together.

use rdkafka::message::OwnedHeaders;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use toolcalls_model::ToolCallRecord;

/// Output topics a task produces to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dest {
    Records,
    Dlq,
}

/// A held output. Its key and payload lie in the store's pages.
pub(super) struct Held {
    pub dest: Dest,
    pub key: Option<Span>,
    pub payload: Option<Span>,
    pub headers: Option<OwnedHeaders>,
}

/// Where held bytes sit: a page of the store and a range in it.
#[derive(Clone, Copy)]
pub(super) struct Span {
    page: usize,
    start: usize,
    end: usize,
}

impl Span {
    fn new(page: usize, start: usize, end: usize) -> Self {
        Span { page, start, end }
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    /// The bytes in `pages` (as [`HeldOutputs::take`] hands them out).
    pub fn of(self, pages: &[Vec<u8>]) -> &[u8] {
        &pages[self.page][self.start..self.end]
    }
}

/// Outputs held back by one task, in order.
pub(super) struct HeldOutputs {
    pages: Vec<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    items: Vec<Held>,
    bytes: usize,
    total: Arc<AtomicUsize>,
}

/// The size of a page; an output larger than a page gets a page of its own.
const PAGE_BYTES: usize = 256 << 10;

/// A new page is begun for the next record when less than this is left in the current one.
const PAGE_SLACK: usize = 16 << 10;

/// Pages kept for the next commit at least (4 MiB per task); more when the last commit used more.
const KEEP_PAGES: usize = 16;

/// What an output counts for the held-back bound beyond its key and payload.
const HELD_OVERHEAD: usize = 64;

impl HeldOutputs {
    /// An empty store whose bytes count in `total`.
    pub fn new(total: Arc<AtomicUsize>) -> Self {
        HeldOutputs {
            pages: Vec::new(),
            spare: Vec::new(),
            items: Vec::new(),
            bytes: 0,
            total,
        }
    }

    /// The page to write the next `want` bytes to (at least `want` left, unless that is more
    /// than a page: then a page of its own).
    fn page_for(&mut self, want: usize) -> usize {
        let fits = self
            .pages
            .last()
            .is_some_and(|p| p.capacity() - p.len() >= want);
        if !fits {
            let mut page = self.spare.pop().unwrap_or_default();
            page.reserve_exact(want.max(PAGE_BYTES));
            self.pages.push(page);
        }
        self.pages.len() - 1
    }

    fn put(&mut self, bytes: Option<&[u8]>) -> Option<Span> {
        bytes.map(|b| {
            let page = self.page_for(b.len());
            let data = &mut self.pages[page];
            let start = data.len();
            data.extend_from_slice(b);
            Span::new(page, start, data.len())
        })
    }

    pub fn push(
        &mut self,
        dest: Dest,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        headers: Option<OwnedHeaders>,
    ) {
        let mut len = 0;
        let key = self.put(key);
        let payload = self.put(payload);
        for s in [key, payload].into_iter().flatten() {
            len += s.len();
        }
        self.items.push(Held {
            dest,
            key,
            payload,
            headers,
        });
        self.count(len);
    }

    /// A record, encoded straight into a page (with its key before it).
    pub fn push_record(&mut self, key: &[u8], record: &ToolCallRecord) {
        let page = self.page_for(key.len() + PAGE_SLACK);
        let data = &mut self.pages[page];
        let at = data.len();
        data.extend_from_slice(key);
        let start = data.len();
        record.encode_into(data);
        let (key, payload) = (
            Span::new(page, at, start),
            Span::new(page, start, data.len()),
        );
        self.items.push(Held {
            dest: Dest::Records,
            key: Some(key),
            payload: Some(payload),
            headers: None,
        });
        self.count(key.len() + payload.len());
    }

    fn count(&mut self, len: usize) {
        let size = len + HELD_OVERHEAD;
        self.bytes += size;
        self.total.fetch_add(size, Ordering::AcqRel);
    }

    /// Takes the pages and the outputs, uncounted; give them back with [`HeldOutputs::reuse`].
    pub fn take(&mut self) -> (Vec<Vec<u8>>, Vec<Held>) {
        self.total.fetch_sub(self.bytes, Ordering::AcqRel);
        self.bytes = 0;
        (
            std::mem::take(&mut self.pages),
            std::mem::take(&mut self.items),
        )
    }

    pub fn reuse(&mut self, mut pages: Vec<Vec<u8>>, mut items: Vec<Held>) {
        // As many as this commit used: the next one likely holds as much, and fresh pages cost
        // page faults (the kernel zeroes every new page).
        let keep = pages.len().max(KEEP_PAGES);
        self.spare.truncate(keep);
        for mut page in pages.drain(..) {
            if self.spare.len() < keep && page.capacity() <= PAGE_BYTES {
                page.clear();
                self.spare.push(page);
            }
        }
        if self.pages.is_empty() {
            self.pages = pages;
        }
        if self.items.is_empty() {
            items.clear();
            self.items = items;
        }
    }
}

impl Drop for HeldOutputs {
    fn drop(&mut self) {
        self.total.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ToolCallRecord {
        let text = include_str!(
            "../../../../schemas/examples/valid/record-collapsed-retry-revision-2.json"
        );
        serde_json::from_str(text).expect("the example record decodes")
    }

    /// An output as the producer gets it: to the records topic?, key, payload.
    type Output = (bool, Option<Vec<u8>>, Option<Vec<u8>>);

    /// What a release hands the producer: every held output, in order.
    fn drain(held: &mut HeldOutputs) -> Vec<Output> {
        let (pages, items) = held.take();
        let bytes = |s: Option<Span>| s.map(|s| s.of(&pages).to_vec());
        let out = items
            .iter()
            .map(|h| {
                (
                    matches!(h.dest, Dest::Records),
                    bytes(h.key),
                    bytes(h.payload),
                )
            })
            .collect();
        held.reuse(pages, items);
        out
    }

    #[test]
    fn held_outputs_come_back_in_order_byte_for_byte_across_pages() {
        let total = Arc::new(AtomicUsize::new(0));
        let mut held = HeldOutputs::new(total.clone());
        let rec = record();
        let mut encoded = Vec::new();
        rec.encode_into(&mut encoded);
        let mut want = Vec::new();
        // Enough records to fill several pages, dead letters in between, one larger than a
        // page, and outputs without key or payload.
        for i in 0..3 {
            for n in 0..700 {
                let key = format!("key-{i}-{n}");
                held.push_record(key.as_bytes(), &rec);
                want.push((true, Some(key.into_bytes()), Some(encoded.clone())));
                if n % 97 == 0 {
                    let big = vec![b'x'; if n == 194 { PAGE_BYTES * 2 + 5 } else { n }];
                    held.push(Dest::Dlq, None, Some(&big), None);
                    want.push((false, None, Some(big)));
                    held.push(Dest::Dlq, Some(b"k"), None, None);
                    want.push((false, Some(b"k".to_vec()), None));
                }
            }
            assert!(held.pages.len() > 2, "the outputs span pages");
            assert!(
                total.load(Ordering::Acquire)
                    >= want
                        .iter()
                        .map(|w| w.2.as_ref().map_or(0, Vec::len))
                        .sum::<usize>()
            );
            let got = drain(&mut held);
            assert_eq!(got.len(), want.len());
            assert!(got == want, "round {i}: held outputs changed");
            assert_eq!(
                total.load(Ordering::Acquire),
                0,
                "released outputs are uncounted"
            );
            assert!(held.spare.len() <= KEEP_PAGES);
            assert!(held
                .spare
                .iter()
                .all(|p| p.is_empty() && p.capacity() <= PAGE_BYTES));
            want.clear();
        }
        held.push(Dest::Dlq, Some(b"k"), Some(b"v"), None);
        drop(held);
        assert_eq!(
            total.load(Ordering::Acquire),
            0,
            "dropped outputs are uncounted"
        );
    }
}
