//! Read-only copies of message heads, kept by a transaction for its later callbacks (the
//! request head for the response callbacks, the response head for the response body
//! callbacks).
//!
//! They hold only what a plugin can read there (method, URL, version, status, the header
//! list), as a flat list of name-value pairs: one allocation, and a reference count bump per
//! name or value, instead of a whole `HeaderMap` (index table, entries) and `Extensions`.
//! The list's storage is reused by the next transaction of the same instance
//! ([`HeaderList::recycle`]).

use http::header::{HeaderName, HeaderValue};
use http::{request, response, HeaderMap, Method, StatusCode, Uri, Version};

/// A header list in the order of the map it was copied from (each name's values together),
/// names repeated per value.
#[derive(Debug, Default)]
pub(crate) struct HeaderList {
    pairs: Vec<(HeaderName, HeaderValue)>,
}

impl HeaderList {
    /// Copies `headers` into this (emptied) list, reusing its storage.
    fn fill(&mut self, headers: &HeaderMap) {
        self.pairs.clear();
        self.pairs.reserve(headers.len());
        self.pairs.extend(headers.iter().map(|(name, value)| (name.clone(), value.clone())));
    }

    /// The first value of `name`.
    pub(crate) fn get(&self, name: &HeaderName) -> Option<&HeaderValue> {
        self.pairs.iter().find(|(n, _)| n == name).map(|(_, value)| value)
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, (HeaderName, HeaderValue)> {
        self.pairs.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Empties the list, keeping its storage for the next copy (`None` if it has none).
    pub(crate) fn recycle(mut self) -> Option<Self> {
        self.pairs.clear();
        (self.pairs.capacity() > 0).then_some(self)
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
        assert_eq!(kept.headers.get(&HeaderName::from_static("x-a")).unwrap(), "1");
        let values: Vec<_> = kept.headers.iter().map(|(_, v)| v.to_str().unwrap()).collect();
        assert_eq!(values, ["1", "3", "2"], "as the map iterates: each name's values together");
        let storage = kept.headers.recycle().unwrap();
        assert_eq!(storage.len(), 0);
        let (resp, ()) = http::Response::builder().status(404).header("a", "b").body(()).unwrap().into_parts();
        let kept = KeptResponse::copy(&resp, storage);
        assert_eq!(kept.status, StatusCode::NOT_FOUND);
        assert_eq!(kept.headers.len(), 1);
        assert!(HeaderList::default().recycle().is_none());
    }
}
