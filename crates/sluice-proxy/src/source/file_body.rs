//! [`FileBody`]: a file's bytes streamed in chunks, never held whole in memory.
//!
//! The body is exactly the length the file had when it was opened (the `Content-Length`
//! sent). A file that shrinks under the reader fails the body; one that was written to while
//! being read (its size, modification or change time differ at the end from when it was
//! opened) fails it too, before the last chunk is given out. A failed body is never stored
//! (the cache's fill fails), so a torn read of a file being rewritten in place never becomes
//! a cached object.
//!
//! The body holds its read's guard (`inflight.rs`) until it is dropped.

use super::inflight::ReadGuard;
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use std::fs::Metadata;
use std::future::Future;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::task::JoinHandle;

/// The most bytes one read asks for.
const CHUNK: u64 = 256 * 1024;

/// What identifies one version of a file: inode, size, modification and change times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl Stamp {
    pub fn of(meta: &Metadata) -> Self {
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        Self {
            ino: meta.ino(),
            size: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

enum State {
    Reading,
    /// The last chunk is read; it goes out once the file is known unchanged.
    Verifying {
        last: Bytes,
        check: JoinHandle<io::Result<Metadata>>,
    },
    Done,
}

/// A file's body. Reads run on tokio's blocking pool.
pub struct FileBody {
    file: tokio::fs::File,
    /// A second handle for the final check (the first may be busy in a blocking read).
    check: Option<std::fs::File>,
    stamp: Stamp,
    remaining: u64,
    /// The buffer a read in progress fills (kept across `Pending`).
    chunk: Option<BytesMut>,
    state: State,
    /// Dropped with the body (after the cache stored it).
    _read: Option<ReadGuard>,
}

impl std::fmt::Debug for FileBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileBody").field("remaining", &self.remaining).finish_non_exhaustive()
    }
}

impl FileBody {
    /// The body of `file`, whose metadata at opening was `meta`, for the read `read`.
    pub fn new(file: std::fs::File, meta: &Metadata, read: Option<ReadGuard>) -> io::Result<Self> {
        let check = file.try_clone()?;
        let remaining = meta.len();
        let state = if remaining == 0 { State::Done } else { State::Reading };
        Ok(Self {
            file: tokio::fs::File::from_std(file),
            check: Some(check),
            stamp: Stamp::of(meta),
            remaining,
            chunk: None,
            state,
            _read: read,
        })
    }

    fn read(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Bytes>> {
        let want = usize::try_from(self.remaining.min(CHUNK)).unwrap_or(CHUNK as usize);
        let chunk = self.chunk.get_or_insert_with(|| BytesMut::zeroed(want));
        let mut buf = ReadBuf::new(&mut chunk[..]);
        ready!(Pin::new(&mut self.file).poll_read(cx, &mut buf))?;
        let n = buf.filled().len();
        let mut chunk = self.chunk.take().unwrap_or_default();
        if n == 0 {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while being read")));
        }
        chunk.truncate(n);
        self.remaining -= n as u64;
        Poll::Ready(Ok(chunk.freeze()))
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::Done => return Poll::Ready(None),
                State::Reading => {
                    let data = match ready!(this.read(cx)) {
                        Ok(data) => data,
                        Err(e) => {
                            this.state = State::Done;
                            return Poll::Ready(Some(Err(e)));
                        }
                    };
                    if this.remaining > 0 {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    match this.check.take() {
                        Some(file) => {
                            let check = tokio::task::spawn_blocking(move || file.metadata());
                            this.state = State::Verifying { last: data, check };
                        }
                        None => {
                            this.state = State::Done;
                            return Poll::Ready(Some(Ok(Frame::data(data))));
                        }
                    }
                }
                State::Verifying { last, check } => {
                    let checked = ready!(Pin::new(check).poll(cx));
                    let last = std::mem::take(last);
                    this.state = State::Done;
                    let unchanged = match checked {
                        Ok(Ok(meta)) => Stamp::of(&meta) == this.stamp,
                        Ok(Err(e)) => return Poll::Ready(Some(Err(e))),
                        Err(e) => return Poll::Ready(Some(Err(io::Error::other(e)))),
                    };
                    if !unchanged {
                        return Poll::Ready(Some(Err(io::Error::other("file changed while being read"))));
                    }
                    return Poll::Ready(Some(Ok(Frame::data(last))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Done => SizeHint::with_exact(0),
            State::Reading => SizeHint::with_exact(self.remaining),
            State::Verifying { last, .. } => SizeHint::with_exact(last.len() as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::os::unix::fs::FileExt;

    fn open(path: &std::path::Path) -> FileBody {
        let file = std::fs::File::open(path).unwrap();
        let meta = file.metadata().unwrap();
        FileBody::new(file, &meta, None).unwrap()
    }

    /// Reads the rest of `body`: the bytes and whether it ended in an error.
    async fn drain(body: &mut FileBody) -> (Vec<u8>, Option<io::Error>) {
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => bytes.extend_from_slice(&frame.into_data().unwrap()),
                Err(e) => return (bytes, Some(e)),
            }
        }
        (bytes, None)
    }

    #[tokio::test]
    async fn a_file_streams_in_chunks_to_its_exact_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let mut body = open(&path);
        assert_eq!(body.size_hint().exact(), Some(600_000));
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert!(first.len() as u64 <= CHUNK);
        let (rest, err) = drain(&mut body).await;
        assert!(err.is_none(), "{err:?}");
        assert_eq!([first.to_vec(), rest].concat(), data);
        assert!(body.is_end_stream());
    }

    #[tokio::test]
    async fn an_empty_file_is_an_ended_body() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("e"), "").unwrap();
        let mut body = open(&dir.path().join("e"));
        assert!(body.is_end_stream());
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn a_file_rewritten_while_read_fails_the_body() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![b'a'; 600_000]).unwrap();
        let mut body = open(&path);
        body.frame().await.unwrap().unwrap();
        // Same size, written in place: only the times tell (set apart explicitly, as two
        // writes within one clock tick can share a modification time).
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(b"b", 0).unwrap();
        file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000)).unwrap();
        let (_, err) = drain(&mut body).await;
        assert!(err.is_some_and(|e| e.to_string().contains("changed")));
    }

    #[tokio::test]
    async fn a_file_that_shrinks_while_read_fails_the_body() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![b'a'; 600_000]).unwrap();
        let mut body = open(&path);
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(10).unwrap();
        let (bytes, err) = drain(&mut body).await;
        assert_eq!(bytes.len(), 10);
        assert_eq!(err.map(|e| e.kind()), Some(io::ErrorKind::UnexpectedEof));
    }
}
