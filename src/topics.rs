//! `toolcalls topics`: create the processor's topics, or check an existing layout.
//!
//! `create` makes the two input topics and the changelog with the same partition count (the
//! changelog compacted), the records topic compacted and the dead-letter topic with a week of
//! retention; topics that exist are left alone. `check` runs the startup check of `toolcalls run`
//! (co-partitioned inputs, a changelog with enough partitions).

use anyhow::Context;
use std::process::ExitCode;
use toolcalls_processor::{TopicOutcome, TopicPlan};
use toolcalls_settings::ConfigFile;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Create the input, output and changelog topics.
    Create {
        /// Partitions of the input topics and the changelog
        #[arg(long, env = "TOOLCALLS_PARTITIONS", default_value_t = 6)]
        partitions: i32,
        /// Partitions of the records and dead-letter topics (default: --partitions)
        #[arg(long, env = "TOOLCALLS_OUTPUT_PARTITIONS")]
        output_partitions: Option<i32>,
        /// Replication factor of every topic (3 on a production cluster)
        #[arg(long, env = "TOOLCALLS_REPLICATION", default_value_t = 1)]
        replication: i32,
        #[command(flatten)]
        run: toolcalls_processor::RunArgs,
    },
    /// Check that the topics exist and are co-partitioned, as `toolcalls run` does at startup.
    Check {
        #[command(flatten)]
        run: toolcalls_processor::RunArgs,
    },
}

pub fn main(args: Args, file: &ConfigFile) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match args.command {
        Command::Create {
            partitions,
            output_partitions,
            replication,
            run,
        } => {
            let settings = run.into_settings(file).context("reading the settings")?;
            let plan = TopicPlan {
                partitions,
                output_partitions,
                replication,
            };
            let created = runtime.block_on(toolcalls_processor::create_topics(&settings, &plan))?;
            for (name, outcome) in created {
                match outcome {
                    TopicOutcome::Created => println!("created {name}"),
                    TopicOutcome::AlreadyExists => println!("exists  {name}"),
                }
            }
            let partitions = toolcalls_processor::topics::check_topics(&settings)?;
            println!("ok: input topics co-partitioned with {partitions} partitions");
        }
        Command::Check { run } => {
            let settings = run.into_settings(file).context("reading the settings")?;
            let partitions = toolcalls_processor::topics::check_topics(&settings)?;
            println!("ok: input topics co-partitioned with {partitions} partitions");
        }
    }
    Ok(ExitCode::SUCCESS)
}
