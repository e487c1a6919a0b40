//! The proxy's cache store: the memory tier over an optional disk tier. Every insertion and
//! every removal of the proxy goes through [`Tiers`], so the two tiers never disagree about
//! what was purged or invalidated.
//!
//! - **Write-through.** [`Tiers::insert`] stores in memory and writes the object to disk on
//!   tokio's blocking pool (never on the request path); the disk copy is visible only once
//!   it is complete and durable (the tier's commit). The memory tier evicts on its own, so
//!   memory holds the hot set and disk holds everything (NICache's "morph").
//! - **Read.** [`Tiers::lookup`] is the memory tier's; on a memory miss
//!   [`Tiers::lookup_disk`] consults the disk index, verifies the body (the tier checks the
//!   checksum of a recovered object before any byte is handed out) and either promotes the
//!   object into memory or hands out the open file to stream.
//! - **Removal.** [`Tiers::remove`], [`Tiers::remove_prefix`] and [`Tiers::remove_tag`]
//!   remove from both tiers at once: the disk index forgets the objects before the call
//!   returns, and the files are deleted (with a directory fsync) on the blocking pool. Disk
//!   writes and promotions in flight for a removed key undo themselves when they finish.
//! - [`Tiers::flush`] waits for the background disk work (graceful shutdown).

use bytes::Bytes;
use parking_lot::Mutex;
use sluice_store::disk::{DiskBody, DiskLookup, DiskStats, DiskTier, ReadError, WriteTicket};
use sluice_store::{Admit, Lookup, MemoryStore, Object, ObjectMeta, StoreStats, StoredBody, Suspended, SweepReport};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// What the disk tier had for a request.
#[derive(Debug)]
pub enum DiskHit {
    /// Found, verified and read into memory (and promoted into the memory tier when it
    /// accepted it).
    Loaded(Arc<Object>),
    /// Found and verified; too large to promote, or not hit often enough yet: stream `body`
    /// from its file.
    Open { meta: Arc<ObjectMeta>, body: DiskBody },
    /// The key is on disk but no variant matches the request.
    VaryMiss,
    /// Nothing usable on disk (including a corrupt entry, now dropped).
    Miss,
}

/// Where a listed variant is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// In the memory tier (and possibly on disk too).
    Memory,
    /// Only in the disk tier (its body is in its file).
    Disk,
    /// Suspended: metadata only, no body anywhere (revalidated or fetched on its next
    /// request).
    Suspended,
}

impl Held {
    /// The name the admin API shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Held::Memory => "memory",
            Held::Disk => "disk",
            Held::Suspended => "suspended",
        }
    }
}

/// One stored variant as a listing shows it (see [`Tiers::listing`]).
#[derive(Debug, Clone)]
pub struct Listed {
    pub meta: Arc<ObjectMeta>,
    /// Body bytes (0 for a suspended entry).
    pub size: u64,
    pub hits: u64,
    pub state: Held,
}

/// Counters of the tiers working together (the tiers count the rest themselves).
#[derive(Debug, Default)]
pub struct TierCounters {
    /// Memory misses answered from disk.
    pub disk_hits: AtomicU64,
    /// Disk hits sent with `sendfile` (see [`crate::zero_copy`]).
    pub zero_copy_hits: AtomicU64,
    /// Objects moved from memory to disk once their disk copy was durable (bodies larger
    /// than the promotion limit).
    pub demotions: AtomicU64,
    /// Disk hits read into memory and promoted into the memory tier.
    pub promotions: AtomicU64,
    /// Disk entries found but not served (corrupt, gone, unreadable).
    pub disk_read_failures: AtomicU64,
    /// Write-through attempts, and those the disk tier did not store (full, too large, I/O).
    pub disk_writes: AtomicU64,
    pub disk_writes_not_stored: AtomicU64,
}

/// Background disk work in flight (writes, file deletions), to wait for. (A removal undoes
/// a write or promotion that started before it through `crate::invalidations`.)
#[derive(Default)]
struct Jobs {
    state: Mutex<JobState>,
    idle: tokio::sync::Notify,
    /// Notified at the end of every purge.
    purge_done: tokio::sync::Notify,
}

#[derive(Default)]
struct JobState {
    running: usize,
    /// File deletions of removals, by number, not finished yet ([`Tiers::purges_settled`]).
    purges: std::collections::BTreeSet<u64>,
    /// The number the next purge gets.
    next_purge: u64,
}

impl Jobs {
    fn started(&self) {
        self.state.lock().running += 1;
    }

    fn ended(&self) {
        let mut state = self.state.lock();
        state.running -= 1;
        if state.running == 0 {
            self.idle.notify_waiters();
        }
    }

    /// A purge starts; returns its number for [`Jobs::purge_ended`].
    fn purge_started(&self) -> u64 {
        let mut state = self.state.lock();
        state.running += 1;
        let number = state.next_purge;
        state.next_purge += 1;
        state.purges.insert(number);
        number
    }

    fn purge_ended(&self, number: u64) {
        self.state.lock().purges.remove(&number);
        self.ended();
        self.purge_done.notify_waiters();
    }
}

/// A copy of an object to write to the disk tier, with its place in the order of writes.
struct DiskWrite {
    disk: DiskTier,
    object: Arc<Object>,
    ticket: WriteTicket,
}

/// The memory tier and, when configured, the disk tier. Safe to share between threads.
pub struct Tiers {
    /// Shared with the background disk writes (see [`Tiers::insert`]).
    memory: Arc<MemoryStore>,
    disk: Option<DiskTier>,
    /// Largest body a disk hit is promoted with.
    promote_max: u64,
    /// Disk hits (since written or recovered) an object needs before it is promoted.
    promote_min_hits: u64,
    jobs: Arc<Jobs>,
    counters: Arc<TierCounters>,
    /// Removals, for the work in flight: fetches ([`Tiers::insert_fetched`]), disk writes and
    /// promotions.
    invalidations: Arc<crate::invalidations::Invalidations>,
    /// What the responses being stored may hold together ([`crate::fill_budget`]).
    fill_budget: Arc<crate::fill_budget::FillBudget>,
    /// Objects on their way to disk that memory did not take, findable until committed.
    writing: Arc<crate::disk_writing::Writing>,
}

impl std::fmt::Debug for Tiers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiers").field("memory", &self.memory).field("disk", &self.disk).finish()
    }
}

/// Runs blocking `job` on tokio's blocking pool, or here when there is no runtime (the
/// file watcher's thread, unit tests).
fn run_blocking(job: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(job);
        }
        Err(_) => job(),
    }
}

impl Tiers {
    /// `memory` alone, or over `disk`; disk hits up to `promote_max` body bytes are promoted.
    /// With a disk tier, objects evicted from memory that have a disk copy are not
    /// suspended (the disk keeps them: the "morph" from memory to disk).
    pub fn new(mut memory: MemoryStore, disk: Option<DiskTier>, promote_max: u64) -> Self {
        if let Some(disk) = &disk {
            let disk = disk.clone();
            // An object leaving memory was in use there: its disk copy becomes the most
            // recently used, and it is not suspended.
            memory.set_kept_elsewhere(Box::new(move |meta: &ObjectMeta| {
                disk.touch(&meta.key, |e| e.vary_key == meta.vary_key)
            }));
        }
        let promote_max = promote_max.min(memory.max_object());
        // By default, room for the memory tier's worth, and for one largest object.
        let filling = memory.stats().capacity.max(disk.as_ref().map_or(0, DiskTier::max_object));
        let memory = Arc::new(memory);
        Self {
            memory,
            disk,
            promote_max,
            promote_min_hits: 1,
            jobs: Arc::default(),
            counters: Arc::default(),
            invalidations: Default::default(),
            fill_budget: crate::fill_budget::FillBudget::new(filling),
            writing: Arc::default(),
        }
    }

    /// Lets the responses being stored hold at most `bytes` together (0 keeps the default:
    /// the larger of the memory tier's capacity and the largest object a tier stores).
    pub fn with_filling_memory(mut self, bytes: u64) -> Self {
        if bytes > 0 {
            self.fill_budget = crate::fill_budget::FillBudget::new(bytes);
        }
        self
    }

    /// What the responses being stored may hold together ([`crate::fill_budget`]).
    pub fn fill_budget(&self) -> &Arc<crate::fill_budget::FillBudget> {
        &self.fill_budget
    }

    /// Promotes a disk object only from its `hits`-th disk hit on (1, the default: on the
    /// first); earlier hits stream it from its file.
    pub fn with_promote_min_hits(mut self, hits: u64) -> Self {
        self.promote_min_hits = hits.max(1);
        self
    }

    /// The memory tier.
    pub fn memory(&self) -> &MemoryStore {
        &self.memory
    }

    /// The disk tier, when configured.
    pub fn disk(&self) -> Option<&DiskTier> {
        self.disk.as_ref()
    }

    /// The largest object either tier accepts, in bytes: what may be stored at all.
    pub fn max_object(&self) -> u64 {
        let disk = self.disk.as_ref().map_or(0, DiskTier::max_object);
        self.memory.max_object().max(disk)
    }

    /// Looks `key` up in the memory tier (see [`MemoryStore::lookup`]).
    pub fn lookup(&self, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> Lookup {
        self.memory.lookup(key, selects)
    }

    /// The suspended entry of `key` matching the request (after a miss in both tiers); counts
    /// a request on it. It has no body: it lends its validators and its history.
    pub fn suspended(&self, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> Option<Arc<Suspended>> {
        self.memory.lookup_suspended(key, selects)
    }

    /// Freshens a suspended entry's metadata after a 304 (it stays suspended).
    pub fn freshen_suspended(&self, meta: Arc<ObjectMeta>) -> bool {
        self.memory.freshen_suspended(meta)
    }

    /// Looks `key` up in the disk tier (after a memory miss) and opens the body, verified
    /// before any byte of it is handed out. A corrupt entry is dropped by the tier and is a
    /// [`DiskHit::Miss`]. Bodies up to the promotion limit of objects hit at least
    /// `promote_min_hits` times on disk are read and promoted into memory
    /// ([`DiskHit::Loaded`]; the memory tier's admission rule still applies); the others are
    /// left to stream ([`DiskHit::Open`]).
    pub async fn lookup_disk(&self, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> DiskHit {
        let Some(disk) = &self.disk else { return DiskHit::Miss };
        if let Some(object) = self.writing.find(key, &selects) {
            // Fetched, and on its way to disk: its write has not committed yet.
            self.counters.disk_hits.fetch_add(1, Relaxed);
            return DiskHit::Loaded(object);
        }
        let mark = self.invalidations.mark();
        let hit = self.open_from_disk(disk, key, selects).await;
        let tags = || match &hit {
            DiskHit::Loaded(object) => sluice_http::tags::tags(&object.meta.headers),
            DiskHit::Open { meta, .. } => sluice_http::tags::tags(&meta.headers),
            DiskHit::VaryMiss | DiskHit::Miss => Vec::new(),
        };
        if self.invalidations.removed_since(mark, key, tags) {
            // Purged while we read it: what we promoted must not outlive the purge (an
            // object stored after the purge stays).
            if let DiskHit::Loaded(promoted) = &hit {
                self.memory.remove_object(promoted);
            }
            return DiskHit::Miss;
        }
        hit
    }

    async fn open_from_disk(&self, disk: &DiskTier, key: &str, selects: impl Fn(&ObjectMeta) -> bool) -> DiskHit {
        let entry = match disk.lookup(key, selects) {
            DiskLookup::Found(entry) => entry,
            DiskLookup::VaryMiss => return DiskHit::VaryMiss,
            DiskLookup::Miss => return DiskHit::Miss,
        };
        let meta = Arc::clone(&entry.meta);
        let hot = entry.hits() >= self.promote_min_hits;
        let body = match disk.open_body_async(entry).await {
            Ok(body) => body,
            Err(e) => {
                self.counters.disk_read_failures.fetch_add(1, Relaxed);
                match e {
                    ReadError::Corrupt => tracing::warn!("disk object for {key} is corrupt: dropped, fetching anew"),
                    e => tracing::info!("disk object for {key} not served: {e}"),
                }
                return DiskHit::Miss;
            }
        };
        self.counters.disk_hits.fetch_add(1, Relaxed);
        if body.len() > self.promote_max || !hot {
            return DiskHit::Open { meta, body };
        }
        let read = tokio::task::spawn_blocking(move || body.read_all()).await;
        let bytes: Bytes = match read {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => {
                self.counters.disk_read_failures.fetch_add(1, Relaxed);
                tracing::info!("disk object for {key} not served: {e}");
                return DiskHit::Miss;
            }
            Err(e) => {
                self.counters.disk_read_failures.fetch_add(1, Relaxed);
                tracing::warn!("disk read for {key} failed: {e}");
                return DiskHit::Miss;
            }
        };
        let body = if bytes.is_empty() { StoredBody::new(Vec::new()) } else { StoredBody::new(vec![bytes]) };
        let object = Object::new(Arc::clone(&meta), body);
        let spare = object.with_meta(meta);
        let promoted = match self.memory.insert(object) {
            Some(stored) => {
                self.counters.promotions.fetch_add(1, Relaxed);
                stored
            }
            None => Arc::new(spare),
        };
        DiskHit::Loaded(promoted)
    }

    /// Now, in the sequence of removals: taken by a fetch before its request goes out, for
    /// [`Tiers::insert_fetched`].
    pub fn invalidation_mark(&self) -> crate::invalidations::Mark {
        self.invalidations.mark()
    }

    /// [`Tiers::insert`] for the body of a fetch that took `since` before its request went
    /// out: not stored (`None`) when its key was removed since, by key, prefix or tag
    /// (`crate::invalidations`).
    pub fn insert_fetched(&self, object: Object, since: crate::invalidations::Mark) -> Option<Arc<Object>> {
        let meta = Arc::clone(&object.meta);
        let tags = || sluice_http::tags::tags(&meta.headers);
        let ((stored, write), now) = self
            .invalidations
            .unless_removed_since(since, &meta.key, tags, |now| (self.insert_in_memory(object, Admit::Judge), now))?;
        // Outside the log's lock (the write may run inline, and checks the log when done):
        // a removal recorded from `now` on undoes it.
        if let Some(write) = write {
            self.write_through(write, now);
        }
        stored
    }

    /// Reads a streamed disk body into an object (not promoted), e.g. to validate it.
    pub async fn read_open(meta: Arc<ObjectMeta>, body: DiskBody) -> Option<Arc<Object>> {
        let bytes = tokio::task::spawn_blocking(move || body.read_all()).await.ok()?.ok()?;
        Some(Arc::new(Object::new(meta, StoredBody::new(vec![bytes]))))
    }

    /// Stores `object` in memory and, when there is a disk tier that accepts its size,
    /// writes it to disk in the background. Returns the stored object, or `None` when
    /// neither tier accepts it.
    pub fn insert(&self, object: Object) -> Option<Arc<Object>> {
        self.insert_with(object, Admit::Judge)
    }

    /// [`Tiers::insert`], asking the memory tier's admission rule or not (`Admit::Bypass`
    /// for content an operator pushes). The disk tier stores what it accepts either way.
    pub fn insert_with(&self, object: Object, admit: Admit) -> Option<Arc<Object>> {
        let (stored, write) = self.insert_in_memory(object, admit);
        if let Some(write) = write {
            self.write_through(write, self.invalidations.mark());
        }
        stored
    }

    /// Stores `object` in memory; returns what was stored and, when the disk tier accepts
    /// its size, the write to make there. Its ticket is taken here, in the order objects
    /// enter memory: a later copy of the key wins on disk too, whichever of the background
    /// writes ends last.
    fn insert_in_memory(&self, object: Object, admit: Admit) -> (Option<Arc<Object>>, Option<DiskWrite>) {
        let Some(disk) = &self.disk else { return (self.memory.insert_with(object, admit), None) };
        if object.body.len() > disk.max_object() {
            return (self.memory.insert_with(object, admit), None);
        }
        let spare = object.with_meta(Arc::clone(&object.meta));
        let stored = self.memory.insert_with(object, admit).unwrap_or_else(|| {
            let spare = Arc::new(spare);
            self.writing.started(&spare);
            spare
        });
        let write = DiskWrite { disk: disk.clone(), object: Arc::clone(&stored), ticket: disk.ticket() };
        (Some(stored), Some(write))
    }

    /// Writes to disk in the background; undone when a removal recorded since `mark`
    /// covers the object (`crate::invalidations`). Not to be called under the removals'
    /// lock: without a runtime the write runs inline.
    fn write_through(&self, write: DiskWrite, mark: crate::invalidations::Mark) {
        let DiskWrite { disk, object, ticket } = write;
        let key = object.meta.key.clone();
        self.jobs.started();
        self.counters.disk_writes.fetch_add(1, Relaxed);
        let (jobs, counters) = (Arc::clone(&self.jobs), Arc::clone(&self.counters));
        let invalidations = Arc::clone(&self.invalidations);
        let memory = Arc::clone(&self.memory);
        let writing = Arc::clone(&self.writing);
        let promote_max = self.promote_max;
        run_blocking(move || {
            let written = match disk.insert_ticketed(&object, ticket) {
                Ok(entry) => {
                    // Evicted from memory before the copy landed: it may have been
                    // suspended meanwhile, which the disk copy makes pointless.
                    memory.drop_suspended(&object.meta);
                    // Morph: a body too large to promote is served from disk (zero-copy)
                    // like every later disk hit on it, and leaves memory to smaller ones.
                    if object.body.len() > promote_max && memory.remove_object(&object) {
                        counters.demotions.fetch_add(1, Relaxed);
                    }
                    Some(entry)
                }
                Err(why) => {
                    counters.disk_writes_not_stored.fetch_add(1, Relaxed);
                    tracing::debug!("{key} not written to disk: {why:?}");
                    None
                }
            };
            let removed = || invalidations.removed_since(mark, &key, || sluice_http::tags::tags(&object.meta.headers));
            if let Some(entry) = written.filter(|_| removed()) {
                // Removed while being written: the removal did not see this copy. Only this
                // copy goes: a copy stored after the removal may have replaced it already.
                disk.remove_entry(&entry);
            }
            writing.ended(&object);
            jobs.ended();
        });
    }

    /// Deletes the files of objects the disk index already forgot, in the background.
    fn purge(&self, purge: sluice_store::disk::Purge) -> usize {
        let n = purge.len();
        if n > 0 {
            let number = self.jobs.purge_started();
            let jobs = Arc::clone(&self.jobs);
            run_blocking(move || {
                purge.finish();
                jobs.purge_ended(number);
            });
        }
        n
    }

    /// Waits until the file deletions of the removals made so far are done: their files
    /// unlinked and their directories synced, so that they do not come back after a crash.
    /// Removals made meanwhile are not waited for.
    pub async fn purges_settled(&self) {
        let upto = self.jobs.state.lock().next_purge;
        loop {
            let done = self.jobs.purge_done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if self.jobs.state.lock().purges.first().is_none_or(|&first| first >= upto) {
                return;
            }
            done.await;
        }
    }

    /// Removes every variant of `key` from both tiers; returns how many there were (the
    /// larger of the two tiers' counts, as they hold copies of the same objects).
    pub fn remove(&self, key: &str) -> usize {
        self.invalidations.record(crate::invalidations::Removed::Key(key.to_owned()));
        self.writing.remove(|meta| meta.key == key);
        let memory = self.memory.remove(key);
        let Some(disk) = &self.disk else { return memory };
        memory.max(self.purge(disk.forget(key)))
    }

    /// Records that `key`'s content is replaced from now on (pushed content): fetches for it
    /// whose requests went out before do not store what they bring, as after a removal.
    pub fn supersede(&self, key: &str) {
        self.invalidations.record(crate::invalidations::Removed::Key(key.to_owned()));
    }

    /// Removes every object whose key starts with `prefix` from both tiers.
    pub fn remove_prefix(&self, prefix: &str) -> usize {
        self.invalidations.record(crate::invalidations::Removed::Prefix(prefix.to_owned()));
        self.writing.remove(|meta| meta.key.starts_with(prefix));
        let memory = self.memory.remove_prefix(prefix);
        let Some(disk) = &self.disk else { return memory };
        memory.max(self.purge(disk.forget_prefix(prefix)))
    }

    /// Removes every object tagged `tag` from both tiers.
    pub fn remove_tag(&self, tag: &str) -> usize {
        self.invalidations.record(crate::invalidations::Removed::Tag(tag.to_owned()));
        self.writing.remove(|meta| sluice_http::tags::tags(&meta.headers).iter().any(|t| t == tag));
        let memory = self.memory.remove_tag(tag);
        let Some(disk) = &self.disk else { return memory };
        memory.max(self.purge(disk.forget_tag(tag)))
    }

    /// Every variant of `key` in either tier, memory first, then disk-only ones, then
    /// suspended ones (metadata only: disk bodies stay in their files).
    pub fn listing(&self, key: &str) -> Vec<Listed> {
        let memory = self.memory.variants(key);
        let mut out: Vec<Listed> = memory
            .iter()
            .map(|o| Listed { meta: Arc::clone(&o.meta), size: o.body.len(), hits: o.hits(), state: Held::Memory })
            .collect();
        for entry in self.disk_only(key, &memory) {
            out.push(Listed {
                meta: Arc::clone(&entry.meta),
                size: entry.body_len(),
                hits: entry.hits(),
                state: Held::Disk,
            });
        }
        for entry in self.memory.suspended_variants(key) {
            if !out.iter().any(|l| l.meta.vary_key == entry.meta.vary_key) {
                out.push(Listed { meta: Arc::clone(&entry.meta), size: 0, hits: entry.hits(), state: Held::Suspended });
            }
        }
        out
    }

    /// True when either tier holds a variant of `key`.
    pub fn is_stored(&self, key: &str) -> bool {
        !self.memory.variants(key).is_empty() || self.disk.as_ref().is_some_and(|d| !d.variants(key).is_empty())
    }

    /// The variants of `key` that are on disk only (not in memory), `pick`ed among their
    /// metadata (all of them: `|_| true`), read from their files (blocking: each body is
    /// read, and verified if it was not yet). Unreadable or corrupt files are skipped (a
    /// corrupt one is dropped by the tier). For content management (reads, expiry changes),
    /// not the request path.
    pub fn load_disk_only(&self, key: &str, pick: impl Fn(&ObjectMeta) -> bool) -> Vec<Object> {
        let Some(disk) = &self.disk else { return Vec::new() };
        let mut loaded = Vec::new();
        for entry in self.disk_only(key, &self.memory.variants(key)).iter().filter(|e| pick(&e.meta)) {
            match disk.load(entry) {
                Ok(object) => loaded.push(object),
                Err(e) => tracing::info!("disk object for {key} not read: {e}"),
            }
        }
        loaded
    }

    /// Metadata of the variants of `key` on disk only (nothing is read).
    pub fn disk_only_metas(&self, key: &str) -> Vec<Arc<ObjectMeta>> {
        self.disk_only(key, &self.memory.variants(key)).iter().map(|e| Arc::clone(&e.meta)).collect()
    }

    /// Gives the disk-only variants of `key` new metadata (`change` of the old) by writing
    /// each again with its body read back (blocking read; the write is in the background, as
    /// every disk write). They stay disk-only: content management does not promote. Returns
    /// how many were rewritten.
    pub fn rewrite_disk_only(&self, key: &str, change: impl Fn(&ObjectMeta) -> ObjectMeta) -> usize {
        let Some(disk) = &self.disk else { return 0 };
        let objects = self.load_disk_only(key, |_| true);
        for object in &objects {
            let meta = Arc::new(change(&object.meta));
            let write =
                DiskWrite { disk: disk.clone(), object: Arc::new(object.with_meta(meta)), ticket: disk.ticket() };
            self.write_through(write, self.invalidations.mark());
        }
        objects.len()
    }

    fn disk_only(&self, key: &str, memory: &[Arc<Object>]) -> Vec<Arc<sluice_store::disk::DiskEntry>> {
        let Some(disk) = &self.disk else { return Vec::new() };
        disk.variants(key).into_iter().filter(|e| !memory.iter().any(|o| o.meta.vary_key == e.meta.vary_key)).collect()
    }

    /// Expiry processing for the disk tier (docs/store.md, "Expiry processing"): removes the
    /// disk objects `rule` judges removable at `now`, counting as hits both the disk entry's
    /// and its memory copy's, so an object kept busy in memory keeps its disk copy too. The
    /// index forgets them at once; their files are deleted in the background. `None` without
    /// a disk tier.
    pub fn sweep_disk(&self, now: std::time::SystemTime, rule: &sluice_store::SweepRule) -> Option<SweepReport> {
        let disk = self.disk.as_ref()?;
        let memory_hits = |meta: &ObjectMeta| -> u64 {
            self.memory.variants(&meta.key).iter().filter(|o| o.meta.vary_key == meta.vary_key).map(|o| o.hits()).sum()
        };
        let (report, purge) = disk.sweep(now, rule, memory_hits);
        self.purge(purge);
        Some(report)
    }

    /// Every variant of `key` in the memory tier (see [`MemoryStore::variants`]).
    pub fn variants(&self, key: &str) -> Vec<Arc<Object>> {
        self.memory.variants(key)
    }

    /// Objects tagged `tag` in the memory tier.
    pub fn tagged(&self, tag: &str) -> usize {
        self.memory.tagged(tag)
    }

    /// The memory tier's counters.
    pub fn stats(&self) -> StoreStats {
        self.memory.stats()
    }

    /// The disk tier's counters, when there is one.
    pub fn disk_stats(&self) -> Option<DiskStats> {
        self.disk.as_ref().map(DiskTier::stats)
    }

    /// Counters of the tiers working together.
    pub fn counters(&self) -> &TierCounters {
        &self.counters
    }

    /// Background disk work (writes, file deletions) not finished yet.
    pub fn pending_disk_jobs(&self) -> usize {
        self.jobs.state.lock().running
    }

    /// Waits until the background disk work started so far is done (graceful shutdown:
    /// what was stored is on disk for the next start).
    pub async fn flush(&self) {
        loop {
            let idle = self.jobs.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.jobs.state.lock().running == 0 {
                return;
            }
            idle.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_store::disk::WaterMarks;

    fn object(key: &str, body: &'static [u8]) -> Object {
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let meta = ObjectMeta {
            key: key.to_owned(),
            status: http::StatusCode::OK,
            headers: http::HeaderMap::new(),
            vary: Vec::new(),
            vary_key: Default::default(),
            request_time: now,
            response_time: now,
            initial_age: std::time::Duration::ZERO,
            lifetime: std::time::Duration::from_secs(60),
            lifetime_source: sluice_http::freshness::LifetimeSource::MaxAge,
            cc: Default::default(),
        };
        Object::new(Arc::new(meta), StoredBody::new(vec![Bytes::from_static(body)]))
    }

    fn tiers(dir: &std::path::Path) -> Tiers {
        let memory = MemoryStore::new(1 << 20, 1 << 20, crate::policy::build("lru", 1 << 20).unwrap());
        let policy = crate::policy::build("lru", 1 << 24).unwrap();
        let (disk, _) = DiskTier::open(dir, 1 << 24, 1000, policy, WaterMarks::default()).unwrap();
        Tiers::new(memory, Some(disk), 1 << 20)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_removal_can_be_waited_for_until_its_files_are_gone_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let tiers = tiers(dir.path());
        for i in 0..20 {
            tiers.insert(object(&format!("p/{i}"), b"body"));
        }
        tiers.flush().await;
        let files =
            |dir: &std::path::Path| walk(dir).into_iter().filter(|p| p.extension() == Some("obj".as_ref())).count();
        assert_eq!(files(dir.path()), 20);
        assert_eq!(tiers.remove_prefix("p/"), 20);
        tiers.purges_settled().await;
        assert_eq!(files(dir.path()), 0, "unlinked (and their directories synced) before it returns");
        tiers.purges_settled().await;
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
        out
    }

    #[test]
    fn a_fetched_object_is_written_through_unless_removed_since_its_fetch_began() {
        // No runtime: the disk write runs inline, right after the check under the log's lock.
        let dir = tempfile::tempdir().unwrap();
        let tiers = tiers(dir.path());
        let before = tiers.invalidation_mark();
        assert!(tiers.insert_fetched(object("f/kept", b"body"), before).is_some());
        assert!(tiers.disk_stats().is_some_and(|s| s.objects == 1), "written through");
        let before = tiers.invalidation_mark();
        tiers.remove("f/gone");
        assert!(tiers.insert_fetched(object("f/gone", b"body"), before).is_none(), "removed meanwhile");
        assert!(tiers.disk_stats().is_some_and(|s| s.objects == 1), "not written");
    }

    #[test]
    fn insert_writes_through_and_removals_reach_both_tiers() {
        // No runtime: disk work runs inline, so its effects are visible at once.
        let dir = tempfile::tempdir().unwrap();
        let tiers = tiers(dir.path());
        tiers.insert(object("a", b"alpha"));
        tiers.insert(object("p/1", b"one"));
        tiers.insert(object("p/2", b"two"));
        let disk = tiers.disk().unwrap();
        assert_eq!(disk.stats().objects, 3);
        assert_eq!(tiers.stats().objects, 3);
        assert_eq!(tiers.remove("a"), 1);
        assert_eq!(tiers.remove_prefix("p/"), 2);
        assert_eq!((disk.stats().objects, tiers.stats().objects), (0, 0));
        let mut tagged = object("t", b"tagged");
        let mut meta = (*tagged.meta).clone();
        meta.headers.insert("cache-tag", http::HeaderValue::from_static("red, blue"));
        tagged = Object::new(Arc::new(meta), tagged.body.clone());
        tiers.insert(tagged);
        tiers.insert(object("u", b"untagged"));
        assert_eq!(tiers.remove_tag("blue"), 1);
        assert_eq!((disk.stats().objects, tiers.stats().objects), (1, 1));
        assert!(disk.variants("t").is_empty());
        assert_eq!(tiers.pending_disk_jobs(), 0);
    }

    #[test]
    fn a_write_undone_by_a_removal_leaves_the_copy_stored_after_the_removal() {
        // The first copy's background write is held inside the disk tier (its body's write
        // waits) while the key is removed and a second copy is stored and written; then it
        // is let go. Whatever order the writes end in, the second copy must stay on disk.
        let dir = tempfile::tempdir().unwrap();
        let (inside_tx, inside) = std::sync::mpsc::channel::<()>();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let (inside_tx, release_rx) = (Mutex::new(Some(inside_tx)), Mutex::new(release_rx));
        let mut config = sluice_store::disk::DiskConfig::new(1 << 24, 1000);
        config.write_hook = Some(Arc::new(move |len| {
            if len == 5000 {
                if let Some(tx) = inside_tx.lock().take() {
                    tx.send(()).unwrap();
                    release_rx.lock().recv().unwrap();
                }
            }
            Ok(())
        }));
        let (disk, _) = DiskTier::open_with(dir.path(), config, crate::policy::build("lru", 1 << 24).unwrap()).unwrap();
        let memory = MemoryStore::new(1 << 20, 1 << 20, crate::policy::build("lru", 1 << 20).unwrap());
        let tiers = Tiers::new(memory, Some(disk.clone()), 1 << 20);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();

        // In the runtime's context the write goes to its blocking pool (and is held there)...
        runtime.block_on(async { tiers.insert(object("k", &[b'1'; 5000])) });
        inside.recv().unwrap();
        assert_eq!(tiers.remove("k"), 1);
        // ... outside it, the next write runs inline: committed before the first one ends.
        tiers.insert(object("k", b"second"));
        assert_eq!(disk.variants("k")[0].body_len(), 6);
        release.send(()).unwrap();
        runtime.block_on(tiers.flush());

        let on_disk = disk.variants("k");
        assert_eq!(on_disk.len(), 1, "the second copy stays on disk");
        assert_eq!(on_disk[0].body_len(), 6);
        let Lookup::Found(in_memory) = tiers.lookup("k", |_| true) else { panic!("the second copy is in memory") };
        assert_eq!(in_memory.body.len(), 6);
        let files = |dir: &std::path::Path| -> usize {
            let mut stack = vec![dir.join("objects")];
            let mut n = 0;
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
                    if entry.file_type().unwrap().is_dir() {
                        stack.push(entry.path())
                    } else {
                        n += 1
                    }
                }
            }
            n
        };
        assert_eq!(files(dir.path()), 1, "the first copy's file is gone");
    }

    #[test]
    fn objects_with_a_disk_copy_are_not_suspended_but_others_are() {
        let dir = tempfile::tempdir().unwrap();
        let with_etag = |key: &str| {
            let o = object(key, &[b'x'; 4000]);
            let mut meta = (*o.meta).clone();
            meta.headers.insert(http::header::ETAG, http::HeaderValue::from_static("\"v1\""));
            Object::new(Arc::new(meta), o.body.clone())
        };
        // Room for one object and a suspended entry, not two objects.
        let capacity = with_etag("a").footprint() * 3 / 2;
        let memory =
            MemoryStore::new(capacity, capacity, crate::policy::build("lru", capacity).unwrap()).with_suspend(10);
        let policy = crate::policy::build("lru", 1 << 24).unwrap();
        let (disk, _) = DiskTier::open(dir.path(), 1 << 24, 1000, policy, WaterMarks::default()).unwrap();
        let tiers = Tiers::new(memory, Some(disk), 1 << 20);
        // No runtime: the write-through runs inline, so "a" is on disk when evicted.
        tiers.insert(with_etag("a"));
        tiers.insert(with_etag("b"));
        assert_eq!(tiers.stats().evictions, 1);
        assert_eq!(tiers.stats().suspended, 0, "the disk keeps a copy: nothing to suspend");
        tiers.disk().unwrap().remove("b");
        tiers.insert(with_etag("c"));
        assert_eq!(tiers.stats().suspended, 1, "b had no disk copy left");
        assert_eq!(tiers.listing("b")[0].state, Held::Suspended);
        assert!(tiers.suspended("b", |_| true).is_some());
        assert_eq!(tiers.remove("b"), 1);
        assert_eq!(tiers.stats().suspended, 0);
    }

    #[tokio::test]
    async fn a_disk_hit_is_promoted_and_a_large_one_left_to_stream() {
        let dir = tempfile::tempdir().unwrap();
        let mut tiers = tiers(dir.path());
        tiers.insert(object("small", b"tiny body"));
        tiers.insert(object("large", b"a body longer than the promotion limit"));
        tiers.flush().await;
        tiers.memory.remove("small");
        tiers.memory.remove("large");
        tiers.promote_max = 16;
        match tiers.lookup_disk("small", |_| true).await {
            DiskHit::Loaded(o) => assert_eq!(o.body.chunks().concat(), b"tiny body"),
            other => panic!("{other:?}"),
        }
        assert_eq!(tiers.stats().objects, 1, "promoted");
        match tiers.lookup_disk("large", |_| true).await {
            DiskHit::Open { body, .. } => assert_eq!(body.len(), 38),
            other => panic!("{other:?}"),
        }
        assert!(matches!(tiers.lookup_disk("large", |_| false).await, DiskHit::VaryMiss));
        assert!(matches!(tiers.lookup_disk("none", |_| true).await, DiskHit::Miss));
        assert_eq!(tiers.counters().promotions.load(Relaxed), 1);
    }
}
