//! Idle timers for client connections and CONNECT tunnels.
//!
//! [`Activity`] is the one timer that bounds how long a client connection may go without
//! making progress: a connection with no request in progress and nothing written to it for
//! the timeout is shut down gracefully (see `server.rs`). That covers the idle keep-alive
//! connection, the request head that never completes (the first on a connection or a later
//! one) and the idle HTTP/2 connection alike.
//!
//! hyper's own `header_read_timeout` is not used. It would cover less: it starts only once
//! hyper's HTTP/1 reader waits for a head, which on a new connection comes after the protocol
//! sniffing (h2c prior knowledge) and the framing guard ([`crate::framing::StrictHttp1`],
//! which holds an incomplete head back) have let a complete head through, and HTTP/2 has no
//! such timer at all. And it costs every request: hyper arms a new timer for each head it
//! reads (an allocation, a clock read, a registration in the runtime's timer wheel and its
//! removal), about 1,500 instructions, 6% of a 1 KiB cache hit (`docs/benchmarks-history.md`,
//! "Latest run (98338f3, 2026-11-25)").
//! [`Activity`] instead costs a counter update per write and one timer per connection.
//!
//! What counts as activity is deliberately not "bytes read": a client trickling a request
//! head a byte at a time must not keep its connection open. Requests in progress (from the
//! moment hyper hands over a complete head until the service answers), response bodies
//! waiting on their origin (`ProxyBody::watch_waits`) and responses written
//! to the client count: every byte on HTTP/1.1, the frames that carry responses on HTTP/2
//! (not the answers to its `PING`s: [`crate::progress`]).

use crate::progress::Progress;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Whether a connection has been active, and how many requests on it are in progress.
///
/// Activity is a counter, not a time: recording it costs a load and a store, no clock read
/// (it happens on every write). [`Activity::idle_for`] looks at the counter every quarter of
/// its timeout, so an idle connection is noticed between one and one and a quarter timeouts
/// after its last activity.
#[derive(Debug, Default)]
pub struct Activity {
    /// Bumped on each activity; only whether it changed matters.
    events: AtomicU64,
    busy: AtomicUsize,
}

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Records activity.
    pub fn touch(&self) {
        // Not an atomic increment: a concurrent touch lost is still a change seen.
        self.events.store(self.events.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// A request in progress until the guard drops.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Relaxed);
        self.touch();
        Busy(Arc::clone(self))
    }

    /// Whether nothing happened since `seen` (a value of the counter) and no request is in
    /// progress; updates `seen`.
    fn quiet_since(&self, seen: &mut u64) -> bool {
        let now = self.events.load(Relaxed);
        let quiet = now == *seen && self.busy.load(Relaxed) == 0;
        *seen = now;
        quiet
    }

    /// Waits until the connection has been idle (no activity, no request in progress) for
    /// `timeout`, give or take a quarter of it.
    pub async fn idle_for(&self, timeout: Duration) {
        let step = (timeout / 4).max(Duration::from_millis(1));
        let mut seen = self.events.load(Relaxed);
        let mut quiet = Duration::ZERO;
        loop {
            tokio::time::sleep(step).await;
            if self.quiet_since(&mut seen) {
                quiet += step;
                if quiet >= timeout {
                    return;
                }
            } else {
                quiet = Duration::ZERO;
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

/// The bytes a [`Watched`] stream read and wrote, counted as they pass, so that the counts
/// outlive an error or the stream being dropped (a tunnel's: what its client sent and got).
#[derive(Debug, Default)]
pub struct Traffic {
    pub read: AtomicU64,
    pub written: AtomicU64,
}

/// A stream whose writes (and, with `reads`, reads) count as activity, and whose bytes are
/// counted in a [`Traffic`] when given one.
#[derive(Debug)]
pub struct Watched<IO> {
    io: IO,
    activity: Arc<Activity>,
    reads: bool,
    /// Which written bytes count.
    progress: Progress,
    traffic: Option<Arc<Traffic>>,
}

impl<IO> Watched<IO> {
    /// Counts writes of responses only (client connections: see the module documentation).
    pub fn writes(io: IO, activity: Arc<Activity>) -> Self {
        Self { io, activity, reads: false, progress: Progress::default(), traffic: None }
    }

    /// Counts every byte read and written (tunnels).
    pub fn both(io: IO, activity: Arc<Activity>) -> Self {
        Self { io, activity, reads: true, progress: Progress::every(), traffic: None }
    }

    /// Counts the bytes read and written in `traffic` too.
    pub fn counting(mut self, traffic: Arc<Traffic>) -> Self {
        self.traffic = Some(traffic);
        self
    }

    /// After a write of `pieces`: the first `n` bytes of them went out.
    fn wrote<'a>(&mut self, polled: &Poll<io::Result<usize>>, pieces: impl Iterator<Item = &'a [u8]>) {
        let Poll::Ready(Ok(n)) = *polled else { return };
        let written = || {
            let mut left = n;
            pieces.map(move |piece| {
                let piece = &piece[..piece.len().min(left)];
                left -= piece.len();
                piece
            })
        };
        if self.progress.wrote(n, written) {
            self.activity.touch();
        }
        if let Some(traffic) = &self.traffic {
            traffic.written.fetch_add(n as u64, Relaxed);
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if this.reads && n > 0 {
            this.activity.touch();
        }
        if let Some(traffic) = &this.traffic {
            traffic.read.fetch_add(n as u64, Relaxed);
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(&polled, std::iter::once(buf));
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(&polled, bufs.iter().map(|buf| &buf[..]));
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

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_is_never_idle_and_an_idle_one_times_out() {
        let activity = Activity::new();
        let timeout = Duration::from_secs(4);
        let busy = activity.busy();
        let waited = tokio::time::timeout(timeout * 3, activity.idle_for(timeout)).await;
        assert!(waited.is_err(), "a request in progress keeps the connection busy");
        drop(busy);
        let started = tokio::time::Instant::now();
        activity.idle_for(timeout).await;
        let idle = started.elapsed();
        assert!(idle >= timeout && idle <= timeout + timeout / 4, "{idle:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn activity_restarts_the_wait() {
        let activity = Activity::new();
        let timeout = Duration::from_secs(4);
        let toucher = Arc::clone(&activity);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            toucher.touch();
        });
        let started = tokio::time::Instant::now();
        activity.idle_for(timeout).await;
        assert!(started.elapsed() >= Duration::from_secs(7), "{:?}", started.elapsed());
    }
}
