//! Settings of the toolcalls commands, each declared once.
//!
//! A setting is a clap option with an environment variable. Its name, type, default, help text
//! and variable are declared on one struct field (`#[arg(long, env = "TOOLCALLS_…",
//! default_value_t = …)]`), and the same option is a key of the TOML file given with `--config`:
//!
//! - the key is the option's id (its field name);
//! - the options of a struct with a lower-case group id (`#[group(id = "core")]`) are the keys
//!   of that table (`[core] call_timeout`); the others are top-level keys;
//! - a repeatable option of pairs (value name `KEY=VALUE`: `--kafka key=value`) is a table of
//!   `key = value` lines (`[kafka]`), given to the command by [`ConfigFile::pairs`] to go
//!   before the option's own values;
//! - another repeatable option (`--redact-pattern`) is a key that takes a list (or one value);
//!   flags given on the command line replace the file's list (a command may add them to it
//!   instead, with [`ConfigFile::list`]: the redaction rules do);
//! - options without an environment variable (plain switches) and hidden ones (test hooks) are
//!   not read from the file.
//!
//! [`try_parse_from`] adds `--config` to every command that has settings, reads the file once,
//! refuses keys no command of the program knows (one file serves every command) and makes the
//! file's values the defaults of the options the command line and the environment left unset.
//! Precedence, highest first: flag, environment variable, config file, declared default.
//! `--help` shows each option's default, variable and key (`[config: core.call_timeout]`).

use clap::error::{ContextKind, ContextValue};
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// The id of the `--config` option that [`command`] adds.
pub const CONFIG: &str = "config";

/// A command-line error (clap's, including `--help`), or a config file that cannot be used.
#[derive(Debug)]
pub enum Error {
    Cli(clap::Error),
    File(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cli(e) => write!(f, "{}", e.render().to_string().trim_end()),
            Error::File(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Prints the error (or the help) and exits: 0 for `--help`/`--version`, otherwise 2.
    pub fn exit(self) -> ! {
        match self {
            Error::Cli(e) => e.exit(),
            Error::File(m) => {
                let _ = writeln!(std::io::stderr(), "error: {m}");
                std::process::exit(2)
            }
        }
    }
}

/// Parses the process's arguments into `C` with the config file's values layered in; prints the
/// error or help and exits when that fails.
pub fn parse<C: CommandFactory + FromArgMatches>() -> (C, ConfigFile) {
    try_parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// Parses `argv` (program name first) into `C`: flags, then environment variables, then the
/// `--config` file, then the declared defaults. Returns the file too, for its map tables.
pub fn try_parse_from<C, I, T>(argv: I) -> Result<(C, ConfigFile), Error>
where
    C: CommandFactory + FromArgMatches,
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    // The keys and the file's values are those of every setting; only the parse leaves out the
    // variables set to nothing.
    let mut cmd = without_empty_variables(command::<C>());
    let mut matches = cmd
        .try_get_matches_from_mut(argv.iter().cloned())
        .map_err(Error::Cli)?;
    let (path, leaf) = leaf(&matches);
    let file = match leaf.try_get_one::<PathBuf>(CONFIG) {
        Ok(Some(p)) => ConfigFile::read(p)?,
        _ => ConfigFile::default(),
    };
    if !file.table.is_empty() {
        let full = command::<C>();
        file.check_keys(&Keys::of(&full))?;
        let defaults = file.defaults_for(find(&full, &path))?;
        file.probe(find(&full, &path).clone(), &defaults)?;
        cmd = at_path(without_empty_variables(full), &path, &|mut leaf| {
            for (id, value) in &defaults {
                leaf = leaf.mut_arg(id, |a| a.default_values(value.clone()));
            }
            leaf
        });
        matches = cmd
            .try_get_matches_from_mut(argv.iter().cloned())
            .map_err(Error::Cli)?;
    }
    let cli = C::from_arg_matches_mut(&mut matches).map_err(|e| Error::Cli(e.format(&mut cmd)))?;
    Ok((cli, file))
}

/// `cmd` reading no variable that is set to nothing: `TOOLCALLS_QUIET=` is unset, as shells,
/// compose files (`${VAR:-}`) and CI systems write an unset variable, not a value to refuse.
fn without_empty_variables(cmd: Command) -> Command {
    cmd.mut_args(|a| match a.get_env() {
        Some(var) if std::env::var_os(var).is_some_and(|v| v.is_empty()) => a.env(None),
        _ => a,
    })
    .mut_subcommands(without_empty_variables)
}

/// `C`'s command with `--config` on every command that has settings, and each setting's key in
/// its help.
pub fn command<C: CommandFactory>() -> Command {
    decorate(C::command())
}

/// `T` with every option at its declared default, whatever the environment says.
///
/// # Panics
///
/// If a declared default does not parse: a mistake in the declaration, which any test of `T`'s
/// defaults shows.
pub fn defaults<T: clap::Args + FromArgMatches>() -> T {
    let mut cmd = T::augment_args(Command::new("defaults"))
        .no_binary_name(true)
        .mut_args(|a| a.env(None));
    let mut m = cmd
        .try_get_matches_from_mut(Vec::<OsString>::new())
        .unwrap_or_else(|e| panic!("a declared default does not parse: {e}"));
    T::from_arg_matches_mut(&mut m).unwrap_or_else(|e| panic!("declared defaults: {e}"))
}

/// Where a setting lives in the config file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    /// `name = value`.
    Top(String),
    /// `[table] name = value`.
    In(String, String),
    /// `[name]` with any `key = value` lines.
    Map(String),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Top(k) => f.write_str(k),
            Key::In(t, k) => write!(f, "{t}.{k}"),
            Key::Map(t) => write!(f, "[{t}] table"),
        }
    }
}

/// The config-file key of `arg` in `cmd`, if it is a setting.
fn key_of(cmd: &Command, arg: &Arg) -> Option<Key> {
    if arg.is_positional() || arg.is_hide_set() || arg.get_env().is_none() || arg.get_id() == CONFIG
    {
        return None;
    }
    let id = arg.get_id().as_str().to_owned();
    // A repeatable option of `KEY=VALUE` pairs is a table of its own (`[kafka]`); another
    // repeatable option is a key that takes a list.
    let pairs = arg
        .get_value_names()
        .is_some_and(|names| names.iter().any(|n| n.as_str() == "KEY=VALUE"));
    if matches!(arg.get_action(), ArgAction::Append) && pairs {
        return Some(Key::Map(id));
    }
    let table = cmd
        .get_groups()
        .find(|g| is_table_name(g.get_id().as_str()) && g.get_args().any(|a| a == arg.get_id()));
    Some(match table {
        Some(g) => Key::In(g.get_id().as_str().to_owned(), id),
        None => Key::Top(id),
    })
}

/// Group ids that name tables: lower case (clap names a struct's own group after the struct).
fn is_table_name(id: &str) -> bool {
    id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn decorate(mut cmd: Command) -> Command {
    let keys: Vec<(String, Key)> = cmd
        .get_arguments()
        .filter_map(|a| Some((a.get_id().as_str().to_owned(), key_of(&cmd, a)?)))
        .collect();
    for (id, key) in &keys {
        cmd = cmd.mut_arg(id, |a| {
            // A switch's variable takes what such variables usually hold: 1/0, yes/no, on/off,
            // true/false.
            let a = match a.get_action() {
                ArgAction::SetTrue => a.value_parser(clap::builder::BoolishValueParser::new()),
                _ => a,
            };
            let note = format!("[config: {key}]");
            let with = |h: Option<&clap::builder::StyledStr>| match h {
                Some(h) => format!("{h} {note}"),
                None => note.clone(),
            };
            let help = with(a.get_help());
            let a = match a.get_long_help() {
                Some(_) => {
                    let long = with(a.get_long_help());
                    a.long_help(long)
                }
                None => a,
            };
            a.help(help)
        });
    }
    if !keys.is_empty() && cmd.get_arguments().all(|a| a.get_id() != CONFIG) {
        cmd = cmd.arg(
            Arg::new(CONFIG)
                .long("config")
                .short('c')
                .env("TOOLCALLS_CONFIG")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help_heading(None::<&str>)
                .help(
                    "TOML file of settings, one serving every command: each option's key is \
                     shown as [config: …]; flags and environment variables override it",
                ),
        );
    }
    cmd.mut_subcommands(decorate)
}

/// The names of the subcommands given, and the innermost one's matches.
fn leaf(m: &ArgMatches) -> (Vec<String>, &ArgMatches) {
    let mut path = Vec::new();
    let mut m = m;
    while let Some((name, sub)) = m.subcommand() {
        path.push(name.to_owned());
        m = sub;
    }
    (path, m)
}

fn find<'a>(cmd: &'a Command, path: &[String]) -> &'a Command {
    path.iter().fold(cmd, |c, name| {
        c.find_subcommand(name)
            .expect("a subcommand that was just parsed")
    })
}

fn at_path(cmd: Command, path: &[String], f: &dyn Fn(Command) -> Command) -> Command {
    match path.split_first() {
        None => f(cmd),
        Some((first, rest)) => cmd.mut_subcommand(first, |sub| at_path(sub, rest, f)),
    }
}

/// Every key that some command of the program reads.
#[derive(Debug, Default)]
struct Keys {
    top: BTreeSet<String>,
    tables: BTreeMap<String, BTreeSet<String>>,
    maps: BTreeSet<String>,
}

impl Keys {
    fn of(cmd: &Command) -> Keys {
        let mut keys = Keys::default();
        keys.add(cmd);
        keys
    }

    fn add(&mut self, cmd: &Command) {
        for key in cmd.get_arguments().filter_map(|a| key_of(cmd, a)) {
            match key {
                Key::Top(k) => {
                    self.top.insert(k);
                }
                Key::In(t, k) => {
                    self.tables.entry(t).or_default().insert(k);
                }
                Key::Map(t) => {
                    self.maps.insert(t);
                }
            }
        }
        for sub in cmd.get_subcommands() {
            self.add(sub);
        }
    }
}

fn list<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    items
        .into_iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A scalar TOML value as the command line would give it.
fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(x) => Some(x.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        toml::Value::Datetime(d) => Some(d.to_string()),
        toml::Value::Array(_) | toml::Value::Table(_) => None,
    }
}

/// The TOML file given with `--config`, read once.
#[derive(Debug, Clone, Default)]
pub struct ConfigFile {
    path: Option<PathBuf>,
    table: toml::Table,
}

impl ConfigFile {
    /// Reads and parses `path`; the error names the file.
    pub fn read(path: &Path) -> Result<ConfigFile, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::File(format!(
                "cannot read config file {}: {e}; check the --config path",
                path.display()
            ))
        })?;
        let table = toml::from_str(&text).map_err(|e| {
            Error::File(format!(
                "config file {} is not valid TOML: {e}",
                path.display()
            ))
        })?;
        Ok(ConfigFile {
            path: Some(path.to_owned()),
            table,
        })
    }

    /// The file, when one was given.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The `key = value` lines of the map table `[name]` (strings as they are, other values as
    /// TOML writes them), in key order; empty without the table. They go before the values of
    /// the option `--name`, so that its flags or variable win.
    pub fn pairs(&self, name: &str) -> Vec<(String, String)> {
        match self.table.get(name) {
            Some(toml::Value::Table(t)) => t
                .iter()
                .map(|(k, v)| (k.clone(), scalar(v).unwrap_or_else(|| v.to_string())))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The strings of key `key` in table `[table]`, a list or one value; empty without it.
    pub fn list(&self, table: &str, key: &str) -> Vec<String> {
        match self.value(&Key::In(table.to_owned(), key.to_owned())) {
            Some(toml::Value::Array(items)) => items.iter().filter_map(scalar).collect(),
            Some(v) => scalar(v).into_iter().collect(),
            None => Vec::new(),
        }
    }

    fn error(&self, message: impl fmt::Display) -> Error {
        let path = self.path.as_deref().unwrap_or(Path::new("?"));
        Error::File(format!("config file {}: {message}", path.display()))
    }

    /// Refuses keys no command reads, and tables written as values.
    fn check_keys(&self, keys: &Keys) -> Result<(), Error> {
        for (name, value) in &self.table {
            if let Some(known) = keys.tables.get(name) {
                let toml::Value::Table(t) = value else {
                    return Err(self.error(format_args!("`{name}` must be a table ([{name}])")));
                };
                if let Some(k) = t.keys().find(|k| !known.contains(*k)) {
                    return Err(self.error(format_args!(
                        "unknown key `{k}` in [{name}]; its keys are {}",
                        list(known)
                    )));
                }
            } else if keys.maps.contains(name) {
                let toml::Value::Table(t) = value else {
                    return Err(self.error(format_args!(
                        "`{name}` must be a table of key = value lines ([{name}])"
                    )));
                };
                if let Some((k, _)) = t.iter().find(|(_, v)| scalar(v).is_none()) {
                    return Err(self.error(format_args!(
                        "[{name}] {k}: give a string, number or boolean"
                    )));
                }
            } else if !keys.top.contains(name) {
                return Err(self.error(format_args!(
                    "unknown key `{name}`; the top-level keys are {}, the tables [{}]",
                    list(&keys.top),
                    list(keys.tables.keys().chain(&keys.maps)).replace(", ", "], [")
                )));
            }
        }
        Ok(())
    }

    /// The file's value of a key; maps are read with [`ConfigFile::pairs`].
    fn value(&self, key: &Key) -> Option<&toml::Value> {
        match key {
            Key::Top(k) => self.table.get(k),
            Key::In(t, k) => self.table.get(t)?.as_table()?.get(k),
            Key::Map(_) => None,
        }
    }

    /// What the file gives `cmd`'s settings: (option id, values), maps left out. An array gives
    /// a repeatable option its values.
    fn defaults_for(&self, cmd: &Command) -> Result<Vec<(String, Vec<String>)>, Error> {
        let mut out = Vec::new();
        for arg in cmd.get_arguments() {
            let Some(key) = key_of(cmd, arg) else {
                continue;
            };
            let Some(value) = self.value(&key) else {
                continue;
            };
            let repeatable = matches!(arg.get_action(), clap::ArgAction::Append);
            let values = match value {
                toml::Value::Array(items) if repeatable => items.iter().map(scalar).collect(),
                _ => scalar(value).map(|v| vec![v]),
            };
            let Some(values) = values else {
                let what = if repeatable {
                    "values (a list of them)"
                } else {
                    "one value"
                };
                return Err(self.error(format_args!("`{key}` takes {what}, not {value}")));
            };
            out.push((arg.get_id().as_str().to_owned(), values));
        }
        Ok(out)
    }

    /// Parses every value the file gives `leaf`, even those a flag overrides, so that a wrong
    /// one is reported with its key.
    fn probe(&self, leaf: Command, defaults: &[(String, Vec<String>)]) -> Result<(), Error> {
        let mut probe = leaf
            .clone()
            .no_binary_name(true)
            .mut_args(|a| a.env(None).required(false));
        for (id, value) in defaults {
            probe = probe.mut_arg(id, |a| a.default_values(value.clone()));
        }
        let Err(e) = probe.try_get_matches_from_mut(Vec::<OsString>::new()) else {
            return Ok(());
        };
        // Clap names the option as `--long <VALUE>`.
        let flag = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(s)) => s.split(' ').next().unwrap_or_default().to_owned(),
            _ => String::new(),
        };
        let key = leaf
            .get_arguments()
            .find(|a| {
                a.get_long()
                    .is_some_and(|l| flag.strip_prefix("--") == Some(l))
            })
            .and_then(|a| key_of(&leaf, a));
        let detail = match (
            std::error::Error::source(&e),
            e.get(ContextKind::InvalidValue),
        ) {
            (Some(source), Some(ContextValue::String(value))) => {
                format!("invalid value `{value}`: {source}")
            }
            (Some(source), _) => source.to_string(),
            (None, _) => e
                .render()
                .to_string()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
                .collect::<Vec<_>>()
                .join(" ")
                .trim_start_matches("error: ")
                .to_owned(),
        };
        Err(match key {
            Some(key) => self.error(format_args!("{key}: {detail}")),
            None => self.error(detail),
        })
    }
}

/// Parses `key=value` (the values of `--kafka`). The error does not quote the value: it may be
/// a secret, or part of one.
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err("not key=value (e.g. --kafka security.protocol=SSL)".to_owned()),
    }
}

/// The value parser of `KEY=VALUE` options (`--kafka`, `--otlp-header`): [`parse_key_value`],
/// refusing a value without quoting it. Clap's own message for a refused value quotes it, and
/// these values hold passwords and tokens: `--kafka sasl.password=a,b` splits at the comma (the
/// variable's separator, which the flags share), and the `b` it refuses is part of the password.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyValueParser;

impl clap::builder::TypedValueParser for KeyValueParser {
    type Value = (String, String);

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        value
            .to_str()
            .and_then(|s| parse_key_value(s).ok())
            .ok_or_else(|| {
                let option = arg
                    .and_then(Arg::get_long)
                    .map_or_else(|| "the option".to_owned(), |l| format!("--{l}"));
                clap::Error::raw(
                    clap::error::ErrorKind::ValueValidation,
                    format!(
                        "{option} takes KEY=VALUE, and a value given is not one (it is not shown here: it may hold a secret); values are split at commas, so a value cannot hold one\n"
                    ),
                )
                .with_cmd(cmd)
            })
    }
}

/// A duration such as `250ms`, `30s`, `5m`, `2h` (a bare number is milliseconds); shown in the
/// largest unit that divides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

impl Dur {
    pub fn from_millis(ms: u64) -> Dur {
        Dur(Duration::from_millis(ms))
    }

    pub fn millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }
}

impl FromStr for Dur {
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
        Ok(Dur::from_millis(ms))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.millis();
        for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
            if ms != 0 && ms % size == 0 {
                return write!(f, "{}{unit}", ms / size);
            }
        }
        write!(f, "{ms}ms")
    }
}

#[cfg(test)]
mod tests;
