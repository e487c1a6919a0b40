//! `OPTIONS` requests about a server rather than one of its resources (RFC 9112 §3.2.4).
//!
//! A client asks for an origin's capabilities through a proxy with `OPTIONS http://host:port`:
//! an absolute-form target with an empty path and no query. The last proxy on the chain must
//! send it on as `OPTIONS *`. The `http` crate parses `http://host:port` and
//! `http://host:port/` to the same `Uri`, so the difference is gone by the time hyper hands
//! the request over. The connection's framing guard ([`crate::framing::StrictHttp1`]), which
//! parses every request head itself, therefore notes the form of each `OPTIONS` request in
//! [`OptionsForms`], in order; the service takes one note per `OPTIONS` request, in the same
//! order (hyper serves an HTTP/1 connection's requests one after the other), and marks the
//! request with [`AsteriskForm`]. Other methods cost one comparison.
//!
//! The same notes carry one more thing the guard knows and hyper cannot tell: a request line
//! too long to read. RFC 9112 §3 asks for `414 URI Too Long` there, but hyper answers a head
//! over its limit with `431`, whatever part of it is long. So the guard hands hyper a
//! stand-in `OPTIONS` request instead ([`crate::framing`]) and notes it here as
//! [`Note::UriTooLong`]; the service answers it `414` ([`crate::refused::uri_too_long`]).

use http::{Method, Request, Version};
use std::collections::VecDeque;

/// What the guard noted of an `OPTIONS` request head it handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// A request about a resource (or `*`): nothing to mark.
    Resource,
    /// A request whose target named a server (see the module documentation).
    Server,
    /// Not the client's request: a stand-in for a request line too long to read.
    UriTooLong,
}

/// The notes on the `OPTIONS` requests read on one HTTP/1 connection and not yet served.
#[derive(Debug, Default)]
pub struct OptionsForms(parking_lot::Mutex<VecDeque<Note>>);

impl OptionsForms {
    /// Notes the target of an `OPTIONS` request head the guard let through.
    pub fn note(&self, target: &str) {
        self.0.lock().push_back(if names_a_server(target) { Note::Server } else { Note::Resource });
    }

    /// Notes that the guard handed over a stand-in `OPTIONS` request for a request line too
    /// long to read.
    pub fn note_uri_too_long(&self) {
        self.0.lock().push_back(Note::UriTooLong);
    }

    /// How many notes wait for their requests.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.0.lock().len()
    }

    /// Marks `req` with [`AsteriskForm`] when it is the `OPTIONS` request whose target named a
    /// server; true when it is a stand-in for a request line too long to read (to be answered
    /// `414`). To be called once for every request of the connection, in order.
    #[inline]
    pub fn mark<B>(forms: Option<&Self>, req: &mut Request<B>) -> bool {
        if req.method() == Method::OPTIONS && req.version() <= Version::HTTP_11 {
            if let Some(forms) = forms {
                match forms.0.lock().pop_front() {
                    Some(Note::Server) => {
                        req.extensions_mut().insert(AsteriskForm);
                    }
                    Some(Note::UriTooLong) => return true,
                    Some(Note::Resource) | None => {}
                }
            }
        }
        false
    }
}

/// A request extension: this `OPTIONS` request's target named a server, so it goes to the
/// origin as `OPTIONS *`.
#[derive(Debug, Clone, Copy)]
pub struct AsteriskForm;

/// Whether `target` is an absolute-form request target with an empty path and no query
/// (`http://host:port`), which names the server itself.
fn names_a_server(target: &str) -> bool {
    let Some((scheme, rest)) = target.split_once("://") else { return false };
    !scheme.is_empty()
        && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        && !rest.is_empty()
        && !rest.contains(['/', '?'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_absolute_form_without_path_or_query_names_a_server() {
        for target in ["http://h:8", "http://h", "HTTPS://example.org:8001", "http://[::1]:80"] {
            assert!(names_a_server(target), "{target}");
        }
        for target in ["http://h:8/", "http://h:8?x", "http://h/a", "*", "/", "/a", "h:80", "://h", "http://"] {
            assert!(!names_a_server(target), "{target}");
        }
    }

    #[test]
    fn notes_are_taken_in_order_by_options_requests_only() {
        let forms = OptionsForms::default();
        forms.note("http://h:8");
        forms.note("http://h:8/");
        forms.note_uri_too_long();
        let request = |method: Method| Request::builder().method(method).body(()).unwrap();

        let mut get = request(Method::GET);
        assert!(!OptionsForms::mark(Some(&forms), &mut get));
        assert!(get.extensions().get::<AsteriskForm>().is_none());
        let mut first = request(Method::OPTIONS);
        assert!(!OptionsForms::mark(Some(&forms), &mut first));
        assert!(first.extensions().get::<AsteriskForm>().is_some());
        let mut second = request(Method::OPTIONS);
        assert!(!OptionsForms::mark(Some(&forms), &mut second));
        assert!(second.extensions().get::<AsteriskForm>().is_none());
        let mut stand_in = request(Method::OPTIONS);
        assert!(OptionsForms::mark(Some(&forms), &mut stand_in), "the stand-in is told apart");
        assert!(forms.0.lock().is_empty());
    }
}
