//! Settings shared by the subcommands: the TOML config file, and the correlation knobs (defined
//! with the processor's settings in `toolcalls_processor::core_settings`).
//!
//! Precedence, highest first: command-line flag, environment variable, config file, default.

use anyhow::Context;
use serde::Deserialize;
use std::path::{Path, PathBuf};

pub use toolcalls_processor::core_settings::{CoreArgs, CoreFile};

/// Reads a TOML config file into `T` (each subcommand has its own tables), naming the file in errors.
pub fn read_file<T: for<'de> Deserialize<'de> + Default>(path: Option<&Path>) -> anyhow::Result<T> {
    let Some(path) = path else {
        return Ok(T::default());
    };
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read config file {}; check the --config path",
            path.display()
        )
    })?;
    toml::from_str(&text).with_context(|| format!("config file {} is not valid", path.display()))
}

/// The whole config file: one table per concern.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FileConfig {
    pub core: Option<CoreFile>,
    pub local: Option<crate::local::LocalFile>,
    /// The processor's settings (`toolcalls run` checks them); one file serves every subcommand.
    #[serde(flatten)]
    pub _run: toml::Table,
}

/// `--config` for every subcommand.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArg {
    /// TOML config file; flags and environment variables override it
    #[arg(long, short = 'c', env = "TOOLCALLS_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
}
