//! What the audit names when something does not add up, and how it says it.

use std::fmt;
use toolcalls_model::RecordId;

/// One thing that does not add up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discrepancy {
    /// An input event that no record, dead letter or pending call accounts for, and that repeats
    /// no event of a record; with the record it would have gone into, where its id (or, for an
    /// announce without one, its position) says.
    Missing {
        at: String,
        event: String,
        expected: Option<RecordId>,
    },
    /// An input that is not a valid event and was not dead-lettered.
    Undecodable { at: String, reason: String },
    /// A position two different records list.
    ClaimedTwice {
        at: String,
        first: RecordId,
        second: RecordId,
    },
    /// A position a record (or pending call) names that holds an event of another source or
    /// session than the record's.
    OtherScope {
        at: String,
        record: RecordId,
        source: String,
        session: String,
    },
    /// A position both in a record (or pending) and dead-lettered.
    RecordAndDeadLetter {
        at: String,
        record: RecordId,
        reason: String,
    },
    /// A position both in a published record and in a pending call.
    RecordAndPending {
        at: String,
        record: RecordId,
        pending: RecordId,
    },
    /// A record id published twice at one revision with different content.
    ConflictingCopies { record: RecordId, revision: u32 },
    /// A position only an older revision of a record lists.
    DroppedByRevision {
        at: String,
        record: RecordId,
        revision: u32,
        latest: u32,
    },
    /// A record names a position inside the audited range that holds no input event: nothing,
    /// or (`not_an_event`, its reason) an input that is not a valid event.
    NoSuchInput {
        at: String,
        record: RecordId,
        not_an_event: Option<String>,
    },
    /// A dead letter whose reason says the opposite of what its input is: a reason of decoding
    /// for a valid event, or a refusal of the correlator for an input that is no event.
    DeadLetterMismatch {
        at: String,
        reason: String,
        holds: String,
    },
    /// A dead letter names a position inside the audited range that holds no input.
    DeadLetterOfNothing { at: String, reason: String },
    /// A record whose id derives from none of the events it lists (the correlator derives it
    /// from the call id, or the position, of the event that opened the call).
    ForeignId { record: RecordId },
    /// A record line that is not a record, or a provenance the runtime did not name.
    BadRecord { at: String, why: String },
    /// An input event in no record whose call's record lists an event it was applied before:
    /// it went into a record under the same id that the outputs no longer hold.
    Superseded {
        at: String,
        event: String,
        record: RecordId,
    },
    /// An announce in no record under the call id of a record of another tool: refused by the
    /// correlator (`conflicting_call_id`), which local mode keeps in no output.
    Refused {
        at: String,
        event: String,
        record: RecordId,
    },
    /// A record that lists events of more than one call id without retries collapsed into it.
    MixedIds { record: RecordId },
    /// A record whose phase says it holds a result while none of its events is a completion.
    NoResult { record: RecordId },
    /// An event without a call id, naming another tool than its record's: the correlator links
    /// such an event by its checksum or its tool name, never to another tool's call.
    OtherTool {
        at: String,
        record: RecordId,
        tool: String,
    },
    /// A record that lists results without a call id that say different things: without an id,
    /// a result's copy says what it says, and a retry's result after the call closed is late.
    TwoResults { record: RecordId },
    /// A hook decision or approval with a call id in no record, which its call's record holds
    /// (in its content) without listing it or any event that says the same.
    Unlisted {
        at: String,
        event: String,
        record: RecordId,
    },
}

impl fmt::Display for Discrepancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Discrepancy::Missing {
                at,
                event,
                expected,
            } => {
                write!(
                    f,
                    "missing     {at}: {event} is in no record, not dead-lettered, not pending, and repeats no event of a record"
                )?;
                match expected {
                    Some(id) => write!(f, " (its record would be {id})"),
                    None => Ok(()),
                }
            }
            Discrepancy::Undecodable { at, reason } => write!(
                f,
                "undecodable {at}: not a valid event ({reason}) and not dead-lettered"
            ),
            Discrepancy::ClaimedTwice { at, first, second } => {
                write!(f, "twice       {at}: in record {first} and in record {second}")
            }
            Discrepancy::OtherScope {
                at,
                record,
                source,
                session,
            } => write!(
                f,
                "scope       {at}: named by record {record}, but the event there is of source {source}, session {session}, not the record's"
            ),
            Discrepancy::RecordAndDeadLetter { at, record, reason } => write!(
                f,
                "both        {at}: in record {record} and dead-lettered ({reason})"
            ),
            Discrepancy::RecordAndPending {
                at,
                record,
                pending,
            } => write!(
                f,
                "both        {at}: in published record {record} and in pending call {pending}"
            ),
            Discrepancy::ConflictingCopies { record, revision } => write!(
                f,
                "conflict    record {record} revision {revision} was published twice with different content"
            ),
            Discrepancy::DroppedByRevision {
                at,
                record,
                revision,
                latest,
            } => write!(
                f,
                "dropped     {at}: in record {record} revision {revision}, not in its latest revision {latest}"
            ),
            Discrepancy::DeadLetterMismatch { at, reason, holds } => write!(
                f,
                "dead letter {at}: dead-lettered as {reason}, but the input there is {holds}"
            ),
            Discrepancy::DeadLetterOfNothing { at, reason } => write!(
                f,
                "no input    {at}: named by a dead letter ({reason}), but the input holds nothing there"
            ),
            Discrepancy::NoSuchInput {
                at,
                record,
                not_an_event,
            } => {
                write!(
                    f,
                    "no input    {at}: named by record {record}, but the input holds no event there"
                )?;
                match not_an_event {
                    Some(reason) => write!(f, " (what it holds is not one: {reason})"),
                    None => Ok(()),
                }
            }
            Discrepancy::ForeignId { record } => write!(
                f,
                "foreign id  record {record}: its id derives from none of the events it lists (from their call ids or positions in their scope)"
            ),
            Discrepancy::BadRecord { at, why } => write!(f, "bad record  {at}: {why}"),
            Discrepancy::Superseded { at, event, record } => write!(
                f,
                "superseded  {at}: {event} is in no record, yet comes before the events record {record} lists: it went into a record under the same id that the outputs lack (published over at the same revision, or compacted away)"
            ),
            Discrepancy::Refused { at, event, record } => write!(
                f,
                "refused     {at}: {event} names the call id of record {record}, of another tool: the correlator refused it (conflicting_call_id) and it is not dead-lettered (`toolcalls local` writes it to its --dead-letters file: give that file to the audit)"
            ),
            Discrepancy::MixedIds { record } => write!(
                f,
                "mixed ids   record {record}: lists events of more than one call id, and collapsed no retries (correlation.attempts 1): events of another call were put in it"
            ),
            Discrepancy::NoResult { record } => write!(
                f,
                "no result   record {record}: its phase says it has a result, but none of the events it lists is a completion"
            ),
            Discrepancy::OtherTool { at, record, tool } => write!(
                f,
                "other tool  {at}: named by record {record}, but the event there, without a call id, is about tool {tool}, not the record's"
            ),
            Discrepancy::Unlisted { at, event, record } => write!(
                f,
                "unlisted    {at}: {event} says what record {record} holds, but the record does not list it: it went into the record, and the record's provenance lost it"
            ),
            Discrepancy::TwoResults { record } => write!(
                f,
                "two results record {record}: lists results without a call id that say different things: another call's result was put in it"
            ),
        }
    }
}
