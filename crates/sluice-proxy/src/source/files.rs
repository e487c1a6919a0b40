//! [`FileSource`]: a route's directory as a data source. It answers the requests the cache
//! (or pass-through) sends it the way an origin server would:
//!
//! - `200` with `Content-Length`, `Content-Type` (by extension), `Last-Modified` (the
//!   file's modification time, never later than `Date`), a strong `ETag` made of inode,
//!   size, modification and change times, and the route's `Cache-Control`; the body streams
//!   from the file ([`FileBody`]);
//! - `304` when the request's `If-None-Match` / `If-Modified-Since` match (the file is only
//!   `fstat`ed, never read), `412` when `If-Match` / `If-Unmodified-Since` fail;
//! - `404` for a missing file or a directory (with the route's `Cache-Control`: the watcher
//!   drops a cached 404 when the file appears), `403` for a path leaving the root or a file
//!   that is not a readable regular file, `405` for methods other than GET and HEAD.
//!
//! `Range` is not honoured here (a `200` with the whole file is a valid answer): the cache
//! asks for whole files and answers ranges from the stored object.

use super::file_body::{FileBody, Stamp};
use super::file_open::{Opened, Root};
use super::file_path::{self, Refused};
use super::inflight::{Inflight, ReadGuard};
use super::{mime, watch, SourceBody};
use crate::body::OutBody;
use crate::config::FilesConfig;
use crate::date::DateCache;
use crate::error::{Kind, ProxyError, Side};
use crate::tiers::Tiers;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use sluice_http::conditional::{self, Precondition};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::UNIX_EPOCH;

/// A served directory with its caching policy and (once started) its change watcher.
pub struct FileSource {
    root: Arc<Root>,
    cache_control: HeaderValue,
    watch: bool,
    watching: OnceLock<Watching>,
}

/// A running watcher and the reads it marks.
struct Watching {
    /// Kept for its drop, which stops the watcher.
    _watcher: notify::RecommendedWatcher,
    inflight: Arc<Inflight>,
}

impl std::fmt::Debug for FileSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSource").field("root", &self.root.path).finish_non_exhaustive()
    }
}

impl FilesConfig {
    /// Checks what the types cannot (at configuration time; the directory itself is opened
    /// at start-up).
    pub fn validate(&self, preserve_host: bool) -> Result<(), String> {
        let root = self.root.display();
        if !self.root.is_absolute() {
            return Err(format!("route files.root `{root}` must be an absolute path"));
        }
        if self.cache_control.trim().is_empty() || HeaderValue::from_str(&self.cache_control).is_err() {
            return Err(format!("route files.cache_control {:?} is not a header value", self.cache_control));
        }
        if preserve_host {
            return Err(format!("route with files.root `{root}`: preserve_host applies to origins only"));
        }
        Ok(())
    }
}

impl FileSource {
    /// Opens the configured directory. Fails when it is not an accessible directory.
    pub fn open(config: &FilesConfig) -> Result<Self, String> {
        config.validate(false)?;
        let root = Root::open(&config.root, config.follow_outside_symlinks)
            .map_err(|e| format!("route files.root `{}`: {e}", config.root.display()))?;
        let cache_control = HeaderValue::from_str(&config.cache_control).map_err(|e| e.to_string())?;
        Ok(Self { root: Arc::new(root), cache_control, watch: config.watch, watching: OnceLock::new() })
    }

    /// Starts the change watcher (when configured and not yet running): from then on a
    /// change to a file drops its responses from `store`.
    pub fn watch(&self, store: Arc<Tiers>) -> Result<(), String> {
        if !self.watch || self.watching.get().is_some() {
            return Ok(());
        }
        let inflight = Arc::new(Inflight::new(Arc::clone(&store)));
        let watcher = watch::start(&self.root.path, store, Arc::clone(&inflight)).map_err(|e| {
            format!(
                "cannot watch {} for changes ({e}); set files.watch = false to serve without",
                self.root.path.display()
            )
        })?;
        // A concurrent start that won keeps its watcher; this one is dropped (stopped).
        let _ = self.watching.set(Watching { _watcher: watcher, inflight });
        Ok(())
    }

    /// The `file://` URI (and so the cache key) of the file a request names by `tail`, its
    /// path below the route's prefix. The query is not part of it: a file has one
    /// representation. Paths with `.`/`..` segments or encoded `/` or NUL are refused (403).
    pub fn uri_for(&self, tail: &str) -> Result<http::Uri, ProxyError> {
        let segments = file_path::segments(tail).map_err(refusal)?;
        let path = file_path::join(&self.root.path, &segments);
        file_path::uri(&path).map_err(|e| ProxyError::bad_request("cannot map the request path").with_cause(e))
    }

    /// Answers `req`, whose URI path is that of a URI from [`Self::uri_for`]. When the
    /// directory is watched, the response body holds the read's guard (`inflight.rs`):
    /// dropped after the cache stored what it read, it drops that again if the file changed
    /// in between.
    pub async fn respond(&self, dates: &DateCache, req: Request<OutBody>) -> Result<Response<SourceBody>, ProxyError> {
        let (parts, _) = req.into_parts();
        let date = dates.value();
        if parts.method != Method::GET && parts.method != Method::HEAD {
            let mut response = self.small(StatusCode::METHOD_NOT_ALLOWED, date, "only GET and HEAD\n", false, None);
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return Ok(response);
        }
        let relative = match file_path::relative(&self.root.path, parts.uri.path()) {
            Ok(relative) => relative,
            Err(Refused::Escape) => return Ok(self.small(StatusCode::FORBIDDEN, date, "forbidden\n", false, None)),
            Err(Refused::BadEncoding) => {
                return Ok(self.small(StatusCode::BAD_REQUEST, date, "bad path\n", false, None));
            }
        };
        // Registered before the open: a change after this point marks the read.
        let read = self.watching.get().map(|w| w.inflight.start(file_path::key(&self.root.path.join(&relative))));
        let root = Arc::clone(&self.root);
        let opened = tokio::task::spawn_blocking(move || root.open_file(&relative).map(|o| (o, relative)))
            .await
            .map_err(|e| ProxyError::new(Kind::Internal, Side::Proxy, "file open task failed").with_cause(e))?
            .map_err(|e| ProxyError::new(Kind::Internal, Side::Proxy, "cannot open file").with_cause(e))?;
        let (file, meta, relative) = match opened {
            (Opened::File(file, meta), relative) => (file, meta, relative),
            (Opened::NotFound | Opened::Directory, _) => {
                return Ok(self.small(StatusCode::NOT_FOUND, date, "not found\n", true, read));
            }
            (Opened::Forbidden, _) => {
                return Ok(self.small(StatusCode::FORBIDDEN, date, "forbidden\n", false, read));
            }
        };
        self.file_response(&parts, file, &meta, &relative, date, read)
    }

    /// The answer for an open regular file: `304`/`412` by the request's conditionals, else
    /// `200` (with the file's body for GET).
    fn file_response(
        &self,
        request: &http::request::Parts,
        file: std::fs::File,
        meta: &std::fs::Metadata,
        relative: &Path,
        date: HeaderValue,
        read: Option<ReadGuard>,
    ) -> Result<Response<SourceBody>, ProxyError> {
        let headers = self.headers(relative, meta, date);
        let mut response = Response::new(SourceBody::local(Bytes::new(), None));
        match conditional::evaluate(&request.method, &request.headers, StatusCode::OK, &headers) {
            Precondition::NotModified => {
                *response.status_mut() = StatusCode::NOT_MODIFIED;
                *response.headers_mut() = conditional::not_modified_headers(&headers);
            }
            Precondition::Failed => {
                *response.status_mut() = StatusCode::PRECONDITION_FAILED;
                response.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(0));
                if let Some(date) = headers.get(header::DATE) {
                    response.headers_mut().insert(header::DATE, date.clone());
                }
            }
            Precondition::Proceed => {
                *response.headers_mut() = headers;
                if request.method == Method::GET {
                    let body = FileBody::new(file, meta, read)
                        .map_err(|e| ProxyError::new(Kind::Internal, Side::Proxy, "cannot read file").with_cause(e))?;
                    *response.body_mut() = SourceBody::File(Box::new(body));
                    return Ok(response);
                }
            }
        }
        // A 304's body is dropped by the cache after it stored the freshened object.
        *response.body_mut() = SourceBody::local(Bytes::new(), read);
        Ok(response)
    }

    /// The header fields of a `200` for the file at `relative` with metadata `meta`.
    fn headers(&self, relative: &Path, meta: &std::fs::Metadata, date: HeaderValue) -> HeaderMap {
        let stamp = Stamp::of(meta);
        let mut headers = HeaderMap::with_capacity(8);
        let now = sluice_http::dates::parse_http_date(&date);
        headers.insert(header::DATE, date);
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime::content_type(relative)));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(stamp.size));
        // RFC 9110 §8.8.2.1: never later than Date.
        let mut modified = meta.modified().unwrap_or(UNIX_EPOCH);
        if let Some(now) = now.filter(|now| modified > *now) {
            modified = now;
        }
        headers.insert(header::LAST_MODIFIED, sluice_http::dates::format_http_date(modified));
        if let Ok(etag) = HeaderValue::from_str(&etag(&stamp)) {
            headers.insert(header::ETAG, etag);
        }
        headers.insert(header::CACHE_CONTROL, self.cache_control.clone());
        headers
    }

    /// A short text response; `cacheable` ones carry the route's `Cache-Control`.
    fn small(
        &self,
        status: StatusCode,
        date: HeaderValue,
        text: &'static str,
        cacheable: bool,
        read: Option<ReadGuard>,
    ) -> Response<SourceBody> {
        let mut response = Response::new(SourceBody::local(Bytes::from_static(text.as_bytes()), read));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(header::DATE, date);
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
        if cacheable {
            headers.insert(header::CACHE_CONTROL, self.cache_control.clone());
        }
        response
    }
}

/// A strong entity tag for one version of a file. Inode, size and the modification time
/// alone could repeat after an in-place rewrite that restores the old time (`cp -p`,
/// `touch -d`); the change time cannot be set by users.
fn etag(stamp: &Stamp) -> String {
    format!("\"{:x}-{:x}-{:x}-{:x}\"", stamp.ino, stamp.size, stamp.mtime_ns, stamp.ctime_ns)
}

fn refusal(refused: Refused) -> ProxyError {
    match refused {
        Refused::Escape => ProxyError::new(Kind::Forbidden, Side::Client, "the path leaves the route's directory"),
        Refused::BadEncoding => ProxyError::bad_request("invalid percent-encoding in the path"),
    }
}
