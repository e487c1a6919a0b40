//! Zero-copy disk hits on plaintext HTTP/1.1 connections: body bytes go from the page cache
//! to the client's socket with `sendfile(2)`, never through user space.
//!
//! hyper owns the connection and writes bodies through `AsyncWrite`, so it offers no place
//! for `sendfile`. We make one without forking it:
//!
//! 1. A disk body serving zero-copy ([`crate::body::ProxyBody::prefer_zero_copy`]) yields
//!    frames that are slices of [`PLACEHOLDER`], a static region that holds no data, and
//!    queues on its connection's [`SendfileQueue`] the file range each frame stands for.
//! 2. The connection's stream, [`ZeroCopyStream`], recognises placeholder bytes by their
//!    address when hyper writes them, and sends the queued file range instead.
//!
//! This relies on hyper's *queue* write strategy (forced with `http1().writev(true)` on
//! every connection that has a queue), in which the body buffers a service yields reach
//! `poll_write_vectored` unchanged (never copied into hyper's own buffer) and in order. The
//! stream checks each placeholder write against the front of the queue (it must be exactly
//! the rest of the front range) and fails the connection when they disagree, so a
//! placeholder byte is never sent to a client.
//!
//! Only for plaintext HTTP/1.x: TLS has to encrypt in user space, and HTTP/2 frames and
//! copies data.

use bytes::Bytes;
use parking_lot::Mutex;
use sluice_store::disk::{sendfile_to, DiskBody};
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Largest frame a zero-copy body yields (one `sendfile` call at most moves this much).
pub const PLACEHOLDER_LEN: usize = 8 << 20;

/// Stands in for file bytes in the frames of a zero-copy body. Zero-initialised, so it
/// lives in `.bss` and costs no memory until touched (it never is: its bytes are not sent).
static PLACEHOLDER: [u8; PLACEHOLDER_LEN] = [0; PLACEHOLDER_LEN];

/// A placeholder frame of `len` bytes (at most [`PLACEHOLDER_LEN`]).
pub fn placeholder(len: usize) -> Bytes {
    Bytes::from_static(&PLACEHOLDER[..len])
}

fn is_placeholder(bytes: &[u8]) -> bool {
    let start = PLACEHOLDER.as_ptr() as usize;
    let at = bytes.as_ptr() as usize;
    !bytes.is_empty() && at >= start && at < start + PLACEHOLDER_LEN
}

/// The file ranges a connection's zero-copy bodies have yielded as placeholders and hyper
/// has not written yet, in the order it will write them. Shared by a connection's stream
/// and the bodies of its responses.
#[derive(Debug, Clone, Default)]
pub struct SendfileQueue(Arc<Mutex<VecDeque<DiskBody>>>);

impl SendfileQueue {
    /// Queues `range`, for which a placeholder frame of the same length is being yielded.
    pub fn push(&self, range: DiskBody) {
        self.0.lock().push_back(range);
    }

    fn front(&self) -> Option<DiskBody> {
        self.0.lock().front().cloned()
    }

    fn pop(&self) {
        self.0.lock().pop_front();
    }
}

/// A client's TCP stream that sends the file range behind each placeholder write with
/// `sendfile` (see the module documentation); everything else passes through.
#[derive(Debug)]
pub struct ZeroCopyStream {
    io: TcpStream,
    queue: SendfileQueue,
    /// Bytes of the front range already sent.
    front_sent: u64,
}

impl ZeroCopyStream {
    pub fn new(io: TcpStream, queue: SendfileQueue) -> Self {
        Self { io, queue, front_sent: 0 }
    }

    /// Sends (part of) the front range, whose placeholder hyper is writing with `want`
    /// bytes left.
    fn poll_sendfile(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<usize>> {
        let Some(range) = self.queue.front() else {
            return Poll::Ready(Err(out_of_step("no file range is queued")));
        };
        let left = range.len() - self.front_sent;
        if left != want as u64 {
            return Poll::Ready(Err(out_of_step("the placeholder and the queued range differ in length")));
        }
        loop {
            ready!(self.io.poll_write_ready(cx))?;
            let at = range.offset() + self.front_sent;
            let mut partial = 0;
            let sent = self.io.try_io(Interest::WRITABLE, || {
                let sent = sendfile_to(&self.io, range.file(), at, left)?;
                if sent > 0 && sent < left {
                    // A short send means the socket buffer is full. Reporting it as
                    // `WouldBlock` clears the stream's write readiness (tokio does the same
                    // for short writes), so the next send waits for room instead of first
                    // failing with EAGAIN.
                    partial = sent;
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(sent)
            });
            match sent {
                Ok(sent) => return Poll::Ready(Ok(self.advance(sent, range.len()))),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && partial > 0 => {
                    return Poll::Ready(Ok(self.advance(partial, range.len())))
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Records `sent` more bytes of the front range (`len` bytes long) as sent, popping the
    /// range when it is complete.
    fn advance(&mut self, sent: u64, len: u64) -> usize {
        self.front_sent += sent;
        if self.front_sent == len {
            self.queue.pop();
            self.front_sent = 0;
        }
        sent as usize
    }

    /// Writes buffers that a placeholder follows with `MSG_MORE`, so the response head and
    /// the file's first bytes leave in full packets despite `TCP_NODELAY`.
    fn poll_write_before_file(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.io.poll_write_ready(cx))?;
            let sent = self.io.try_io(Interest::WRITABLE, || {
                let mut control = rustix::net::SendAncillaryBuffer::default();
                rustix::net::sendmsg(&self.io, bufs, &mut control, rustix::net::SendFlags::MORE)
                    .map_err(io::Error::from)
            });
            match sent {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                other => return Poll::Ready(other),
            }
        }
    }
}

fn out_of_step(what: &str) -> io::Error {
    io::Error::other(format!("zero-copy send out of step: {what}; closing the connection"))
}

impl AsyncRead for ZeroCopyStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for ZeroCopyStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if is_placeholder(buf) {
            return this.poll_sendfile(cx, buf.len());
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let Some(first) = bufs.iter().position(|b| !b.is_empty()) else {
            return Poll::Ready(Ok(0));
        };
        if is_placeholder(&bufs[first]) {
            return this.poll_sendfile(cx, bufs[first].len());
        }
        match bufs[first..].iter().position(|b| is_placeholder(b)) {
            Some(n) => this.poll_write_before_file(cx, &bufs[first..first + n]),
            None => Pin::new(&mut this.io).poll_write_vectored(cx, &bufs[first..]),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
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

    #[test]
    fn placeholders_are_recognised_by_address_not_content() {
        assert!(is_placeholder(&placeholder(10)));
        assert!(is_placeholder(&placeholder(PLACEHOLDER_LEN).slice(PLACEHOLDER_LEN - 1..)));
        let zeros = vec![0u8; 10];
        assert!(!is_placeholder(&zeros), "zero bytes elsewhere are data");
        assert!(!is_placeholder(&placeholder(10)[..0]), "an empty slice is nothing to send");
    }
}
