//! Integration tests of the processor against a real Kafka wire-protocol broker (Tansu, installed
//! by `scripts/install-test-deps.sh`). One broker per test binary; every test has its own topics
//! and group, and every wait is bounded (see `harness.rs`).

mod align;
mod api;
mod backfill;
mod backlog;
mod cluster;
mod dashboard;
mod deliver;
mod disorder;
mod dlq;
mod flow;
mod guarantees;
mod harness;
mod ingest;
mod kill;
mod ledger;
mod operate;
mod owner;
#[path = "../support/piped.rs"]
mod piped;
mod poison;
mod prom;
mod resend;
mod restart;
#[path = "../support/scratch.rs"]
mod scratch;
mod spans;
mod split;
