//! An in-memory `CacheApi` double that records every call.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use sluice_module::{CacheApi, CacheError, CacheFuture, ObjectInfo, Revalidation, Validated};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Stored objects by URL, and a log of calls (`"op url"`).
#[derive(Default)]
pub struct MemCache {
    pub objects: Mutex<BTreeMap<String, (StatusCode, HeaderMap, Bytes, bool)>>,
    pub calls: Mutex<Vec<String>>,
}

impl MemCache {
    /// A cache holding a fresh `200` for each of `urls`.
    pub fn with(urls: &[&str]) -> Self {
        let cache = Self::default();
        for url in urls {
            cache
                .objects
                .lock()
                .unwrap()
                .insert(url.to_string(), (StatusCode::OK, HeaderMap::new(), Bytes::from_static(b"stored"), true));
        }
        cache
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, op: &str, url: &str) -> Result<(), CacheError> {
        self.calls.lock().unwrap().push(format!("{op} {url}"));
        if url.starts_with("http://") || url.starts_with("https://") {
            Ok(())
        } else {
            Err(CacheError::BadUrl(url.to_string()))
        }
    }
}

impl CacheApi for MemCache {
    fn query(&self, url: &str) -> Result<Vec<ObjectInfo>, CacheError> {
        self.record("query", url)?;
        Ok(self
            .objects
            .lock()
            .unwrap()
            .get(url)
            .map(|(status, headers, body, fresh)| ObjectInfo {
                key: url.to_string(),
                status: *status,
                headers: headers.clone(),
                size: body.len() as u64,
                age: Duration::from_secs(5),
                lifetime: Duration::from_secs(if *fresh { 60 } else { 0 }),
                stored_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
                hits: 3,
                vary: Vec::new(),
            })
            .into_iter()
            .collect())
    }

    fn delete(&self, url: &str) -> Result<usize, CacheError> {
        self.record("delete", url)?;
        Ok(usize::from(self.objects.lock().unwrap().remove(url).is_some()))
    }

    fn delete_prefix(&self, prefix: &str) -> Result<usize, CacheError> {
        self.record("delete_prefix", prefix)?;
        let mut objects = self.objects.lock().unwrap();
        let before = objects.len();
        objects.retain(|url, _| !url.starts_with(prefix));
        Ok(before - objects.len())
    }

    fn delete_tag(&self, tag: &str) -> Result<usize, CacheError> {
        self.calls.lock().unwrap().push(format!("delete_tag {tag}"));
        let mut objects = self.objects.lock().unwrap();
        let before = objects.len();
        objects.retain(|_, (_, headers, _, _)| {
            !headers.get("surrogate-key").and_then(|v| v.to_str().ok()).is_some_and(|v| v.split(' ').any(|t| t == tag))
        });
        Ok(before - objects.len())
    }

    fn expire(&self, url: &str) -> Result<usize, CacheError> {
        self.record("expire", url)?;
        Ok(self.objects.lock().unwrap().get_mut(url).map(|object| object.3 = false).map_or(0, |()| 1))
    }

    fn inject(&self, url: &str, status: StatusCode, headers: HeaderMap, body: Bytes) -> Result<(), CacheError> {
        self.record("inject", url)?;
        self.objects.lock().unwrap().insert(url.to_string(), (status, headers, body, true));
        Ok(())
    }

    /// Records the call when made; the future says the object was not modified.
    fn validate(&self, url: &str) -> CacheFuture<Validated> {
        let recorded = self.record("validate", url);
        Box::pin(async move {
            recorded?;
            Ok(Validated {
                outcome: Revalidation::NotModified,
                origin_status: Some(StatusCode::NOT_MODIFIED),
                cache_status: String::new(),
            })
        })
    }

    fn read(&self, url: &str) -> Result<Option<(StatusCode, HeaderMap, Bytes)>, CacheError> {
        self.record("read", url)?;
        Ok(self.objects.lock().unwrap().get(url).map(|(s, h, b, _)| (*s, h.clone(), b.clone())))
    }
}
