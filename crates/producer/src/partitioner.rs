//! The partition a key lands on: Kafka's default partitioner for keyed messages (the Java
//! client's, librdkafka's `murmur2` and `murmur2_random`), so that the processor can say which
//! partition — and so which instance — holds a session.

/// Kafka's 32-bit murmur2 of `data` (`org.apache.kafka.common.utils.Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate().rev() {
            h ^= u32::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` among `partitions` (> 0): `(murmur2(key) & 0x7fffffff) % partitions`.
pub fn partition_of(key: &[u8], partitions: i32) -> i32 {
    assert!(partitions > 0, "a topic has at least one partition");
    (murmur2(key) & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors of Kafka's own test of `Utils.murmur2`.
    #[test]
    fn matches_the_java_clients_murmur2() {
        for (key, hash) in [
            (&b"21"[..], -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ] {
            assert_eq!(murmur2(key), hash, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn partitions_are_in_range() {
        for n in 1..20 {
            for key in ["", "s", "session-1", "8a2518dd-ff41-4d5f-83a1-407b03598cc6"] {
                assert!((0..n).contains(&partition_of(key.as_bytes(), n)));
            }
        }
    }
}
