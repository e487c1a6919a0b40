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

use http::{Method, Request, Version};
use std::collections::VecDeque;

/// The forms of the `OPTIONS` requests read on one HTTP/1 connection and not yet served:
/// true when the target named a server (see the module documentation).
#[derive(Debug, Default)]
pub struct OptionsForms(parking_lot::Mutex<VecDeque<bool>>);

impl OptionsForms {
    /// Notes the target of an `OPTIONS` request head the guard let through.
    pub fn note(&self, target: &str) {
        self.0.lock().push_back(names_a_server(target));
    }

    /// Marks `req` with [`AsteriskForm`] when it is the `OPTIONS` request whose target named a
    /// server. To be called once for every request of the connection, in order.
    #[inline]
    pub fn mark<B>(forms: Option<&Self>, req: &mut Request<B>) {
        if req.method() == Method::OPTIONS && req.version() <= Version::HTTP_11 {
            if let Some(forms) = forms {
                if forms.0.lock().pop_front() == Some(true) {
                    req.extensions_mut().insert(AsteriskForm);
                }
            }
        }
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
        let request = |method: Method| Request::builder().method(method).body(()).unwrap();

        let mut get = request(Method::GET);
        OptionsForms::mark(Some(&forms), &mut get);
        assert!(get.extensions().get::<AsteriskForm>().is_none());
        let mut first = request(Method::OPTIONS);
        OptionsForms::mark(Some(&forms), &mut first);
        assert!(first.extensions().get::<AsteriskForm>().is_some());
        let mut second = request(Method::OPTIONS);
        OptionsForms::mark(Some(&forms), &mut second);
        assert!(second.extensions().get::<AsteriskForm>().is_none());
        assert!(forms.0.lock().is_empty());
    }
}
