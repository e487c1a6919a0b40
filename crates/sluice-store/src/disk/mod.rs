//! The disk tier: one checksummed file per object, durable before visible, recovered on
//! open, served zero-copy.
//!
//! - [`DiskTier::open`] recovers the directory (see [`RecoveryReport`]) and indexes it.
//! - [`DiskTier::begin`] / [`DiskWriter`] stream a body to disk as it arrives;
//!   [`DiskTier::insert`] stores a complete [`Object`]; [`DiskTier::persist`] tees an async
//!   body. Each commit is durable (file fsync, rename, directory fsync) before it is
//!   visible.
//! - [`DiskTier::lookup`] finds a variant in the in-memory index; [`DiskTier::open_body`]
//!   returns a [`DiskBody`] whose checksum was verified before any byte is served, ready for
//!   [`sendfile_to`] / [`send_body`] or [`DiskBody::into_stream`].
//! - A [`ResourceManager`] charges disk bytes (whole 4 KiB blocks) and entries, evicts by
//!   the configured policy from the high- to the low-water mark, and stops admission for a
//!   while when the disk reports ENOSPC. Admission failures are [`NotStored`] values, never
//!   request failures.
//!
//! All methods but [`DiskTier::persist`] and [`DiskTier::open_body_async`] do blocking file
//! I/O, except [`DiskTier::lookup`], [`DiskTier::variants`] and [`DiskTier::stats`], which
//! only touch memory. Call the blocking ones from a blocking thread.
//!
//! The format and the rules are described in `docs/store.md`.

mod body;
mod format;
mod layout;
mod manager;
mod record;
mod recovery;
mod sweep;
mod writer;
mod zerocopy;

pub use body::{DiskBody, DiskBodyStream, DiskEntry};
pub use manager::{Limits, ManagerStats, NotStored, ResourceManager, WaterMarks};
pub use recovery::RecoveryReport;
pub use writer::DiskWriter;
pub use zerocopy::{send_body, sendfile_to};

use crate::{Object, ObjectMeta, StoreStats, StoredBody};
use bytes::Bytes;
use layout::Layout;
use parking_lot::Mutex;
use sluice_policy::{IdMap, ObjectId, Policy};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A hook consulted before every write to an object file with the number of bytes about to
/// be written; an error it returns is handled as if the write failed with it. Tests use it
/// to inject ENOSPC; production leaves it unset.
pub type WriteHook = Arc<dyn Fn(u64) -> io::Result<()> + Send + Sync>;

/// When a body's checksum is verified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BodyCheck {
    /// Before the first serve of a recovered object (objects written by this process were
    /// hashed as they were written). Startup reads headers and metadata only.
    #[default]
    FirstServe,
    /// Every body during recovery: slow startup, nothing left to check later.
    AtOpen,
    /// Before every serve: reads each body twice (once to check, once to send).
    EveryServe,
}

/// Disk tier settings. Build with [`DiskConfig::new`].
#[derive(Clone)]
pub struct DiskConfig {
    /// Disk bytes the tier may use (files are charged in whole 4 KiB blocks).
    pub capacity_bytes: u64,
    /// Objects the tier may hold (`u64::MAX`: no limit). Each costs memory for the index.
    pub max_entries: u64,
    /// Largest object file accepted, in bytes (never more than the low-water mark).
    pub max_object: u64,
    pub water: WaterMarks,
    pub body_check: BodyCheck,
    /// How long admission stays closed after the disk reported ENOSPC.
    pub full_backoff: Duration,
    /// Verified object files kept open for later hits (0: none; each costs a descriptor).
    /// Not used with [`BodyCheck::EveryServe`].
    pub open_files: usize,
    /// Test hook; see [`WriteHook`].
    pub write_hook: Option<WriteHook>,
}

impl DiskConfig {
    /// `capacity_bytes` and `max_entries` with default water marks (95%/90%), objects up to
    /// the low mark, checks at first serve and a 5 s pause after ENOSPC.
    pub fn new(capacity_bytes: u64, max_entries: u64) -> Self {
        Self {
            capacity_bytes,
            max_entries,
            max_object: u64::MAX,
            water: WaterMarks::default(),
            body_check: BodyCheck::default(),
            full_backoff: Duration::from_secs(5),
            open_files: 1024,
            write_hook: None,
        }
    }
}

impl std::fmt::Debug for DiskConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskConfig")
            .field("capacity_bytes", &self.capacity_bytes)
            .field("max_entries", &self.max_entries)
            .field("max_object", &self.max_object)
            .field("water", &self.water)
            .field("body_check", &self.body_check)
            .field("full_backoff", &self.full_backoff)
            .field("open_files", &self.open_files)
            .field("write_hook", &self.write_hook.is_some())
            .finish()
    }
}

/// The outcome of [`DiskTier::lookup`].
#[derive(Debug)]
pub enum DiskLookup {
    /// A stored variant matched.
    Found(Arc<DiskEntry>),
    /// The key is stored but no variant matches the request.
    VaryMiss,
    /// Nothing stored under the key.
    Miss,
}

/// Why a body could not be opened. Serve as a miss.
#[derive(Debug)]
pub enum ReadError {
    /// The object was evicted or purged since the lookup.
    Gone,
    /// Its file failed a check; it was dropped from the tier and deleted.
    Corrupt,
    /// Another I/O error.
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Gone => f.write_str("disk object gone"),
            ReadError::Corrupt => f.write_str("disk object corrupt (dropped)"),
            ReadError::Io(e) => write!(f, "disk object unreadable: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Objects already dropped from the index whose files are still to be deleted. Dropping it
/// without [`Purge::finish`] leaves the files for the next recovery to re-index (so call it).
#[derive(Debug)]
#[must_use = "the files are only deleted by finish()"]
pub struct Purge {
    paths: Vec<PathBuf>,
}

impl Purge {
    /// How many objects were dropped.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// True when nothing was dropped.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Deletes the files and fsyncs their directories, so the objects do not come back
    /// after a crash (blocking). Returns how many objects were dropped.
    pub fn finish(self) -> usize {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for path in &self.paths {
            let _ = std::fs::remove_file(path);
            if let Some(dir) = path.parent() {
                dirs.push(dir.to_path_buf());
            }
        }
        dirs.sort();
        dirs.dedup();
        for dir in dirs {
            let _ = layout::sync_dir(&dir);
        }
        self.paths.len()
    }
}

/// Counters and gauges of the disk tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    pub objects: u64,
    pub bytes: u64,
    /// Configured capacity, and the byte limit in force (lower after ENOSPC).
    pub capacity: u64,
    pub limit_bytes: u64,
    pub high_water_bytes: u64,
    pub low_water_bytes: u64,
    pub max_entries: u64,
    pub insertions: u64,
    pub evictions: u64,
    pub removals: u64,
    /// Stale, idle objects removed by expiry sweeps ([`DiskTier::sweep`]).
    pub swept: u64,
    pub rejected_too_large: u64,
    /// Admissions refused while paused after ENOSPC (or with no room to make).
    pub rejected_full: u64,
    /// Times the disk reported ENOSPC/EDQUOT.
    pub full_events: u64,
    /// Writes that failed with another I/O error.
    pub write_errors: u64,
    /// Bodies verified at serve time, and those that failed (dropped, never served).
    pub verified_at_read: u64,
    pub corrupt_at_read: u64,
    /// True while admission is paused.
    pub admission_paused: bool,
    /// Verified object files kept open for hits (see [`DiskConfig::open_files`]).
    pub open_files: u64,
}

impl DiskStats {
    /// The fields [`StoreStats`] has, for `/stats` and `/metrics`.
    pub fn store_stats(&self) -> StoreStats {
        StoreStats {
            objects: self.objects,
            bytes: self.bytes,
            capacity: self.capacity,
            insertions: self.insertions,
            evictions: self.evictions,
            rejected_too_large: self.rejected_too_large,
            ..StoreStats::default()
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    insertions: u64,
    removals: u64,
    swept: u64,
    rejected_full: u64,
    rejected_too_large: u64,
    full_events: u64,
    write_errors: u64,
    verified_at_read: u64,
    corrupt_at_read: u64,
}

struct Inner {
    /// Primary key to its variants' ids, newest first.
    index: HashMap<String, Vec<ObjectId>>,
    entries: IdMap<Arc<DiskEntry>>,
    manager: ResourceManager,
    paused_until: Option<Instant>,
    counters: Counters,
}

impl Inner {
    /// Drops `id` from the index (not from the manager); returns its entry.
    fn forget(&mut self, id: ObjectId) -> Option<Arc<DiskEntry>> {
        let entry = self.entries.remove(&id)?;
        if let Some(ids) = self.index.get_mut(&entry.meta.key) {
            ids.retain(|v| *v != id);
            if ids.is_empty() {
                self.index.remove(&entry.meta.key);
            }
        }
        Some(entry)
    }

    /// Forgets the manager's victims; returns their files to delete.
    fn forget_all(&mut self, victims: &[ObjectId]) -> Vec<PathBuf> {
        victims.iter().filter_map(|v| self.forget(*v)).map(|e| e.path.clone()).collect()
    }
}

pub(crate) struct Shared {
    layout: Layout,
    config: DiskConfig,
    inner: Mutex<Inner>,
    next_generation: AtomicU64,
    tmp_seq: AtomicU64,
    open_files: Arc<body::OpenFiles>,
    _lock: File,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskTier").field("dir", &self.layout.root()).finish()
    }
}

impl Shared {
    fn next_tmp_seq(&self) -> u64 {
        self.tmp_seq.fetch_add(1, Ordering::Relaxed)
    }

    fn next_generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed)
    }

    fn check_write(&self, len: u64) -> io::Result<()> {
        self.config.write_hook.as_ref().map_or(Ok(()), |hook| hook(len))
    }

    fn count_too_large(&self) {
        self.inner.lock().counters.rejected_too_large += 1;
    }

    /// `Err(Full)` while admission is paused; reopens it (with the configured limits) once
    /// the pause is over.
    fn admission_open(&self) -> Result<(), NotStored> {
        let mut inner = self.inner.lock();
        match inner.paused_until {
            Some(until) if Instant::now() < until => {
                inner.counters.rejected_full += 1;
                Err(NotStored::Full)
            }
            Some(_) => {
                inner.paused_until = None;
                inner.manager.restore();
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Turns a failed write into why the object is not stored. ENOSPC and EDQUOT pause
    /// admission and shrink the byte limit to the current usage, evicting down to its
    /// low-water mark so there is room again when the pause ends.
    fn write_failed(&self, e: io::Error) -> NotStored {
        let full = matches!(e.raw_os_error(), Some(code) if code == rustix::io::Errno::NOSPC.raw_os_error()
            || code == rustix::io::Errno::DQUOT.raw_os_error())
            || e.kind() == io::ErrorKind::StorageFull;
        if !full {
            self.inner.lock().counters.write_errors += 1;
            return NotStored::Io(e.to_string());
        }
        let doomed = {
            let mut inner = self.inner.lock();
            inner.counters.full_events += 1;
            inner.counters.rejected_full += 1;
            inner.paused_until = Some(Instant::now() + self.config.full_backoff);
            let mut victims = Vec::new();
            inner.manager.clamp_to_usage(&mut victims);
            inner.forget_all(&victims)
        };
        unlink_all(&doomed);
        NotStored::Full
    }

    /// Makes a committed entry visible, replacing an older generation of the variant and
    /// evicting as the manager decides.
    fn publish(&self, entry: DiskEntry) -> Result<Arc<DiskEntry>, NotStored> {
        let id = entry.id();
        let mut doomed = Vec::new();
        let result = {
            let mut inner = self.inner.lock();
            if inner.entries.get(&id).is_some_and(|old| old.generation() > entry.generation()) {
                doomed.push(entry.path.clone());
                Err(NotStored::Superseded)
            } else {
                if let Some(old) = inner.forget(id) {
                    inner.manager.remove(id);
                    doomed.push(old.path.clone());
                }
                let mut victims = Vec::new();
                let admitted = inner.manager.admit(id, entry.charge, &mut victims);
                doomed.extend(inner.forget_all(&victims));
                match admitted {
                    Ok(()) => {
                        let entry = Arc::new(entry);
                        inner.index.entry(entry.meta.key.clone()).or_default().insert(0, id);
                        inner.entries.insert(id, Arc::clone(&entry));
                        inner.counters.insertions += 1;
                        Ok(entry)
                    }
                    Err(e) => {
                        if e == NotStored::TooLarge {
                            inner.counters.rejected_too_large += 1;
                        }
                        doomed.push(entry.path.clone());
                        Err(e)
                    }
                }
            }
        };
        unlink_all(&doomed);
        result
    }

    /// Drops `entry` after its file failed a check at read time.
    fn drop_corrupt(&self, entry: &DiskEntry) {
        let mut inner = self.inner.lock();
        inner.counters.corrupt_at_read += 1;
        let current = inner.entries.get(&entry.id()).is_some_and(|e| e.generation() == entry.generation());
        if current {
            inner.forget(entry.id());
            inner.manager.remove(entry.id());
        }
        drop(inner);
        unlink_all(std::slice::from_ref(&entry.path));
    }
}

fn unlink_all(paths: &[PathBuf]) {
    for path in paths {
        // NotFound: already gone. Other errors leave a file that recovery will supersede
        // or re-index; nothing to do from the request path.
        let _ = std::fs::remove_file(path);
    }
}

/// A write's place in the order of writes, taken with [`DiskTier::ticket`]: of two writes
/// of one variant, the copy kept is the one whose ticket was taken later, whichever of them
/// commits last (the other gets [`NotStored::Superseded`]). Take it where the order of the
/// copies is known (when the object is stored in memory, or as its response arrives), before
/// handing the write to a blocking thread, which may run it at any time. The ticket is the
/// copy's generation, in its file name.
#[derive(Debug)]
pub struct WriteTicket(u64);

/// The disk tier. Cheap to clone (a shared handle); safe to use from any thread.
#[derive(Clone, Debug)]
pub struct DiskTier {
    shared: Arc<Shared>,
}

impl DiskTier {
    /// Opens (creating if needed) the tier in `dir` with default settings besides the
    /// limits and water marks, recovering what is there. See [`DiskTier::open_with`].
    pub fn open(
        dir: impl AsRef<Path>,
        capacity_bytes: u64,
        max_entries: u64,
        policy: Box<dyn Policy>,
        water: WaterMarks,
    ) -> io::Result<(DiskTier, RecoveryReport)> {
        let config = DiskConfig { water, ..DiskConfig::new(capacity_bytes, max_entries) };
        Self::open_with(dir, config, policy)
    }

    /// Opens (creating if needed) the tier in `dir`: takes the directory lock (one process
    /// per directory), deletes incomplete and corrupt files, and indexes the rest, oldest
    /// first into `policy`, evicting as admissions do if the limits shrank.
    pub fn open_with(
        dir: impl AsRef<Path>,
        config: DiskConfig,
        policy: Box<dyn Policy>,
    ) -> io::Result<(DiskTier, RecoveryReport)> {
        let layout = Layout::new(dir.as_ref());
        let lock = layout.prepare()?;
        let recovered = recovery::recover(&layout, config.body_check == BodyCheck::AtOpen)?;
        let mut report = recovered.report;
        let limits = Limits { bytes: config.capacity_bytes, entries: config.max_entries.max(1) };
        let mut inner = Inner {
            index: HashMap::new(),
            entries: IdMap::default(),
            manager: ResourceManager::new(limits, config.water, config.max_object, policy),
            paused_until: None,
            counters: Counters::default(),
        };
        for entry in recovered.entries {
            let id = entry.id();
            let mut victims = Vec::new();
            // Admission order is write order, so FIFO/LRU-like policies start from it. An
            // object larger than today's limit is dropped like an eviction.
            match inner.manager.admit(id, entry.charge, &mut victims) {
                Ok(()) => {
                    let entry = Arc::new(entry);
                    inner.index.entry(entry.meta.key.clone()).or_default().insert(0, id);
                    inner.entries.insert(id, entry);
                }
                Err(_) => {
                    report.evicted += 1;
                    unlink_all(std::slice::from_ref(&entry.path));
                }
            }
            report.evicted += victims.len() as u64;
            unlink_all(&inner.forget_all(&victims));
        }
        report.recovered -= report.evicted.min(report.recovered);
        report.recovered_bytes = inner.manager.bytes();
        let open_files = Arc::new(body::OpenFiles::new(config.open_files));
        let shared = Shared {
            layout,
            config,
            inner: Mutex::new(inner),
            next_generation: AtomicU64::new(recovered.max_generation + 1),
            tmp_seq: AtomicU64::new(0),
            open_files,
            _lock: lock,
        };
        Ok((DiskTier { shared: Arc::new(shared) }, report))
    }

    /// The tier's directory.
    pub fn dir(&self) -> &Path {
        self.shared.layout.root()
    }

    /// The largest object file accepted now, in bytes.
    pub fn max_object(&self) -> u64 {
        self.shared.inner.lock().manager.max_object()
    }

    /// Marks the variant of `key` that `selects` as used in the replacement policy, without
    /// counting a hit (for a copy whose object was being used in another tier); false when
    /// there is none.
    pub fn touch(&self, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> bool {
        let mut inner = self.shared.inner.lock();
        let inner = &mut *inner;
        let Some(ids) = inner.index.get(key) else { return false };
        let Some(id) = ids.iter().find(|id| selects(&inner.entries[*id].meta)).copied() else { return false };
        inner.manager.hit(id);
        true
    }

    /// Finds the newest variant of `key` for which `selects` is true and counts a hit on
    /// it. Memory only.
    pub fn lookup(&self, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> DiskLookup {
        let mut inner = self.shared.inner.lock();
        let inner = &mut *inner;
        let Some(ids) = inner.index.get(key) else { return DiskLookup::Miss };
        for id in ids {
            let entry = &inner.entries[id];
            if selects(&entry.meta) {
                entry.record_hit();
                inner.manager.hit(*id);
                return DiskLookup::Found(Arc::clone(entry));
            }
        }
        DiskLookup::VaryMiss
    }

    /// The stored entry with variant id `id`, if any (no hit is counted). Memory only.
    pub fn entry(&self, id: u64) -> Option<Arc<DiskEntry>> {
        self.shared.inner.lock().entries.get(&id).cloned()
    }

    /// Every stored variant of `key`, newest first (no hit is counted). Memory only.
    pub fn variants(&self, key: &str) -> Vec<Arc<DiskEntry>> {
        let inner = self.shared.inner.lock();
        inner
            .index
            .get(key)
            .map(|ids| ids.iter().map(|id| Arc::clone(&inner.entries[id])).collect())
            .unwrap_or_default()
    }

    /// Takes the next place in the order of writes (see [`WriteTicket`]).
    pub fn ticket(&self) -> WriteTicket {
        WriteTicket(self.shared.next_generation())
    }

    /// Starts writing an object whose body will follow in chunks, in the order of a ticket
    /// taken now. `Err` when admission is paused, the announced `Content-Length` is too
    /// large, or the file cannot be created.
    pub fn begin(&self, meta: Arc<ObjectMeta>) -> Result<DiskWriter, NotStored> {
        self.begin_ticketed(meta, self.ticket())
    }

    /// [`DiskTier::begin`] in the order of `ticket`, taken earlier.
    pub fn begin_ticketed(&self, meta: Arc<ObjectMeta>, ticket: WriteTicket) -> Result<DiskWriter, NotStored> {
        self.shared.admission_open()?;
        let max_object = self.max_object();
        DiskWriter::start(Arc::clone(&self.shared), meta, max_object, ticket.0)
    }

    /// Stores a complete object (blocking; two fsyncs), in the order of a ticket taken now.
    pub fn insert(&self, object: &Object) -> Result<Arc<DiskEntry>, NotStored> {
        self.insert_ticketed(object, self.ticket())
    }

    /// [`DiskTier::insert`] in the order of `ticket`, taken earlier.
    pub fn insert_ticketed(&self, object: &Object, ticket: WriteTicket) -> Result<Arc<DiskEntry>, NotStored> {
        let mut writer = self.begin_ticketed(Arc::clone(&object.meta), ticket)?;
        for chunk in object.body.chunks() {
            writer.write_chunk(chunk)?;
        }
        writer.commit()
    }

    /// Tees an async body to disk: a task reads `body` and a blocking thread writes what
    /// it reads; the object is committed when the body ends cleanly and abandoned when it
    /// fails. Must be called inside a tokio runtime. The handle resolves to the outcome.
    pub fn persist<B>(
        &self,
        meta: Arc<ObjectMeta>,
        body: B,
    ) -> tokio::task::JoinHandle<Result<Arc<DiskEntry>, NotStored>>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Send,
    {
        let tier = self.clone();
        let ticket = self.ticket();
        tokio::spawn(async move {
            // `None` marks a clean end; a closed channel without it, a failed body.
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Option<Bytes>>(16);
            let writer = tokio::task::spawn_blocking(move || {
                let mut writer = tier.begin_ticketed(meta, ticket)?;
                loop {
                    match rx.blocking_recv() {
                        Some(Some(chunk)) => writer.write_chunk(&chunk)?,
                        Some(None) => return writer.commit(),
                        None => return Err(NotStored::Aborted),
                    }
                }
            });
            let mut body = std::pin::pin!(body);
            loop {
                match std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            if tx.send(Some(data)).await.is_err() {
                                break; // the writer gave up
                            }
                        }
                    }
                    Some(Err(_)) => break,
                    None => {
                        let _ = tx.send(None).await;
                        break;
                    }
                }
            }
            drop(tx);
            writer.await.unwrap_or_else(|e| Err(NotStored::Io(format!("disk writer panicked: {e}"))))
        })
    }

    /// Opens `entry`'s body for serving (blocking). Checks the file's header and, unless
    /// already verified (see [`BodyCheck`]), reads the whole body and compares its checksum
    /// before returning, so no byte of a corrupt body is ever handed out; a corrupt object
    /// is dropped from the tier and deleted.
    pub fn open_body(&self, entry: &DiskEntry) -> Result<DiskBody, ReadError> {
        if let Some(body) = self.kept_open(entry) {
            return Ok(body);
        }
        // One opener at a time per entry: a concurrent first serve waits here, then finds
        // the file kept open or the body verified (see `DiskEntry::opening`).
        let _opening = entry.opening.lock();
        if let Some(body) = self.kept_open(entry) {
            return Ok(body);
        }
        let file = match File::open(&entry.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadError::Gone),
            Err(e) => return Err(ReadError::Io(e)),
        };
        let check = |file: &File| -> io::Result<bool> {
            if !entry.has_its_length(file)? || !body::header_matches(file, &entry.header)? {
                return Ok(false);
            }
            if entry.is_verified() && self.shared.config.body_check != BodyCheck::EveryServe {
                return Ok(true);
            }
            let ok = body::verify_body(file, &entry.header)?;
            self.shared.inner.lock().counters.verified_at_read += 1;
            if ok {
                entry.mark_verified();
            }
            Ok(ok)
        };
        match check(&file) {
            Ok(true) => {
                let file = Arc::new(file);
                if self.shared.config.body_check != BodyCheck::EveryServe {
                    entry.keep_open(&file, &self.shared.open_files);
                }
                Ok(DiskBody::new(file, entry.header.body_offset, entry.header.body_len))
            }
            Ok(false) => {
                self.shared.drop_corrupt(entry);
                Err(ReadError::Corrupt)
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.shared.drop_corrupt(entry);
                Err(ReadError::Corrupt)
            }
            Err(e) => Err(ReadError::Io(e)),
        }
    }

    /// The body of `entry` from the file the tier keeps open for it (see
    /// [`DiskConfig::open_files`]), with one `fstat` to check the file still has its length;
    /// `None` when no file is kept (then [`DiskTier::open_body`] opens and checks it), or
    /// when the file was cut short or grown since (the entry is then dropped).
    pub fn kept_open(&self, entry: &DiskEntry) -> Option<DiskBody> {
        if self.shared.config.body_check == BodyCheck::EveryServe {
            return None;
        }
        let body = entry.kept_open()?;
        if !entry.has_its_length(body.file()).unwrap_or(false) {
            // Cut short (or grown) under us: never served again (the next serve is a miss).
            self.shared.drop_corrupt(entry);
            return None;
        }
        Some(body)
    }

    /// [`DiskTier::open_body`] on tokio's blocking pool; a kept-open file is used at once.
    pub async fn open_body_async(&self, entry: Arc<DiskEntry>) -> Result<DiskBody, ReadError> {
        if let Some(body) = self.kept_open(&entry) {
            return Ok(body);
        }
        let tier = self.clone();
        tokio::task::spawn_blocking(move || tier.open_body(&entry))
            .await
            .unwrap_or_else(|e| Err(ReadError::Io(io::Error::other(e))))
    }

    /// Reads `entry` into memory as an [`Object`] (verified), e.g. to promote it to the
    /// memory tier.
    pub fn load(&self, entry: &DiskEntry) -> Result<Object, ReadError> {
        let body = self.open_body(entry)?;
        let bytes = body.read_all().map_err(ReadError::Io)?;
        Ok(Object::new(Arc::clone(&entry.meta), StoredBody::new(vec![bytes])))
    }

    /// Removes every variant of `key`, durably (the directory is fsynced, so a purged object
    /// does not come back after a crash). Returns how many were removed.
    pub fn remove(&self, key: &str) -> usize {
        self.forget(key).finish()
    }

    /// Removes `entry`, durably, if the tier still holds that very copy; a later copy of the
    /// same variant that replaced it stays. Returns whether it was removed.
    pub fn remove_entry(&self, entry: &DiskEntry) -> bool {
        let purge = {
            let mut inner = self.shared.inner.lock();
            let held = inner.entries.get(&entry.id()).is_some_and(|held| held.generation() == entry.generation());
            if !held {
                return false;
            }
            inner.forget(entry.id());
            inner.manager.remove(entry.id());
            inner.counters.removals += 1;
            Purge { paths: vec![entry.path.clone()] }
        };
        purge.finish();
        true
    }

    /// Removes every object whose primary key starts with `prefix`, durably. Walks the whole
    /// index: for administration, not the request path.
    pub fn remove_prefix(&self, prefix: &str) -> usize {
        self.forget_prefix(prefix).finish()
    }

    /// Drops every variant of `key` from the index at once (memory only: no lookup finds
    /// them after this returns) and hands back their files; [`Purge::finish`] deletes them
    /// durably (blocking). For callers on an async thread that must not fsync there.
    pub fn forget(&self, key: &str) -> Purge {
        let ids = self.shared.inner.lock().index.get(key).cloned().unwrap_or_default();
        self.forget_ids(&ids)
    }

    /// [`DiskTier::forget`] for every key starting with `prefix` (walks the index).
    pub fn forget_prefix(&self, prefix: &str) -> Purge {
        let ids: Vec<ObjectId> = {
            let inner = self.shared.inner.lock();
            inner.index.iter().filter(|(k, _)| k.starts_with(prefix)).flat_map(|(_, ids)| ids.iter().copied()).collect()
        };
        self.forget_ids(&ids)
    }

    /// [`DiskTier::forget`] for every object carrying cache tag `tag` (`Surrogate-Key`,
    /// `Cache-Tag`; walks the index).
    pub fn forget_tag(&self, tag: &str) -> Purge {
        let ids: Vec<ObjectId> = {
            let inner = self.shared.inner.lock();
            inner
                .entries
                .iter()
                .filter(|(_, e)| {
                    sluice_http::tags::has_tags(&e.meta.headers)
                        && sluice_http::tags::tags(&e.meta.headers).iter().any(|t| t == tag)
                })
                .map(|(id, _)| *id)
                .collect()
        };
        self.forget_ids(&ids)
    }

    /// [`DiskTier::forget`] for these entries (by variant id).
    pub fn forget_entries(&self, entries: &[Arc<DiskEntry>]) -> Purge {
        let ids: Vec<ObjectId> = entries.iter().map(|e| e.id()).collect();
        self.forget_ids(&ids)
    }

    fn forget_ids(&self, ids: &[ObjectId]) -> Purge {
        let mut inner = self.shared.inner.lock();
        let removed: Vec<Arc<DiskEntry>> = ids.iter().filter_map(|id| inner.forget(*id)).collect();
        for entry in &removed {
            inner.manager.remove(entry.id());
        }
        inner.counters.removals += removed.len() as u64;
        Purge { paths: removed.iter().map(|e| e.path.clone()).collect() }
    }

    /// Current counters and gauges.
    pub fn stats(&self) -> DiskStats {
        let inner = self.shared.inner.lock();
        let m = &inner.manager;
        let c = &inner.counters;
        DiskStats {
            objects: m.entries(),
            bytes: m.bytes(),
            capacity: m.configured().bytes,
            limit_bytes: m.limits().bytes,
            high_water_bytes: m.high().bytes,
            low_water_bytes: m.low().bytes,
            max_entries: m.configured().entries,
            insertions: c.insertions,
            evictions: m.stats().evictions,
            removals: c.removals,
            swept: c.swept,
            rejected_too_large: c.rejected_too_large,
            rejected_full: c.rejected_full,
            full_events: c.full_events,
            write_errors: c.write_errors,
            verified_at_read: c.verified_at_read,
            corrupt_at_read: c.corrupt_at_read,
            admission_paused: inner.paused_until.is_some_and(|t| Instant::now() < t),
            open_files: self.shared.open_files.kept() as u64,
        }
    }
}

#[cfg(test)]
mod tests;
