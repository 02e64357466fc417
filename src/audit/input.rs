//! The inputs an audit reads, as records, dead letters and the command line name them, and the
//! positions in them.

use std::fmt;

/// An input position: the input's number in the ledger, and the offset, line or event number.
pub type Pos = (u32, i64);

/// What an input is, as records, dead letters and the command line name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum InputKey {
    /// A topic partition (the processor).
    Topic(String, i32),
    /// A file of v1 events, by line (`toolcalls local`).
    Lines(String),
    /// A native file read through an adapter, by event number (`toolcalls local --format`).
    Events(String),
}

impl fmt::Display for InputKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputKey::Topic(t, p) => write!(f, "{t}/{p}"),
            InputKey::Lines(file) | InputKey::Events(file) => f.write_str(file),
        }
    }
}

/// Which positions of an input the audit covers: `from ..= to - 1`; `to: None` reads to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub from: i64,
    pub to: Option<i64>,
}

impl Range {
    pub const ALL: Range = Range {
        from: i64::MIN,
        to: None,
    };

    pub fn contains(&self, at: i64) -> bool {
        at >= self.from && self.to.is_none_or(|to| at < to)
    }
}
