//! Span export as options of `toolcalls run`: `--otlp-endpoint` and its companions,
//! `TOOLCALLS_OTLP_*`, `[spans]` in the config file (headers: the `[otlp_header]` table).

use crate::secret::Secret;
use clap::builder::TypedValueParser;
use toolcalls_settings::{Dur, KeyValueParser};

/// Where and how records are exported as OpenTelemetry spans (`[spans]` in the config file).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[group(id = "spans")]
pub struct SpanArgs {
    /// Export every published record as an OpenTelemetry span (OTLP over HTTP, protobuf) to this
    /// URL: the traces endpoint (`http://127.0.0.1:6006/v1/traces`), or a collector's base URL
    /// to which `/v1/traces` is added (`http://collector:4318`). Off unless set. The resource
    /// comes from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (default service.name toolcalls)
    #[arg(long, env = "TOOLCALLS_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// HTTP header sent with every export, repeatable: `--otlp-header authorization=Bearer…`;
    /// the variable takes a comma-separated list. Values are never logged
    #[arg(long, env = "TOOLCALLS_OTLP_HEADER", value_name = "KEY=VALUE",
          value_parser = KeyValueParser.map(header), value_delimiter = ',', hide_env_values = true)]
    pub otlp_header: Vec<(String, Secret)>,
    /// Spans waiting to be exported at most; beyond it spans are dropped (counted in
    /// toolcalls_spans_dropped_total{reason="queue_full"}), never waited for: export never
    /// holds up the records
    #[arg(
        long,
        env = "TOOLCALLS_OTLP_QUEUE",
        value_name = "SPANS",
        default_value_t = 65_536
    )]
    pub otlp_queue: usize,
    /// Spans sent in one export request at most
    #[arg(
        long,
        env = "TOOLCALLS_OTLP_BATCH",
        value_name = "SPANS",
        default_value_t = 512
    )]
    pub otlp_batch: usize,
    /// Timeout of one export request; a request that fails or times out drops its spans
    /// (toolcalls_spans_dropped_total{reason="export_failed"})
    #[arg(
        long,
        env = "TOOLCALLS_OTLP_TIMEOUT",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub otlp_timeout: Dur,
}

impl Default for SpanArgs {
    fn default() -> Self {
        SpanArgs {
            otlp_endpoint: None,
            otlp_header: Vec::new(),
            otlp_queue: 65_536,
            otlp_batch: 512,
            otlp_timeout: Dur::from_millis(10_000),
        }
    }
}

fn header((key, value): (String, String)) -> (String, Secret) {
    (key, Secret(value))
}

impl SpanArgs {
    /// The traces URL, checked: `http`, `/v1/traces` added to a bare base URL. `https` is
    /// refused: the exporter's client (hyper's plain connector) speaks no TLS, and would fail at
    /// every export instead of at the start.
    pub fn traces_url(&self) -> Result<Option<String>, String> {
        let Some(endpoint) = self.otlp_endpoint.as_deref().map(str::trim) else {
            return Ok(None);
        };
        let Some((scheme, rest)) = endpoint.split_once("://") else {
            return Err(format!(
                "--otlp-endpoint `{endpoint}` is not a URL; give http://HOST:PORT/v1/traces"
            ));
        };
        if scheme == "https" {
            return Err(format!(
                "--otlp-endpoint `{endpoint}`: this build exports spans over plain HTTP only; send them to an OpenTelemetry Collector beside the processor (http://127.0.0.1:4318) and let it forward them over TLS"
            ));
        }
        if scheme != "http" || rest.is_empty() || rest.starts_with('/') {
            return Err(format!(
                "--otlp-endpoint `{endpoint}`: OTLP export needs an http:// URL with a host, e.g. http://127.0.0.1:4318/v1/traces"
            ));
        }
        if endpoint.contains(char::is_whitespace) {
            return Err(format!("--otlp-endpoint `{endpoint}` is not a valid URL"));
        }
        let has_path = rest
            .find('/')
            .is_some_and(|i| !rest[i..].trim_end_matches('/').is_empty());
        Ok(Some(if has_path {
            endpoint.to_owned()
        } else {
            format!("{}/v1/traces", endpoint.trim_end_matches('/'))
        }))
    }

    /// Checks the options make sense together.
    pub fn validate(&self) -> Result<(), String> {
        self.traces_url()?;
        if self.otlp_queue == 0 || self.otlp_batch == 0 {
            return Err("--otlp-queue and --otlp-batch must be greater than 0".into());
        }
        if self.otlp_timeout.0.is_zero() {
            return Err("--otlp-timeout must be greater than 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(endpoint: &str) -> Result<Option<String>, String> {
        SpanArgs {
            otlp_endpoint: Some(endpoint.into()),
            ..SpanArgs::default()
        }
        .traces_url()
    }

    #[test]
    fn the_traces_path_is_added_to_a_base_url_only() {
        assert_eq!(
            url("http://c:4318").unwrap().unwrap(),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            url("http://c:4318/").unwrap().unwrap(),
            "http://c:4318/v1/traces"
        );
        let e = url("https://p.example/v1/traces").unwrap_err();
        assert!(e.contains("plain HTTP only"), "{e}");
        assert_eq!(
            url("http://h/api/otel").unwrap().unwrap(),
            "http://h/api/otel"
        );
        assert_eq!(SpanArgs::default().traces_url().unwrap(), None);
        for bad in [
            "localhost:4318",
            "grpc://h:4317",
            "http://",
            "http:///v1/traces",
            "http://a b",
        ] {
            assert!(url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn header_values_are_secrets() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            spans: SpanArgs,
        }
        let cli = Cli::try_parse_from(["x", "--otlp-header", "authorization=Bearer abc="]).unwrap();
        let (k, v) = &cli.spans.otlp_header[0];
        assert_eq!(k, "authorization");
        assert_eq!(v.0, "Bearer abc=");
        assert_eq!(format!("{v:?}"), "<secret>");
        // A comma splits the value: the part without a key is refused, and not quoted.
        let e = Cli::try_parse_from(["x", "--otlp-header", "authorization=Bearer ab,cdef"])
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("--otlp-header takes KEY=VALUE"), "{e}");
        assert!(!e.contains("cdef"), "{e}");
    }
}
