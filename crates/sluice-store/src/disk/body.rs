//! Stored entries and their bodies on disk: what the index holds per object, the verified
//! open file a hit is served from (by `sendfile` or by reading), and body verification.

use super::format::{Header, HEADER_LEN};
use crate::ObjectMeta;
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use std::fs::File;
use std::future::Future;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use twox_hash::XxHash3_64;

/// Bytes read per step when verifying or streaming a body.
const READ_CHUNK: usize = 256 * 1024;

/// The first step of a streamed body ([`DiskBody::into_stream`]).
const FIRST_STEP: usize = 16 * 1024;

/// One object in the disk tier's index. The metadata is held in memory; the body stays in
/// its file until served.
#[derive(Debug)]
pub struct DiskEntry {
    pub meta: Arc<ObjectMeta>,
    pub(crate) header: Header,
    pub(crate) path: PathBuf,
    /// Disk bytes charged (whole 4 KiB blocks of the file).
    pub(crate) charge: u64,
    /// True once the body's checksum matched (at write, at recovery, or at first serve).
    pub(crate) verified: AtomicBool,
    hits: AtomicU64,
    /// The verified file, kept open for later hits when the tier's budget of open files
    /// allows (see [`OpenFiles`]). Object files are never rewritten (a new version is a new
    /// file and a new entry), so a descriptor stays right for the entry's whole life.
    open: OnceLock<KeptOpen>,
    /// Held while the body is opened and checked, so concurrent first serves of one entry
    /// open and verify it once (the others then find it kept open, or verified).
    pub(crate) opening: parking_lot::Mutex<()>,
}

impl DiskEntry {
    pub(crate) fn new(meta: Arc<ObjectMeta>, header: Header, path: PathBuf, charge: u64, verified: bool) -> Self {
        Self {
            meta,
            header,
            path,
            charge,
            verified: AtomicBool::new(verified),
            hits: AtomicU64::new(0),
            open: OnceLock::new(),
            opening: parking_lot::Mutex::new(()),
        }
    }

    /// The body from the file kept open for this entry, if any: no system call.
    pub(crate) fn kept_open(&self) -> Option<DiskBody> {
        let kept = self.open.get()?;
        Some(DiskBody::new(Arc::clone(&kept.file), self.header.body_offset, self.header.body_len))
    }

    /// Whether `file` is as long as this entry's header says (one `fstat`): a file cut
    /// short under the running tier would otherwise be served short, hit after hit.
    pub(crate) fn has_its_length(&self, file: &File) -> io::Result<bool> {
        Ok(file.metadata()?.len() == self.header.file_len())
    }

    /// Keeps `file` (verified) open for later hits if `budget` has room.
    pub(crate) fn keep_open(&self, file: &Arc<File>, budget: &Arc<OpenFiles>) {
        if self.open.get().is_none() && budget.reserve() {
            // Losing a race to another opener releases the reservation (`KeptOpen::drop`).
            let _ = self.open.set(KeptOpen { file: Arc::clone(file), budget: Arc::clone(budget) });
        }
    }

    /// The variant id (stable across restarts).
    pub fn id(&self) -> u64 {
        self.header.id
    }

    /// The write generation (higher is newer).
    pub fn generation(&self) -> u64 {
        self.header.generation
    }

    /// Body length in bytes.
    pub fn body_len(&self) -> u64 {
        self.header.body_len
    }

    /// Disk bytes charged to the tier for this object.
    pub fn charge(&self) -> u64 {
        self.charge
    }

    /// The object's file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Hits since loaded.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    pub(crate) fn record_hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn is_verified(&self) -> bool {
        self.verified.load(Ordering::Acquire)
    }

    pub(crate) fn mark_verified(&self) {
        self.verified.store(true, Ordering::Release);
    }
}

/// The tier's budget of descriptors kept open for hits (like nginx's `open_file_cache`): a hit
/// on an entry with a kept file opens nothing, reads no header and needs no blocking thread.
/// First come, first kept; a slot frees when its entry leaves the index and the last request
/// using it ends.
#[derive(Debug)]
pub(crate) struct OpenFiles {
    kept: AtomicUsize,
    max: usize,
}

impl OpenFiles {
    pub(crate) fn new(max: usize) -> Self {
        Self { kept: AtomicUsize::new(0), max }
    }

    fn reserve(&self) -> bool {
        self.kept.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.max).then_some(n + 1)).is_ok()
    }

    /// Descriptors kept open now.
    pub(crate) fn kept(&self) -> usize {
        self.kept.load(Ordering::Acquire)
    }
}

/// A descriptor kept open for an entry, holding one slot of the budget.
#[derive(Debug)]
struct KeptOpen {
    file: Arc<File>,
    budget: Arc<OpenFiles>,
}

impl Drop for KeptOpen {
    fn drop(&mut self) {
        self.budget.kept.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Checks that `file` still carries `expected`'s header (cheap: one 128-byte read).
pub(crate) fn header_matches(file: &File, expected: &Header) -> io::Result<bool> {
    let mut buf = [0u8; HEADER_LEN];
    file.read_exact_at(&mut buf, 0)?;
    Ok(Header::decode(&buf).as_ref() == Ok(expected))
}

/// Reads the whole body and compares its checksum. Errors are I/O errors; a mismatch is
/// `Ok(false)`.
pub(crate) fn verify_body(file: &File, header: &Header) -> io::Result<bool> {
    let mut hasher = XxHash3_64::new();
    let mut buf = vec![0u8; READ_CHUNK.min(header.body_len as usize).max(1)];
    let mut offset = header.body_offset;
    let end = header.file_len();
    while offset < end {
        let n = buf.len().min((end - offset) as usize);
        file.read_exact_at(&mut buf[..n], offset)?;
        std::hash::Hasher::write(&mut hasher, &buf[..n]);
        offset += n as u64;
    }
    Ok(std::hash::Hasher::finish(&hasher) == header.body_hash)
}

/// A verified body in its file, ready to be served: by `sendfile` from [`DiskBody::file`]
/// at [`DiskBody::offset`] for [`DiskBody::len`] bytes (see [`super::sendfile_to`]), or read
/// through [`DiskBody::into_stream`]. Holding it keeps the file readable even if the object
/// is evicted meanwhile (the open descriptor outlives the unlink).
#[derive(Debug, Clone)]
pub struct DiskBody {
    file: Arc<File>,
    offset: u64,
    len: u64,
}

impl DiskBody {
    pub(crate) fn new(file: Arc<File>, offset: u64, len: u64) -> Self {
        Self { file, offset, len }
    }

    /// The open object file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Offset of the first body byte in [`DiskBody::file`].
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Body bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty body.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The part of the body in `range` (relative to the body, clamped to it), for range
    /// requests.
    pub fn slice(&self, range: Range<u64>) -> DiskBody {
        let start = range.start.min(self.len);
        let end = range.end.clamp(start, self.len);
        DiskBody { file: Arc::clone(&self.file), offset: self.offset + start, len: end - start }
    }

    /// Reads the whole body into memory (blocking).
    pub fn read_all(&self) -> io::Result<Bytes> {
        let mut buf = BytesMut::zeroed(self.len as usize);
        self.file.read_exact_at(&mut buf, self.offset)?;
        Ok(buf.freeze())
    }

    /// The body as an [`http_body::Body`] that reads the file on tokio's blocking pool in
    /// steps that start at 16 KiB and double with every step read (up to 256 KiB): the path
    /// for clients `sendfile` cannot serve (TLS, HTTP/2, bodies a module transforms). A client
    /// that stops reading (an HTTP/2 stream whose window stays shut) holds one small step, not
    /// 256 KiB, however many such streams it opens; one that reads on soon gets full steps.
    /// Must be polled inside a tokio runtime.
    pub fn into_stream(self) -> DiskBodyStream {
        DiskBodyStream { body: self, sent: 0, steps: 0, pending: None }
    }
}

/// A [`DiskBody`] read as an [`http_body::Body`]. See [`DiskBody::into_stream`].
#[derive(Debug)]
pub struct DiskBodyStream {
    body: DiskBody,
    sent: u64,
    /// Steps read so far (the next one is `FIRST_STEP << steps`, at most [`READ_CHUNK`]).
    steps: u32,
    pending: Option<tokio::task::JoinHandle<io::Result<Bytes>>>,
}

impl Body for DiskBodyStream {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if this.pending.is_none() {
            let remaining = this.body.len - this.sent;
            if remaining == 0 {
                return Poll::Ready(None);
            }
            let step = (FIRST_STEP << this.steps.min(8)).min(READ_CHUNK);
            this.steps += 1;
            let n = (remaining as usize).min(step);
            let file = Arc::clone(&this.body.file);
            let at = this.body.offset + this.sent;
            this.pending = Some(tokio::task::spawn_blocking(move || {
                let mut buf = BytesMut::zeroed(n);
                file.read_exact_at(&mut buf, at)?;
                Ok(buf.freeze())
            }));
        }
        let handle = this.pending.as_mut().expect("a read is pending");
        let result = std::task::ready!(Pin::new(handle).poll(cx));
        this.pending = None;
        match result {
            Ok(Ok(chunk)) => {
                this.sent += chunk.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            Ok(Err(e)) => {
                this.sent = this.body.len;
                Poll::Ready(Some(Err(e)))
            }
            Err(join) => {
                this.sent = this.body.len;
                Poll::Ready(Some(Err(io::Error::other(join))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_none() && self.sent >= self.body.len
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.body.len - self.sent)
    }
}
