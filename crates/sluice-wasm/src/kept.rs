//! Read-only copies of message heads, kept by a transaction for its later callbacks (the
//! request head for the response callbacks, the response head for the response body
//! callbacks; both for done, log and delete).
//!
//! They hold only what a plugin can read there (method, URL, version, status, the header
//! list), the header list as flat bytes (names and values back to back, and their
//! lengths): copying it is a few small `memcpy`s per header, with no reference counts to
//! bump and drop, and its storage is reused by the next transaction of the same instance
//! ([`HeaderList::recycle`]), so a copy normally allocates nothing.

use http::header::HeaderName;
use http::{request, response, HeaderMap, Method, StatusCode, Uri, Version};

/// A header list in the order of the map it was copied from (each name's values together),
/// names (lower case, as `HeaderName` has them) repeated per value.
#[derive(Debug, Default)]
pub(crate) struct HeaderList {
    /// Each pair's name then value.
    bytes: Vec<u8>,
    /// Each pair's name length and value length, in order.
    lengths: Vec<(u32, u32)>,
}

impl HeaderList {
    /// Copies `headers` into this list (emptied first), reusing its storage.
    fn fill(&mut self, headers: &HeaderMap) {
        self.bytes.clear();
        self.lengths.clear();
        self.lengths.reserve(headers.len());
        for (name, value) in headers {
            let (name, value) = (name.as_str().as_bytes(), value.as_bytes());
            self.bytes.extend_from_slice(name);
            self.bytes.extend_from_slice(value);
            // Header maps hold far less than 4 GiB.
            self.lengths.push((name.len() as u32, value.len() as u32));
        }
    }

    /// The first value of `name`.
    pub(crate) fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        let name = name.as_str().as_bytes();
        self.iter().find(|(n, _)| *n == name).map(|(_, value)| value)
    }

    /// The pairs in order.
    pub(crate) fn iter(&self) -> HeaderListIter<'_> {
        HeaderListIter { bytes: &self.bytes, lengths: self.lengths.iter() }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Empties the list, keeping its storage for the next copy (`None` if it has none).
    pub(crate) fn recycle(mut self) -> Option<Self> {
        self.bytes.clear();
        self.lengths.clear();
        (self.lengths.capacity() > 0).then_some(self)
    }

    /// Whether it holds storage worth recycling.
    pub(crate) fn has_storage(&self) -> bool {
        self.lengths.capacity() > 0
    }

    /// Bytes of storage it holds on to.
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.capacity() + self.lengths.capacity() * std::mem::size_of::<(u32, u32)>()
    }
}

/// The pairs of a [`HeaderList`] as `(name, value)` byte strings.
pub(crate) struct HeaderListIter<'a> {
    bytes: &'a [u8],
    lengths: std::slice::Iter<'a, (u32, u32)>,
}

impl<'a> Iterator for HeaderListIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let &(name_len, value_len) = self.lengths.next()?;
        let (name, rest) = self.bytes.split_at(name_len as usize);
        let (value, rest) = rest.split_at(value_len as usize);
        self.bytes = rest;
        Some((name, value))
    }
}

/// The request head as later callbacks can read it, once kept. It lives as long as its
/// transaction, so that a copy is made in place (and a second copy over the first).
#[derive(Debug)]
pub(crate) struct KeptRequest {
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub headers: HeaderList,
    kept: bool,
}

impl KeptRequest {
    /// Nothing kept yet, copies to go to `storage` (a recycled list, or a new one).
    pub(crate) fn new(storage: HeaderList) -> Self {
        Self { method: Method::GET, uri: Uri::default(), version: Version::HTTP_11, headers: storage, kept: false }
    }

    /// Keeps a copy of `parts` (replacing any kept before).
    pub(crate) fn keep(&mut self, parts: &request::Parts) {
        self.headers.fill(&parts.headers);
        self.method.clone_from(&parts.method);
        self.uri.clone_from(&parts.uri);
        self.version = parts.version;
        self.kept = true;
    }

    /// The kept head, if one is.
    pub(crate) fn kept(&self) -> Option<&Self> {
        self.kept.then_some(self)
    }
}

/// The response head as the later callbacks (body, done, log, delete) can read it, once
/// kept; as [`KeptRequest`].
#[derive(Debug)]
pub(crate) struct KeptResponse {
    pub status: StatusCode,
    pub headers: HeaderList,
    kept: bool,
}

impl KeptResponse {
    /// Nothing kept yet, copies to go to `storage` (a recycled list, or a new one).
    pub(crate) fn new(storage: HeaderList) -> Self {
        Self { status: StatusCode::OK, headers: storage, kept: false }
    }

    /// Keeps a copy of `parts` (replacing any kept before).
    pub(crate) fn keep(&mut self, parts: &response::Parts) {
        self.headers.fill(&parts.headers);
        self.status = parts.status;
        self.kept = true;
    }

    /// The kept head, if one is.
    pub(crate) fn kept(&self) -> Option<&Self> {
        self.kept.then_some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_keep_every_value_in_order_and_reuse_storage() {
        let (parts, ()) = http::Request::get("/p?q")
            .header("x-a", "1")
            .header("x-b", "2")
            .header("x-a", "3")
            .body(())
            .unwrap()
            .into_parts();
        let mut kept = KeptRequest::new(HeaderList::default());
        assert!(kept.kept().is_none());
        kept.keep(&parts);
        assert!(kept.kept().is_some());
        assert_eq!(kept.uri, "/p?q");
        assert_eq!(kept.headers.len(), 3);
        assert_eq!(kept.headers.get(&HeaderName::from_static("x-a")), Some(&b"1"[..]));
        assert_eq!(kept.headers.get(&HeaderName::from_static("x-c")), None);
        let pairs: Vec<_> = kept.headers.iter().collect();
        let expected: [(&[u8], &[u8]); 3] = [(b"x-a", b"1"), (b"x-a", b"3"), (b"x-b", b"2")];
        assert_eq!(pairs, expected, "as the map iterates: each name's values together");
        let storage = kept.headers.recycle().unwrap();
        assert_eq!(storage.len(), 0);
        let (resp, ()) = http::Response::builder().status(404).header("a", "b").body(()).unwrap().into_parts();
        let mut kept = KeptResponse::new(storage);
        kept.keep(&resp);
        assert_eq!(kept.status, StatusCode::NOT_FOUND);
        assert_eq!(kept.headers.len(), 1);
        assert!(HeaderList::default().recycle().is_none());
    }
}
