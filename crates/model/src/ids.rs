//! Identifier newtypes.
//!
//! Native ids are only unique inside their scope — a Codex `item_3` restarts per thread, an MCP
//! JSON-RPC id per session — so no id here is ever used as a key on its own: the correlation scope is
//! always `(source, session, thread)`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Whether two ids' texts are the same. A shared text (`Arc<str>`) is first compared by pointer:
/// the decoder hands out one text for the ids events repeat, so the correlator finds a scope
/// without reading its key's text (`Arc`'s own `==` compares `str` by content only).
trait SameText {
    fn same(&self, other: &Self) -> bool;
}

impl SameText for String {
    fn same(&self, other: &Self) -> bool {
        self == other
    }
}

impl SameText for Arc<str> {
    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(self, other) || **self == **other
    }
}

/// An id type holding its text as `$text`: a `String`, or an `Arc<str>` for the ids every
/// record of a scope repeats (a record takes a reference to its scope's instead of a copy).
macro_rules! string_id {
    ($text:ty, $(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $text);

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                SameText::same(&self.0, &other.0)
            }
        }

        impl Eq for $name {}

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.0.hash(state);
            }
        }

        impl $name {
            pub fn new(s: impl Into<$text>) -> Self {
                Self(s.into())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.into())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s.into())
            }
        }
    };
}

string_id!(
    Arc<str>,
    /// The framework that produced an event (`claude-code`, `codex`, `gemini-cli`, `adk`, …).
    /// Adapters of one framework (transcript, hooks, stream) share it so their events correlate.
    Source
);
string_id!(
    Arc<str>,
    /// The agent session; also the Kafka key of every input message.
    SessionId
);
string_id!(
    Arc<str>,
    /// A thread inside a session, for formats whose ids restart per thread (`codex exec --json`).
    ThreadId
);
string_id!(
    Arc<str>,
    /// A turn (one model request/response cycle and the tool calls it caused); shared by the
    /// events, calls and records of the turn.
    TurnId
);
string_id!(
    String,
    /// A native or stream id of one tool call (`toolu_…`, `call_…`, `item_3`, the nhtio stream id).
    CallId
);

/// The deterministic key of a ToolCall record: a UUID v5 over `(source, session, thread, call key)`.
///
/// Replaying the same input gives the same ids, so a compacted records topic keeps one record per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RecordId(pub uuid::Uuid);

/// Namespace of record ids (a fixed random UUID; changing it changes every record key).
const RECORD_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x6f1c_1d2e_93a4_4b7e_8f0d_52c4_a1b3_9e77);

impl RecordId {
    /// The record id of the call known by `call_key` in `(source, session, thread)`.
    ///
    /// `call_key` is the native call id when there is one, otherwise a key the processor derives
    /// from the input position of the first event of the call (see `toolcalls-core`).
    pub fn derive(
        source: &Source,
        session: &SessionId,
        thread: Option<&ThreadId>,
        call_key: &str,
    ) -> Self {
        // UUID v5 (RFC 9562 §5.5): SHA-1 over the namespace and the name, the name being
        // length-prefixed parts, so no choice of strings can make two different tuples collide.
        // The hasher is fed piece by piece (no name buffer) and runs on the CPU's SHA extensions
        // where there are some.
        use sha1::Digest;
        let mut h = sha1::Sha1::new();
        h.update(RECORD_NAMESPACE.as_bytes());
        for part in [
            source.as_str(),
            session.as_str(),
            thread.map_or("", ThreadId::as_str),
            call_key,
        ] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        h.update([u8::from(thread.is_some())]);
        let digest = h.finalize();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        Self(uuid::Builder::from_sha1_bytes(bytes).into_uuid())
    }

    pub fn parse(s: &str) -> Result<Self, uuid::Error> {
        uuid::Uuid::parse_str(s).map(Self)
    }
}

impl fmt::Display for RecordId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.as_hyphenated().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Ids are equal by their text, whether or not they share it, and hash as their text does.
    #[test]
    fn ids_compare_and_hash_by_text() {
        let hasher = std::hash::RandomState::new();
        let shared = SessionId::from("s-1");
        let copy = SessionId::from(String::from("s-1"));
        assert!(!Arc::ptr_eq(&shared.0, &copy.0));
        assert_eq!(shared, copy);
        assert_eq!(shared, shared.clone());
        assert_ne!(shared, SessionId::from("s-2"));
        assert_eq!(hasher.hash_one(&shared), hasher.hash_one(&copy));
        assert_eq!(hasher.hash_one(&shared), hasher.hash_one("s-1"));
        assert_eq!(CallId::from("toolu_1"), CallId::from("toolu_1"));
        assert_ne!(CallId::from("toolu_1"), CallId::from("toolu_2"));
    }

    /// Record ids are persisted (they key the records topic): the derivation must stay the UUID v5
    /// of the length-prefixed name, as `uuid::Uuid::new_v5` computes it.
    #[test]
    fn record_ids_are_uuid_v5_of_the_length_prefixed_name() {
        let cases: [(&str, &str, Option<&str>, &str); 4] = [
            ("claude-code", "s1", None, "toolu_01"),
            ("codex", "s-2", Some("t1"), "item_1"),
            ("", "", Some(""), ""),
            ("gemini", &"x".repeat(300), None, "a/0:17"),
        ];
        for (source, session, thread, key) in cases {
            let mut name = Vec::new();
            for part in [source, session, thread.unwrap_or(""), key] {
                name.extend_from_slice(&(part.len() as u64).to_be_bytes());
                name.extend_from_slice(part.as_bytes());
            }
            name.push(u8::from(thread.is_some()));
            let thread = thread.map(ThreadId::from);
            let id = RecordId::derive(&source.into(), &session.into(), thread.as_ref(), key);
            assert_eq!(id.0, uuid::Uuid::new_v5(&RECORD_NAMESPACE, &name));
            assert_eq!(id.0.get_version_num(), 5);
        }
    }

    #[test]
    fn record_ids_are_deterministic_and_scoped() {
        let s = Source::from("codex");
        let a = RecordId::derive(&s, &"s1".into(), Some(&"t1".into()), "item_1");
        assert_eq!(
            a,
            RecordId::derive(&s, &"s1".into(), Some(&"t1".into()), "item_1")
        );
        // Same native id in another thread or session is another call.
        assert_ne!(
            a,
            RecordId::derive(&s, &"s1".into(), Some(&"t2".into()), "item_1")
        );
        assert_ne!(
            a,
            RecordId::derive(&s, &"s2".into(), Some(&"t1".into()), "item_1")
        );
        // No thread differs from an empty thread name, and parts cannot slide into each other.
        assert_ne!(
            RecordId::derive(&s, &"s1".into(), None, "x"),
            RecordId::derive(&s, &"s1".into(), Some(&"".into()), "x")
        );
        assert_ne!(
            RecordId::derive(&s, &"ab".into(), None, "c"),
            RecordId::derive(&s, &"a".into(), None, "bc")
        );
        assert_eq!(RecordId::parse(&a.to_string()).unwrap(), a);
    }
}
