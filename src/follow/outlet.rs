//! Where `ingest --follow` delivers, and how it knows an event is safe: the Kafka input topics,
//! where an event counts once the brokers acknowledged it, or JSON lines (`--out`), once written
//! and flushed.

use anyhow::Context;
use std::io::Write;
use toolcalls_model::Event;
use toolcalls_producer::Publisher;

pub enum Outlet {
    Kafka(Publisher),
    Lines(Box<dyn Write>),
}

impl Outlet {
    /// Hands one event over (`payload` is its encoding); not yet safe.
    pub fn send(&mut self, event: &Event, payload: &[u8]) -> anyhow::Result<()> {
        match self {
            Outlet::Kafka(p) => Ok(p.send(event, payload)?),
            Outlet::Lines(w) => w
                .write_all(payload)
                .and_then(|()| w.write_all(b"\n"))
                .context("cannot write an event"),
        }
    }

    /// Waits until everything sent is acknowledged (or flushed); fails when anything was not,
    /// within the delivery timeout.
    pub fn confirm(&mut self) -> anyhow::Result<()> {
        match self {
            Outlet::Kafka(p) => {
                p.finish()?;
                Ok(())
            }
            Outlet::Lines(w) => w.flush().context("cannot write the events"),
        }
    }
}
