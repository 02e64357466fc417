//! The hasher of the correlator's tables.

/// Hash maps of the core use foldhash (seeded per process): ids and names come from producers, so
/// the hash must not be predictable, and SipHash showed up at 5 % of the core path's profile.
pub(super) type Hasher = foldhash::fast::RandomState;
pub(super) type HashMap<K, V> = std::collections::HashMap<K, V, Hasher>;
