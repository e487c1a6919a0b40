//! One transaction's bookkeeping: identity, module states, and what the log line needs.
//!
//! A [`Txn`] is created when a request arrives and travels with the response body
//! ([`crate::body::Finish`]); it is logged, counted, and its module states dropped exactly
//! once, in its `Drop`, whether the response completed, failed, or was never produced.

use crate::access_log::LogRecord;
use crate::chain::{Honours, ModuleFailure, PhaseOutcome, PhaseStart, SharedChain};
use crate::error::{Kind, ProxyError, Side};
use crate::outcome::ResultCode;
use crate::state::State;
use futures_util::future::BoxFuture;
use http::{header, HeaderValue, Method, Request, Version};
use sluice_module::{Flow, LogFields, Txn as ModuleTxn, TxnInfo, TxnOutcome};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

/// A transaction in progress.
pub struct Txn {
    pub info: TxnInfo,
    pub modules: SharedChain,
    /// A module guarding the transaction closed panicked in `new_txn`: the transaction must
    /// fail ([`Txn::check_start`]).
    start_failure: Option<ModuleFailure>,
    /// How it was served (set as the pipeline decides).
    pub code: ResultCode,
    /// The origin address, when the request went forward.
    pub peer: Option<IpAddr>,
    /// The URL as logged (absolute URI, or `host:port` for CONNECT).
    pub url: String,
    /// The user proxy authentication proved (`[proxy_auth]`), for the log.
    pub user: Option<Arc<str>>,
    /// The header rules of the route the request took, for its response.
    pub route_headers: Option<Arc<crate::header_rules::RouteHeaders>>,
    /// The request took a reverse route: its errors do not explain the origin's failure to
    /// the client ([`crate::respond::error_explained`]).
    pub reverse: bool,
    /// The request's count among its client's requests in progress, while there is a limit
    /// (`client.max_requests_per_client`); dropped with the transaction.
    pub in_flight: Option<crate::in_flight::Counted>,
    status: u16,
    content_type: Option<HeaderValue>,
    head_bytes: u64,
    body_bytes: u64,
    completed: bool,
    started: Instant,
    method: Method,
    version: Version,
    referer: Option<HeaderValue>,
    user_agent: Option<HeaderValue>,
    state: Arc<State>,
}

impl std::fmt::Debug for Txn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn").field("id", &self.info.id).field("url", &self.url).finish_non_exhaustive()
    }
}

impl Txn {
    /// Starts a transaction for `req` from `client`. Boxed from the start: the transaction
    /// travels from the request's future to the response body, and a pointer is cheaper to
    /// move than its 400 bytes.
    pub fn start<B>(state: &Arc<State>, client: SocketAddr, req: &Request<B>, tls: bool) -> Box<Self> {
        Self::begin(state, client, req, tls, false)
    }

    /// Starts the transaction of a background revalidation (`stale-while-revalidate`) of
    /// `uri`, which a request from `client` set off: the modules see it with
    /// [`TxnInfo::background`] set, from `resolve` to `origin_resp_body`, then `resp_done` and
    /// `log` (docs/modules.md, "Background revalidation").
    pub fn background(state: &Arc<State>, client: SocketAddr, uri: &http::Uri) -> Box<Self> {
        let mut req = Request::new(());
        *req.uri_mut() = uri.clone();
        Self::begin(state, client, &req, false, true)
    }

    fn begin<B>(state: &Arc<State>, client: SocketAddr, req: &Request<B>, tls: bool, background: bool) -> Box<Self> {
        let info = TxnInfo {
            id: state.next_txn_id(),
            client,
            cache: Arc::clone(&state.content),
            cpu: state.cpu.clone(),
            background,
        };
        let (modules, start_failure) = SharedChain::new(&state.modules.load(), &info);
        let headers = req.headers();
        // The log line's fields are looked up only when there is a log to write.
        let logged = state.access_log.is_some();
        Box::new(Self {
            modules,
            start_failure,
            code: ResultCode::None,
            peer: None,
            // Formatted only for the access log; routing sets the URL it resolved.
            url: if logged { logged_url(req.uri(), headers, tls) } else { String::new() },
            status: 0,
            content_type: None,
            head_bytes: 0,
            body_bytes: 0,
            completed: false,
            started: Instant::now(),
            method: req.method().clone(),
            version: req.version(),
            referer: if logged { headers.get(header::REFERER).cloned() } else { None },
            user_agent: if logged { headers.get(header::USER_AGENT).cloned() } else { None },
            user: None,
            route_headers: None,
            reverse: false,
            in_flight: None,
            state: Arc::clone(state),
            info,
        })
    }

    /// The method the client sent, before any module changed it.
    pub fn sent_method(&self) -> &Method {
        &self.method
    }

    /// Records the response head being sent.
    pub fn responding(&mut self, parts: &http::response::Parts) {
        self.status = parts.status.as_u16();
        if self.state.access_log.is_none() {
            return;
        }
        self.content_type = parts.headers.get(header::CONTENT_TYPE).cloned();
        // Status line plus fields, as on the wire; used for Squid's %<st (head and body).
        self.head_bytes =
            17 + parts.headers.iter().map(|(n, v)| (n.as_str().len() + v.len() + 4) as u64).sum::<u64>() + 2;
    }

    fn outcome(&self) -> TxnOutcome {
        TxnOutcome {
            status: http::StatusCode::from_u16(self.status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR),
            body_bytes: self.body_bytes,
            result: self.code.as_str(),
            completed: self.completed,
        }
    }
}

impl Txn {
    /// Ends the transaction: `body_bytes` were sent, `completed` unless it failed or the
    /// client left. Logging and metrics happen in `Drop`.
    pub fn complete(mut self, body_bytes: u64, completed: bool) {
        self.body_bytes = body_bytes;
        self.completed = completed;
    }

    /// Records the status of a transaction that sends no response head (a background
    /// revalidation: the origin's status).
    pub fn record_status(&mut self, status: http::StatusCode) {
        self.status = status.as_u16();
    }

    /// Records the outcome without ending the transaction (the body calls this when it ends).
    pub fn record_end(&mut self, body_bytes: u64, completed: bool) {
        self.body_bytes = body_bytes;
        self.completed = completed;
    }

    /// Fails the transaction (500) when a module that guards it closed panicked in
    /// `new_txn`; called before its first phase.
    pub fn check_start(&mut self) -> Result<(), ProxyError> {
        match self.start_failure.take() {
            None => Ok(()),
            Some(failure) => Err(module_error(failure)),
        }
    }

    /// Runs a phase that may defer (a header phase, or a body phase on a whole buffered body)
    /// for the modules taking part; free when none does. `call(module, info, None)` calls
    /// the phase method, `call(module, info, Some(verdict))` the module's `resumed` with the
    /// phase's subject. Use it through [`module_phase!`], which writes that closure and
    /// turns a closed module failure into a 500.
    ///
    /// The modules are called before this returns: the outcome is ready, unless a module
    /// deferred, and then the rest of the phase is returned, to await at once.
    #[inline(always)]
    pub fn phase<'a>(
        &'a mut self,
        honours: Honours,
        call: impl FnMut(&mut dyn ModuleTxn, &TxnInfo, Option<Flow>) -> Flow + Send + 'a,
    ) -> Phase<'a> {
        if self.modules.is_empty() {
            return Phase::Ready(Ok(PhaseOutcome::default()));
        }
        self.module_phase(honours, call)
    }

    /// [`Txn::phase`] when some module takes part: one call, the phase inlined in it.
    fn module_phase<'a>(
        &'a mut self,
        honours: Honours,
        mut call: impl FnMut(&mut dyn ModuleTxn, &TxnInfo, Option<Flow>) -> Flow + Send + 'a,
    ) -> Phase<'a> {
        let Self { modules, info, .. } = self;
        match modules.start_phase(honours, move |m, resumed| call(m, info, resumed)) {
            PhaseStart::Ready(result) => Phase::Ready(result),
            PhaseStart::Waiting(rest) => Phase::Waiting(rest),
        }
    }

    /// The `origin_resp_body` phase for a fetch that stores the body it reads (the chain is
    /// then shared with the fetch); `None` when no module is active.
    pub fn origin_body_phase(&mut self) -> Option<OriginBodyPhase> {
        let edits = self.modules.edits()?;
        Some(OriginBodyPhase {
            chain: self.modules.share(),
            info: self.info.clone(),
            may_change: edits.origin_response,
            length: crate::body::SameLength::default(),
        })
    }

    /// Runs a response body phase of the modules taking part on `chunk` (a local answer
    /// cannot apply there: the head is sent).
    pub fn body_phase(
        &mut self,
        chunk: &mut sluice_module::BodyChunk,
        mut call: impl FnMut(&mut dyn ModuleTxn, &TxnInfo, &mut sluice_module::BodyChunk) -> Flow,
    ) -> Result<(), ModuleFailure> {
        let Self { modules, info, .. } = self;
        modules.body_phase(chunk, crate::chain::Honours::Nothing, |m, c| call(m, info, c)).map(drop)
    }
}

/// The modules' `origin_resp_body` phase on a body a fetch stores ([`Txn::origin_body_phase`]).
pub struct OriginBodyPhase {
    pub chain: SharedChain,
    pub info: TxnInfo,
    /// Some module declared that it may change the body
    /// ([`sluice_module::BodyEdits::origin_response`]): readers of the fill get it without the
    /// origin's length. Otherwise the length stays, and a module changing it fails the fill.
    pub may_change: bool,
    /// The announced length kept through the phase (unless it may change).
    pub length: crate::body::SameLength,
}

impl OriginBodyPhase {
    /// Runs the phase on one piece of the body.
    pub fn run(&mut self, data: bytes::Bytes, end: bool) -> Result<bytes::Bytes, String> {
        let announced = data.len();
        let mut chunk = sluice_module::BodyChunk::new(data, end);
        let info = &self.info;
        self.chain
            .body_phase(&mut chunk, crate::chain::Honours::Nothing, |m, c| m.origin_resp_body(info, c))
            .map_err(|e| e.to_string())?;
        if !self.may_change && !self.length.keeps(announced, chunk.data().len(), end) {
            return Err("a module changed a stored body's length without declaring it in edits_body".into());
        }
        Ok(chunk.into_data())
    }

    /// Whether a module failed open in this phase: the body went on, part edited and part
    /// not, and is not to be stored.
    pub fn failed_open(&mut self) -> bool {
        self.chain.failed_open_in_a_body()
    }
}

/// A header phase under way (see [`Txn::phase`]): its outcome, ready at once unless a module
/// deferred.
pub enum Phase<'a> {
    /// Every module answered at once.
    Ready(Result<PhaseOutcome, ModuleFailure>),
    /// A module deferred: the rest of the phase, to await.
    Waiting(BoxFuture<'a, Result<PhaseOutcome, ModuleFailure>>),
}

/// `module_phase!(txn, X, Subject::Kind(&mut subject), |m, info| m.some_phase(info, &mut subject))`:
/// runs a phase that may defer ([`Txn::phase`]) honouring the verdicts of `Honours::X`, hands
/// a module whose deferred work is done the subject (`sluice_module::Subject::Kind`, through
/// its `resumed`), and evaluates to the phase's `Result<PhaseOutcome, ProxyError>` (a closed
/// module failure is a 500). Use it in an async fn: it awaits only when a module deferred, so
/// the common case polls no future and keeps none in the caller's state.
macro_rules! module_phase {
    ($txn:expr, $honours:ident, $subject:expr, |$m:ident, $info:ident| $call:expr) => {{
        let phase = $txn.phase(
            $crate::chain::Honours::$honours,
            |$m: &mut dyn sluice_module::Txn, $info: &sluice_module::TxnInfo, resumed: Option<sluice_module::Flow>| {
                match resumed {
                    None => $call,
                    Some(deferred) => $m.resumed($info, $subject, deferred),
                }
            },
        );
        let result = match phase {
            $crate::txn::Phase::Ready(result) => result,
            $crate::txn::Phase::Waiting(rest) => rest.await,
        };
        result.map_err($crate::txn::module_error)
    }};
}
pub(crate) use module_phase;

/// A closed module failure, as a transaction error (500).
#[cold]
pub fn module_error(failure: ModuleFailure) -> ProxyError {
    ProxyError::new(Kind::Internal, Side::Module, failure.to_string())
}

impl Drop for Txn {
    fn drop(&mut self) {
        let state = Arc::clone(&self.state);
        state.metrics.record(self.code, self.status, self.body_bytes, self.completed, self.started.elapsed());
        let record = state.access_log.is_some().then(|| self.log_record());
        if self.modules.is_shared() {
            // A fill still runs `origin_resp_body` (its client left): `resp_done`, `log` and
            // the log line wait until it is done, so that no phase comes after them.
            let outcome = self.outcome();
            let info = self.info.clone();
            self.modules.end_after_fill(Box::new(move |chain| {
                let mut fields = LogFields::default();
                chain.notify(|m| m.resp_done(&info, &outcome));
                chain.notify(|m| m.log(&info, &outcome, &mut fields));
                if let (Some(log), Some(mut record)) = (&state.access_log, record) {
                    record.extra = fields.fields;
                    log.log(record);
                }
            }));
            return;
        }
        let mut fields = LogFields::default();
        if !self.modules.is_empty() {
            let outcome = self.outcome();
            let info = &self.info;
            self.modules.notify_both(|m| m.resp_done(info, &outcome), |m| m.log(info, &outcome, &mut fields));
        }
        if let (Some(log), Some(mut record)) = (&state.access_log, record) {
            record.extra = fields.fields;
            log.log(record);
        }
    }
}

impl Txn {
    /// The access log line, without the modules' fields.
    fn log_record(&mut self) -> LogRecord {
        LogRecord {
            end: self.state.clock.now(),
            elapsed: self.started.elapsed(),
            client: self.info.client.ip(),
            code: self.code,
            completed: self.completed,
            status: self.status,
            bytes: self.head_bytes + self.body_bytes,
            method: self.method.clone(),
            url: std::mem::take(&mut self.url),
            version: self.version,
            peer: self.peer,
            content_type: self.content_type.take(),
            referer: self.referer.take(),
            user_agent: self.user_agent.take(),
            user: self.user.take(),
            extra: Vec::new(),
        }
    }
}

/// The URL a request is logged under until routing resolves it (and when it never does: a
/// module's local answer, a refused client): its absolute form, the origin form completed
/// with the `Host` it names, as Squid logs an accelerated request
/// ([`crate::service::named_authority`]: a `Host` that is not a valid authority, which could
/// break the log line, is left out, and so is userinfo).
fn logged_url(uri: &http::Uri, headers: &http::HeaderMap, tls: bool) -> String {
    match crate::service::named_authority(uri, headers).filter(|_| uri.scheme().is_none()) {
        Some(authority) if uri.path().starts_with('/') => crate::service::absolute_url(tls, authority, uri),
        _ => without_userinfo(uri),
    }
}

/// `uri` as text without its userinfo (`user:password@`), which is refused
/// (`service::check_target`) and must not reach the log on its way out.
fn without_userinfo(uri: &http::Uri) -> String {
    let text = uri.to_string();
    match uri.authority().map(|a| a.as_str()).and_then(|a| a.rfind('@').map(|at| &a[..=at])) {
        Some(userinfo) => text.replacen(userinfo, "", 1),
        None => text,
    }
}

#[cfg(test)]
mod userinfo_tests {
    use super::{logged_url, without_userinfo};

    #[test]
    fn origin_form_is_logged_with_its_host() {
        let logged = |uri: &str, host: Option<&str>, tls: bool| {
            let mut headers = http::HeaderMap::new();
            if let Some(host) = host {
                headers.insert(http::header::HOST, host.parse().unwrap());
            }
            logged_url(&uri.parse().unwrap(), &headers, tls)
        };
        assert_eq!(logged("/x/y?z", Some("www.example.com"), false), "http://www.example.com/x/y?z");
        assert_eq!(logged("/x", Some("example.com:8443"), true), "https://example.com:8443/x");
        assert_eq!(logged("/x", None, false), "/x");
        assert_eq!(logged("/x", Some("a b"), false), "/x", "not an authority");
        assert_eq!(logged("/x", Some("u@h"), false), "/x", "no userinfo");
        assert_eq!(logged("http://u:p@h/x", Some("other"), false), "http://h/x", "absolute form wins");
        assert_eq!(logged("h:443", Some("h:443"), false), "h:443", "CONNECT");
        assert_eq!(logged("*", Some("h"), false), "*");
    }

    #[test]
    fn userinfo_is_left_out_of_the_logged_url() {
        let logged = |uri: &str| without_userinfo(&uri.parse().unwrap());
        assert_eq!(logged("http://user:secret@example.com:8080/a?b"), "http://example.com:8080/a?b");
        assert_eq!(logged("http://a@b@example.com/"), "http://example.com/");
        assert_eq!(logged("http://example.com/a@b"), "http://example.com/a@b");
        assert_eq!(logged("/a@b"), "/a@b");
    }
}
