//! HTTP/1.1 pipelining towards origins (RFC 9112 §9.3.2): several GET and HEAD requests in
//! flight on one connection, their heads written together and their responses read in order.
//!
//! Why: relaying a small response costs a proxy more kernel time than user time, a system
//! call to send each request to the origin and one to read each response
//! (`docs/benchmarks.md`, "the kernel floor"). Requests of transactions that become ready in
//! the same scheduler round go out in one write, and responses that arrive together are read
//! with one read.
//!
//! How: a [`Pipe`] is a [`Connection`] shared by the transactions that queued a request on it,
//! each holding a [`Ticket`], its place in the order. The ticket that finds the output buffer
//! empty owns the next write: it yields once, so that the other transactions runnable in this
//! round can add their requests, then writes them all. The ticket whose turn it is reads its
//! response head, then its body (through [`super::PooledBody`], which holds the ticket); when
//! the body ends the turn passes to the next ticket.
//!
//! Failure: an I/O or protocol error, a response that ends the connection, or a ticket dropped
//! before its response was read to the end (its client went away) closes the pipe. Tickets
//! whose response has not started then fail with [`ExchangeError::ClosedBeforeResponse`],
//! which the caller retries on a connection of its own: pipelined requests are idempotent,
//! and §9.3.2 asks clients to retry unanswered ones.

use super::conn::{Connection, ExchangeError, READ_CHUNK};
use super::wire::{self, ResponseHead, WireError};
use crate::deadline::{Elapsed, TimerSlot};
use http::Method;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::AsyncWrite;

/// A connection carrying pipelined requests.
pub(super) struct Pipe {
    state: Mutex<State>,
    /// Requests queued and not yet answered in full; read without the lock to pick a pipe.
    in_flight: AtomicUsize,
    /// No request may be added any more; read without the lock to pick a pipe.
    closed: AtomicBool,
    /// The timers of its tickets' response timeouts (the connection's, then more for tickets
    /// in flight together).
    timers: TimerSlot,
}

struct State {
    /// Dropped once the pipe is closed and no ticket is left, which frees its per-host slot.
    conn: Option<Connection>,
    /// Request heads queued and not yet written.
    out: Vec<u8>,
    /// The ticket of the next request queued.
    next: u64,
    /// The ticket whose response is being read; every earlier one is done.
    turn: u64,
    /// The wakers of the tickets after `turn`, in order: `waiting[i]` is ticket `turn + 1 + i`.
    waiting: VecDeque<Option<Waker>>,
    /// When the last request in flight was answered.
    idle_since: Instant,
}

impl Pipe {
    pub fn new(mut conn: Connection) -> Arc<Self> {
        let timers = std::mem::take(&mut conn.timers);
        let state = State {
            conn: Some(conn),
            out: Vec::new(),
            next: 0,
            turn: 0,
            waiting: VecDeque::new(),
            idle_since: Instant::now(),
        };
        Arc::new(Self {
            state: Mutex::new(state),
            in_flight: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            timers,
        })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Relaxed)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Relaxed)
    }

    /// Whether the reaper should drop this pipe: closed, or idle for longer than `max_idle`.
    pub fn is_spent(&self, max_idle: std::time::Duration) -> bool {
        self.is_closed() || (self.in_flight() == 0 && self.state.lock().idle_since.elapsed() > max_idle)
    }

    /// Queues a request head. `None` when the pipe is closed, already carries `depth`
    /// requests, or (idle) was closed by the origin. Otherwise the ticket, and whether it owns
    /// the write of the queued heads ([`Ticket::exchange`] does it).
    pub fn enqueue(self: &Arc<Self>, head: &[u8], depth: usize) -> Option<(Ticket, bool)> {
        let mut st = self.state.lock();
        if self.is_closed() || (st.next - st.turn) as usize >= depth {
            return None;
        }
        if st.next == st.turn && !st.conn.as_mut().is_some_and(Connection::is_reusable) {
            self.close(&mut st);
            return None;
        }
        let writes = st.out.is_empty();
        st.out.extend_from_slice(head);
        let n = st.next;
        st.next += 1;
        if n > st.turn {
            st.waiting.push_back(None);
        }
        self.in_flight.fetch_add(1, Relaxed);
        Some((Ticket { pipe: Arc::clone(self), n, done: false }, writes))
    }

    /// Closes the pipe: no more requests, and every waiting ticket is woken to fail.
    fn close(&self, st: &mut State) {
        self.closed.store(true, Relaxed);
        st.out.clear();
        for waker in st.waiting.iter_mut().filter_map(Option::take) {
            waker.wake();
        }
        self.drop_conn_when_done(st);
    }

    /// Closes the connection of a closed pipe once no ticket needs it (the response being
    /// read when the pipe closed may still be).
    fn drop_conn_when_done(&self, st: &mut State) {
        if self.is_closed() && self.in_flight() == 0 {
            st.conn = None;
        }
    }

    /// Writes the queued heads.
    fn poll_write_out(&self, cx: &mut Context<'_>) -> Poll<Result<(), ExchangeError>> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(conn) = st.conn.as_mut().filter(|_| !self.is_closed()) else {
            return Poll::Ready(Err(ExchangeError::ClosedBeforeResponse));
        };
        while !st.out.is_empty() {
            match Pin::new(&mut conn.io).poll_write(cx, &st.out) {
                Poll::Ready(Ok(0)) => {
                    self.close(st);
                    return Poll::Ready(Err(io::Error::from(io::ErrorKind::WriteZero).into()));
                }
                Poll::Ready(Ok(n)) => drop(st.out.drain(..n)),
                Poll::Ready(Err(e)) => {
                    self.close(st);
                    return Poll::Ready(Err(e.into()));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        Pin::new(&mut conn.io).poll_flush(cx).map_err(|e| {
            self.close(st);
            e.into()
        })
    }

    /// The response head of ticket `n`, once it is `n`'s turn.
    fn poll_head(&self, n: u64, method: &Method, cx: &mut Context<'_>) -> Poll<Result<ResponseHead, ExchangeError>> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let Some(conn) = st.conn.as_mut().filter(|_| !self.is_closed()) else {
            return Poll::Ready(Err(ExchangeError::ClosedBeforeResponse));
        };
        if n != st.turn {
            let slot = &mut st.waiting[(n - st.turn - 1) as usize];
            if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *slot = Some(cx.waker().clone());
            }
            return Poll::Pending;
        }
        loop {
            match wire::parse_response_head(&mut conn.buf, method, &mut conn.names) {
                Ok(Some(head)) if head.parts.status == http::StatusCode::SWITCHING_PROTOCOLS => {
                    self.close(st);
                    return Poll::Ready(Err(WireError("unrequested protocol switch").into()));
                }
                Ok(Some(head)) if head.parts.status.is_informational() => continue,
                Ok(Some(head)) => {
                    if !head.keep_alive {
                        // This response ends the connection: the requests behind it go elsewhere.
                        self.close(st);
                    }
                    return Poll::Ready(Ok(head));
                }
                Ok(None) => {}
                Err(e) => {
                    self.close(st);
                    return Poll::Ready(Err(e.into()));
                }
            }
            match conn.poll_read_more(cx, READ_CHUNK) {
                Poll::Ready(Ok(0)) => {
                    let err = if conn.buf.is_empty() {
                        ExchangeError::ClosedBeforeResponse
                    } else {
                        WireError("connection closed inside the response head").into()
                    };
                    self.close(st);
                    return Poll::Ready(Err(err));
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => {
                    self.close(st);
                    return Poll::Ready(Err(e.into()));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// A request's place on a [`Pipe`]. Dropped before [`Ticket::finish`], it closes the pipe:
/// its response, unread, would stand in front of the next one.
pub(super) struct Ticket {
    pipe: Arc<Pipe>,
    n: u64,
    done: bool,
}

impl Ticket {
    /// Writes the queued heads if this ticket owns the write, then waits for its turn and
    /// reads its response head, skipping interim responses; all within `timeout` from now
    /// (`Err(Elapsed)` past it).
    pub async fn exchange(
        &self,
        writes: bool,
        method: &Method,
        timeout: Duration,
    ) -> Result<Result<ResponseHead, ExchangeError>, Elapsed> {
        let exchange = async {
            if writes {
                // Let the transactions runnable in this round queue their requests first.
                tokio::task::yield_now().await;
                std::future::poll_fn(|cx| self.pipe.poll_write_out(cx)).await?;
            }
            std::future::poll_fn(|cx| self.pipe.poll_head(self.n, method, cx)).await
        };
        self.pipe.timers.within(timeout, exchange).await
    }

    /// Runs `f` on the connection, for reading this ticket's body.
    pub fn with_conn<R>(&self, f: impl FnOnce(&mut Connection) -> R) -> R {
        let mut st = self.pipe.state.lock();
        f(st.conn.as_mut().expect("a pipe keeps its connection while a ticket is in flight"))
    }

    /// The body ended: the turn passes to the next ticket.
    pub fn finish(mut self) {
        self.done = true;
        let mut st = self.pipe.state.lock();
        debug_assert_eq!(st.turn, self.n, "responses are read in order");
        st.turn += 1;
        if self.pipe.in_flight.fetch_sub(1, Relaxed) == 1 {
            st.idle_since = Instant::now();
            self.pipe.drop_conn_when_done(&mut st);
        }
        if let Some(Some(waker)) = st.waiting.pop_front() {
            drop(st);
            waker.wake();
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.done {
            self.pipe.in_flight.fetch_sub(1, Relaxed);
            let mut st = self.pipe.state.lock();
            self.pipe.close(&mut st);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conn::Stream;
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    const DEPTH: usize = 8;
    /// A response timeout none of these tests reaches.
    const LONG: Duration = Duration::from_secs(60);

    fn head(path: &str) -> Vec<u8> {
        format!("GET {path} HTTP/1.1\r\nHost: origin\r\n\r\n").into_bytes()
    }

    /// A pipe to an origin that reads `requests` request heads, then answers each with an
    /// empty 200 naming its path, all in one write.
    async fn pipe_to_origin(requests: usize) -> Arc<Pipe> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while seen.windows(4).filter(|w| w == b"\r\n\r\n").count() < requests {
                let n = socket.read(&mut buf).await.unwrap();
                assert_ne!(n, 0, "the proxy closed before sending every request");
                seen.extend_from_slice(&buf[..n]);
            }
            let text = String::from_utf8(seen).unwrap();
            let replies: String = text
                .split("\r\n\r\n")
                .filter(|r| !r.is_empty())
                .map(|r| {
                    let path = r.split(' ').nth(1).unwrap();
                    format!("HTTP/1.1 200 OK\r\nX-Path: {path}\r\nContent-Length: 0\r\n\r\n")
                })
                .collect();
            socket.write_all(replies.as_bytes()).await.unwrap();
            let _ = socket.read(&mut buf).await;
        });
        let stream = TcpStream::connect(addr).await.unwrap();
        Pipe::new(Connection::new(Stream::Plain(stream, None), addr.ip(), None))
    }

    fn path_of(head: &ResponseHead) -> &str {
        head.parts.headers["x-path"].to_str().unwrap()
    }

    #[tokio::test]
    async fn responses_are_read_in_turn_and_requests_written_together() {
        let pipe = pipe_to_origin(3).await;
        let (first, writes) = pipe.enqueue(&head("/0"), DEPTH).unwrap();
        assert!(writes, "the first request owns the write");
        let (second, writes) = pipe.enqueue(&head("/1"), DEPTH).unwrap();
        assert!(!writes, "later ones join it");
        let (third, _) = pipe.enqueue(&head("/2"), DEPTH).unwrap();
        assert_eq!(pipe.in_flight(), 3);

        // The origin answers only once all three requests arrived: one write carried them.
        let response = first.exchange(true, &Method::GET, LONG).await.unwrap().unwrap();
        assert_eq!(path_of(&response), "/0");
        // Not the second's turn until the first response's body has ended.
        let mut waiting = Box::pin(second.exchange(false, &Method::GET, LONG));
        assert!(futures_util::poll!(waiting.as_mut()).is_pending());
        first.finish();
        assert_eq!(path_of(&waiting.await.unwrap().unwrap()), "/1");
        second.finish();
        assert_eq!(path_of(&third.exchange(false, &Method::GET, LONG).await.unwrap().unwrap()), "/2");
        third.finish();
        assert_eq!(pipe.in_flight(), 0);
        assert!(!pipe.is_closed());
    }

    #[tokio::test]
    async fn a_ticket_dropped_before_its_response_closes_the_pipe() {
        let pipe = pipe_to_origin(3).await;
        let (first, _) = pipe.enqueue(&head("/0"), DEPTH).unwrap();
        let (second, _) = pipe.enqueue(&head("/1"), DEPTH).unwrap();
        let (third, _) = pipe.enqueue(&head("/2"), DEPTH).unwrap();
        let response = first.exchange(true, &Method::GET, LONG).await.unwrap().unwrap();
        assert_eq!(path_of(&response), "/0");
        // Its client went away: its unread response would stand in front of the third's.
        drop(second);
        assert!(pipe.is_closed());
        assert!(pipe.enqueue(&head("/3"), DEPTH).is_none(), "a closed pipe takes no request");
        first.finish();
        let err = third.exchange(false, &Method::GET, LONG).await.unwrap().unwrap_err();
        assert!(err.nothing_received(), "retryable: {err}");
        drop(third);
        assert_eq!(pipe.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_full_pipe_takes_no_more() {
        let pipe = pipe_to_origin(2).await;
        let tickets: Vec<_> = (0..2).map(|i| pipe.enqueue(&head(&format!("/{i}")), 2).unwrap()).collect();
        assert!(pipe.enqueue(&head("/2"), 2).is_none());
        assert!(!pipe.is_closed(), "full is not closed");
        for (ticket, writes) in tickets {
            ticket.exchange(writes, &Method::GET, LONG).await.unwrap().unwrap();
            ticket.finish();
        }
        assert!(pipe.enqueue(&head("/2"), 2).is_some(), "room again once answered");
    }
}
