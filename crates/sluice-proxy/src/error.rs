//! One error type for a transaction: what went wrong, whose fault it is, and what the client
//! is told.

use http::StatusCode;
use std::fmt;

/// Who caused an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Origin,
    Module,
    Proxy,
}

/// What went wrong; decides the status the client gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Malformed or ambiguous request (400).
    BadRequest,
    /// Not allowed by an ACL (403).
    Forbidden,
    /// A forward-proxy request without valid proxy credentials (407).
    ProxyAuthRequired,
    /// A request body larger than allowed (`client.max_body_size`; 413).
    TooLarge,
    /// The client stopped sending its request body before the origin's answer was due
    /// (408): not the origin's failure.
    RequestTimeout,
    /// A rate limit refused the request (`[[rate_limit]]`; 429 with `Retry-After`, in
    /// whole seconds, at least 1).
    TooManyRequests { retry_after_secs: u64 },
    /// No route for a reverse-proxied request, or a request for the proxy itself (404).
    NoRoute,
    /// `Via` shows the request already passed through us (508).
    Loop,
    /// The request uses something the proxy does not implement: a transfer coding other
    /// than `chunked` (501, RFC 9112 §6.1).
    NotImplemented,
    /// The origin could not be resolved or reached, or broke the protocol (502).
    BadGateway,
    /// The origin was too slow (504).
    GatewayTimeout,
    /// `only-if-cached` and nothing usable is stored (504).
    NotCached,
    /// A bug or resource exhaustion in the proxy (500).
    Internal,
    /// The proxy is at a limit of its own: no origin connection could be had under
    /// `upstream.max_connections` in time (503).
    Unavailable,
}

/// A transaction error.
#[derive(Debug)]
pub struct ProxyError {
    pub kind: Kind,
    pub side: Side,
    /// What was being done, for the log and the error page.
    pub context: String,
    pub cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ProxyError {
    pub fn new(kind: Kind, side: Side, context: impl Into<String>) -> Self {
        Self { kind, side, context: context.into(), cause: None }
    }

    /// Attaches the underlying error.
    /// The local answer a module gave while the request body streamed to the origin
    /// (`req_body.rs`), which the client gets instead of an error: found anywhere in the
    /// chain of causes (an HTTP/2 origin's client wraps the body's error in its own).
    pub fn module_answer(&self) -> Option<&sluice_module::LocalResponse> {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self.cause.as_deref()?);
        while let Some(error) = cause {
            if let Some(ended) = error.downcast_ref::<crate::req_body::ModuleBodyError>() {
                return ended.answer.as_deref();
            }
            cause = error.source();
        }
        None
    }

    pub fn with_cause(mut self, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        self.cause = Some(cause.into());
        self
    }

    pub fn bad_request(context: impl Into<String>) -> Self {
        Self::new(Kind::BadRequest, Side::Client, context)
    }

    pub fn bad_gateway(context: impl Into<String>) -> Self {
        Self::new(Kind::BadGateway, Side::Origin, context)
    }

    pub fn gateway_timeout(context: impl Into<String>) -> Self {
        Self::new(Kind::GatewayTimeout, Side::Origin, context)
    }

    /// The status the client gets.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            Kind::BadRequest => StatusCode::BAD_REQUEST,
            Kind::Forbidden => StatusCode::FORBIDDEN,
            Kind::ProxyAuthRequired => StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            Kind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Kind::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Kind::NoRoute => StatusCode::NOT_FOUND,
            Kind::Loop => StatusCode::LOOP_DETECTED,
            Kind::NotImplemented => StatusCode::NOT_IMPLEMENTED,
            Kind::BadGateway => StatusCode::BAD_GATEWAY,
            Kind::GatewayTimeout | Kind::NotCached => StatusCode::GATEWAY_TIMEOUT,
            Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// True when the origin gave no usable answer (unresolvable, unreachable, broken or too
    /// slow), where a stale response may be served instead (`stale-if-error`,
    /// `cache.stale_if_unreachable`).
    pub fn is_origin_failure(&self) -> bool {
        matches!(self.kind, Kind::BadGateway | Kind::GatewayTimeout)
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.context)?;
        if let Some(cause) = &self.cause {
            write!(f, ": {cause}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ProxyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_deref().map(|c| c as &(dyn std::error::Error + 'static))
    }
}
