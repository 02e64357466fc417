use super::*;
use clap::{Args, Parser, Subcommand};

/// A program shaped like toolcalls: top-level keys, a table, a map, a switch, a test hook, and
/// two commands sharing one file.
#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    Serve(Serve),
    Tool {
        #[command(subcommand)]
        command: ToolCmd,
    },
}

#[derive(Debug, Subcommand)]
enum ToolCmd {
    Go(Go),
}

#[derive(Debug, Args)]
struct Serve {
    /// Where to connect
    #[arg(
        long,
        env = "TOOLCALLS_SETTINGS_TEST_HOST",
        default_value = "localhost"
    )]
    host: String,
    /// How many
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_COUNT", default_value_t = 3)]
    count: u32,
    /// Only the precedence test sets its variable
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_LEVEL", default_value_t = 1)]
    level: u8,
    /// Only the defaults test sets its variable
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_NAME", default_value = "anon")]
    name: String,
    /// Extra properties
    #[arg(long = "prop", id = "props", value_name = "KEY=VALUE", env = "TOOLCALLS_SETTINGS_TEST_PROPS", value_parser = parse_key_value, value_delimiter = ',')]
    props: Vec<(String, String)>,
    /// Only the variables test sets its variable
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_LOUD")]
    loud: bool,
    /// Only the variables test sets its variable
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_LABEL", default_value = "none")]
    label: String,
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_HOOK", hide = true)]
    hook: Option<String>,
    /// Not a setting: no variable
    #[arg(long)]
    verbose: bool,
    #[command(flatten)]
    timing: Timing,
}

/// `[timing]`.
#[derive(Debug, Args)]
#[group(id = "timing")]
struct Timing {
    /// How long to wait
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_WAIT", default_value_t = Dur::from_millis(30_000))]
    wait: Dur,
    /// Stop early
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_EARLY")]
    early: bool,
}

#[derive(Debug, Args)]
#[group(id = "go")]
struct Go {
    /// A mode
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_MODE", default_value = "fast", value_parser = ["fast", "slow"])]
    mode: String,
    /// A time
    #[arg(long, env = "TOOLCALLS_SETTINGS_TEST_AT")]
    at: Option<String>,
}

/// A config file, removed when dropped.
struct TempFile(PathBuf);

impl std::ops::Deref for TempFile {
    type Target = PathBuf;

    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn file(name: &str, text: &str) -> TempFile {
    let path =
        std::env::temp_dir().join(format!("toolcalls-settings-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    TempFile(path)
}

/// Held by every test: some set the process's variables, which every parse reads, and the tests
/// run on threads of one process.
fn environment() -> std::sync::MutexGuard<'static, ()> {
    static ENVIRONMENT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ENVIRONMENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn serve(argv: &[&str]) -> Result<(Serve, ConfigFile), Error> {
    let (cli, file) = try_parse_from::<Cli, _, _>(["p", "serve"].iter().chain(argv))?;
    match cli.command {
        Cmd::Serve(s) => Ok((s, file)),
        Cmd::Tool { .. } => unreachable!(),
    }
}

fn err(r: Result<(Serve, ConfigFile), Error>) -> String {
    r.map(|_| ()).unwrap_err().to_string()
}

#[test]
fn flag_over_env_over_file_over_default() {
    let _environment = environment();
    let cfg = file(
        "layers.toml",
        "host = \"file\"\ncount = 5\nlevel = 5\n[timing]\nwait = \"2m\"\nearly = true\n[go]\nmode = \"slow\"\n",
    );
    let c = cfg.to_str().unwrap();
    let (s, _) = serve(&[]).unwrap();
    assert_eq!(
        (s.host.as_str(), s.count, s.timing.wait, s.timing.early),
        ("localhost", 3, Dur::from_millis(30_000), false),
        "declared defaults"
    );
    let (s, f) = serve(&["--config", c]).unwrap();
    assert_eq!(
        (
            s.host.as_str(),
            s.count,
            s.timing.wait.millis(),
            s.timing.early
        ),
        ("file", 5, 120_000, true),
        "the file over the defaults"
    );
    assert_eq!(f.path(), Some(cfg.as_path()));
    assert_eq!(s.level, 5);
    std::env::set_var("TOOLCALLS_SETTINGS_TEST_LEVEL", "7");
    let (s, _) = serve(&["-c", c, "--host", "flag"]).unwrap();
    let (flagged, _) = serve(&["-c", c, "--level", "9"]).unwrap();
    std::env::remove_var("TOOLCALLS_SETTINGS_TEST_LEVEL");
    assert_eq!(
        (s.host.as_str(), s.level),
        ("flag", 7),
        "flag over file, env over file"
    );
    assert_eq!(flagged.level, 9, "flag over env");
}

#[test]
fn maps_hooks_and_switches() {
    let _environment = environment();
    let cfg = file(
        "maps.toml",
        "[props]\n\"a.b\" = \"x\"\n\"c.d\" = 5\nflag = true\n",
    );
    let (s, f) = serve(&["-c", cfg.to_str().unwrap(), "--prop", "e=f"]).unwrap();
    assert_eq!(s.props, vec![("e".into(), "f".into())]);
    assert_eq!(
        f.pairs("props"),
        vec![
            ("a.b".into(), "x".into()),
            ("c.d".into(), "5".into()),
            ("flag".into(), "true".into())
        ]
    );
    assert!(f.pairs("nothing").is_empty());
    for (text, what) in [
        ("hook = \"x\"\n", "a hidden option"),
        ("verbose = true\n", "an option without variable"),
        ("config = \"x\"\n", "--config"),
    ] {
        let cfg = file("not-settings.toml", text);
        let e = err(serve(&["-c", cfg.to_str().unwrap()]));
        assert!(e.contains("unknown key"), "{what}: {e}");
    }
}

#[test]
fn unknown_keys_are_refused_with_the_key_and_the_file() {
    let _environment = environment();
    let cfg = file("unknown.toml", "[timing]\nwiat = 5\n");
    let e = err(serve(&["-c", cfg.to_str().unwrap()]));
    assert!(
        e.contains("unknown.toml") && e.contains("`wiat` in [timing]") && e.contains("early, wait"),
        "{e}"
    );
    let cfg = file("unknown-top.toml", "hots = \"x\"\n");
    let e = err(serve(&["-c", cfg.to_str().unwrap()]));
    assert!(e.contains("`hots`") && e.contains("host"), "{e}");
    let cfg = file("not-a-table.toml", "timing = 5\n");
    let e = err(serve(&["-c", cfg.to_str().unwrap()]));
    assert!(e.contains("must be a table"), "{e}");
    let cfg = file("broken.toml", "host = \n");
    let e = err(serve(&["-c", cfg.to_str().unwrap()]));
    assert!(e.contains("broken.toml") && e.contains("TOML"), "{e}");
    let e = err(serve(&["-c", "/nonexistent/x.toml"]));
    assert!(e.contains("/nonexistent/x.toml"), "{e}");
}

#[test]
fn wrong_values_name_their_key_even_when_a_flag_overrides_them() {
    let _environment = environment();
    let cfg = file("bad-value.toml", "[timing]\nwait = \"soon\"\n");
    let c = cfg.to_str().unwrap();
    for argv in [&["-c", c][..], &["-c", c, "--wait", "1s"]] {
        let e = err(serve(argv));
        assert!(
            e.contains("bad-value.toml: timing.wait:") && e.contains("not a duration"),
            "{e}"
        );
    }
    let cfg = file("bad-count.toml", "count = [1, 2]\n");
    let e = err(serve(&["-c", cfg.to_str().unwrap()]));
    assert!(e.contains("`count` takes one value"), "{e}");
    let cfg = file("bad-mode.toml", "[go]\nmode = \"medium\"\n");
    let e = try_parse_from::<Cli, _, _>(["p", "tool", "go", "-c", cfg.to_str().unwrap()])
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("go.mode:") && e.contains("medium") && e.contains("fast"),
        "{e}"
    );
}

#[test]
fn one_file_serves_every_command() {
    let _environment = environment();
    let cfg = file(
        "shared.toml",
        "host = \"h\"\n[go]\nmode = \"slow\"\nat = 2026-01-01T00:00:00Z\n",
    );
    let (cli, _) =
        try_parse_from::<Cli, _, _>(["p", "tool", "go", "--config", cfg.to_str().unwrap()])
            .unwrap();
    let Cmd::Tool {
        command: ToolCmd::Go(go),
    } = cli.command
    else {
        panic!("parsed another command")
    };
    assert_eq!(go.mode, "slow");
    assert_eq!(go.at.as_deref(), Some("2026-01-01T00:00:00Z"));
    assert_eq!(serve(&["-c", cfg.to_str().unwrap()]).unwrap().0.host, "h");
}

#[test]
fn help_shows_default_variable_and_key() {
    let _environment = environment();
    let mut cmd = command::<Cli>();
    cmd.build();
    let serve = cmd.find_subcommand_mut("serve").unwrap();
    let help = serve.render_help().to_string();
    for line in [
        "[config: host] [env: TOOLCALLS_SETTINGS_TEST_HOST=] [default: localhost]",
        "[config: timing.wait] [env: TOOLCALLS_SETTINGS_TEST_WAIT=] [default: 30s]",
        "[config: [props] table] [env: TOOLCALLS_SETTINGS_TEST_PROPS=]",
        "-c, --config <FILE>",
    ] {
        assert!(help.contains(line), "{line}\n{help}");
    }
    assert!(!help.contains("--hook"), "{help}");
    assert!(
        !command::<Cli>()
            .find_subcommand("tool")
            .unwrap()
            .get_arguments()
            .any(|a| a.get_id() == CONFIG),
        "--config only where there are settings"
    );
}

#[test]
fn switch_variables_take_the_usual_words_and_an_empty_variable_is_unset() {
    let _environment = environment();
    let cfg = file("label.toml", "label = \"file\"\n");
    let c = cfg.to_str().unwrap();
    std::env::set_var("TOOLCALLS_SETTINGS_TEST_LABEL", "");
    let mut seen = Vec::new();
    for (value, loud) in [
        ("1", true),
        ("yes", true),
        ("on", true),
        ("true", true),
        ("0", false),
        ("no", false),
        ("off", false),
        ("false", false),
        ("", false),
    ] {
        std::env::set_var("TOOLCALLS_SETTINGS_TEST_LOUD", value);
        let (plain, _) = serve(&[]).unwrap_or_else(|e| panic!("{value:?}: {e}"));
        let (filed, _) = serve(&["-c", c]).unwrap_or_else(|e| panic!("{value:?}: {e}"));
        seen.push((plain.loud == loud, plain.label, filed.label));
    }
    std::env::set_var("TOOLCALLS_SETTINGS_TEST_LOUD", "maybe");
    let refused = err(serve(&[]));
    std::env::remove_var("TOOLCALLS_SETTINGS_TEST_LOUD");
    std::env::remove_var("TOOLCALLS_SETTINGS_TEST_LABEL");
    for (right, plain, filed) in seen {
        assert!(right);
        assert_eq!((plain.as_str(), filed.as_str()), ("none", "file"));
    }
    assert!(refused.contains("'maybe'"), "{refused}");
}

#[test]
fn defaults_ignore_the_environment() {
    let _environment = environment();
    std::env::set_var("TOOLCALLS_SETTINGS_TEST_NAME", "from-env");
    let s: Serve = defaults();
    std::env::remove_var("TOOLCALLS_SETTINGS_TEST_NAME");
    assert_eq!((s.name.as_str(), s.count), ("anon", 3));
}

#[test]
fn key_value_pairs() {
    let _environment = environment();
    assert_eq!(
        parse_key_value(" a.b =x=y"),
        Ok(("a.b".into(), "x=y".into()))
    );
    assert!(parse_key_value("novalue").is_err());
    assert!(parse_key_value("=v").is_err());
}

#[test]
fn durations_parse_with_units_and_say_what_is_wrong() {
    let _environment = environment();
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
fn durations_show_in_their_largest_unit_and_read_back() {
    let _environment = environment();
    for (ms, text) in [
        (0, "0ms"),
        (250, "250ms"),
        (1_500, "1500ms"),
        (30_000, "30s"),
        (90_000, "90s"),
        (1_800_000, "30m"),
        (7_200_000, "2h"),
    ] {
        let d = Dur::from_millis(ms);
        assert_eq!(d.to_string(), text);
        assert_eq!(text.parse::<Dur>(), Ok(d));
    }
}
