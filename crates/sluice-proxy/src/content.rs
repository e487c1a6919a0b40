//! Content management ([`CacheApi`]) over the store (memory and disk tiers: queries list
//! both, reads and expiry changes of disk-only objects read their files back, deletions
//! remove disk copies too), for modules, the admin API
//! (`admin_content.rs`) and `sluice ctl`. Fetch and validate run through the proxy's own
//! cache path (`content_fetch.rs`).

use crate::clock::SharedClock;
use crate::content_fetch::{self, Purpose};
use crate::hit_for_pass::HitForPass;
use crate::meta::{Directives, Received};
use crate::state::State;
use crate::tiers::{Held, Tiers};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use parking_lot::RwLock;
use sluice_http::freshness::Heuristic;
use sluice_module::{
    CacheApi, CacheError, CacheFuture, Expiry, FetchMode, FetchResponse, Injection, ObjectInfo, ObjectReader, Validated,
};
use sluice_store::{Object, ObjectMeta, StoredBody};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

/// The proxy's [`CacheApi`].
pub struct Content {
    store: Arc<Tiers>,
    clock: SharedClock,
    /// The proxy's hit-for-pass entries (shared by every generation): a key stored or
    /// deleted on purpose stops being one.
    hit_for_pass: Arc<HitForPass>,
    /// Heuristic freshness until a generation is attached (then the generation's).
    heuristic: Heuristic,
    /// The running proxy's current generation, for fetch, validate and heuristic
    /// freshness; set by [`Content::attach`] once the state is shared (the state
    /// owns this object, hence the weak reference).
    proxy: RwLock<Weak<State>>,
}

impl std::fmt::Debug for Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Content").finish_non_exhaustive()
    }
}

impl Content {
    pub fn new(store: Arc<Tiers>, clock: SharedClock, hit_for_pass: Arc<HitForPass>, heuristic: Heuristic) -> Self {
        Self { store, clock, hit_for_pass, heuristic, proxy: RwLock::new(Weak::new()) }
    }

    /// Connects this object to the running proxy's current generation (called by `start`
    /// and by each configuration reload). Before that, `fetch` and `validate` fail with
    /// `Unsupported`; everything else works.
    pub fn attach(&self, state: &Arc<State>) {
        *self.proxy.write() = Arc::downgrade(state);
    }

    fn proxy(&self) -> Option<Arc<State>> {
        self.proxy.read().upgrade()
    }

    fn heuristic(&self) -> Heuristic {
        self.proxy().map_or(self.heuristic, |state| state.heuristic)
    }

    /// The key stops being a hit-for-pass (it is stored, or deleted, on purpose).
    fn forget_pass(&self, key: &str) {
        self.hit_for_pass.forget(key);
    }

    /// The stored variant a request without special header fields selects: the one with
    /// no Vary values, else the newest; from the memory tier, else read from the disk tier
    /// (blocking read of the body, which is not promoted).
    fn chosen(&self, url: &str) -> Result<Option<Arc<Object>>, CacheError> {
        let key = key_of(url)?;
        let variants = self.store.variants(&key);
        if let Some(i) = preferred(variants.iter().map(|o| &*o.meta)) {
            return Ok(Some(Arc::clone(&variants[i])));
        }
        // Only the chosen disk-only variant is read back.
        let on_disk = self.store.disk_only_metas(&key);
        let Some(i) = preferred(on_disk.iter().map(|m| &**m)) else { return Ok(None) };
        let chosen = &on_disk[i];
        let loaded = self.store.load_disk_only(&key, |m| m.vary_key == chosen.vary_key);
        Ok(loaded.into_iter().next().map(Arc::new))
    }

    fn meta_for(&self, url: &str, status: StatusCode, headers: HeaderMap) -> Result<ObjectMeta, CacheError> {
        let key = key_of(url)?;
        if status.is_informational() {
            return Err(CacheError::Invalid(format!("status {} cannot be stored", status.as_u16())));
        }
        let now = self.clock.now();
        let request = HeaderMap::new();
        let received = Received { key, status, headers, request: &request, request_time: now, response_time: now };
        Ok(crate::meta::describe(received, Directives::default(), &self.heuristic()))
    }
}

/// Which of a key's variants (newest first) a request without special header fields selects:
/// the one with no Vary values, else the newest.
fn preferred<'a>(metas: impl Iterator<Item = &'a ObjectMeta> + Clone) -> Option<usize> {
    let plain = metas.clone().position(|m| m.vary_key.iter().all(Option::is_none));
    plain.or_else(|| metas.clone().next().map(|_| 0))
}

/// The primary key of an absolute http(s) URL.
pub fn key_of(url: &str) -> Result<String, CacheError> {
    let uri: http::Uri = url.parse().map_err(|_| CacheError::BadUrl(url.to_owned()))?;
    match uri.scheme_str() {
        Some("http" | "https") => sluice_http::key::primary_key(&uri).ok_or_else(|| CacheError::BadUrl(url.to_owned())),
        _ => Err(CacheError::BadUrl(url.to_owned())),
    }
}

fn info(object: &Object, now: SystemTime) -> ObjectInfo {
    info_of(&object.meta, object.body.len(), object.hits(), now)
}

pub(crate) fn info_of(meta: &ObjectMeta, size: u64, hits: u64, now: SystemTime) -> ObjectInfo {
    ObjectInfo {
        key: meta.key.clone(),
        status: meta.status,
        headers: meta.headers.clone(),
        size,
        age: meta.age(now),
        lifetime: meta.lifetime,
        stored_at: meta.response_time,
        hits,
        vary: meta.vary.iter().zip(&meta.vary_key).map(|(name, value)| (name.to_string(), value.clone())).collect(),
    }
}

impl CacheApi for Content {
    fn query(&self, url: &str) -> Result<Vec<ObjectInfo>, CacheError> {
        let now = self.clock.now();
        // Suspended entries have no body to read: modules see stored objects only (the
        // admin API lists them with their state).
        let listing = self.store.listing(&key_of(url)?);
        Ok(listing
            .iter()
            .filter(|l| l.state != Held::Suspended)
            .map(|l| info_of(&l.meta, l.size, l.hits, now))
            .collect())
    }

    fn delete(&self, url: &str) -> Result<usize, CacheError> {
        let key = key_of(url)?;
        self.forget_pass(&key);
        Ok(self.store.remove(&key))
    }

    fn delete_prefix(&self, prefix: &str) -> Result<usize, CacheError> {
        Ok(self.store.remove_prefix(&key_of(prefix)?))
    }

    fn delete_tag(&self, tag: &str) -> Result<usize, CacheError> {
        Ok(self.store.remove_tag(tag))
    }

    fn expire(&self, url: &str) -> Result<usize, CacheError> {
        self.set_expiry(url, Expiry::Now)
    }

    fn set_expiry(&self, url: &str, expiry: Expiry) -> Result<usize, CacheError> {
        let variants = self.store.variants(&key_of(url)?);
        let now = self.clock.now();
        let fresh_for = match expiry {
            Expiry::Now => Duration::ZERO,
            Expiry::In(d) => d,
            Expiry::At(t) => t.duration_since(now).unwrap_or(Duration::ZERO),
        };
        // Freshness is `lifetime > age`: the object stays fresh `fresh_for` from now.
        let change = |old: &ObjectMeta| {
            let mut meta = old.clone();
            meta.lifetime = if fresh_for.is_zero() { Duration::ZERO } else { meta.age(now) + fresh_for };
            meta
        };
        for object in &variants {
            self.store.insert(object.with_meta(Arc::new(change(&object.meta))));
        }
        // Disk-only variants are written again with the new metadata (files are immutable).
        Ok(variants.len() + self.store.rewrite_disk_only(&key_of(url)?, change))
    }

    fn inject(&self, url: &str, status: StatusCode, headers: HeaderMap, body: Bytes) -> Result<(), CacheError> {
        let mut injection = self.inject_start(url, status, headers)?;
        injection.write(body)?;
        injection.finish().map(|_| ())
    }

    fn inject_start(
        &self,
        url: &str,
        status: StatusCode,
        headers: HeaderMap,
    ) -> Result<Box<dyn Injection>, CacheError> {
        let meta = self.meta_for(url, status, headers)?;
        Ok(Box::new(Pushing {
            store: Arc::clone(&self.store),
            clock: Arc::clone(&self.clock),
            hit_for_pass: Arc::clone(&self.hit_for_pass),
            meta,
            chunks: Vec::new(),
            size: 0,
        }))
    }

    fn read(&self, url: &str) -> Result<Option<(StatusCode, HeaderMap, Bytes)>, CacheError> {
        Ok(self.open(url)?.map(|reader| (reader.status, reader.headers.clone(), reader.read_to_end())))
    }

    fn open(&self, url: &str) -> Result<Option<ObjectReader>, CacheError> {
        Ok(self.chosen(url)?.map(|object| {
            ObjectReader::new(object.meta.status, object.meta.headers.clone(), object.body.chunks().iter().cloned())
        }))
    }

    fn fetch(&self, url: &str, mode: FetchMode) -> CacheFuture<FetchResponse> {
        let Some(state) = self.proxy() else {
            return Box::pin(std::future::ready(Err(CacheError::Unsupported("fetch before the proxy started"))));
        };
        let url = url.to_owned();
        Box::pin(async move {
            let fetched = content_fetch::fetch(&state, &url, Purpose::Fetch).await?;
            content_fetch::into_fetch_response(fetched, mode).await
        })
    }

    fn validate(&self, url: &str) -> CacheFuture<Validated> {
        let Some(state) = self.proxy() else {
            return Box::pin(std::future::ready(Err(CacheError::Unsupported("validate before the proxy started"))));
        };
        let url = url.to_owned();
        Box::pin(async move {
            let fetched = content_fetch::fetch(&state, &url, Purpose::Revalidate).await?;
            let validated = content_fetch::revalidation(&fetched);
            // Read the body so a replacement is stored before this resolves.
            let _ = content_fetch::into_fetch_response(fetched, FetchMode::Prefetch).await;
            validated
        })
    }
}

/// A response being pushed in pieces.
struct Pushing {
    store: Arc<Tiers>,
    clock: SharedClock,
    hit_for_pass: Arc<HitForPass>,
    meta: ObjectMeta,
    chunks: Vec<Bytes>,
    size: u64,
}

impl Injection for Pushing {
    fn write(&mut self, chunk: Bytes) -> Result<(), CacheError> {
        self.size += chunk.len() as u64;
        let max = self.store.max_object();
        if self.size > max {
            self.chunks.clear();
            return Err(CacheError::TooLarge { size: self.size, max });
        }
        if !chunk.is_empty() {
            self.chunks.push(chunk);
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<ObjectInfo, CacheError> {
        let Pushing { store, clock, hit_for_pass, mut meta, chunks, size } = *self;
        let max = store.max_object();
        if size > max {
            return Err(CacheError::TooLarge { size, max });
        }
        meta.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
        hit_for_pass.forget(&meta.key);
        // A fill already on its way from the origin must not overwrite the push when it ends.
        store.supersede(&meta.key);
        let object = Object::new(Arc::new(meta), StoredBody::new(chunks));
        let footprint = object.footprint();
        match store.insert_with(object, sluice_store::Admit::Bypass) {
            Some(stored) => Ok(info(&stored, clock.now())),
            None => Err(CacheError::TooLarge { size: footprint, max }),
        }
    }
}
