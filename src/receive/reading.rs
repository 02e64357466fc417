//! How a request's body is read into events, on every route: a small body (a hook post, a few
//! spans) at once, on the thread that answers it; a larger one off the async workers (reading is
//! CPU work in proportion to its size, and other requests are answered meanwhile) and at most
//! `--max-reads` at a time, each holding its turn until its events are delivered. A body costs
//! up to about 60 times its size until then — its events, their encodings, the producer's copies
//! (docs/OPERATIONS.md, "Receiving over HTTP") — so the turns, not the cores, bound the memory of
//! large requests.

use axum::body::Bytes;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use toolcalls_model::Event;

/// Bodies up to this size are read as they come: at 60 times their size, a few megabytes each.
pub const SMALL_BODY: usize = 64 << 10;

/// Why a body gave no events.
pub enum Unread {
    /// The body is not what the route takes: the reason, for a 400.
    Bad(String),
    /// The reading itself failed (a panic in a reader): a 500.
    Failed,
    /// The receiver is stopping.
    Stopping,
}

/// The events `read` finds in `body`, and the turn of a large body, to be held until they are
/// delivered.
pub async fn events(
    readers: &Arc<Semaphore>,
    body: Bytes,
    read: impl FnOnce(&[u8]) -> Result<Vec<Event>, String> + Send + 'static,
) -> Result<(Vec<Event>, Option<OwnedSemaphorePermit>), Unread> {
    if body.len() <= SMALL_BODY {
        return read(&body).map(|e| (e, None)).map_err(Unread::Bad);
    }
    let turn = readers
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| Unread::Stopping)?;
    match tokio::task::spawn_blocking(move || read(&body)).await {
        Ok(Ok(events)) => Ok((events, Some(turn))),
        Ok(Err(why)) => Err(Unread::Bad(why)),
        Err(e) => {
            tracing::error!(error = %e, "reading a request's body failed");
            Err(Unread::Failed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A large body is read in a turn of its own, held until its events are delivered; a small
    /// one takes none.
    #[tokio::test]
    async fn large_bodies_are_read_in_turns() {
        let readers = Arc::new(Semaphore::new(1));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let reader = |readers: &Arc<Semaphore>| {
            let (readers, seen) = (readers.clone(), seen.clone());
            move |_: &[u8]| {
                seen.lock().unwrap().push(readers.available_permits());
                Ok(Vec::new())
            }
        };
        let small = Bytes::from(vec![b' '; SMALL_BODY]);
        let large = Bytes::from(vec![b' '; SMALL_BODY + 1]);
        let Ok((_, turn)) = events(&readers, small, reader(&readers)).await else {
            panic!("read")
        };
        assert!(turn.is_none());
        let Ok((_, turn)) = events(&readers, large.clone(), reader(&readers)).await else {
            panic!("read")
        };
        assert!(turn.is_some());
        assert_eq!(readers.available_permits(), 0, "held until delivered");
        drop(turn);
        assert_eq!(
            *seen.lock().unwrap(),
            [1, 0],
            "the large body read in its turn"
        );
        readers.close();
        let stopping = events(&readers, large, reader(&readers)).await;
        assert!(matches!(stopping, Err(Unread::Stopping)));
    }
}
