//! The summary of a run: what became of the events and records, added up over the threads, and
//! printed on stderr at the end.

use crate::say::say;
use std::collections::BTreeMap;
use toolcalls_model::{Phase, Strategy, ToolCallRecord};

#[derive(Default)]
pub(super) struct Summary {
    pub events: u64,
    pub bad_lines: u64,
    pub outcomes: Tally,
    pub rejected: Tally,
    pub phases: BTreeMap<Phase, u64>,
    pub strategies: BTreeMap<Strategy, u64>,
    pub duplicates: u64,
    pub still_pending: u64,
}

impl Summary {
    /// Adds another thread's counts to these.
    pub fn add(&mut self, other: Summary) {
        fn add_map<K: Ord>(to: &mut BTreeMap<K, u64>, from: BTreeMap<K, u64>) {
            for (k, v) in from {
                *to.entry(k).or_default() += v;
            }
        }
        self.events += other.events;
        self.bad_lines += other.bad_lines;
        self.outcomes.add_all(&other.outcomes);
        self.rejected.add_all(&other.rejected);
        add_map(&mut self.phases, other.phases);
        add_map(&mut self.strategies, other.strategies);
        self.duplicates += other.duplicates;
        self.still_pending += other.still_pending;
    }

    /// Counts a record written.
    pub fn record(&mut self, record: &ToolCallRecord) {
        *self.phases.entry(record.status.phase).or_default() += 1;
        *self
            .strategies
            .entry(record.correlation.strategy)
            .or_default() += 1;
        self.duplicates += u64::from(record.correlation.duplicates);
    }
}

/// Counts by label. The labels are a few constants (`Outcome::label`, the reasons of a
/// refusal), counted at every event: a short list matched by pointer first costs less than a map
/// that compares the text.
#[derive(Default)]
pub(super) struct Tally(Vec<(&'static str, u64)>);

impl Tally {
    pub fn add(&mut self, label: &'static str, n: u64) {
        let found = self
            .0
            .iter_mut()
            .find(|(l, _)| std::ptr::eq(*l, label) || *l == label);
        match found {
            Some((_, count)) => *count += n,
            None => self.0.push((label, n)),
        }
    }

    fn add_all(&mut self, other: &Tally) {
        for &(label, n) in &other.0 {
            self.add(label, n);
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The counts by label, in the labels' order.
    fn sorted(&self) -> Vec<(&'static str, u64)> {
        let mut counts = self.0.clone();
        counts.sort_unstable();
        counts
    }
}

/// Prints the summary on stderr; with `--at-end keep`, the first pending entries (`pending`, at
/// most 20 of them) too.
pub(super) fn print_summary(s: &Summary, keep: bool, pending: &[ToolCallRecord]) {
    let records: u64 = s.phases.values().sum();
    say!(
        "toolcalls local: {} events, {} bad lines, {} records",
        s.events,
        s.bad_lines,
        records
    );
    let join = |items: Vec<String>| {
        if items.is_empty() {
            "-".to_owned()
        } else {
            items.join(", ")
        }
    };
    say!(
        "  by phase:    {}",
        join(s.phases.iter().map(|(k, v)| format!("{k} {v}")).collect())
    );
    say!(
        "  by strategy: {}",
        join(
            s.strategies
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect()
        )
    );
    say!(
        "  events:      {}",
        join(
            s.outcomes
                .sorted()
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect()
        )
    );
    if s.duplicates > 0 {
        say!("  duplicates merged: {}", s.duplicates);
    }
    if !s.rejected.is_empty() {
        say!(
            "  refused:     {}",
            join(
                s.rejected
                    .sorted()
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect()
            )
        );
    }
    if keep {
        say!("  still pending (--at-end keep): {}", s.still_pending);
        for r in pending.iter().take(20) {
            let tool = r.spec.tool_ref.as_ref().map_or("?", |t| t.name.as_str());
            say!(
                "    {} {} {} session={}",
                r.status.phase,
                tool,
                r.metadata.name,
                r.metadata.session
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn a_tally_counts_each_label_once_whatever_text_holds_it() {
        let mut a = Tally::default();
        a.add("matched", 1);
        a.add("duplicate", 2);
        a.add("matched", 1);
        // The same label from another place in memory.
        let elsewhere: &'static str = String::from("matched").leak();
        a.add(elsewhere, 1);
        let mut b = Tally::default();
        b.add("late", 4);
        b.add("duplicate", 1);
        a.add_all(&b);
        assert_eq!(a.sorted(), [("duplicate", 3), ("late", 4), ("matched", 3)]);
        assert!(!a.is_empty() && Tally::default().is_empty());
    }
}
