//! Zero-copy sends: file pages go from the page cache to the socket with `sendfile(2)`,
//! never through user space.
//!
//! No `unsafe` here: `rustix` wraps the syscall safely over borrowed descriptors
//! (`AsFd`), so the workspace's `unsafe_code = "deny"` holds for this crate without an
//! exception.

use super::DiskBody;
use rustix::io::Errno;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;

/// Largest count handed to one `sendfile` call (Linux moves at most 0x7ffff000 per call).
const MAX_PER_CALL: u64 = 1 << 30;

/// Sends `len` bytes of `file` starting at `offset` to `out` (a socket, or any descriptor
/// `sendfile` accepts) without copying through user space; the file position is not used
/// or moved.
///
/// On a blocking descriptor this returns once everything was sent. On a non-blocking one it
/// returns the bytes sent so far when the socket's buffer is full (`Err(WouldBlock)` when
/// that is none): wait until it is writable and call again with the advanced offset (see
/// [`send_body`] for tokio). A file shorter than `offset + len` fails with `UnexpectedEof`.
pub fn sendfile_to(out: impl AsFd, file: &File, offset: u64, len: u64) -> io::Result<u64> {
    let out = out.as_fd();
    let mut at = offset;
    let end = offset + len;
    while at < end {
        let count = (end - at).min(MAX_PER_CALL) as usize;
        match rustix::fs::sendfile(out, file, Some(&mut at), count) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file ended before the body")),
            Ok(_) => {} // `at` was advanced by the kernel.
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) if at > offset => return Ok(at - offset),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(len)
}

/// Sends `body` on a tokio TCP stream with `sendfile`, waiting for writability as needed.
/// The response head must already have been written (and flushed) to the same stream.
pub async fn send_body(stream: &tokio::net::TcpStream, body: &DiskBody) -> io::Result<u64> {
    let mut sent = 0;
    while sent < body.len() {
        stream.writable().await?;
        match stream.try_io(tokio::io::Interest::WRITABLE, || {
            sendfile_to(stream, body.file(), body.offset() + sent, body.len() - sent)
        }) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}
