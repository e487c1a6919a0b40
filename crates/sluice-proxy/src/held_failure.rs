//! A response body's failure held back for a moment, so that what the body gave before it
//! reaches the client.
//!
//! hyper buffers a response body's pieces and writes them when the body has nothing more
//! for the moment; a body that fails instead makes hyper drop the connection with whatever
//! is still buffered. When an origin cuts its response short, its last piece and the cut
//! arrive together, and the client would lose that piece, which a client resuming with a
//! range (`curl -C -`) needs to start where the response really stopped. So the body
//! answers "nothing yet" for [`FAILURE_GRACE`] first: hyper writes what it holds (and keeps
//! writing while the client reads), then the failure cuts the connection (HTTP/1.1) or
//! resets the stream (HTTP/2), as before.

use crate::body::BoxError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// How long a failure waits for the data before it to be written. A client that cannot take
/// the buffered data in this time loses the rest of it, as it would have lost all of it.
pub const FAILURE_GRACE: Duration = Duration::from_millis(100);

/// A body's failure, given out once [`FAILURE_GRACE`] has passed.
#[derive(Debug)]
pub struct HeldFailure {
    err: Option<BoxError>,
    grace: Pin<Box<tokio::time::Sleep>>,
}

impl HeldFailure {
    /// Holds `err` from now on.
    pub fn new(err: BoxError) -> Self {
        Self { err: Some(err), grace: Box::pin(tokio::time::sleep(FAILURE_GRACE)) }
    }

    /// The failure once the grace has passed; until then `Pending`, woken when it ends.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<BoxError> {
        match self.grace.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(self.err.take().unwrap_or_else(|| "body failed".into())),
            Poll::Pending => Poll::Pending,
        }
    }
}
