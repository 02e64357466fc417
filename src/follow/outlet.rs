//! Where `ingest --follow` delivers, and how it knows an event is safe: the Kafka input topics,
//! where an event counts once the brokers acknowledged it, or JSON lines (`--out`), once written
//! and flushed — to a file, once on disk (the checkpoint that counts them is, so they must be
//! first: else a power loss would leave the checkpoint counting events the file lost).

use anyhow::Context;
use std::fs::File;
use std::io::{BufWriter, Write};
use toolcalls_model::Event;
use toolcalls_producer::{Publisher, Refused};

pub enum Outlet {
    Kafka(Publisher),
    /// Standard output.
    Lines(Box<dyn Write>),
    File(BufWriter<File>),
}

impl Outlet {
    /// Hands one event over (`payload` is its encoding); not yet safe.
    pub fn send(&mut self, event: &Event, payload: &[u8]) -> anyhow::Result<()> {
        match self {
            Outlet::Kafka(p) => Ok(p.send(event, payload)?),
            Outlet::Lines(w) => write_line(w, payload),
            Outlet::File(w) => write_line(w, payload),
        }
    }

    /// Waits until everything sent is acknowledged (or flushed); fails when anything was not,
    /// within the delivery timeout. Returns the events the brokers refused as too large: left
    /// out, for the caller to say.
    pub fn confirm(&mut self) -> anyhow::Result<Vec<Refused>> {
        match self {
            Outlet::Kafka(p) => {
                p.finish()?;
                return Ok(p.take_refused());
            }
            Outlet::Lines(w) => w.flush().context("cannot write the events")?,
            Outlet::File(w) => w
                .flush()
                .and_then(|()| w.get_ref().sync_data())
                .context("cannot write the events to disk")?,
        }
        Ok(Vec::new())
    }
}

fn write_line(w: &mut impl Write, payload: &[u8]) -> anyhow::Result<()> {
    w.write_all(payload)
        .and_then(|()| w.write_all(b"\n"))
        .context("cannot write an event")
}
