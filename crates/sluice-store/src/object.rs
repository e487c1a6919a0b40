//! Cache objects: a stored response's metadata and its body, independent of the data source.

use crate::StoredBody;
use http::header::{HeaderMap, HeaderName};
use http::StatusCode;
use sluice_http::freshness::LifetimeSource;
use sluice_http::vary::VaryKey;
use sluice_http::CacheControl;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How many fields a response served from the cache typically gains on its way out: `Age`,
/// `Cache-Status`, `Via`, `Accept-Ranges`, and a few from modules.
pub const SERVE_HEADROOM: usize = 8;

/// `headers` as they should be stored in [`ObjectMeta::headers`]: indexed with room for
/// [`SERVE_HEADROOM`] more fields, so that a hit's copy takes them without being indexed
/// again (about 800 instructions per hit), and without spare room for the fields themselves
/// (a copy would not keep it, and it would cost each stored object about 800 bytes).
pub fn stored_headers(mut headers: HeaderMap) -> HeaderMap {
    headers.reserve(SERVE_HEADROOM);
    // A clone has the original's index size and exactly its fields.
    headers.clone()
}

/// What the cache knows about a stored response, computed once when it is stored (or
/// freshened by a 304), so a hit does no header parsing.
#[derive(Debug, Clone)]
pub struct ObjectMeta {
    /// Primary cache key (see [`sluice_http::key::primary_key`]).
    pub key: String,
    pub status: StatusCode,
    /// Response header fields as stored (hop-by-hop fields removed), best built with
    /// [`stored_headers`].
    pub headers: HeaderMap,
    /// The request fields the response varies on (empty without `Vary`).
    pub vary: Vec<HeaderName>,
    /// The values of those fields in the request that fetched the response.
    pub vary_key: VaryKey,
    /// When the request that fetched (or last validated) the response was sent.
    pub request_time: SystemTime,
    /// When its response arrived.
    pub response_time: SystemTime,
    /// `corrected_initial_age` (RFC 9111 §4.2.3).
    pub initial_age: Duration,
    /// Freshness lifetime (RFC 9111 §4.2.1) and where it came from.
    pub lifetime: Duration,
    pub lifetime_source: LifetimeSource,
    /// The effective response directives.
    pub cc: CacheControl,
}

impl ObjectMeta {
    /// A `200 OK` with `headers`, no `Vary`, received at the Unix epoch with no age, fresh for
    /// `lifetime` (from `max-age`): the plain object tests, examples and tools start from.
    pub fn ok(key: &str, headers: HeaderMap, lifetime: Duration) -> Self {
        Self {
            key: key.to_owned(),
            status: StatusCode::OK,
            headers,
            vary: Vec::new(),
            vary_key: Vec::new(),
            request_time: SystemTime::UNIX_EPOCH,
            response_time: SystemTime::UNIX_EPOCH,
            initial_age: Duration::ZERO,
            lifetime,
            lifetime_source: LifetimeSource::MaxAge,
            cc: CacheControl::default(),
        }
    }

    /// Current age at `now` (RFC 9111 §4.2.3).
    pub fn age(&self, now: SystemTime) -> Duration {
        sluice_http::age::current_age(self.initial_age, self.response_time, now)
    }

    /// Approximate bytes this metadata occupies, for resource accounting.
    pub fn footprint(&self) -> u64 {
        let headers: usize = self.headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 32).sum();
        (std::mem::size_of::<Self>() + self.key.len() + headers) as u64
    }
}

/// A complete stored response. `meta` and `body` stay as they were made for the object's
/// life (new metadata makes a new object: [`Object::with_meta`]); its footprint is computed
/// from them once.
#[derive(Debug)]
pub struct Object {
    pub meta: Arc<ObjectMeta>,
    pub body: StoredBody,
    hits: AtomicU64,
    /// See [`Object::footprint`]; asked on every hit, so not summed over the fields each time.
    footprint: u64,
}

impl Object {
    /// A stored response with no hits yet.
    pub fn new(meta: Arc<ObjectMeta>, body: StoredBody) -> Self {
        Self::with_hits(meta, body, 0)
    }

    /// The same body with new metadata (after a 304 freshened it), keeping the hit count.
    pub fn with_meta(&self, meta: Arc<ObjectMeta>) -> Self {
        Self::with_hits(meta, self.body.clone(), self.hits())
    }

    fn with_hits(meta: Arc<ObjectMeta>, body: StoredBody, hits: u64) -> Self {
        let footprint = body.len() + meta.footprint();
        Self { meta, body, hits: AtomicU64::new(hits), footprint }
    }

    /// Counts one hit.
    pub fn record_hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` hits carried over from an earlier copy (a suspended entry).
    pub fn add_hits(&self, n: u64) {
        self.hits.fetch_add(n, Ordering::Relaxed);
    }

    /// Hits since stored.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Bytes charged to the tier for this object: body plus metadata.
    pub fn footprint(&self) -> u64 {
        self.footprint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderValue, AGE, CONTENT_TYPE, ETAG};

    #[test]
    fn stored_headers_and_their_copies_have_room_for_the_serving_fields() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        headers.insert(ETAG, HeaderValue::from_static("\"1\""));
        let stored = stored_headers(headers.clone());
        assert_eq!(stored, headers, "the same fields");
        let copy = stored.clone();
        assert!(copy.capacity() >= headers.len() + SERVE_HEADROOM, "{} fields of room", copy.capacity());
        // Reserving the headroom again is then free: the capacity does not change.
        let mut served = copy;
        served.reserve(SERVE_HEADROOM);
        assert_eq!(served.capacity(), stored.capacity());
        served.insert(AGE, HeaderValue::from_static("0"));
        assert_eq!(served.capacity(), stored.capacity());
    }
}
