//! The listeners, and the graceful stop: at SIGTERM or SIGINT the receiver stops accepting
//! connections, lets the requests in flight finish (each waits at most the delivery timeout for
//! its acknowledgements), flushes the producer and exits 0.

use super::metrics;
use super::state::Shared;
use super::{auth, compression, events, hooks, traces};
use axum::extract::DefaultBodyLimit;
use axum::routing::post;
use axum::Router;
use std::sync::Arc;
use std::time::Duration;
use toolcalls_processor::listener::{self, Bounds};
use toolcalls_processor::Secret;

/// The receiving listener's routes, behind the token when there is one, every answer counted,
/// every body read within `read_timeout` and decompressed when it comes compressed.
pub fn router(s: Arc<Shared>, token: Option<Secret>, read_timeout: Duration) -> Router {
    let mut app = Router::new()
        .route("/v1/hooks/claude-code", post(hooks::claude_code))
        .route("/v1/traces", post(traces::traces))
        .route("/v1/events", post(events::events))
        .fallback(no_such_route)
        .method_not_allowed_fallback(only_post)
        .layer(DefaultBodyLimit::max(s.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            s.max_body_bytes,
            compression::decompressed,
        ))
        .layer(axum::middleware::from_fn_with_state(
            read_timeout,
            listener::timed_body,
        ));
    if let Some(token) = token {
        app = app.layer(axum::middleware::from_fn_with_state(
            Arc::new(token),
            auth::authorize,
        ));
    }
    app.layer(axum::middleware::from_fn(traces::protobuf_refusals))
        .layer(axum::middleware::from_fn_with_state(
            s.metrics.clone(),
            metrics::count,
        ))
        .with_state(s)
}

/// 404 for a path that is none of the routes, saying which there are.
async fn no_such_route(uri: axum::http::Uri) -> axum::response::Response {
    super::reply::error(
        axum::http::StatusCode::NOT_FOUND,
        format!(
            "no route {}; the receiver takes POST /v1/hooks/claude-code, /v1/traces and /v1/events",
            uri.path()
        ),
    )
}

/// 405 for a method other than POST on a route.
async fn only_post(method: axum::http::Method) -> axum::response::Response {
    let mut response = super::reply::error(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not taken here; send POST"),
    );
    response.headers_mut().insert(
        axum::http::header::ALLOW,
        axum::http::HeaderValue::from_static("POST"),
    );
    response
}

/// Serves until SIGTERM or SIGINT, then stops as the module says.
pub async fn serve(
    s: Arc<Shared>,
    token: Option<Secret>,
    (listener, metrics_listener): (std::net::TcpListener, Option<std::net::TcpListener>),
    bounds: Bounds,
    grace: Duration,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::info!("stopping: no new connections; finishing the requests in flight");
        let _ = stop_tx.send(true);
    });
    if let Some(l) = metrics_listener {
        l.set_nonblocking(true)?;
        let l = tokio::net::TcpListener::from_std(l)?;
        tracing::info!("metrics on http://{}/metrics", l.local_addr()?);
        let app = metrics::router(s.metrics.clone());
        // Stopped with the process: a scrape in flight at the stop is not waited for.
        let (_, never) = tokio::sync::watch::channel(false);
        tokio::spawn(listener::serve(l, app, bounds, never));
    }
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    tracing::info!("listening on {}", listener.local_addr()?);
    let app = router(s.clone(), token, bounds.read_timeout);
    let server = listener::serve(listener, app, bounds, stop_rx.clone());
    let mut stopped = stop_rx;
    tokio::select! {
        () = server => {},
        _ = async {
            let _ = stopped.wait_for(|stop| *stop).await;
            tokio::time::sleep(grace).await;
        } => tracing::warn!("requests still open {grace:?} after the stop signal; stopping without them"),
    }
    let flushed = tokio::task::spawn_blocking(move || s.deliverer.flush()).await?;
    flushed?;
    tracing::info!("stopped");
    Ok(())
}
