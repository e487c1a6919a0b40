//! The assembled body: an [`http_body::Body`] over a template body that sends template text
//! as soon as it arrives and each include's fragment in document order.
//!
//! Contract:
//! - The template is read ahead of what is sent (up to [`READ_AHEAD`] bytes of queued text)
//!   so that each include's fetch starts as soon as its tag is parsed; at most
//!   [`CONCURRENCY`] fragment fetches of one page (nested ones included) run at once.
//! - A fragment is fetched through the cache ([`crate::content_fetch::fetch_as`]), read
//!   whole (at most [`MAX_FRAGMENT`] bytes), and itself assembled when it is an ESI
//!   template on an ESI route, up to [`MAX_DEPTH`] levels below the page.
//! - A failed include (`src`, then `alt`) yields nothing: the response head is already
//!   sent. It is counted (`sluice_esi_include_errors_total`) and logged unless it said
//!   `onerror="continue"`.
//! - A template body that fails fails this body (the client sees a cut response); dropping
//!   the body (client gone) aborts the fetches still running.

use super::parse::{Event, Include, Parser};
use super::{is_template, Page};
use crate::body::{BoxError, ProxyBody};
use crate::config::Mode;
use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Request, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::task::JoinHandle;

/// How many levels of includes are followed: the page's own includes are level 1; an
/// include inside a level-3 fragment fails.
pub const MAX_DEPTH: u32 = 3;
/// Most includes fetched for one page, nested ones included; the rest fail.
pub const MAX_INCLUDES: usize = 64;
/// Most fragment fetches of one page running at once.
pub const CONCURRENCY: usize = 4;
/// Largest fragment body; a larger one fails the include.
pub const MAX_FRAGMENT: usize = 1 << 20;
/// Template text queued ahead of a pending include before the template is read further.
pub const READ_AHEAD: usize = 256 * 1024;

enum Segment {
    Text(Bytes),
    Include(JoinHandle<Bytes>),
}

/// The assembled body of one ESI document (a page, or a nested fragment).
pub struct Assembler {
    input: ProxyBody,
    input_done: bool,
    parser: Parser,
    queue: VecDeque<Segment>,
    queued_text: usize,
    page: Arc<Page>,
}

impl std::fmt::Debug for Assembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembler").field("depth", &self.page.depth).finish_non_exhaustive()
    }
}

impl Assembler {
    /// Assembles `template`, the body of the document `page` describes.
    pub fn new(page: Arc<Page>, template: ProxyBody) -> Self {
        Self { input: template, input_done: false, parser: Parser::new(), queue: VecDeque::new(), queued_text: 0, page }
    }

    fn enqueue(&mut self, events: Vec<Event>) {
        for event in events {
            match event {
                Event::Text(text) => {
                    self.queued_text += text.len();
                    self.queue.push_back(Segment::Text(text));
                }
                Event::Include(include) => {
                    // Counted here, in document order (the fetches run concurrently): past the
                    // limit the later includes fail, the same ones every time.
                    if self.page.budget.includes.fetch_add(1, Relaxed) >= MAX_INCLUDES {
                        self.page.state.metrics.esi_include_errors.fetch_add(1, Relaxed);
                        tracing::warn!(
                            "ESI include of {:?} omitted in {}: more than {MAX_INCLUDES} includes in the page",
                            include.src,
                            self.page.base
                        );
                        continue;
                    }
                    let task = tokio::spawn(include_fragment(Arc::clone(&self.page), include));
                    self.queue.push_back(Segment::Include(task));
                }
            }
        }
    }

    /// Reads and parses the template while there is room; `Err` when it failed.
    fn pump(&mut self, cx: &mut Context<'_>) -> Result<(), BoxError> {
        while !self.input_done && self.queued_text < READ_AHEAD {
            let mut events = Vec::new();
            match Pin::new(&mut self.input).poll_frame(cx) {
                Poll::Pending => return Ok(()),
                Poll::Ready(Some(Err(e))) => {
                    self.input_done = true;
                    return Err(e);
                }
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.parser.feed(&data, &mut events);
                    }
                }
                Poll::Ready(None) => {
                    self.input_done = true;
                    self.parser.finish(&mut events);
                }
            }
            self.enqueue(events);
        }
        Ok(())
    }
}

impl Body for Assembler {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Err(e) = this.pump(cx) {
            return Poll::Ready(Some(Err(e)));
        }
        loop {
            match this.queue.front_mut() {
                None if this.input_done => return Poll::Ready(None),
                // The template registered the waker.
                None => return Poll::Pending,
                Some(Segment::Text(_)) => {
                    let Some(Segment::Text(text)) = this.queue.pop_front() else { unreachable!() };
                    this.queued_text -= text.len();
                    return Poll::Ready(Some(Ok(Frame::data(text))));
                }
                Some(Segment::Include(task)) => match Pin::new(task).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(result) => {
                        this.queue.pop_front();
                        // Room in the queue again: read on (the include may have blocked it).
                        if let Err(e) = this.pump(cx) {
                            return Poll::Ready(Some(Err(e)));
                        }
                        match result {
                            Ok(data) if !data.is_empty() => return Poll::Ready(Some(Ok(Frame::data(data)))),
                            _ => continue,
                        }
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.input_done && self.queue.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

impl Drop for Assembler {
    fn drop(&mut self) {
        for segment in &self.queue {
            if let Segment::Include(task) = segment {
                task.abort();
            }
        }
    }
}

/// The content that replaces one include: `src`'s fragment, else `alt`'s, else nothing.
async fn include_fragment(page: Arc<Page>, include: Include) -> Bytes {
    let metrics = &page.state.metrics;
    let mut failure = String::new();
    for src in std::iter::once(&include.src).chain(include.alt.as_ref()) {
        match fetch_fragment(&page, src).await {
            Ok(body) => return body,
            Err(e) => failure = format!("{failure}{}{src:?}: {e}", if failure.is_empty() { "" } else { "; " }),
        }
    }
    metrics.esi_include_errors.fetch_add(1, Relaxed);
    if include.continue_on_error {
        tracing::debug!("ESI include omitted in {} (onerror=continue): {failure}", page.base);
    } else {
        tracing::warn!("ESI include failed in {}, omitted: {failure}", page.base);
    }
    Bytes::new()
}

/// Fetches and (when it is a template) assembles one fragment.
async fn fetch_fragment(page: &Arc<Page>, src: &str) -> Result<Bytes, String> {
    if page.depth >= MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    if src.is_empty() {
        return Err("no src".into());
    }
    let uri = sluice_http::uri_ref::resolve(&page.base, src).ok_or("not a valid URL")?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err("not an http(s) URL".into());
    }
    let host = uri.host().unwrap_or("").to_ascii_lowercase();
    if !page.allows(&host) {
        return Err(format!("host {host} is not the page's host nor in the route's esi_hosts"));
    }
    let permit = page.budget.fetches.acquire().await.map_err(|e| e.to_string())?;
    page.state.metrics.esi_includes.fetch_add(1, Relaxed);
    let mut headers = page.headers.clone();
    if !page.same_host(&host) {
        // Credentials are for the page's host, not for another one on the allow-list.
        headers.remove(header::COOKIE);
        headers.remove(header::AUTHORIZATION);
    }
    let authority = uri.authority().map_or("", |a| a.as_str());
    headers.insert(header::HOST, HeaderValue::from_str(authority).map_err(|e| e.to_string())?);
    let mut request = Request::get(uri.clone()).body(()).map_err(|e| e.to_string())?;
    *request.headers_mut() = headers.clone();
    let fetched = crate::content_fetch::fetch_as(&page.state, request, Mode::Reverse).await;
    if let Some(error) = fetched.error {
        return Err(error);
    }
    let (parts, body) = fetched.response.into_parts();
    if !parts.status.is_success() || parts.status == http::StatusCode::PARTIAL_CONTENT {
        return Err(format!("status {}", parts.status.as_u16()));
    }
    if parts.headers.get(header::CONTENT_ENCODING).is_some_and(|v| v != "identity") {
        return Err("compressed (Content-Encoding)".into());
    }
    let whole = read_whole(body, MAX_FRAGMENT).await?;
    drop(permit);
    // A nested template's includes go out with this include's fields: credentials dropped for
    // another host stay dropped, whatever host that template then names as its own.
    match page.nested(&uri, &host, &parts.headers, headers) {
        Some(nested) => read_whole(Assembler::new(nested, ProxyBody::full(whole)), usize::MAX).await,
        None => Ok(whole),
    }
}

/// A body read whole, at most `max` bytes.
async fn read_whole<B>(mut body: B, max: usize) -> Result<Bytes, String>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut whole = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("body failed after {} bytes: {e}", whole.len()))?;
        if let Ok(data) = frame.into_data() {
            if whole.len() + data.len() > max {
                return Err(format!("larger than {max} bytes"));
            }
            whole.extend_from_slice(&data);
        }
    }
    Ok(whole.freeze())
}

impl Page {
    /// The document of a fragment at `uri` (whose host is `host`, whose response fields are
    /// `headers`), when it must be assembled itself: an ESI template on an ESI route. Its own
    /// includes are requested with `request_headers`, the fields its fetch went out with.
    fn nested(
        self: &Arc<Self>,
        uri: &Uri,
        host: &str,
        headers: &http::HeaderMap,
        request_headers: http::HeaderMap,
    ) -> Option<Arc<Page>> {
        if !is_template(headers, &self.state.name) {
            return None;
        }
        let route = self.state.routes.find(Some(host), uri.path())?;
        let esi = route.esi.as_ref()?;
        Some(Arc::new(Page {
            state: Arc::clone(&self.state),
            base: uri.clone(),
            host: host.to_owned(),
            route: Arc::clone(esi),
            headers: request_headers,
            depth: self.depth + 1,
            budget: Arc::clone(&self.budget),
        }))
    }
}
