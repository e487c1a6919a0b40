//! Read-only copies of message heads, kept by a transaction for its later callbacks (the
//! request head for the response callbacks, the response head for the response body
//! callbacks).
//!
//! They hold only what a plugin can read there (method, URL, version, status, the header
//! list). The header list keeps the names as `HeaderName`s (nearly all are standard ones:
//! a copy is a small enum) and the values as flat bytes: copying a header is one small
//! `memcpy`, without reference counts to bump and drop. Its storage is reused by the next
//! transaction of the same instance ([`HeaderList::recycle`]), so a copy normally allocates
//! nothing.

use http::header::HeaderName;
use http::{request, response, HeaderMap, Method, StatusCode, Uri, Version};

/// A header list in the order of the map it was copied from (each name's values together),
/// names repeated per value.
#[derive(Debug, Default)]
pub(crate) struct HeaderList {
    names: Vec<HeaderName>,
    /// The values back to back.
    values: Vec<u8>,
    /// Each value's length.
    lengths: Vec<u32>,
}

impl HeaderList {
    /// Copies `headers` into this list (emptied first), reusing its storage.
    fn fill(&mut self, headers: &HeaderMap) {
        self.clear();
        self.names.reserve(headers.len());
        self.lengths.reserve(headers.len());
        for (name, value) in headers {
            let value = value.as_bytes();
            self.names.push(name.clone());
            self.values.extend_from_slice(value);
            // Header values are far shorter than 4 GiB.
            self.lengths.push(value.len() as u32);
        }
    }

    fn clear(&mut self) {
        self.names.clear();
        self.values.clear();
        self.lengths.clear();
    }

    /// The first value of `name`.
    pub(crate) fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        let at = self.names.iter().position(|n| n == name)?;
        self.iter().nth(at).map(|(_, value)| value)
    }

    /// The pairs in order, as `(name, value)` byte strings.
    pub(crate) fn iter(&self) -> HeaderListIter<'_> {
        HeaderListIter { names: self.names.iter(), values: &self.values, lengths: self.lengths.iter() }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// Empties the list, keeping its storage for the next copy (`None` if it has none).
    pub(crate) fn recycle(mut self) -> Option<Self> {
        self.clear();
        (self.names.capacity() > 0).then_some(self)
    }

    /// Bytes of storage it holds on to.
    pub(crate) fn capacity(&self) -> usize {
        self.values.capacity()
            + self.names.capacity() * std::mem::size_of::<HeaderName>()
            + self.lengths.capacity() * std::mem::size_of::<u32>()
    }
}

/// The pairs of a [`HeaderList`].
pub(crate) struct HeaderListIter<'a> {
    names: std::slice::Iter<'a, HeaderName>,
    values: &'a [u8],
    lengths: std::slice::Iter<'a, u32>,
}

impl<'a> Iterator for HeaderListIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let name = self.names.next()?;
        let &len = self.lengths.next()?;
        let (value, rest) = self.values.split_at(len as usize);
        self.values = rest;
        Some((name.as_str().as_bytes(), value))
    }
}

/// The request head as later callbacks can read it.
#[derive(Debug)]
pub(crate) struct KeptRequest {
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub headers: HeaderList,
}

impl KeptRequest {
    /// A copy of `parts`, in `storage` (a recycled list, or a new one).
    pub(crate) fn copy(parts: &request::Parts, mut storage: HeaderList) -> Self {
        storage.fill(&parts.headers);
        Self { method: parts.method.clone(), uri: parts.uri.clone(), version: parts.version, headers: storage }
    }
}

/// The response head as the body callbacks can read it.
#[derive(Debug)]
pub(crate) struct KeptResponse {
    pub status: StatusCode,
    pub headers: HeaderList,
}

impl KeptResponse {
    /// A copy of `parts`, in `storage` (a recycled list, or a new one).
    pub(crate) fn copy(parts: &response::Parts, mut storage: HeaderList) -> Self {
        storage.fill(&parts.headers);
        Self { status: parts.status, headers: storage }
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
        let kept = KeptRequest::copy(&parts, HeaderList::default());
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
        let kept = KeptResponse::copy(&resp, storage);
        assert_eq!(kept.status, StatusCode::NOT_FOUND);
        assert_eq!(kept.headers.len(), 1);
        assert!(HeaderList::default().recycle().is_none());
    }
}
