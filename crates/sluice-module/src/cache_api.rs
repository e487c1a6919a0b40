//! Content management (seed 000 §3.2, table 2: the `DR_Obj*` family): what modules, the admin
//! API (`docs/content.md`) and `sluice ctl` may do with cached objects.
//!
//! | seed 000 | here |
//! |---|---|
//! | `ObjQuery` | [`CacheApi::query`] |
//! | `ObjFetch` | [`CacheApi::fetch`] (also seed 002's RPC fetch) |
//! | `ObjValidate` | [`CacheApi::validate`] |
//! | `ObjExpirationSet` | [`CacheApi::expire`], [`CacheApi::set_expiry`] |
//! | `ObjDelete` | [`CacheApi::delete`], [`CacheApi::delete_prefix`], [`CacheApi::delete_tag`] |
//! | `ObjInject`, `ObjInjectStart/Body/Done` | [`CacheApi::inject`], [`CacheApi::inject_start`] + [`Injection`] |
//! | `ObjRead`, `ObjReadStart/Part/Done` | [`CacheApi::read`], [`CacheApi::open`] + [`ObjectReader`] |
//!
//! Objects are named by URL (an absolute http(s) URL, normalised to the cache key), not by
//! the seed's object ids. The synchronous methods are cheap (one store lock) and may be
//! called from any phase; [`CacheApi::fetch`] and [`CacheApi::validate`] talk to an origin
//! and return a `'static` future, which a phase may spawn or a module's async work await.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

pub use crate::cache_read::ObjectReader;

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
    /// Nothing is stored under this key (for operations that need a stored object).
    NotFound(String),
    /// A byte range outside the stored body, or empty.
    BadRange(String),
    /// Another argument is unusable (a status, a header field, an expiry time...).
    Invalid(String),
    /// The origin could not be reached or failed (`fetch`, `validate`).
    Origin(String),
    /// This implementation does not provide the operation (the trait's defaults).
    Unsupported(&'static str),
}

impl std::fmt::Display for CacheError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheError::BadUrl(url) => write!(f, "not an absolute http(s) URL: {url}"),
            CacheError::TooLarge { size, max } => write!(f, "object of {size} bytes exceeds the {max}-byte limit"),
            CacheError::NotFound(key) => write!(f, "nothing stored for {key}"),
            CacheError::BadRange(why) => write!(f, "bad range: {why}"),
            CacheError::Invalid(why) => f.write_str(why),
            CacheError::Origin(why) => write!(f, "origin fetch failed: {why}"),
            CacheError::Unsupported(op) => write!(f, "{op} is not supported by this cache"),
        }
    }
}

impl std::error::Error for CacheError {}

/// The future of an asynchronous content operation. `'static` and `Send`: it owns what it
/// needs, so it may be spawned, or dropped to cancel (a fetch others share goes on).
pub type CacheFuture<T> = Pin<Box<dyn Future<Output = Result<T, CacheError>> + Send + 'static>>;

/// A new expiry for [`CacheApi::set_expiry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Stale now: the next request validates it (same as [`CacheApi::expire`]).
    Now,
    /// Fresh for this long from now, whatever the response's own freshness said.
    In(Duration),
    /// Fresh until this time (stale now if it is past).
    At(SystemTime),
}

/// Whether [`CacheApi::fetch`] returns the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchMode {
    /// Return the body.
    Body,
    /// Prefetch: read the body into the cache (when storable) and return only the head and
    /// the body's size. Resolves when the whole body has arrived.
    Prefetch,
}

/// What [`CacheApi::fetch`] got: the response a proxy client asking for the URL with no
/// special header fields would get, and how the cache produced it.
#[derive(Debug, Clone)]
pub struct FetchResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The `Cache-Status` field value (RFC 9211) the proxy sent, "" when disabled.
    pub cache_status: String,
    /// Squid-style result code: `TCP_MISS`, `TCP_MEM_HIT`, `TCP_REFRESH_UNMODIFIED`...
    pub result: &'static str,
    /// True when the response came from the cache without a full origin fetch.
    pub hit: bool,
    /// Body bytes received (also for a prefetch).
    pub size: u64,
    /// The body; empty for [`FetchMode::Prefetch`].
    pub body: Bytes,
}

/// How a [`CacheApi::validate`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revalidation {
    /// The origin answered 304: the stored object is fresh again (headers updated).
    NotModified,
    /// The origin sent a new response, which replaced the stored one (or removed it when
    /// it may not be stored).
    Replaced,
    /// The origin failed and `stale-if-error` let the stale object stay.
    Failed,
}

/// What [`CacheApi::validate`] did.
#[derive(Debug, Clone)]
pub struct Validated {
    pub outcome: Revalidation,
    /// The origin's status (304 for [`Revalidation::NotModified`]); `None` when it failed.
    pub origin_status: Option<StatusCode>,
    /// The `Cache-Status` field value of the validation, "" when disabled.
    pub cache_status: String,
}

/// A response being pushed into the cache piece by piece (seed 000's `ObjInjectStart`,
/// `ObjInjectBody`, `ObjInjectDone`). Dropping it before [`Injection::finish`] discards
/// everything written: a partial body is never stored.
pub trait Injection: Send {
    /// Appends body bytes. Fails with [`CacheError::TooLarge`] as soon as the body exceeds
    /// the cache's object limit (the injection is then void).
    fn write(&mut self, chunk: Bytes) -> Result<(), CacheError>;

    /// Stores the complete response, replacing what was stored under its key and Vary key,
    /// and returns what was stored.
    fn finish(self: Box<Self>) -> Result<ObjectInfo, CacheError>;
}

fn unsupported<T: Send + 'static>(op: &'static str) -> CacheFuture<T> {
    Box::pin(std::future::ready(Err(CacheError::Unsupported(op))))
}

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

    /// Opens the stored response [`CacheApi::read`] would return, to read it in pieces or a
    /// byte range of it ([`ObjectReader::range`]). `Ok(None)` when nothing is stored. The
    /// default reads the whole body with [`CacheApi::read`].
    fn open(&self, url: &str) -> Result<Option<ObjectReader>, CacheError> {
        Ok(self.read(url)?.map(|(status, headers, body)| ObjectReader::new(status, headers, [body])))
    }

    /// Removes every object tagged `tag` by its `Surrogate-Key` (space-separated) or
    /// `Cache-Tag` (comma-separated) response field; returns how many (0 for a tag no
    /// stored object has).
    fn delete_tag(&self, _tag: &str) -> Result<usize, CacheError> {
        Err(CacheError::Unsupported("delete by tag"))
    }

    /// Sets a new expiry on every stored variant of `url`; returns how many. Freshness is
    /// then this expiry, not the response's own (`Cache-Control` is left as stored). The
    /// default supports [`Expiry::Now`] only, through [`CacheApi::expire`].
    fn set_expiry(&self, url: &str, expiry: Expiry) -> Result<usize, CacheError> {
        match expiry {
            Expiry::Now => self.expire(url),
            _ => Err(CacheError::Unsupported("setting a freshness lifetime")),
        }
    }

    /// Starts pushing a response for `url` whose body arrives in pieces; see [`Injection`].
    /// Validates the URL at once. The default is unsupported.
    fn inject_start(
        &self,
        _url: &str,
        _status: StatusCode,
        _headers: HeaderMap,
    ) -> Result<Box<dyn Injection>, CacheError> {
        Err(CacheError::Unsupported("streamed injection"))
    }

    /// Fetches `url` through the cache, as a proxy client's GET without special header
    /// fields would: a fresh stored response is a hit; otherwise the origin is asked
    /// (conditionally when a stale object is stored), the response stored when storable,
    /// and the fetch shares (collapses with) any fetch of the URL already in flight.
    /// Modules run their phases on it as on any transaction. An origin error status is a
    /// response, not an `Err`; `Err(CacheError::Origin)` means no response at all. The
    /// default is unsupported.
    fn fetch(&self, _url: &str, _mode: FetchMode) -> CacheFuture<FetchResponse> {
        unsupported("fetch")
    }

    /// Revalidates the stored response for `url` now, whatever its freshness: a
    /// conditional GET to the origin (with the stored validators); a 304 freshens the
    /// object, a new response replaces it. `Err(CacheError::NotFound)` when nothing is
    /// stored. The default is unsupported.
    fn validate(&self, _url: &str) -> CacheFuture<Validated> {
        unsupported("validate")
    }
}

/// A cache that stores nothing: queries and reads find nothing, deletions and expiries touch
/// nothing, injections are dropped, and the optional operations are unsupported. For running
/// a module without a proxy (unit tests, benchmarks, tools).
#[derive(Debug, Clone, Copy, Default)]
pub struct EmptyCache;

impl CacheApi for EmptyCache {
    fn query(&self, _url: &str) -> Result<Vec<ObjectInfo>, CacheError> {
        Ok(Vec::new())
    }

    fn delete(&self, _url: &str) -> Result<usize, CacheError> {
        Ok(0)
    }

    fn delete_prefix(&self, _prefix: &str) -> Result<usize, CacheError> {
        Ok(0)
    }

    fn expire(&self, _url: &str) -> Result<usize, CacheError> {
        Ok(0)
    }

    fn inject(&self, _url: &str, _status: StatusCode, _headers: HeaderMap, _body: Bytes) -> Result<(), CacheError> {
        Ok(())
    }

    fn read(&self, _url: &str) -> Result<Option<(StatusCode, HeaderMap, Bytes)>, CacheError> {
        Ok(None)
    }
}
