//! The correlation knobs as flags, environment variables and `[core]` keys of the config file,
//! shared by `toolcalls run` and `toolcalls local`.
//!
//! Precedence, highest first: command-line flag, environment variable, config file, default.

use serde::Deserialize;
use std::time::Duration;
use toolcalls_core::Config;

/// A duration such as `250ms`, `30s`, `5m`, `2h` (a bare number is milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl Dur {
    pub fn millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }
}

impl std::str::FromStr for Dur {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: u64 = num
            .parse()
            .map_err(|_| format!("`{s}` is not a duration; write e.g. 250ms, 30s, 5m or 2h"))?;
        let ms = match unit.trim() {
            "" | "ms" => n,
            "s" => n.saturating_mul(1_000),
            "m" | "min" => n.saturating_mul(60_000),
            "h" => n.saturating_mul(3_600_000),
            other => {
                return Err(format!(
                    "unknown duration unit `{other}` in `{s}`; use ms, s, m or h"
                ))
            }
        };
        Ok(Dur(Duration::from_millis(ms)))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Ms(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Ms(ms) => Ok(Dur(Duration::from_millis(ms))),
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// The correlation rules' knobs (`[core]` in the config file).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CoreArgs {
    /// A call with no result this long after its announce is closed as TimedOut [default: 30m]
    #[arg(long, env = "TOOLCALLS_CALL_TIMEOUT", value_name = "DURATION")]
    pub call_timeout: Option<Dur>,
    /// After turn_end / turn_aborted or a denial, pending calls wait this long before they close
    /// as Interrupted / Denied [default: 30s]
    #[arg(long, env = "TOOLCALLS_TURN_GRACE", value_name = "DURATION")]
    pub turn_grace: Option<Dur>,
    /// A result whose announce has not arrived waits this long before it is published as
    /// Orphaned [default: 5m]
    #[arg(long, env = "TOOLCALLS_ORPHAN_GRACE", value_name = "DURATION")]
    pub orphan_grace: Option<Dur>,
    /// Announces sharing an idempotency key this close together collapse into one record
    /// [default: 10m]
    #[arg(long, env = "TOOLCALLS_IDEMPOTENCY_WINDOW", value_name = "DURATION")]
    pub idempotency_window: Option<Dur>,
    /// How long closed call ids are remembered so late repeats count as duplicates [default: 10m]
    #[arg(long, env = "TOOLCALLS_DEDUPE_WINDOW", value_name = "DURATION")]
    pub dedupe_window: Option<Dur>,
    /// Most pending calls and waiting results per partition; over it the oldest are closed as
    /// Evicted [default: 100000]
    #[arg(long, env = "TOOLCALLS_MAX_PENDING", value_name = "N")]
    pub max_pending: Option<usize>,
    /// Most closed call ids remembered per partition for de-duplication [default: 200000]
    #[arg(long, env = "TOOLCALLS_MAX_REMEMBERED", value_name = "N")]
    pub max_remembered: Option<usize>,
}

/// The `[core]` table of the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreFile {
    pub call_timeout: Option<Dur>,
    pub turn_grace: Option<Dur>,
    pub orphan_grace: Option<Dur>,
    pub idempotency_window: Option<Dur>,
    pub dedupe_window: Option<Dur>,
    pub max_pending: Option<usize>,
    pub max_remembered: Option<usize>,
}

impl CoreArgs {
    /// Flags/env over the file over the defaults.
    pub fn resolve(&self, file: &CoreFile) -> Result<Config, String> {
        let d = Config::default();
        let ms = |flag: Option<Dur>, file: Option<Dur>, default: u64| {
            flag.or(file).map_or(default, Dur::millis)
        };
        let config = Config {
            call_timeout_ms: ms(self.call_timeout, file.call_timeout, d.call_timeout_ms),
            turn_grace_ms: ms(self.turn_grace, file.turn_grace, d.turn_grace_ms),
            orphan_grace_ms: ms(self.orphan_grace, file.orphan_grace, d.orphan_grace_ms),
            idempotency_window_ms: ms(
                self.idempotency_window,
                file.idempotency_window,
                d.idempotency_window_ms,
            ),
            dedupe_window_ms: ms(self.dedupe_window, file.dedupe_window, d.dedupe_window_ms),
            max_pending: self
                .max_pending
                .or(file.max_pending)
                .unwrap_or(d.max_pending),
            max_remembered: self
                .max_remembered
                .or(file.max_remembered)
                .unwrap_or(d.max_remembered),
            // Set by the caller: the processor reads two input topics, `local` one stream.
            input_topics: d.input_topics,
        };
        config
            .validate()
            .map_err(|e| format!("invalid correlation settings: {e}"))?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_say_what_is_wrong() {
        assert_eq!("250ms".parse::<Dur>().unwrap().millis(), 250);
        assert_eq!("30s".parse::<Dur>().unwrap().millis(), 30_000);
        assert_eq!("5m".parse::<Dur>().unwrap().millis(), 300_000);
        assert_eq!("2h".parse::<Dur>().unwrap().millis(), 7_200_000);
        assert_eq!("42".parse::<Dur>().unwrap().millis(), 42);
        assert!("5 parsecs".parse::<Dur>().unwrap_err().contains("unit"));
        assert!("soon"
            .parse::<Dur>()
            .unwrap_err()
            .contains("not a duration"));
    }

    #[test]
    fn flags_override_file_override_defaults() {
        let file: CoreFile =
            toml::from_str("call_timeout = \"1m\"\nturn_grace = 500\nmax_pending = 7").unwrap();
        let args = CoreArgs {
            turn_grace: Some(Dur(Duration::from_secs(2))),
            ..Default::default()
        };
        let c = args.resolve(&file).unwrap();
        assert_eq!(c.call_timeout_ms, 60_000);
        assert_eq!(c.turn_grace_ms, 2_000);
        assert_eq!(c.max_pending, 7);
        assert_eq!(c.orphan_grace_ms, Config::default().orphan_grace_ms);
        assert!(toml::from_str::<CoreFile>("bogus = 1").is_err());
        let zero = CoreArgs {
            max_pending: Some(0),
            ..Default::default()
        };
        assert!(zero.resolve(&CoreFile::default()).is_err());
    }
}
