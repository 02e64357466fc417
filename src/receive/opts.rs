//! The options of `toolcalls receive`: `[receive]` in the config file, and the Kafka options
//! `toolcalls ingest` has.

use crate::publish_args::Publish;
use std::net::SocketAddr;
use std::time::Duration;
use toolcalls_processor::redact_settings::RedactArgs;
use toolcalls_processor::{LogFormat, Secret};
use toolcalls_settings::Dur;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub opts: Opts,
    #[command(flatten, next_help_heading = "Kafka")]
    pub publish: Publish,
    #[command(flatten, next_help_heading = "Redaction")]
    pub redact: RedactArgs,
}

/// `[receive]` in the config file.
#[derive(Debug, clap::Args)]
#[group(id = "receive")]
pub struct Opts {
    /// Address to listen on for hook payloads, OTLP traces and v1 events (see
    /// docs/OPERATIONS.md, "Receiving over HTTP"); an address beyond loopback needs --token
    #[arg(long, env = "TOOLCALLS_RECEIVE_LISTEN", value_name = "ADDR", default_value_t = SocketAddr::from(([127, 0, 0, 1], 4319)))]
    pub listen: SocketAddr,
    /// Bearer token every request must carry (`Authorization: Bearer <token>`); required when
    /// --listen is not a loopback address. Prefer the variable (or a file) to the flag, which
    /// other users of the host can see
    #[arg(
        long,
        env = "TOOLCALLS_RECEIVE_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<Secret>,
    /// Largest request body accepted, as sent and once decompressed (gzip, deflate); a larger one
    /// is answered 413 and nothing of it is published
    #[arg(
        long,
        env = "TOOLCALLS_RECEIVE_MAX_BODY_BYTES",
        value_name = "BYTES",
        default_value_t = 8 << 20
    )]
    pub max_body_bytes: usize,
    /// How long a request waits for the brokers to acknowledge its events before it is answered
    /// 503 (the events may still arrive; a retry is deduplicated by the processor)
    #[arg(
        long,
        env = "TOOLCALLS_RECEIVE_DELIVERY_TIMEOUT",
        value_name = "DURATION",
        default_value_t = Dur(Duration::from_secs(10))
    )]
    pub delivery_timeout: Dur,
    /// How long a client may take to send a request's headers, and its body (408 then); a
    /// connection that sends nothing for that long is closed
    #[arg(
        long,
        env = "TOOLCALLS_RECEIVE_READ_TIMEOUT",
        value_name = "DURATION",
        default_value_t = Dur(Duration::from_secs(10))
    )]
    pub read_timeout: Dur,
    /// Connections served at once (at most 1048576); more wait to be accepted until one ends
    #[arg(
        long,
        env = "TOOLCALLS_RECEIVE_MAX_CONNECTIONS",
        value_name = "N",
        default_value_t = 512
    )]
    pub max_connections: usize,
    /// Requests of a body over 64 KiB read at once, each until its events are delivered (a body
    /// costs up to about 60 times its size until then); more wait their turn. Smaller bodies are
    /// read as they come
    #[arg(
        long,
        env = "TOOLCALLS_RECEIVE_MAX_READS",
        value_name = "N",
        default_value_t = 2
    )]
    pub max_reads: usize,
    /// Address of a listener of its own for /metrics and /healthz (no token: they tell counts,
    /// never payloads); off unless set
    #[arg(long, env = "TOOLCALLS_RECEIVE_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Log format; the level comes from RUST_LOG (default `info`)
    #[arg(long, env = "TOOLCALLS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl Opts {
    /// Refuses settings that would expose the listener or could never work.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(token) = &self.token {
            token.check_token("--token").map_err(anyhow::Error::msg)?;
        }
        if !self.listen.ip().is_loopback() && self.token.is_none() {
            anyhow::bail!(
                "--listen {} is reachable beyond this host, and anyone who reaches it could write into the ledger: set --token (TOOLCALLS_RECEIVE_TOKEN), or listen on 127.0.0.1",
                self.listen
            );
        }
        if self.max_body_bytes == 0 {
            anyhow::bail!("--max-body-bytes must be greater than 0");
        }
        if self.delivery_timeout.0.is_zero() {
            anyhow::bail!("--delivery-timeout must be greater than 0");
        }
        if self.read_timeout.0.is_zero() {
            anyhow::bail!("--read-timeout must be greater than 0");
        }
        let most = toolcalls_processor::listener::MAX_CONNECTIONS;
        if self.max_connections == 0 || self.max_connections > most {
            anyhow::bail!("--max-connections must be greater than 0 and at most {most}");
        }
        if self.max_reads == 0 || self.max_reads > most {
            anyhow::bail!("--max-reads must be greater than 0 and at most {most}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn opts(argv: &[&str], file: Option<&str>) -> Result<Opts, String> {
        let dir = tempfile::tempdir().unwrap();
        let mut full = vec!["receive".to_owned()];
        if let Some(text) = file {
            let path = dir.path().join("receive.toml");
            std::fs::write(&path, text).unwrap();
            full.extend(["-c".to_owned(), path.display().to_string()]);
        }
        full.extend(argv.iter().map(|s| (*s).to_owned()));
        let (cli, _) =
            toolcalls_settings::try_parse_from::<Cli, _, _>(full).map_err(|e| e.to_string())?;
        cli.args.opts.check().map_err(|e| e.to_string())?;
        Ok(cli.args.opts)
    }

    #[test]
    fn the_receive_table_and_the_token_rule() {
        let o = opts(&[], None).unwrap();
        assert_eq!(o.listen, SocketAddr::from(([127, 0, 0, 1], 4319)));
        assert_eq!(
            (o.max_body_bytes, o.delivery_timeout.0),
            (8 << 20, Duration::from_secs(10))
        );
        assert_eq!(o.max_reads, 2);
        let file = "[receive]\nlisten = \"0.0.0.0:4400\"\ntoken = \"from-the-file-0123\"\nmax_body_bytes = 1024\ndelivery_timeout = \"2s\"\nmax_reads = 5\n";
        let o = opts(&[], Some(file)).unwrap();
        assert_eq!(o.listen, SocketAddr::from(([0, 0, 0, 0], 4400)));
        assert_eq!(o.token, Some(Secret("from-the-file-0123".into())));
        assert_eq!(o.max_reads, 5);
        assert_eq!(
            (o.max_body_bytes, o.delivery_timeout.0),
            (1024, Duration::from_secs(2))
        );
        assert!(
            !format!("{o:?}").contains("from-the-file"),
            "the token never shows"
        );
        let e = opts(&["--listen", "0.0.0.0:4319"], None).unwrap_err();
        assert!(e.contains("set --token"), "{e}");
        assert!(opts(&["--listen", "[::1]:4319"], None).is_ok());
        assert!(opts(&["--token", " "], None).unwrap_err().contains("empty"));
        let e = opts(&["--max-connections", "2305843009213693952"], None).unwrap_err();
        assert!(e.contains("at most 1048576"), "{e}");
        let e = opts(&["--max-reads", "0"], None).unwrap_err();
        assert!(e.contains("--max-reads must be greater than 0"), "{e}");
    }
}
