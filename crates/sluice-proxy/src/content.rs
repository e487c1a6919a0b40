//! Content management ([`CacheApi`]) over the memory store, for modules and the admin API.

use crate::clock::SharedClock;
use crate::meta::{Directives, Received};
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, StatusCode};
use sluice_http::freshness::Heuristic;
use sluice_module::{CacheApi, CacheError, ObjectInfo};
use sluice_store::{MemoryStore, Object, StoredBody};
use std::sync::Arc;
use std::time::Duration;

/// The proxy's [`CacheApi`].
pub struct Content {
    store: Arc<MemoryStore>,
    clock: SharedClock,
    heuristic: Heuristic,
}

impl std::fmt::Debug for Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Content").finish_non_exhaustive()
    }
}

impl Content {
    pub fn new(store: Arc<MemoryStore>, clock: SharedClock, heuristic: Heuristic) -> Self {
        Self { store, clock, heuristic }
    }
}

/// The primary key of an absolute http(s) URL.
pub fn key_of(url: &str) -> Result<String, CacheError> {
    let uri: http::Uri = url.parse().map_err(|_| CacheError::BadUrl(url.to_owned()))?;
    match uri.scheme_str() {
        Some("http" | "https") => sluice_http::key::primary_key(&uri).ok_or_else(|| CacheError::BadUrl(url.to_owned())),
        _ => Err(CacheError::BadUrl(url.to_owned())),
    }
}

fn info(object: &Object, now: std::time::SystemTime) -> ObjectInfo {
    let meta = &object.meta;
    ObjectInfo {
        key: meta.key.clone(),
        status: meta.status,
        headers: meta.headers.clone(),
        size: object.body.len(),
        age: meta.age(now),
        lifetime: meta.lifetime,
        stored_at: meta.response_time,
        hits: object.hits(),
        vary: meta.vary.iter().zip(&meta.vary_key).map(|(name, value)| (name.to_string(), value.clone())).collect(),
    }
}

impl CacheApi for Content {
    fn query(&self, url: &str) -> Result<Vec<ObjectInfo>, CacheError> {
        let now = self.clock.now();
        Ok(self.store.variants(&key_of(url)?).iter().map(|o| info(o, now)).collect())
    }

    fn delete(&self, url: &str) -> Result<usize, CacheError> {
        Ok(self.store.remove(&key_of(url)?))
    }

    fn delete_prefix(&self, prefix: &str) -> Result<usize, CacheError> {
        Ok(self.store.remove_prefix(&key_of(prefix)?))
    }

    fn expire(&self, url: &str) -> Result<usize, CacheError> {
        let variants = self.store.variants(&key_of(url)?);
        for object in &variants {
            let mut meta = (*object.meta).clone();
            meta.lifetime = Duration::ZERO;
            self.store.insert(object.with_meta(Arc::new(meta)));
        }
        Ok(variants.len())
    }

    fn inject(&self, url: &str, status: StatusCode, headers: HeaderMap, body: Bytes) -> Result<(), CacheError> {
        let key = key_of(url)?;
        let now = self.clock.now();
        let size = body.len() as u64;
        let request = HeaderMap::new();
        let received = Received { key, status, headers, request: &request, request_time: now, response_time: now };
        let meta = crate::meta::describe(received, Directives { cdn: false }, &self.heuristic);
        let object = Object::new(Arc::new(meta), StoredBody::new(vec![body]));
        match self.store.insert(object) {
            Some(_) => Ok(()),
            None => Err(CacheError::TooLarge { size, max: self.store.max_object() }),
        }
    }

    fn read(&self, url: &str) -> Result<Option<(StatusCode, HeaderMap, Bytes)>, CacheError> {
        let variants = self.store.variants(&key_of(url)?);
        let chosen = variants.iter().find(|o| o.meta.vary_key.iter().all(Option::is_none)).or(variants.first());
        Ok(chosen.map(|object| {
            let mut body = BytesMut::with_capacity(object.body.len() as usize);
            object.body.chunks().iter().for_each(|c| body.extend_from_slice(c));
            (object.meta.status, object.meta.headers.clone(), body.freeze())
        }))
    }
}
