//! Content management (seed 000's Obj* family): what modules, the admin API and the CLI may
//! do with cached objects. The store issue extends it with fetch, validate, tags and
//! streaming; every method here is cheap and synchronous.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use std::time::{Duration, SystemTime};

/// What the cache knows about one stored variant.
#[derive(Debug, Clone)]
pub struct ObjectInfo {
    /// Primary cache key (normalised absolute URL).
    pub key: String,
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// Body length in bytes.
    pub size: u64,
    /// Current age and freshness lifetime (RFC 9111 §4.2).
    pub age: Duration,
    pub lifetime: Duration,
    /// When the response was received (or last validated).
    pub stored_at: SystemTime,
    /// Times it was served from the cache.
    pub hits: u64,
    /// The request field values it varies on (`Vary`), as `name: value` pairs.
    pub vary: Vec<(String, Option<String>)>,
}

impl ObjectInfo {
    /// True while the object is fresh.
    pub fn is_fresh(&self) -> bool {
        self.lifetime > self.age
    }
}

/// Why a content-management call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheError {
    /// The URL is not absolute (`http://host/path`).
    BadUrl(String),
    /// The object is larger than the cache accepts.
    TooLarge { size: u64, max: u64 },
}

impl std::fmt::Display for CacheError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheError::BadUrl(url) => write!(f, "not an absolute http(s) URL: {url}"),
            CacheError::TooLarge { size, max } => write!(f, "object of {size} bytes exceeds the {max}-byte limit"),
        }
    }
}

impl std::error::Error for CacheError {}

/// Content management over the cache. Implemented by the proxy's store.
pub trait CacheApi: Send + Sync {
    /// Every stored variant of `url`.
    fn query(&self, url: &str) -> Result<Vec<ObjectInfo>, CacheError>;

    /// Removes every stored variant of `url`; returns how many were removed.
    fn delete(&self, url: &str) -> Result<usize, CacheError>;

    /// Removes every object whose key starts with `prefix` (an absolute URL prefix).
    fn delete_prefix(&self, prefix: &str) -> Result<usize, CacheError>;

    /// Makes every stored variant of `url` stale, so the next request validates it.
    fn expire(&self, url: &str) -> Result<usize, CacheError>;

    /// Stores a complete response for `url` (GET, no Vary key), as if fetched now; it is
    /// served until its freshness (from `headers`, RFC 9111) runs out.
    fn inject(&self, url: &str, status: StatusCode, headers: HeaderMap, body: Bytes) -> Result<(), CacheError>;

    /// The stored response for `url` that a request without special headers would get:
    /// status, header fields and the whole body.
    fn read(&self, url: &str) -> Result<Option<(StatusCode, HeaderMap, Bytes)>, CacheError>;
}
