//! The shared texts of the ids events repeat — source, session, thread, turn — as the last events
//! decoded on this thread had them: [`shared`].
//!
//! A session's events come in runs and a stream holds a few hundred sessions, so nearly every
//! event names a source, session and turn an event decoded shortly before it named. Handing out
//! that event's `Arc<str>` again costs a compare and a reference count, where a new one cost an
//! allocation, a copy and a free for each; the correlator finds the scope of an id it holds
//! already by the pointer, without comparing the text; and the calls of a turn hold one text.

use std::cell::RefCell;
use std::sync::Arc;

/// Texts kept per thread: a slot each, picked by a hash of the text.
const SLOTS: usize = 256;
/// Texts longer than this are not kept (ids are short; a long one is rare and costs its copy).
const MAX_LEN: usize = 128;

thread_local! {
    static RECENT: RefCell<Vec<Option<Arc<str>>>> = RefCell::new(vec![None; SLOTS]);
}

/// `text` as an `Arc<str>`: the one an event decoded on this thread had for the same text when
/// its slot still holds it, else a new one, kept in the slot.
pub(super) fn shared(text: &str) -> Arc<str> {
    if text.len() > MAX_LEN {
        return Arc::from(text);
    }
    let slot = slot_of(text.as_bytes());
    RECENT
        .try_with(|recent| {
            let mut recent = recent.borrow_mut();
            match &recent[slot] {
                Some(kept) if **kept == *text => Arc::clone(kept),
                _ => {
                    let new: Arc<str> = Arc::from(text);
                    recent[slot] = Some(Arc::clone(&new));
                    new
                }
            }
        })
        // The thread is ending and its slots are gone.
        .unwrap_or_else(|_| Arc::from(text))
}

/// The slot of a text, from its length and its first and last eight bytes (ids that differ
/// differ there: a counter, a random suffix). Not keyed: texts that share a slot only take it
/// from each other, which costs what keeping none costs.
fn slot_of(bytes: &[u8]) -> usize {
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(w)
    };
    let n = bytes.len();
    let (head, tail) = (&bytes[..n.min(8)], &bytes[n.saturating_sub(8)..]);
    let mixed =
        (word(head) ^ word(tail).rotate_left(29) ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 56) as usize % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_shares_one_allocation_and_others_get_their_own() {
        let a = shared("claude-code-0006-392456de");
        let b = shared("claude-code-0006-392456de");
        assert!(Arc::ptr_eq(&a, &b));
        let c = shared("claude-code-0007-392456de");
        assert_eq!(&*c, "claude-code-0007-392456de");
        assert!(!Arc::ptr_eq(&a, &c));
        // Every text comes back as itself, whichever slot it shares.
        for i in 0..2 * SLOTS {
            let text = format!("session-{i}");
            assert_eq!(&*shared(&text), text);
            assert_eq!(&*shared(&text), text);
        }
        let long = "x".repeat(MAX_LEN + 1);
        assert_eq!(&*shared(&long), long);
        assert_eq!(&*shared(""), "");
    }
}
