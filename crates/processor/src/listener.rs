//! The connections of an HTTP listener (the processor's operations listener and query API,
//! `receive`, the follower's metrics), served with bounds a client cannot stretch: at most
//! `max_connections` at once (the listener stops accepting until one ends, so a flood of idle
//! connections waits in the kernel's queue instead of taking the process's descriptors), and
//! `read_timeout` to send a request's headers — which also closes a connection that has sent
//! nothing for that long — and, for routes that read one, its body ([`timed_body`]); and as long
//! to take each answer's bytes, so that a client that never reads its answers cannot keep its
//! connection either.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use http_body::Frame;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{watch, Semaphore};

/// The most connections a listener may be told to serve at once: far above any process's file
/// descriptors, and far below what its semaphore can count.
pub const MAX_CONNECTIONS: usize = 1 << 20;

/// What bounds a listener's clients.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub max_connections: usize,
    pub read_timeout: Duration,
}

/// Serves `app` on `listener` until `stop` turns true, then lets the open connections finish
/// the requests they are in (each closes after its answer) and returns once all have ended.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    bounds: Bounds,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(bounds.max_connections.min(MAX_CONNECTIONS)));
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = stopped(&mut stop) => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was taken: the
                    // listener itself is fine. A pause keeps a persistent error from spinning.
                    tracing::warn!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(bounds.read_timeout);
            let stream = WriteDeadline {
                inner: stream,
                limit: bounds.read_timeout,
                stalled: None,
            };
            let connection = http.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stopped(&mut stop) => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = served {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    // Every slot back: every connection has ended.
    let all = u32::try_from(bounds.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}

/// A connection whose writes fail once one has waited `limit` for the client to take its
/// bytes: a client that sends requests and never reads the answers would otherwise hold its
/// connection, and its slot, for ever (the read timeout does not run while an answer is written).
struct WriteDeadline {
    inner: tokio::net::TcpStream,
    limit: Duration,
    /// Since when a write has waited, as a deadline.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl WriteDeadline {
    /// `ready` when the write went through (or failed); else waits, failing past the deadline.
    fn waited<T>(
        &mut self,
        cx: &mut Context<'_>,
        ready: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if ready.is_ready() {
            self.stalled = None;
            return ready;
        }
        let limit = self.limit;
        let deadline = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client did not take its answer in time",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl tokio::io::AsyncRead for WriteDeadline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for WriteDeadline {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let ready = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.waited(cx, ready)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let ready = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.waited(cx, ready)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let ready = Pin::new(&mut self.inner).poll_flush(cx);
        self.waited(cx, ready)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Waits until `stop` turns true (or its sender is gone: never, then).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The request's body, failing once `--read-timeout` has passed since the request came in: a
/// client that sends a large `Content-Length` and then a byte a minute is answered 408 instead
/// of holding its connection for ever.
pub async fn timed_body(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let body = Body::new(TimedBody {
        inner: body,
        deadline: Box::pin(tokio::time::sleep(limit)),
        limit,
    });
    next.run(Request::from_parts(parts, body)).await
}

/// The body did not arrive within `--read-timeout`.
#[derive(Debug)]
pub struct BodyTimedOut(pub Duration);

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the body did not arrive within {:?} (--read-timeout)",
            self.0
        )
    }
}

impl std::error::Error for BodyTimedOut {}

struct TimedBody {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl http_body::Body for TimedBody {
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(self.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
