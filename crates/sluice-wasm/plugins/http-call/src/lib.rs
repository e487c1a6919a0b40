//! Asks an upstream before letting requests through, with `dispatch_http_call` (cluster
//! `auth`):
//! - a request with `x-user: NAME` waits for `GET /check/NAME` (`x-asked-by: wasm`): a `200`
//!   lets it through with `x-auth: <the answer's body>`, unless that body is `again`: then
//!   it asks `GET /check/NAME-again` too, and that answer decides; another status answers
//!   `403` (`denied: <body>`), the host's made-up `503` for an unreachable cluster included;
//!   no headers at all (the call failed after its head) answers `503` (`auth unreachable`);
//! - a request with `x-users: NAME,NAME,...` asks `GET /check/NAME` for every name at once
//!   and waits for all the answers: if every one is a `200`, it goes on with `x-auth: <the
//!   bodies, joined with ,>` in the order asked; otherwise `403` (`denied: <names>`);
//! - a response with `x-annotate: KEY` waits for `GET /annotate/KEY` and gets its body as
//!   `x-annotation`.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::time::Duration;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Asker { waiting: None, parallel: Vec::new() }))
    }
}

/// Which head the pending call is for.
#[derive(Clone, Copy, PartialEq)]
enum Waiting {
    Request,
    Response,
}

struct Asker {
    waiting: Option<Waiting>,
    /// The calls of an `x-users` request: token, name, and the answer's body once it is a
    /// `200` (`Some(None)`: another status).
    parallel: Vec<(u32, String, Option<Option<String>>)>,
}

impl Asker {
    fn ask(&mut self, path: &str, waiting: Waiting) -> Action {
        let headers = vec![(":method", "GET"), (":path", path), (":authority", "auth.local"), ("x-asked-by", "wasm")];
        match self.dispatch_http_call("auth", headers, None, vec![], Duration::from_secs(5)) {
            Ok(_) => {
                self.waiting = Some(waiting);
                Action::Pause
            }
            Err(status) => {
                let body = format!("call failed: {status:?}");
                self.send_http_response(500, vec![], Some(body.as_bytes()));
                Action::Pause
            }
        }
    }
}

impl Asker {
    /// Asks for every name of `users` at once.
    fn ask_all(&mut self, users: &str) -> Action {
        for name in users.split(',').map(str::trim) {
            let path = format!("/check/{name}");
            let headers = vec![(":method", "GET"), (":path", path.as_str()), (":authority", "auth.local")];
            match self.dispatch_http_call("auth", headers, None, vec![], Duration::from_secs(5)) {
                Ok(token) => self.parallel.push((token, name.to_owned(), None)),
                Err(status) => {
                    let body = format!("call failed: {status:?}");
                    self.send_http_response(500, vec![], Some(body.as_bytes()));
                    return Action::Pause;
                }
            }
        }
        Action::Pause
    }

    /// Notes the answer to call `token`; once every call has its answer, lets the request go
    /// on or denies it.
    fn answered(&mut self, token: u32, status: Option<&str>, body: String) {
        if let Some(entry) = self.parallel.iter_mut().find(|(t, _, _)| *t == token) {
            entry.2 = Some((status == Some("200")).then_some(body));
        }
        if self.parallel.iter().any(|(_, _, answer)| answer.is_none()) {
            return;
        }
        let denied: Vec<&str> =
            self.parallel.iter().filter(|(_, _, answer)| answer == &Some(None)).map(|(_, name, _)| name.as_str()).collect();
        if denied.is_empty() {
            let bodies: Vec<String> = self.parallel.iter().filter_map(|(_, _, answer)| answer.clone().flatten()).collect();
            self.set_http_request_header("x-auth", Some(&bodies.join(",")));
            self.resume_http_request();
        } else {
            let body = format!("denied: {}", denied.join(","));
            self.send_http_response(403, vec![], Some(body.as_bytes()));
        }
    }
}

impl Context for Asker {
    fn on_http_call_response(&mut self, token: u32, _headers: usize, body_size: usize, _trailers: usize) {
        let status = self.get_http_call_response_header(":status");
        let body = self.get_http_call_response_body(0, body_size).unwrap_or_default();
        let body = String::from_utf8_lossy(&body).into_owned();
        if !self.parallel.is_empty() {
            return self.answered(token, status.as_deref(), body);
        }
        match (self.waiting.take(), status.as_deref()) {
            (Some(Waiting::Request), Some("200")) if body == "again" => {
                let user = self.get_http_request_header("x-user").unwrap_or_default();
                self.ask(&format!("/check/{user}-again"), Waiting::Request);
            }
            (Some(Waiting::Request), Some("200")) => {
                self.set_http_request_header("x-auth", Some(&body));
                self.resume_http_request();
            }
            (Some(Waiting::Request), Some(_)) => {
                self.send_http_response(403, vec![], Some(format!("denied: {body}").as_bytes()));
            }
            (Some(Waiting::Request), None) => {
                self.send_http_response(503, vec![("x-auth-error", "unreachable")], Some(b"auth unreachable"));
            }
            (Some(Waiting::Response), _) => {
                self.set_http_response_header("x-annotation", Some(&body));
                self.resume_http_response();
            }
            (None, _) => {}
        }
    }
}

impl HttpContext for Asker {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        if let Some(users) = self.get_http_request_header("x-users") {
            return self.ask_all(&users);
        }
        match self.get_http_request_header("x-user") {
            Some(user) => self.ask(&format!("/check/{user}"), Waiting::Request),
            None => Action::Continue,
        }
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        match self.get_http_response_header("x-annotate") {
            Some(key) => self.ask(&format!("/annotate/{key}"), Waiting::Response),
            None => Action::Continue,
        }
    }
}
