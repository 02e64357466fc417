//! Which file a path holds: its device and inode, a fingerprint of its first bytes (as Vector
//! does), and the size and modification time that say whether it changed since it was read.

use sha2::{Digest, Sha256};
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// How many leading bytes the fingerprint covers (fewer while the file is shorter).
pub const FINGERPRINT_BYTES: usize = 256;

/// A file as `stat` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
}

impl Stat {
    pub fn of(meta: &Metadata) -> Stat {
        Stat {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
        }
    }

    /// Device and inode: the file, whatever its name.
    pub fn inode(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

/// The fingerprint of `bytes`' first [`FINGERPRINT_BYTES`] (or all of them when fewer): the
/// first 8 bytes of their SHA-256, in hex, and how many bytes it covers.
pub fn fingerprint(bytes: &[u8]) -> (String, usize) {
    let n = bytes.len().min(FINGERPRINT_BYTES);
    (hex8(&Sha256::digest(&bytes[..n])), n)
}

/// The fingerprint of the last [`FINGERPRINT_BYTES`] of `read` (all of it when shorter): the
/// end of what a checkpoint's position covers.
pub fn tail_print(read: &[u8]) -> (String, usize) {
    let n = read.len().min(FINGERPRINT_BYTES);
    (hex8(&Sha256::digest(&read[read.len() - n..])), n)
}

/// Whether `bytes` still start with what a fingerprint of `len` bytes was taken of: false when
/// the file is now shorter than that or starts otherwise (it was truncated or rewritten).
pub fn same_start(bytes: &[u8], print: &str, len: usize) -> bool {
    bytes.len() >= len && hex8(&Sha256::digest(&bytes[..len])) == print
}

/// The digest of an encoded event: the first 8 bytes of its SHA-256.
pub fn event_digest(payload: &[u8]) -> u64 {
    let d = Sha256::digest(payload);
    u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

fn hex8(d: &[u8]) -> String {
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_covers_the_first_bytes_only() {
        let a = vec![b'a'; 1000];
        let (print, len) = fingerprint(&a);
        assert_eq!(len, FINGERPRINT_BYTES);
        let mut b = a.clone();
        b[900] = b'b';
        assert!(same_start(&b, &print, len), "a change past the fingerprint");
        b[3] = b'b';
        assert!(!same_start(&b, &print, len), "a change inside it");
        assert!(!same_start(&a[..10], &print, len), "truncated");
        let (short, n) = fingerprint(b"{\"a\"");
        assert_eq!(n, 4);
        assert!(same_start(b"{\"a\":1}\n", &short, n), "a file that grew");
    }
}
