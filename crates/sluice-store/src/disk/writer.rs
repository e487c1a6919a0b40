//! Streaming writes: a temporary file filled as the body arrives, made durable and renamed
//! into place on commit. Nothing is visible in the index until the rename and the fsync of
//! its directory are done.
//!
//! ```text
//! begin:  take the write's generation (its `WriteTicket`, possibly taken earlier);
//!         create tmp/<id>-<pid>-<seq>.tmp; write zeroed header, metadata, padding
//! chunks: append body bytes, hashing them
//! commit: write the real header at offset 0; fdatasync the file;
//!         rename into objects/<aa>/<bb>/<id>-<gen>.obj; fsync that directory; publish
//! abort:  (or drop, or any error) delete the temporary file
//! ```

use super::format::{self, Header, HEADER_LEN};
use super::{record, DiskEntry, NotStored, Shared};
use crate::ObjectMeta;
use std::fs::{self, File};
use std::hash::Hasher;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use twox_hash::XxHash3_64;

/// Body bytes buffered before each write to the file.
const WRITE_BUFFER: usize = 256 * 1024;

/// A write in progress. Blocking I/O: use from a blocking thread (see
/// [`super::DiskTier::persist`] for an async tee). Dropped without [`DiskWriter::commit`],
/// it deletes its temporary file.
pub struct DiskWriter {
    shared: Arc<Shared>,
    meta: Arc<ObjectMeta>,
    id: u64,
    /// The write's ticket (`super::WriteTicket`): the generation it commits as.
    generation: u64,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
    meta_len: u32,
    meta_hash: u64,
    body_offset: u64,
    body_len: u64,
    max_body: u64,
    hasher: XxHash3_64,
}

impl std::fmt::Debug for DiskWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskWriter").field("id", &self.id).field("written", &self.body_len).finish()
    }
}

impl DiskWriter {
    pub(super) fn start(
        shared: Arc<Shared>,
        meta: Arc<ObjectMeta>,
        max_object: u64,
        generation: u64,
    ) -> Result<Self, NotStored> {
        let expected = meta
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let encoded = record::encode(&meta);
        if encoded.len() > format::MAX_META_LEN {
            return Err(NotStored::TooLarge);
        }
        let body_offset = format::body_offset(encoded.len(), expected);
        if expected.is_some_and(|n| format::charge(body_offset + n) > max_object) {
            shared.count_too_large();
            return Err(NotStored::TooLarge);
        }
        let id = record::variant_id(&meta.key, &meta.vary_key);
        let tmp = shared.layout.tmp_path(id, shared.next_tmp_seq());
        let mut writer = DiskWriter {
            meta_len: encoded.len() as u32,
            meta_hash: XxHash3_64::oneshot(&encoded),
            shared,
            meta,
            id,
            generation,
            tmp,
            out: None,
            body_offset,
            body_len: 0,
            max_body: max_object.saturating_sub(body_offset),
            hasher: XxHash3_64::new(),
        };
        let mut prefix = vec![0u8; body_offset as usize];
        prefix[HEADER_LEN..HEADER_LEN + encoded.len()].copy_from_slice(&encoded);
        let result = (|| {
            let file = fs::OpenOptions::new().write(true).create_new(true).open(&writer.tmp)?;
            let mut out = BufWriter::with_capacity(WRITE_BUFFER, file);
            writer.shared.check_write(prefix.len() as u64)?;
            out.write_all(&prefix)?;
            Ok(out)
        })();
        match result {
            Ok(out) => {
                writer.out = Some(out);
                Ok(writer)
            }
            Err(e) => Err(writer.fail(e)),
        }
    }

    /// The variant id being written.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Body bytes written so far.
    pub fn written(&self) -> u64 {
        self.body_len
    }

    /// Appends body bytes. On error the write is abandoned (temporary file deleted) and
    /// every later call fails the same way; the caller just stops teeing.
    pub fn write_chunk(&mut self, chunk: &[u8]) -> Result<(), NotStored> {
        let Some(out) = self.out.as_mut() else { return Err(NotStored::Aborted) };
        if self.body_len + chunk.len() as u64 > self.max_body {
            self.shared.count_too_large();
            self.discard();
            return Err(NotStored::TooLarge);
        }
        let result = self.shared.check_write(chunk.len() as u64).and_then(|()| out.write_all(chunk));
        if let Err(e) = result {
            return Err(self.fail(e));
        }
        self.hasher.write(chunk);
        self.body_len += chunk.len() as u64;
        Ok(())
    }

    /// Makes the object durable and visible. Returns the stored entry, or why it was not
    /// stored (never a request failure).
    pub fn commit(mut self) -> Result<Arc<DiskEntry>, NotStored> {
        let Some(out) = self.out.take() else { return Err(NotStored::Aborted) };
        if let Err(e) = self.shared.admission_open() {
            self.out = Some(out);
            self.discard();
            return Err(e);
        }
        let generation = self.generation;
        let header = Header {
            meta_len: self.meta_len,
            body_offset: self.body_offset,
            body_len: self.body_len,
            id: self.id,
            generation,
            meta_hash: self.meta_hash,
            body_hash: self.hasher.finish(),
        };
        let path = self.shared.layout.object_path(self.id, generation);
        let result = (|| -> io::Result<()> {
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.write_all_at(&header.encode(), 0)?;
            file.sync_data()?;
            drop(file);
            let dir = self.shared.layout.ensure_object_dir(self.id)?;
            fs::rename(&self.tmp, &path)?;
            super::layout::sync_dir(&dir)
        })();
        if let Err(e) = result {
            // The rename may have happened before the directory fsync failed: remove both.
            let _ = fs::remove_file(&path);
            return Err(self.fail(e));
        }
        let charge = format::charge(header.file_len());
        let entry = DiskEntry::new(Arc::clone(&self.meta), header, path, charge, true);
        self.tmp = PathBuf::new(); // renamed: nothing left to clean up
        self.shared.publish(entry)
    }

    /// Abandons the write and deletes the temporary file.
    pub fn abort(mut self) {
        self.discard();
    }

    fn fail(&mut self, e: io::Error) -> NotStored {
        self.discard();
        self.shared.write_failed(e)
    }

    fn discard(&mut self) {
        self.out = None;
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
            self.tmp = PathBuf::new();
        }
    }
}

impl Drop for DiskWriter {
    fn drop(&mut self) {
        self.discard();
    }
}
