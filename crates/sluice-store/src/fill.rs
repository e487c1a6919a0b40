//! A body being filled from its source while any number of clients read it.
//!
//! The writer (one fetch task) pushes chunks and finally completes or fails the fill.
//! Readers start at the first chunk and follow the writer; a reader never sees a partial
//! body as complete: a failed fill ends every reader with [`FillError`], so the client's
//! connection is cut rather than handed a truncated response that looks whole.
//!
//! A fill keeps every chunk (the body is stored whole once it ends) until the writer learns
//! that it will not be stored (it outgrew the object limit) and calls
//! [`Fill::stop_keeping`]. From then on it is a stream: chunks every reader has read are
//! dropped, the writer waits ([`Fill::poll_room`]) while more than [`STREAM_WINDOW`] bytes
//! wait for the slowest reader, and stops when no reader is left. Its memory is then bounded
//! by the window, not by the body, however large the body and however slow its readers.

use crate::{RangeCut, StoredBody};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Why a fill did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FillError(pub String);

impl std::fmt::Display for FillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "body source failed: {}", self.0)
    }
}

impl std::error::Error for FillError {}

/// Bytes a streaming fill ([`Fill::stop_keeping`]) holds ahead of its slowest reader before
/// its writer waits.
pub const STREAM_WINDOW: u64 = 1 << 20;

#[derive(Debug, Default)]
struct State {
    /// The chunks kept, the first being chunk number `dropped` of the body.
    chunks: VecDeque<Bytes>,
    /// Chunks dropped from the front (streaming only).
    dropped: usize,
    /// Bytes in `chunks`.
    kept: u64,
    /// Bytes received.
    len: u64,
    end: Option<Result<(), FillError>>,
    /// Readers waiting for more.
    wakers: Vec<Waker>,
    /// The body will not be stored: read chunks are dropped ([`Fill::stop_keeping`]).
    streaming: bool,
    /// Each reader's next chunk number, by reader slot (`None`: a free slot).
    cursors: Vec<Option<usize>>,
    /// The writer, waiting for room ([`Fill::poll_room`]).
    writer: Option<Waker>,
}

impl State {
    /// Takes a slot for a new reader starting at chunk 0.
    fn join(&mut self) -> usize {
        match self.cursors.iter().position(Option::is_none) {
            Some(slot) => {
                self.cursors[slot] = Some(0);
                slot
            }
            None => {
                self.cursors.push(Some(0));
                self.cursors.len() - 1
            }
        }
    }

    /// When streaming: drops the chunks every reader has read; the writer's waker when that
    /// made room for it (or no reader is left).
    fn trim(&mut self) -> Option<Waker> {
        if !self.streaming {
            return None;
        }
        let slowest = self.cursors.iter().flatten().min().copied();
        let upto = slowest.unwrap_or(self.dropped + self.chunks.len());
        while self.dropped < upto {
            let Some(chunk) = self.chunks.pop_front() else { break };
            self.kept -= chunk.len() as u64;
            self.dropped += 1;
        }
        let room = self.kept <= STREAM_WINDOW || slowest.is_none();
        room.then(|| self.writer.take()).flatten()
    }
}

/// A growing body shared by one writer and many readers.
#[derive(Debug, Default)]
pub struct Fill {
    state: Mutex<State>,
    /// The length announced by the source (`Content-Length`), if any.
    expected_len: Option<u64>,
}

impl Fill {
    /// An empty fill; `expected_len` is the announced length, used for readers' size hints.
    pub fn new(expected_len: Option<u64>) -> Arc<Self> {
        Arc::new(Self { state: Mutex::default(), expected_len })
    }

    /// Appends a chunk and wakes readers. Ignored after the fill ended.
    pub fn push(&self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        let wakers = {
            let mut st = self.state.lock();
            if st.end.is_some() {
                return;
            }
            st.len += chunk.len() as u64;
            st.kept += chunk.len() as u64;
            st.chunks.push_back(chunk);
            std::mem::take(&mut st.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// The body received so far, as a [`StoredBody`] (chunks are shared, not copied).
    /// The writer calls this once the source ended, stores the object, and only then calls
    /// [`Fill::complete`], so a reader that sees the end can already find the object stored.
    pub fn body(&self) -> StoredBody {
        let st = self.state.lock();
        debug_assert!(!st.streaming, "a streaming fill's body is not whole");
        StoredBody::new(st.chunks.iter().cloned().collect())
    }

    /// The body will not be stored: from now on chunks every reader has read are dropped,
    /// and readers that start now, after chunks were dropped, fail (see the module
    /// documentation). The writer should stop letting others join (the collapse slot) first.
    pub fn stop_keeping(&self) {
        let writer = {
            let mut st = self.state.lock();
            st.streaming = true;
            st.trim()
        };
        writer.into_iter().for_each(Waker::wake);
    }

    /// For the writer of a fill that stopped keeping its chunks: `Ready(true)` when it may
    /// push more (at most [`STREAM_WINDOW`] bytes wait for the slowest reader), `Ready(false)`
    /// when no reader is left (nobody wants the rest), `Pending` otherwise. Always
    /// `Ready(true)` while the fill keeps its chunks.
    pub fn poll_room(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut st = self.state.lock();
        if !st.streaming {
            return Poll::Ready(true);
        }
        if st.cursors.iter().all(Option::is_none) {
            return Poll::Ready(false);
        }
        if st.kept <= STREAM_WINDOW {
            return Poll::Ready(true);
        }
        st.writer = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Marks the body complete: readers end after the last chunk.
    pub fn complete(&self) {
        let wakers = {
            let mut st = self.state.lock();
            st.end = Some(Ok(()));
            std::mem::take(&mut st.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Marks the body failed: every reader ends with an error.
    pub fn fail(&self, why: impl Into<String>) {
        let wakers = {
            let mut st = self.state.lock();
            if st.end.is_none() {
                st.end = Some(Err(FillError(why.into())));
            }
            std::mem::take(&mut st.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Bytes received so far.
    pub fn len(&self) -> u64 {
        self.state.lock().len
    }

    /// True when nothing has been received yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The length announced by the source, if any.
    pub fn expected_len(&self) -> Option<u64> {
        self.expected_len
    }

    /// A reader positioned at the start of the body.
    pub fn reader(self: &Arc<Self>) -> FillReader {
        let slot = self.state.lock().join();
        FillReader { fill: Arc::clone(self), slot, next: 0, sent: 0, cut: RangeCut::whole() }
    }

    /// A reader of the bytes in `range` only, as they arrive (a `206` for a body still
    /// arriving). It ends once it has given the range's last byte, whether or not the fill
    /// has ended; a fill that fails before then ends it with [`FillError`].
    pub fn range_reader(self: &Arc<Self>, range: std::ops::Range<u64>) -> FillReader {
        let slot = self.state.lock().join();
        FillReader { fill: Arc::clone(self), slot, next: 0, sent: 0, cut: RangeCut::range(range) }
    }
}

/// Reads a [`Fill`] (all of it, or one range), following the writer. Implements
/// [`http_body::Body`].
#[derive(Debug)]
pub struct FillReader {
    fill: Arc<Fill>,
    /// Its slot among the fill's readers (where it tells the fill how far it has read).
    slot: usize,
    /// The number of the next chunk.
    next: usize,
    /// Bytes given so far.
    sent: u64,
    /// What of the body it gives.
    cut: RangeCut,
}

impl Body for FillReader {
    type Data = Bytes;
    type Error = FillError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, FillError>>> {
        let this = self.get_mut();
        if this.cut.is_done() {
            return Poll::Ready(None);
        }
        let mut st = this.fill.state.lock();
        if this.next < st.dropped {
            // Started after the fill stopped keeping the start of its body.
            return Poll::Ready(Some(Err(FillError("the body outgrew the cache and was not kept".into()))));
        }
        while let Some(chunk) = st.chunks.get(this.next - st.dropped) {
            let chunk = chunk.clone();
            this.next += 1;
            st.cursors[this.slot] = Some(this.next);
            let writer = st.trim();
            if let Some(part) = this.cut.cut(&chunk) {
                drop(st);
                writer.into_iter().for_each(Waker::wake);
                this.sent += part.len() as u64;
                return Poll::Ready(Some(Ok(Frame::data(part))));
            }
            if let Some(writer) = writer {
                writer.wake();
            }
        }
        match &st.end {
            Some(Ok(())) => Poll::Ready(None),
            Some(Err(e)) => Poll::Ready(Some(Err(e.clone()))),
            None => {
                st.wakers.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        if self.cut.is_done() {
            return true;
        }
        let st = self.fill.state.lock();
        self.next >= st.dropped + st.chunks.len() && matches!(st.end, Some(Ok(())))
    }

    fn size_hint(&self) -> SizeHint {
        match (self.cut.remaining(), self.fill.expected_len) {
            (Some(remaining), _) => SizeHint::with_exact(remaining),
            (None, Some(len)) => SizeHint::with_exact(len.saturating_sub(self.sent)),
            (None, None) => SizeHint::default(),
        }
    }
}

impl Drop for FillReader {
    /// Gives its slot back; a streaming fill may drop what only this reader still needed.
    fn drop(&mut self) {
        let writer = {
            let mut st = self.fill.state.lock();
            st.cursors[self.slot] = None;
            st.trim()
        };
        writer.into_iter().for_each(Waker::wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn readers_that_join_late_see_the_whole_body() {
        let fill = Fill::new(None);
        let early = fill.reader();
        fill.push(Bytes::from_static(b"hello "));
        let late = fill.reader();
        let writer = Arc::clone(&fill);
        let task = tokio::spawn(async move {
            writer.push(Bytes::from_static(b"world"));
            let body = writer.body();
            writer.complete();
            body
        });
        let a = early.collect().await.unwrap().to_bytes();
        let b = late.collect().await.unwrap().to_bytes();
        assert_eq!(a, "hello world");
        assert_eq!(b, "hello world");
        assert_eq!(task.await.unwrap().len(), 11);
    }

    #[tokio::test]
    async fn range_readers_give_their_bytes_as_they_arrive_and_end_after_the_last() {
        let fill = Fill::new(Some(12));
        let readers = [(0..12, "hello world!"), (3..8, "lo wo"), (6..7, "w"), (11..12, "!"), (0..6, "hello ")];
        let readers: Vec<_> = readers.into_iter().map(|(range, want)| (fill.range_reader(range), want)).collect();
        for (reader, _) in &readers {
            assert_eq!(reader.size_hint().exact(), reader.cut.remaining());
        }
        fill.push(Bytes::from_static(b"hel"));
        fill.push(Bytes::from_static(b"lo "));
        // A range within the chunks that came ends without waiting for the fill to end.
        let mut early = fill.range_reader(1..5);
        assert_eq!(early.frame().await.unwrap().unwrap().into_data().unwrap(), "el");
        assert_eq!(early.frame().await.unwrap().unwrap().into_data().unwrap(), "lo");
        assert!(early.is_end_stream());
        assert!(early.frame().await.is_none());
        let writer = Arc::clone(&fill);
        let task = tokio::spawn(async move {
            writer.push(Bytes::from_static(b"wor"));
            writer.push(Bytes::from_static(b"ld!"));
            writer.complete();
        });
        for (reader, want) in readers {
            assert_eq!(reader.collect().await.unwrap().to_bytes(), want);
        }
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_range_reader_fails_with_the_fill_before_its_last_byte() {
        let fill = Fill::new(Some(100));
        let reader = fill.range_reader(2..50);
        fill.push(Bytes::from_static(b"partial"));
        fill.fail("origin closed early");
        assert!(reader.collect().await.is_err());
    }

    #[tokio::test]
    async fn a_fill_that_stops_keeping_holds_only_what_its_slowest_reader_has_not_read() {
        let fill = Fill::new(None);
        let mut fast = fill.reader();
        let mut slow = fill.reader();
        let chunk = Bytes::from(vec![7u8; 256 << 10]);
        for _ in 0..8 {
            fill.push(chunk.clone());
        }
        fill.stop_keeping();
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(fill.poll_room(&mut cx), Poll::Pending, "2 MiB wait for the readers");
        for _ in 0..8 {
            fast.frame().await.unwrap().unwrap();
        }
        assert_eq!(fill.poll_room(&mut cx), Poll::Pending, "the slow reader has read nothing");
        assert_eq!(fill.state.lock().kept, 8 * (256 << 10));
        for _ in 0..5 {
            slow.frame().await.unwrap().unwrap();
        }
        assert_eq!(fill.state.lock().kept, 3 * (256 << 10), "what both read is dropped");
        assert_eq!(fill.poll_room(&mut cx), Poll::Ready(true));
        let late = fill.reader();
        assert!(late.collect().await.is_err(), "a reader that starts now cannot have the start");
        drop(fast);
        drop(slow);
        assert_eq!(fill.poll_room(&mut cx), Poll::Ready(false), "nobody is left to read the rest");
        assert_eq!(fill.state.lock().kept, 0);
    }

    #[tokio::test]
    async fn a_kept_fill_never_drops_or_waits() {
        let fill = Fill::new(None);
        let reader = fill.reader();
        fill.push(Bytes::from(vec![1u8; 2 * STREAM_WINDOW as usize]));
        assert_eq!(fill.poll_room(&mut Context::from_waker(Waker::noop())), Poll::Ready(true));
        drop(reader);
        assert_eq!(fill.body().len(), 2 * STREAM_WINDOW);
    }

    #[tokio::test]
    async fn a_failed_fill_ends_readers_with_an_error() {
        let fill = Fill::new(Some(100));
        let reader = fill.reader();
        fill.push(Bytes::from_static(b"partial"));
        fill.fail("origin closed early");
        let err = reader.collect().await.unwrap_err();
        assert!(err.to_string().contains("origin closed early"));
    }
}
