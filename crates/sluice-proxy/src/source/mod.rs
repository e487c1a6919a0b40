//! Data sources: where a request that leaves the proxy is answered. An HTTP origin (through
//! the upstream pool) or a local directory (the file source).
//!
//! Every source answers with the same thing, a response head and a streaming
//! [`SourceBody`], so the cache path (RFC 9111 storability, freshness, validation and 304
//! freshening, collapsing, the module phases) treats them alike: a stored object never
//! knows where its data came from. [`send`] is the one dispatch point.
//!
//! | file | job |
//! |---|---|
//! | `files.rs` | [`FileSource`]: answers GET/HEAD from a directory (validators, conditionals) |
//! | `file_path.rs` | request paths ⇄ files ⇄ `file://` URIs and cache keys; refuses escapes |
//! | `file_open.rs` | opens a file without leaving the root (`openat2` `RESOLVE_BENEATH`) |
//! | `file_body.rs` | [`FileBody`]: a file streamed in chunks, checked unchanged at its end |
//! | `watch.rs` | the inotify watcher that drops changed files' responses from the store |
//! | `inflight.rs` | reads in flight, so a change during a read also drops what it stores |
//! | `mime.rs` | `Content-Type` by file extension |

mod file_body;
mod file_open;
mod file_path;
mod files;
mod inflight;
mod mime;
mod watch;

pub use file_body::FileBody;
pub use files::FileSource;

use crate::body::{BoxError, OutBody};
use crate::error::ProxyError;
use crate::origin_pool::{MemberLoad, OriginPool};
use crate::state::State;
use crate::upstream::{PooledBody, Target};
use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Where a request goes.
#[derive(Debug, Clone)]
pub enum Dest {
    /// An HTTP origin, through the upstream pool.
    Origin(Target),
    /// An origin of a route's origin pool, chosen for this request; the others stand by
    /// (`crate::origin_pool`).
    Pool(PoolMember),
    /// A directory served by a file source.
    Files(Arc<FileSource>),
}

impl Dest {
    /// Where an HTTP request goes (first): `None` for a file source.
    pub fn origin(&self) -> Option<&Target> {
        match self {
            Dest::Origin(target) => Some(target),
            Dest::Pool(member) => Some(member.target()),
            Dest::Files(_) => None,
        }
    }
}

/// An origin of a pool, by its index.
#[derive(Debug, Clone)]
pub struct PoolMember {
    pub pool: Arc<OriginPool>,
    pub member: usize,
}

impl PoolMember {
    /// Where its requests go.
    pub fn target(&self) -> &Target {
        &self.pool.members()[self.member].origin.target
    }
}

/// A data source's response.
#[derive(Debug)]
pub struct SourceResponse {
    pub response: Response<SourceBody>,
    /// The origin's address; `None` for a local source (the access log shows `HIER_NONE/-`).
    pub peer: Option<IpAddr>,
}

/// Sends `req` (origin-form URI) to `dest` and waits for the response head. Origin errors
/// are those of [`crate::upstream::Upstream::send`]; a file source answers every request
/// with a response (404, 403, 405, ...) and fails only on an unexpected I/O error (500).
pub async fn send(state: &State, dest: &Dest, req: Request<OutBody>) -> Result<SourceResponse, ProxyError> {
    match dest {
        Dest::Origin(target) => {
            let origin = state.upstream.send(target, req).await?;
            Ok(SourceResponse {
                response: origin.response.map(|body| SourceBody::Origin(Box::new(body))),
                peer: Some(origin.peer),
            })
        }
        Dest::Pool(first) => {
            // Boxed: inline, its larger state would enlarge every origin request's future.
            let (origin, load) = Box::pin(first.pool.send(&state.upstream, first.member, req)).await?;
            Ok(SourceResponse {
                response: origin
                    .response
                    .map(|body| SourceBody::Balanced(Box::new(BalancedBody { body, _load: load }))),
                peer: Some(origin.peer),
            })
        }
        Dest::Files(files) => {
            let response = files.respond(&state.dates, req).await?;
            Ok(SourceResponse { response, peer: None })
        }
    }
}

/// A response body from a data source.
#[derive(Debug)]
pub enum SourceBody {
    /// Read off an origin connection. Boxed: it carries the connection, and inline it would
    /// make every response body (hits included) twice as large to move.
    Origin(Box<PooledBody>),
    /// Read off a connection to an origin of a pool, which counts it in flight until dropped.
    Balanced(Box<BalancedBody>),
    /// Read from a file (boxed: a file body is several times the size of the others, and
    /// every response body would pay for it).
    File(Box<FileBody>),
    /// A small body made here (a file source's 404), or none; `read` is the file read it
    /// answers, if watched (dropped with the body).
    Local { data: Option<Bytes>, read: Option<inflight::ReadGuard> },
}

/// A pooled origin's body and the load it puts on its origin.
#[derive(Debug)]
pub struct BalancedBody {
    body: PooledBody,
    _load: MemberLoad,
}

impl SourceBody {
    /// A body of `data` (none when empty).
    pub fn local(data: Bytes, read: Option<inflight::ReadGuard>) -> Self {
        SourceBody::Local { data: (!data.is_empty()).then_some(data), read }
    }
}

impl Body for SourceBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            SourceBody::Origin(body) => Pin::new(body.as_mut()).poll_frame(cx).map_err(Into::into),
            SourceBody::Balanced(balanced) => Pin::new(&mut balanced.body).poll_frame(cx).map_err(Into::into),
            SourceBody::File(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            SourceBody::Local { data, .. } => Poll::Ready(data.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            SourceBody::Origin(body) => body.is_end_stream(),
            SourceBody::Balanced(balanced) => balanced.body.is_end_stream(),
            SourceBody::File(body) => body.is_end_stream(),
            SourceBody::Local { data, .. } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            SourceBody::Origin(body) => body.size_hint(),
            SourceBody::Balanced(balanced) => balanced.body.size_hint(),
            SourceBody::File(body) => body.size_hint(),
            SourceBody::Local { data, .. } => SizeHint::with_exact(data.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}
