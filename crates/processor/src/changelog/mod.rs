//! The changelog: a compacted topic with one partition per input partition, holding that
//! partition's correlation state as of its last committed batch.
//!
//! - `write`: at each checkpoint a partition task writes the entries its correlator changed
//!   since the last one, in the batch's transaction;
//! - `restore`: on assignment (and after an aborted batch) the coordinator rebuilds the
//!   partition's correlator from it, leaving out what never committed;
//! - `position`: the header that ties each entry to the input position that wrote it.
//!
//! [`Fold`], [`decode_pos`] and [`POS_HEADER`] are public for `toolcalls audit`, which rebuilds
//! each partition's pending state from the changelog the way a restore does.

mod position;
pub(crate) mod restore;

pub use position::{decode_pos, POS_HEADER};
pub use restore::Fold;
pub(crate) mod write;
