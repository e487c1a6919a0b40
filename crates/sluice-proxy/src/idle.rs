//! Idle timers for client connections and CONNECT tunnels.
//!
//! hyper's own `header_read_timeout` only runs once hyper's HTTP/1 reader is waiting for a
//! head. On a new connection it is not: the protocol sniffing (h2c prior knowledge) and the
//! framing guard ([`crate::framing::StrictHttp1`], which holds an incomplete head back) both
//! wait for bytes first, without a timer. HTTP/2 connections have no idle timer at all in
//! hyper. [`Activity`] is the connection-level timer that covers both: a connection with no
//! request in progress and nothing written to it for the timeout is shut down gracefully
//! (see `server.rs`).
//!
//! What counts as activity is deliberately not "bytes read": a client trickling a request
//! head a byte at a time must not keep its connection open. Requests in progress (from the
//! moment hyper hands over a complete head until the service answers) and bytes written to
//! the client count.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// When a connection was last active, and how many requests on it are in progress.
#[derive(Debug)]
pub struct Activity {
    base: Instant,
    /// Milliseconds from `base` to the last activity.
    last: AtomicU64,
    busy: AtomicUsize,
}

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::new(Self { base: Instant::now(), last: AtomicU64::new(0), busy: AtomicUsize::new(0) })
    }

    /// Records activity now.
    pub fn touch(&self) {
        let now = self.base.elapsed().as_millis() as u64;
        // Monotonic enough: a concurrent older value loses only a millisecond or so.
        if self.last.load(Relaxed) < now {
            self.last.store(now, Relaxed);
        }
    }

    /// A request in progress until the guard drops.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Relaxed);
        self.touch();
        Busy(Arc::clone(self))
    }

    /// When the connection will have been idle for `timeout`, as things stand: `None` while a
    /// request is in progress (look again after `timeout`).
    pub fn idle_deadline(&self, timeout: Duration) -> Option<Instant> {
        if self.busy.load(Relaxed) > 0 {
            return None;
        }
        Some(self.base + Duration::from_millis(self.last.load(Relaxed)) + timeout)
    }

    /// Waits until the connection has been idle for `timeout`.
    pub async fn idle_for(&self, timeout: Duration) {
        loop {
            match self.idle_deadline(timeout) {
                Some(deadline) if deadline <= Instant::now() => return,
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => tokio::time::sleep(timeout).await,
            }
        }
    }
}

/// See [`Activity::busy`].
#[derive(Debug)]
pub struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Relaxed);
    }
}

/// A stream whose writes (and, with `reads`, reads) count as activity.
#[derive(Debug)]
pub struct Watched<IO> {
    io: IO,
    activity: Arc<Activity>,
    reads: bool,
}

impl<IO> Watched<IO> {
    /// Counts writes only (client connections: see the module documentation).
    pub fn writes(io: IO, activity: Arc<Activity>) -> Self {
        Self { io, activity, reads: false }
    }

    /// Counts reads and writes (tunnels).
    pub fn both(io: IO, activity: Arc<Activity>) -> Self {
        Self { io, activity, reads: true }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if this.reads && buf.filled().len() > before {
            this.activity.touch();
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_busy_connection_is_never_idle_and_an_idle_one_times_out() {
        let activity = Activity::new();
        let busy = activity.busy();
        assert_eq!(activity.idle_deadline(Duration::from_secs(1)), None);
        drop(busy);
        let deadline = activity.idle_deadline(Duration::from_secs(1)).unwrap();
        assert!(deadline > Instant::now() + Duration::from_millis(900), "{deadline:?}");
        let started = Instant::now();
        activity.idle_for(Duration::from_millis(30)).await;
        assert!(started.elapsed() >= Duration::from_millis(25));
    }
}
