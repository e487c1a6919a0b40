//! The on-disk metadata record: [`ObjectMeta`] in a compact binary form of our own, and the
//! stable variant id derived from it.
//!
//! Integers are little-endian; strings and byte strings are a `u32` length then the bytes;
//! `Option<u64>` is a tag byte (0 none, 1 some) then the value. Fields, in order:
//!
//! ```text
//! key           string
//! status        u16
//! headers       u32 count, then per field: name (string), value (bytes), in map order
//! vary          u16 count, then names (strings)
//! vary_key      u16 count, then per value: tag byte (0 absent, 1 present) and the bytes
//! request_time  i64 unix nanoseconds
//! response_time i64 unix nanoseconds
//! initial_age   u64 seconds, u32 nanoseconds
//! lifetime      u64 seconds, u32 nanoseconds
//! lifetime_src  u8 (0 s-maxage, 1 max-age, 2 Expires, 3 heuristic, 4 none)
//! cc flags      u16 bit set (no-cache, no-store, no-transform, only-if-cached,
//!               must-revalidate, proxy-revalidate, must-understand, private, public, immutable)
//! cc numbers    max-age, s-maxage, min-fresh, stale-while-revalidate, stale-if-error: Option<u64>
//! max-stale     u8 (0 absent, 1 any, 2 seconds) [+ u64]
//! ```
//!
//! The encoding of `(key, vary_key)` alone also feeds the variant id, so it must never
//! change within a format version.

use crate::ObjectMeta;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::StatusCode;
use sluice_http::cache_control::MaxStale;
use sluice_http::freshness::LifetimeSource;
use sluice_http::vary::VaryKey;
use sluice_http::CacheControl;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use twox_hash::XxHash3_64;

/// Seed of the variant id hash (any fixed value; changing it renames every file).
const ID_SEED: u64 = 0x5_1u64 << 56 | 0x1ce;

/// A record that could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt(pub &'static str);

/// The variant id: xxh3 of the encoded key and Vary key. Stable across runs and Rust
/// versions (unlike `DefaultHasher`), since it names files.
pub fn variant_id(key: &str, vary_key: &VaryKey) -> u64 {
    let mut enc = Enc(Vec::with_capacity(key.len() + 16));
    enc.str(key);
    enc.vary_key(vary_key);
    XxHash3_64::oneshot_with_seed(ID_SEED, &enc.0)
}

/// Encodes `meta`.
pub fn encode(meta: &ObjectMeta) -> Vec<u8> {
    let mut e = Enc(Vec::with_capacity(256 + meta.key.len()));
    e.str(&meta.key);
    e.u16(meta.status.as_u16());
    e.u32(meta.headers.len() as u32);
    for (name, value) in &meta.headers {
        e.str(name.as_str());
        e.bytes(value.as_bytes());
    }
    e.u16(meta.vary.len() as u16);
    for name in &meta.vary {
        e.str(name.as_str());
    }
    e.vary_key(&meta.vary_key);
    e.time(meta.request_time);
    e.time(meta.response_time);
    e.duration(meta.initial_age);
    e.duration(meta.lifetime);
    e.u8(match meta.lifetime_source {
        LifetimeSource::SMaxAge => 0,
        LifetimeSource::MaxAge => 1,
        LifetimeSource::Expires => 2,
        LifetimeSource::Heuristic => 3,
        LifetimeSource::None => 4,
    });
    // Destructured without `..`, so a new directive fails to compile here until it is stored.
    let CacheControl {
        max_age,
        s_maxage,
        max_stale,
        min_fresh,
        no_cache,
        no_store,
        no_transform,
        only_if_cached,
        must_revalidate,
        proxy_revalidate,
        must_understand,
        private,
        public,
        immutable,
        stale_while_revalidate,
        stale_if_error,
    } = meta.cc;
    let flags = [
        no_cache,
        no_store,
        no_transform,
        only_if_cached,
        must_revalidate,
        proxy_revalidate,
        must_understand,
        private,
        public,
        immutable,
    ]
    .iter()
    .enumerate()
    .fold(0u16, |acc, (i, &on)| acc | (u16::from(on) << i));
    e.u16(flags);
    for n in [max_age, s_maxage, min_fresh, stale_while_revalidate, stale_if_error] {
        e.opt_u64(n);
    }
    match max_stale {
        None => e.u8(0),
        Some(MaxStale::Any) => e.u8(1),
        Some(MaxStale::Seconds(n)) => {
            e.u8(2);
            e.u64(n);
        }
    }
    e.0
}

/// Decodes a record written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<ObjectMeta, Corrupt> {
    let mut d = Dec(bytes);
    let key = d.string()?;
    let status = StatusCode::from_u16(d.u16()?).map_err(|_| Corrupt("status"))?;
    let count = d.u32()?;
    let mut headers = HeaderMap::new();
    for _ in 0..count {
        let name = HeaderName::from_bytes(d.bytes()?).map_err(|_| Corrupt("header name"))?;
        let value = HeaderValue::from_bytes(d.bytes()?).map_err(|_| Corrupt("header value"))?;
        headers.append(name, value);
    }
    let mut vary = Vec::new();
    for _ in 0..d.u16()? {
        vary.push(HeaderName::from_bytes(d.bytes()?).map_err(|_| Corrupt("vary name"))?);
    }
    let mut vary_key = Vec::new();
    for _ in 0..d.u16()? {
        vary_key.push(match d.u8()? {
            0 => None,
            1 => Some(String::from_utf8(d.bytes()?.to_vec()).map_err(|_| Corrupt("vary value"))?),
            _ => return Err(Corrupt("vary tag")),
        });
    }
    let request_time = d.time()?;
    let response_time = d.time()?;
    let initial_age = d.duration()?;
    let lifetime = d.duration()?;
    let lifetime_source = match d.u8()? {
        0 => LifetimeSource::SMaxAge,
        1 => LifetimeSource::MaxAge,
        2 => LifetimeSource::Expires,
        3 => LifetimeSource::Heuristic,
        4 => LifetimeSource::None,
        _ => return Err(Corrupt("lifetime source")),
    };
    let flags = d.u16()?;
    let flag = |i: u16| flags & (1 << i) != 0;
    let mut numbers = [None; 5];
    for n in &mut numbers {
        *n = d.opt_u64()?;
    }
    let max_stale = match d.u8()? {
        0 => None,
        1 => Some(MaxStale::Any),
        2 => Some(MaxStale::Seconds(d.u64()?)),
        _ => return Err(Corrupt("max-stale tag")),
    };
    if !d.0.is_empty() {
        return Err(Corrupt("trailing bytes"));
    }
    let [max_age, s_maxage, min_fresh, stale_while_revalidate, stale_if_error] = numbers;
    let cc = CacheControl {
        max_age,
        s_maxage,
        max_stale,
        min_fresh,
        no_cache: flag(0),
        no_store: flag(1),
        no_transform: flag(2),
        only_if_cached: flag(3),
        must_revalidate: flag(4),
        proxy_revalidate: flag(5),
        must_understand: flag(6),
        private: flag(7),
        public: flag(8),
        immutable: flag(9),
        stale_while_revalidate,
        stale_if_error,
    };
    Ok(ObjectMeta {
        key,
        status,
        headers: crate::object::stored_headers(headers),
        vary,
        vary_key,
        request_time,
        response_time,
        initial_age,
        lifetime,
        lifetime_source,
        cc,
    })
}

struct Enc(Vec<u8>);

impl Enc {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
    }
    fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }
    fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            None => self.u8(0),
            Some(n) => {
                self.u8(1);
                self.u64(n);
            }
        }
    }
    fn vary_key(&mut self, key: &VaryKey) {
        self.u16(key.len() as u16);
        for value in key {
            match value {
                None => self.u8(0),
                Some(v) => {
                    self.u8(1);
                    self.str(v);
                }
            }
        }
    }
    /// Unix nanoseconds, saturating outside 1677..2262.
    fn time(&mut self, t: SystemTime) {
        let nanos: i128 = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        };
        self.0.extend_from_slice(&(nanos.clamp(i64::MIN as i128, i64::MAX as i128) as i64).to_le_bytes());
    }
    fn duration(&mut self, d: Duration) {
        self.u64(d.as_secs());
        self.u32(d.subsec_nanos());
    }
}

struct Dec<'a>(&'a [u8]);

impl<'a> Dec<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Corrupt> {
        if self.0.len() < n {
            return Err(Corrupt("truncated record"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, Corrupt> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, Corrupt> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    fn u32(&mut self) -> Result<u32, Corrupt> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, Corrupt> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn bytes(&mut self) -> Result<&'a [u8], Corrupt> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> Result<String, Corrupt> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| Corrupt("string"))
    }
    fn opt_u64(&mut self) -> Result<Option<u64>, Corrupt> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.u64()?)),
            _ => Err(Corrupt("option tag")),
        }
    }
    fn time(&mut self) -> Result<SystemTime, Corrupt> {
        let nanos = i64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
        let magnitude = Duration::from_nanos(nanos.unsigned_abs());
        let t = if nanos >= 0 { UNIX_EPOCH.checked_add(magnitude) } else { UNIX_EPOCH.checked_sub(magnitude) };
        t.ok_or(Corrupt("time"))
    }
    fn duration(&mut self) -> Result<Duration, Corrupt> {
        let secs = self.u64()?;
        let nanos = self.u32()?;
        if nanos >= 1_000_000_000 {
            return Err(Corrupt("duration"));
        }
        Ok(Duration::new(secs, nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_TYPE, SET_COOKIE};

    pub(crate) fn sample_meta(key: &str) -> ObjectMeta {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        headers.append(SET_COOKIE, HeaderValue::from_static("a=1"));
        headers.append(SET_COOKIE, HeaderValue::from_static("b=2"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=60, stale-if-error=5"));
        headers.insert("x-bin", HeaderValue::from_bytes(b"\xff\x80 opaque").unwrap());
        ObjectMeta {
            key: key.to_owned(),
            status: StatusCode::NON_AUTHORITATIVE_INFORMATION,
            cc: CacheControl::from_headers(&headers),
            headers,
            vary: vec![ACCEPT_ENCODING, HeaderName::from_static("x-v")],
            vary_key: vec![Some("gzip".into()), None],
            request_time: UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789),
            response_time: UNIX_EPOCH + Duration::new(1_700_000_001, 5),
            initial_age: Duration::from_millis(1500),
            lifetime: Duration::from_secs(60),
            lifetime_source: LifetimeSource::MaxAge,
        }
    }

    fn same(a: &ObjectMeta, b: &ObjectMeta) {
        assert_eq!(a.key, b.key);
        assert_eq!(a.status, b.status);
        assert_eq!(a.headers, b.headers);
        assert_eq!(a.vary, b.vary);
        assert_eq!(a.vary_key, b.vary_key);
        assert_eq!(a.request_time, b.request_time);
        assert_eq!(a.response_time, b.response_time);
        assert_eq!(a.initial_age, b.initial_age);
        assert_eq!(a.lifetime, b.lifetime);
        assert_eq!(a.lifetime_source, b.lifetime_source);
        assert_eq!(a.cc, b.cc);
    }

    #[test]
    fn metadata_round_trips_exactly() {
        let mut meta = sample_meta("http://example.test/a?b");
        meta.cc.max_stale = Some(MaxStale::Seconds(9));
        meta.cc.immutable = true;
        meta.cc.s_maxage = Some(u64::MAX);
        same(&decode(&encode(&meta)).unwrap(), &meta);
        let order: Vec<_> = meta.headers.get_all(SET_COOKIE).iter().collect();
        let back = decode(&encode(&meta)).unwrap();
        assert_eq!(back.headers.get_all(SET_COOKIE).iter().collect::<Vec<_>>(), order);
    }

    #[test]
    fn truncated_or_extended_records_are_corrupt() {
        let bytes = encode(&sample_meta("k"));
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "prefix of {n} bytes decoded");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }

    const PINNED: u64 = 6_358_236_027_136_100_074;

    #[test]
    fn variant_ids_are_stable_and_distinguish_vary_keys() {
        let a = variant_id("http://x/", &vec![Some("gzip".into())]);
        assert_eq!(a, variant_id("http://x/", &vec![Some("gzip".into())]));
        assert_ne!(a, variant_id("http://x/", &vec![None]));
        assert_ne!(a, variant_id("http://x/", &vec![]));
        // Pinned: file names depend on it, and recovery drops files whose name disagrees.
        assert_eq!(variant_id("http://x/", &vec![]), PINNED);
    }
}
