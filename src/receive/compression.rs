//! Compressed request bodies: `Content-Encoding: gzip` (what OpenTelemetry Collector's
//! `otlphttp` exporter sends by default, and SDK exporters with `compression: gzip`) and
//! `deflate` are decompressed before a route reads them; any other encoding is 415.
//!
//! Both sizes are bounded by `--max-body-bytes`: the body as it comes, and what it decompresses
//! to, read no further than one byte past the limit, so a small body that would inflate to
//! gigabytes costs the limit and is answered 413. The receiver runs this behind the token: an
//! anonymous client makes it decompress nothing.

use super::reply::{self, Refusal};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::io::Read;
use toolcalls_processor::listener::BodyTimedOut;

/// The encodings the receiver reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoding {
    Gzip,
    /// The zlib format, as HTTP's `deflate` is.
    Deflate,
}

impl Encoding {
    /// `None` for no encoding (`identity`); 415 for one the receiver does not read, or for more
    /// than one (a body compressed twice). Every `Content-Encoding` line counts, as one list.
    fn of(request: &Request) -> Result<Option<Encoding>, Refusal> {
        let mut codings = Vec::new();
        for value in request.headers().get_all(header::CONTENT_ENCODING) {
            let value = value.to_str().unwrap_or("?");
            codings.extend(
                value
                    .split(',')
                    .map(|c| c.trim().to_ascii_lowercase())
                    .filter(|c| !c.is_empty() && c != "identity"),
            );
        }
        let unread = |what: String| {
            Refusal::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("{what}; send the body as gzip, deflate or uncompressed; nothing of it was published"),
            )
        };
        match codings.as_slice() {
            [] => Ok(None),
            [one] => match one.as_str() {
                "gzip" | "x-gzip" => Ok(Some(Encoding::Gzip)),
                "deflate" => Ok(Some(Encoding::Deflate)),
                _ => Err(unread(format!("Content-Encoding `{one}` is not supported"))),
            },
            more => Err(unread(format!(
                "Content-Encoding `{}` compresses the body more than once, which is not supported",
                more.join(", ")
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
        }
    }
}

/// Hands the route the body decompressed, as if it had been sent so; `limit` is
/// `--max-body-bytes` (a `Content-Length` over it is refused at once, compressed or not).
pub async fn decompressed(State(limit): State<usize>, request: Request, next: Next) -> Response {
    match decompress(request, limit).await {
        Ok(request) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

async fn decompress(request: Request, limit: usize) -> Result<Request, Refusal> {
    // A body said to be over the limit is refused before it is waited for.
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {limit} bytes (--max-body-bytes); nothing of it was published"),
        ));
    }
    let Some(encoding) = Encoding::of(&request)? else {
        return Ok(request);
    };
    let (mut parts, body) = request.into_parts();
    let compressed = axum::body::to_bytes(body, limit)
        .await
        .map_err(|e| unread(&e, limit))?;
    let plain = tokio::task::spawn_blocking(move || inflate(encoding, &compressed, limit))
        .await
        .map_err(|e| {
            Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("decompressing the body failed ({e}); nothing of it was published"),
            )
        })??;
    parts.headers.remove(header::CONTENT_ENCODING);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(plain.len()));
    Ok(Request::from_parts(parts, Body::from(plain)))
}

/// `bytes` decompressed, at most `limit` bytes of it: 413 past that, 400 when it is not what
/// its encoding says.
pub(super) fn inflate(encoding: Encoding, bytes: &[u8], limit: usize) -> Result<Bytes, Refusal> {
    let mut plain = Vec::with_capacity(bytes.len().saturating_mul(4).min(limit));
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let read = match encoding {
        Encoding::Gzip => flate2::read::MultiGzDecoder::new(bytes)
            .take(cap)
            .read_to_end(&mut plain)
            .map(|_| ()),
        Encoding::Deflate => {
            let mut z = flate2::read::ZlibDecoder::new(bytes);
            let read = (&mut z).take(cap).read_to_end(&mut plain);
            // Bytes after the stream's end are not part of it: the body is not what it says.
            match read {
                Ok(_) if plain.len() <= limit && z.total_in() < bytes.len() as u64 => {
                    Err(std::io::Error::other("bytes after the end of the stream"))
                }
                other => other.map(|_| ()),
            }
        }
    };
    if let Err(e) = read {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!(
                "the body is not valid {} ({e}); nothing of it was published",
                encoding.name()
            ),
        ));
    }
    if plain.len() > limit {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body decompresses to more than {limit} bytes (--max-body-bytes); nothing of it was published"),
        ));
    }
    Ok(Bytes::from(plain))
}

/// Why a compressed body could not be read whole: it did not arrive within `--read-timeout`
/// (408), it is over the limit (413), or the connection failed (400).
fn unread(e: &axum::Error, limit: usize) -> Refusal {
    if reply::caused_by::<BodyTimedOut>(e) {
        return Refusal::new(
            StatusCode::REQUEST_TIMEOUT,
            format!("{e}; nothing of it was published"),
        );
    }
    if reply::caused_by::<http_body_util::LengthLimitError>(e) {
        return Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {limit} bytes (--max-body-bytes); nothing of it was published"),
        );
    }
    Refusal::new(
        StatusCode::BAD_REQUEST,
        format!("cannot read the body ({e})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        w.write_all(bytes).unwrap();
        w.finish().unwrap()
    }

    fn zlib(bytes: &[u8]) -> Vec<u8> {
        let mut w = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        w.write_all(bytes).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn a_body_inflates_within_the_limit_and_no_further() {
        let text = b"{\"v\":1}\n".repeat(100);
        assert_eq!(
            inflate(Encoding::Gzip, &gzip(&text), text.len()).unwrap(),
            &text[..]
        );
        assert_eq!(
            inflate(Encoding::Deflate, &zlib(&text), text.len()).unwrap(),
            &text[..]
        );
        // A bomb: a megabyte of zeros in about a kilobyte.
        let bomb = gzip(&vec![0; 1 << 20]);
        assert!(bomb.len() < 4096);
        let refused = inflate(Encoding::Gzip, &bomb, 1 << 16).unwrap_err();
        assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
        // Gzip members one after another are one body, as HTTP reads them.
        let two = [gzip(b"a\n"), gzip(b"b\n")].concat();
        assert_eq!(inflate(Encoding::Gzip, &two, 100).unwrap(), &b"a\nb\n"[..]);
    }

    #[test]
    fn a_body_that_is_not_its_encoding_is_refused() {
        for (encoding, bytes) in [
            (Encoding::Gzip, &b"{\"v\":1}"[..]),
            (Encoding::Deflate, &b"\x78\x9c\xff\xff"[..]),
            (Encoding::Gzip, &gzip(b"cut short")[..12]),
            (
                Encoding::Deflate,
                &[&zlib(b"a\n")[..], b"garbage"].concat()[..],
            ),
        ] {
            let refused = inflate(encoding, bytes, 1000).unwrap_err();
            assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{encoding:?}");
        }
    }
}
