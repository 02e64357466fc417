//! The query API: pending calls and waiting results shown as `Pending` / `Running` records.

use super::record::{record_of_call, record_of_waiting};
use super::rules::Link;
use super::Correlator;
use crate::state::Live;
use std::hash::BuildHasher;
use toolcalls_model::{Phase, RecordId, SessionId, ToolCallRecord};

impl Correlator {
    /// A pending call or waiting result by record id, as a `Pending` / `Running` record.
    pub fn get(&self, id: &RecordId) -> Option<ToolCallRecord> {
        let seq = *self.by_record.find(self.hs.hash_one(id), |&s| {
            self.entries.record_id(s) == Some(*id)
        })?;
        self.entries.live(seq).map(|live| self.view(seq, live))
    }

    /// Pending calls and waiting results of a session (any source or thread), oldest first.
    pub fn pending_in_session(&self, session: &SessionId) -> Vec<ToolCallRecord> {
        let mut seqs: Vec<u64> = self
            .entries
            .live
            .iter()
            .filter(|(_, live)| {
                let ix = match &***live {
                    Live::Call(call) => call.scope,
                    Live::Waiting(waiting) => waiting.scope,
                };
                &self.scopes.get(ix).key.session == session
            })
            .map(|(&seq, _)| seq)
            .collect();
        seqs.sort_unstable();
        seqs.into_iter()
            .filter_map(|seq| self.entries.live(seq).map(|live| self.view(seq, live)))
            .collect()
    }

    /// Every pending call and waiting result, oldest first.
    pub fn pending_views(&self) -> impl Iterator<Item = ToolCallRecord> + '_ {
        self.entries
            .live_seqs()
            .into_iter()
            .filter_map(|seq| self.entries.live(seq).map(|live| self.view(seq, live)))
    }

    /// A pending entry as the query API shows it.
    fn view(&self, seq: u64, live: &Live) -> ToolCallRecord {
        match live {
            Live::Call(call) => {
                let phase = if call.started_at().is_some() {
                    Phase::Running
                } else {
                    Phase::Pending
                };
                let scope = self.scopes.get(call.scope);
                let tool = scope.tool_name(call.tool).to_owned();
                let mut record = record_of_call(
                    call.clone(),
                    &scope.key,
                    tool,
                    None,
                    phase,
                    None,
                    Link::unmatched(seq),
                );
                // Pending: not completed, whatever an execution end said.
                record.status.completed_at = None;
                record.status.duration_ms = None;
                record
            }
            Live::Waiting(waiting) => record_of_waiting(
                (**waiting).clone(),
                &self.scopes.get(waiting.scope).key,
                Phase::Pending,
                "waiting for its announce",
            ),
        }
    }
}
