//! The hashers of the correlator's tables.

use std::hash::BuildHasher;

/// Hash maps of the core use foldhash (seeded per process): ids and names come from producers, so
/// the hash must not be predictable, and SipHash showed up at 5 % of the core path's profile.
pub(super) type Hasher = foldhash::fast::RandomState;
pub(super) type HashMap<K, V> = std::collections::HashMap<K, V, Hasher>;

/// The 64-bit golden-ratio multiplier: spreads a few bits (a tag, an entry number) over all 64,
/// for the tables that make their hash from them.
pub(super) const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// A map by entry number ([`BySeq`]).
pub(super) type SeqMap<V> = std::collections::HashMap<u64, V, BySeq>;

/// Below this capacity a map keeps its memory when it empties.
const SHRINK_MIN: usize = 1024;

/// Gives a map the memory back that a burst left it, once it is three quarters empty: hash maps
/// never shrink by themselves, so a partition that once held many calls would hold their table
/// for good. Shrinking to twice what is left, and only after three quarters went, keeps the
/// rehashing an amortised constant per removal.
pub(super) fn shrink_if_sparse<K: std::hash::Hash + Eq, V, S: BuildHasher>(
    map: &mut std::collections::HashMap<K, V, S>,
) {
    if map.capacity() > SHRINK_MIN && map.len() * 4 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}

/// Hashes an entry number to itself, but for the top seven bits, a mix of it: the table takes the
/// bucket from the low bits, so entries numbered close together — a call and the calls filed
/// around it, which mostly close around the same time — sit in neighbouring buckets and share
/// cache lines, and the top bits it keeps as a tag still tell numbers apart. Entry numbers come
/// from the correlator's own counter, never from input, so nobody can choose them to collide.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct BySeq;

impl BuildHasher for BySeq {
    type Hasher = SeqHash;

    fn build_hasher(&self) -> SeqHash {
        SeqHash(0)
    }
}

/// The hasher of [`BySeq`].
#[derive(Debug, Default)]
pub(super) struct SeqHash(u64);

impl SeqHash {
    /// The bits the table takes its tag from (hashbrown: the top seven).
    const TAG: u64 = 0x7F << 57;
}

impl std::hash::Hasher for SeqHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, seq: u64) {
        self.0 = (seq & !Self::TAG) | (seq.wrapping_mul(SPREAD) & Self::TAG);
    }

    /// Only `u64` keys are hashed here; anything else still hashes, as a plain fold.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(SPREAD);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher as _;

    #[test]
    fn entry_numbers_keep_their_low_bits_and_get_distinct_tags() {
        let hash = |seq: u64| BySeq.hash_one(seq);
        let mut tags = std::collections::HashSet::new();
        for seq in 0..1024u64 {
            assert_eq!(hash(seq) & !SeqHash::TAG, seq);
            tags.insert(hash(seq) >> 57);
        }
        // Consecutive numbers spread over the tags, not all in one.
        assert!(tags.len() > 100, "{}", tags.len());
        let mut h = SeqHash::default();
        h.write(b"ab");
        assert_ne!(h.finish(), 0);
    }
}
