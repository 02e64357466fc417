//! Redaction rules as options of `toolcalls run` and `local`, and of the producers `ingest` and
//! `receive`: `--redact-pointer` and `--redact-pattern`, `TOOLCALLS_REDACT_*`, and `[redact]` in
//! the config file (lists). The flags and the variables add rules to the file's: a rule the file
//! sets is never dropped by one given beside it.

use toolcalls_model::redact::Redaction;
use toolcalls_settings::ConfigFile;

/// What is replaced by `[REDACTED]` before a record, or a producer's event, leaves the process
/// (`[redact]` in the config file).
#[derive(Debug, Clone, PartialEq, Eq, Default, clap::Args)]
#[group(id = "redact")]
pub struct RedactArgs {
    /// JSON pointer into a call's arguments, its result and each attribute whose value is
    /// replaced by `[REDACTED]` in whatever leaves the process (records and dead-letter topics,
    /// query API, local output; the events ingest and receive publish), repeatable: `--redact-pointer
    /// /password`; the checksum stays the original's
    #[arg(
        long = "redact-pointer",
        env = "TOOLCALLS_REDACT_POINTER",
        value_name = "POINTER"
    )]
    pub pointers: Vec<String>,
    /// Regular expression whose matches in any string of a call's arguments, result and
    /// attributes, and in the reasons and messages that may quote them, are replaced by
    /// `[REDACTED]`, repeatable: `--redact-pattern 'sk-[A-Za-z0-9]{20,}'`
    #[arg(
        long = "redact-pattern",
        env = "TOOLCALLS_REDACT_PATTERN",
        value_name = "REGEX"
    )]
    pub patterns: Vec<String>,
}

impl RedactArgs {
    /// These rules after the file's `[redact]` rules, each once: flags and variables add to the
    /// file's lists, where other lists replace them.
    pub fn with_file(self, file: &ConfigFile) -> RedactArgs {
        let joined = |table: Vec<String>, given: Vec<String>| {
            let mut all = table;
            for rule in given {
                if !all.contains(&rule) {
                    all.push(rule);
                }
            }
            all
        };
        RedactArgs {
            pointers: joined(file.list("redact", "pointers"), self.pointers),
            patterns: joined(file.list("redact", "patterns"), self.patterns),
        }
    }

    /// The rules, checked.
    pub fn resolve(&self) -> Result<Redaction, String> {
        Redaction::new(&self.pointers, &self.patterns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        redact: RedactArgs,
    }

    #[test]
    fn flags_and_file_lists() {
        let path =
            std::env::temp_dir().join(format!("toolcalls-redact-{}.toml", std::process::id()));
        std::fs::write(
            &path,
            "[redact]\npointers = [\"/password\", \"/token\"]\npatterns = [\"sk-[a-z]+\"]\n",
        )
        .unwrap();
        let parse = |argv: &[&str]| {
            let args = ["x", "--config", path.to_str().unwrap()]
                .into_iter()
                .chain(argv.iter().copied());
            toolcalls_settings::try_parse_from::<Cli, _, _>(args)
                .map(|(c, file)| c.redact.with_file(&file))
        };
        let from_file = parse(&[]).unwrap();
        assert_eq!(from_file.pointers, ["/password", "/token"]);
        assert_eq!(from_file.patterns, ["sk-[a-z]+"]);
        let flags = parse(&["--redact-pointer", "/key", "--redact-pointer", "/token"]).unwrap();
        assert_eq!(
            flags.pointers,
            ["/password", "/token", "/key"],
            "flags add to the file's rules"
        );
        assert_eq!(flags.patterns, ["sk-[a-z]+"]);
        assert!(from_file.resolve().is_ok());
        std::fs::write(&path, "[redact]\npointers = \"/password\"\n").unwrap();
        assert_eq!(
            parse(&[]).unwrap().pointers,
            ["/password"],
            "one value is a list of one"
        );
        std::fs::write(&path, "[redact]\npatterns = [\"(\"]\n").unwrap();
        let e = parse(&[]).unwrap().resolve().unwrap_err();
        assert!(e.contains("not a regular expression"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }
}
