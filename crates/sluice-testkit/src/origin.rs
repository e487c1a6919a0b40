//! A scriptable HTTP/1.1 origin on raw TCP, so tests control every byte: status, headers
//! (with dates relative to an injected clock), delays, truncated bodies, disconnects,
//! validation (304), and per-path request counters.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A header value: text, or a date `offset` seconds from the origin clock's now.
#[derive(Debug, Clone)]
enum Value {
    Text(String),
    DateFromNow(i64),
}

/// How the origin misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    Normal,
    /// Close the connection without answering.
    CloseBeforeHead,
    /// Announce the full length, send this many body bytes, then close.
    TruncateAfter(usize),
    /// Send the body with chunked encoding.
    Chunked,
    /// Send the body with chunked encoding, in pieces of this size, each written on its own
    /// after a short pause (so the reader sees many small reads).
    Trickle(usize),
    /// Send bytes that are not HTTP.
    Garbage,
    /// Answer normally, then close the connection without announcing it.
    CloseAfter,
    /// Send no framing field: the body ends when the connection closes.
    UntilClose,
    /// Send the first half of the body, stay quiet this long, then send the rest.
    PauseMidBody(Duration),
}

/// One scripted response.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, Value)>,
    body: Bytes,
    delay: Duration,
    behaviour: Behaviour,
    validate: bool,
    interim: Option<u16>,
}

impl Reply {
    /// A 200 with `body`.
    pub fn ok(body: impl Into<Bytes>) -> Self {
        Self::status(200, body)
    }

    /// A response with `status` and `body`.
    pub fn status(status: u16, body: impl Into<Bytes>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.into(),
            delay: Duration::ZERO,
            behaviour: Behaviour::Normal,
            validate: false,
            interim: None,
        }
    }

    /// Adds a header field.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), Value::Text(value.to_owned())));
        self
    }

    /// Adds a date header `offset_secs` from the origin clock's now (negative: the past).
    pub fn date(mut self, name: &str, offset_secs: i64) -> Self {
        self.headers.push((name.to_owned(), Value::DateFromNow(offset_secs)));
        self
    }

    /// Waits before sending the head.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Closes the connection without answering.
    pub fn close_before_head(mut self) -> Self {
        self.behaviour = Behaviour::CloseBeforeHead;
        self
    }

    /// Announces the whole body but sends only `n` bytes of it, then closes.
    pub fn truncate_after(mut self, n: usize) -> Self {
        self.behaviour = Behaviour::TruncateAfter(n);
        self
    }

    /// Uses chunked transfer coding instead of Content-Length.
    pub fn chunked(mut self) -> Self {
        self.behaviour = Behaviour::Chunked;
        self
    }

    /// Uses chunked transfer coding with `size`-byte pieces, written one by one with a
    /// millisecond between them: a body that arrives in many small reads.
    pub fn trickle(mut self, size: usize) -> Self {
        self.behaviour = Behaviour::Trickle(size.max(1));
        self
    }

    /// Sends the first half of the body (announced whole), stays quiet for `pause`, then
    /// sends the rest: a server stream or long poll with a quiet spell.
    pub fn pause_mid_body(mut self, pause: Duration) -> Self {
        self.behaviour = Behaviour::PauseMidBody(pause);
        self
    }

    /// Answers normally, then closes the connection without a `Connection: close`.
    pub fn close_after(mut self) -> Self {
        self.behaviour = Behaviour::CloseAfter;
        self
    }

    /// Sends the body without Content-Length or chunked coding, and closes to end it.
    pub fn until_close(mut self) -> Self {
        self.behaviour = Behaviour::UntilClose;
        self
    }

    /// Sends an interim (1xx) response with `status` before the final one.
    pub fn interim(mut self, status: u16) -> Self {
        self.interim = Some(status);
        self
    }

    /// Answers with bytes that are not an HTTP response.
    pub fn garbage(mut self) -> Self {
        self.behaviour = Behaviour::Garbage;
        self
    }

    /// Answers conditional requests: 304 when `If-None-Match` matches this reply's `ETag`
    /// or `If-Modified-Since` is not before its `Last-Modified`.
    pub fn validating(mut self) -> Self {
        self.validate = true;
        self
    }
}

/// A request as the origin received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

#[derive(Default)]
struct Script {
    replies: Vec<Reply>,
}

struct Shared {
    scripts: Mutex<HashMap<String, Script>>,
    hits: Mutex<HashMap<String, usize>>,
    requests: Mutex<HashMap<String, Vec<RecordedRequest>>>,
    connections: Mutex<usize>,
    /// Connections that ended (the peer closed them, or a reply ended them).
    ended: tokio::sync::watch::Sender<usize>,
    clock: Clock,
}

/// The origin. Dropping it stops the server.
pub struct Origin {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origin").field("addr", &self.addr).finish()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Origin {
    /// Starts an origin on 127.0.0.1 with an ephemeral port; dates come from `clock`.
    pub async fn start(clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            scripts: Mutex::default(),
            hits: Mutex::default(),
            requests: Mutex::default(),
            connections: Mutex::default(),
            ended: tokio::sync::watch::Sender::new(0),
            clock: Arc::new(clock),
        });
        let accept_shared = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                *accept_shared.connections.lock() += 1;
                let shared = Arc::clone(&accept_shared);
                tokio::spawn(async move {
                    serve(Arc::clone(&shared), stream).await;
                    shared.ended.send_modify(|n| *n += 1);
                });
            }
        });
        Self { addr, shared, task }
    }

    /// `http://127.0.0.1:port` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Every request for `path` (path and query, as sent) gets `reply`.
    pub fn on(&self, path: &str, reply: Reply) {
        self.on_seq(path, vec![reply]);
    }

    /// The n-th request for `path` gets the n-th reply; the last one repeats.
    pub fn on_seq(&self, path: &str, replies: Vec<Reply>) {
        self.shared.scripts.lock().insert(path.to_owned(), Script { replies });
    }

    /// How many requests for `path` arrived.
    pub fn hits(&self, path: &str) -> usize {
        self.shared.hits.lock().get(path).copied().unwrap_or(0)
    }

    /// The requests received for `path`, oldest first.
    pub fn requests(&self, path: &str) -> Vec<RecordedRequest> {
        self.shared.requests.lock().get(path).cloned().unwrap_or_default()
    }

    /// The last request received for `path`.
    pub fn last_request(&self, path: &str) -> Option<RecordedRequest> {
        self.requests(path).pop()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        *self.shared.connections.lock()
    }

    /// Waits until at least `n` connections have ended (closed by the peer, or by a reply
    /// that ends its connection). Never returns if fewer ever end: bound it with a timeout.
    pub async fn connections_ended(&self, n: usize) {
        let mut ended = self.shared.ended.subscribe();
        // The sender lives as long as `self`, so waiting cannot fail.
        let _ = ended.wait_for(|ended| *ended >= n).await;
    }
}

async fn serve(shared: Arc<Shared>, mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    loop {
        let Some((request, used)) = read_request(&mut stream, &mut buf).await else { return };
        buf.drain(..used);
        let reply = {
            let mut hits = shared.hits.lock();
            let n = hits.entry(request.target.clone()).or_insert(0);
            *n += 1;
            let scripts = shared.scripts.lock();
            scripts.get(&request.target).map(|s| s.replies[(*n - 1).min(s.replies.len() - 1)].clone())
        };
        shared.requests.lock().entry(request.target.clone()).or_default().push(request.clone());
        let reply = reply.unwrap_or_else(|| Reply::status(404, format!("no script for {}\n", request.target)));
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        let head_only = request.method == "HEAD";
        if !write_reply(&shared, &mut stream, &reply, &request, head_only).await {
            return;
        }
    }
}

/// Reads one request head and body (Content-Length, chunked, or none). `None` on EOF or
/// garbage.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(RecordedRequest, usize)> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(head_len)) = req.parse(buf) {
            let headers: Vec<(String, String)> = req
                .headers
                .iter()
                .map(|h| (h.name.to_owned(), String::from_utf8_lossy(h.value).into_owned()))
                .collect();
            let field = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim());
            let chunked = field("transfer-encoding").is_some_and(|te| te.eq_ignore_ascii_case("chunked"));
            let len: usize = field("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            let method = req.method.unwrap_or("").to_owned();
            let target = req.path.unwrap_or("").to_owned();
            if chunked {
                loop {
                    if let Some((body, used)) = decode_chunked(&buf[head_len..]) {
                        return Some((RecordedRequest { method, target, headers, body }, head_len + used));
                    }
                    read_some(stream, buf).await?;
                }
            }
            while buf.len() < head_len + len {
                read_some(stream, buf).await?;
            }
            let body = buf[head_len..head_len + len].to_vec();
            return Some((RecordedRequest { method, target, headers, body }, head_len + len));
        }
        read_some(stream, buf).await?;
    }
}

/// Appends what the peer sends next to `buf`; `None` at EOF or on an error.
async fn read_some(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    let n = stream.read(&mut chunk).await.ok()?;
    if n == 0 {
        return None;
    }
    buf.extend_from_slice(&chunk[..n]);
    Some(())
}

/// A complete chunked body at the start of `wire` (no trailers), and the bytes it used.
fn decode_chunked(wire: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = at + wire[at..].windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&wire[at..line_end]).ok()?.trim(), 16).ok()?;
        at = line_end + 2;
        if size == 0 {
            return (wire.len() >= at + 2).then_some((body, at + 2));
        }
        if wire.len() < at + size + 2 {
            return None;
        }
        body.extend_from_slice(&wire[at..at + size]);
        at += size + 2;
    }
}

fn render(shared: &Shared, value: &Value) -> String {
    match value {
        Value::Text(t) => t.clone(),
        Value::DateFromNow(offset) => {
            let now = (shared.clock)();
            let t = if *offset >= 0 {
                now + Duration::from_secs(*offset as u64)
            } else {
                now - Duration::from_secs(offset.unsigned_abs())
            };
            httpdate::fmt_http_date(t)
        }
    }
}

fn not_modified(shared: &Shared, reply: &Reply, request: &RecordedRequest) -> bool {
    if !reply.validate {
        return false;
    }
    let field =
        |name: &str| reply.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| render(shared, v));
    if let Some(inm) = request.header("if-none-match") {
        return field("etag").is_some_and(|etag| inm.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    }
    if let (Some(ims), Some(lm)) = (request.header("if-modified-since"), field("last-modified")) {
        if let (Ok(ims), Ok(lm)) = (httpdate::parse_http_date(ims), httpdate::parse_http_date(&lm)) {
            return lm <= ims;
        }
    }
    false
}

/// Writes `reply`; returns false when the connection must close.
async fn write_reply(
    shared: &Shared,
    stream: &mut TcpStream,
    reply: &Reply,
    request: &RecordedRequest,
    head_only: bool,
) -> bool {
    let (status, body): (u16, &[u8]) =
        if not_modified(shared, reply, request) { (304, b"") } else { (reply.status, &reply.body) };
    match reply.behaviour {
        Behaviour::CloseBeforeHead => return false,
        Behaviour::Garbage => {
            let _ = stream.write_all(b"this is not HTTP\r\n\r\n").await;
            return false;
        }
        _ => {}
    }
    let mut head = match reply.interim {
        Some(interim) => format!("HTTP/1.1 {interim} Interim\r\n\r\nHTTP/1.1 {status} X\r\n"),
        None => format!("HTTP/1.1 {status} X\r\n"),
    };
    let has = |name: &str| reply.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("date") {
        head.push_str(&format!("Date: {}\r\n", httpdate::fmt_http_date((shared.clock)())));
    }
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {}\r\n", render(shared, value)));
    }
    let bodyless = status == 304 || status == 204 || (100..200).contains(&status);
    let chunked = matches!(reply.behaviour, Behaviour::Chunked | Behaviour::Trickle(_)) && !bodyless;
    if chunked {
        head.push_str("Transfer-Encoding: chunked\r\n");
    } else if !bodyless && !has("content-length") && reply.behaviour != Behaviour::UntilClose {
        head.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
    }
    head.push_str("\r\n");
    if stream.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    if head_only || bodyless {
        return reply.behaviour != Behaviour::CloseAfter;
    }
    let ok = match reply.behaviour {
        Behaviour::TruncateAfter(n) => {
            let _ = stream.write_all(&body[..n.min(body.len())]).await;
            let _ = stream.flush().await;
            return false;
        }
        Behaviour::Chunked => {
            let mut out = Vec::new();
            for piece in body.chunks(1000) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
            stream.write_all(&out).await
        }
        Behaviour::Trickle(size) => {
            for piece in body.chunks(size) {
                let mut out = format!("{:x}\r\n", piece.len()).into_bytes();
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
                if stream.write_all(&out).await.is_err() || stream.flush().await.is_err() {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            stream.write_all(b"0\r\n\r\n").await
        }
        Behaviour::CloseAfter | Behaviour::UntilClose => {
            let _ = stream.write_all(body).await;
            return false;
        }
        Behaviour::PauseMidBody(pause) => {
            let (first, rest) = body.split_at(body.len() / 2);
            if stream.write_all(first).await.is_err() || stream.flush().await.is_err() {
                return false;
            }
            tokio::time::sleep(pause).await;
            stream.write_all(rest).await
        }
        _ => stream.write_all(body).await,
    };
    ok.is_ok()
}
