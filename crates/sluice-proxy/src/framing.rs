//! Strict HTTP/1 request framing on client connections: a defence against request smuggling.
//!
//! hyper's server parser resolves ambiguous framing on its own (it drops `Content-Length` when
//! `Transfer-Encoding` is present, in either order) before the service sees the request, and it
//! exposes no raw head. [`StrictHttp1`] therefore sits between the accepted socket and hyper and
//! follows HTTP/1.1 message framing (RFC 9112 §6) on the bytes the client sends:
//!
//! * A request head is held back until it is complete, then checked with one `httparse` parse.
//!   A request whose framing is ambiguous (see [`check`]) never reaches hyper: its head is
//!   replaced by [`REJECTED_HEAD`], which hyper's parser refuses with `400 Bad Request` before
//!   closing the connection, and everything the client sent after it is discarded.
//! * Bodies are followed, not held: `Content-Length` bytes are counted, and chunked bodies go
//!   through a small state machine that mirrors hyper's decoder, so the next head is found
//!   exactly where hyper will look for it.
//! * Heads that `httparse` itself refuses, or that outgrow the limit, are handed to hyper
//!   unchanged (hyper answers 400 or 431 with the same parser and limit) and nothing after them.
//!   But a request line longer than the limit by itself gets `414 URI Too Long` (RFC 9112 §3):
//!   hyper is handed [`URI_TOO_LONG_STAND_IN`] instead, which the service answers (see
//!   [`crate::options_form`]).
//! * The connection is held to the protocols it may speak ([`Speaks`]: the listener's `h2c`,
//!   TLS's ALPN), which hyper would otherwise guess from the first bytes.
//! * The HTTP/2 preface at the start of the connection turns inspection off for good. So does
//!   a request that switched protocols (a `2xx` to `CONNECT`, a `101` to `Upgrade` in
//!   HTTP/1.1): what the client sends after such a request is held until the service tells
//!   the guard how it was answered ([`SwitchOutcome`], [`StrictHttp1::noting_switches`]);
//!   then it is a tunnel or another protocol, passed through untouched whatever it looks
//!   like, or, when the switch was refused, HTTP/1 checked like any other request. (Without
//!   an outcome to wait for, bytes that are not HTTP/1 after such a request turn the checks
//!   off, and HTTP/1 is checked.)
//!
//! Cost in the common case (a head arriving whole, no body): one `httparse` parse with the
//! headers on the stack, reading straight into hyper's buffer; nothing is copied or allocated.
//! Bytes are only copied into the wrapper's own buffer when a head arrives in pieces.
//!
//! Writes go straight to the wrapped stream.

use crate::options_form::OptionsForms;
use crate::switch_outcome::SwitchOutcome;
use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocols a client connection may speak, from its listener and what TLS negotiated
/// (ALPN): hyper's server reads the protocol from the first bytes alone, so this guard, which
/// sees them first, holds the connection to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaks {
    /// HTTP/1.x, or HTTP/2 with prior knowledge (a plain listener with `h2c`).
    Either,
    /// HTTP/1.x only (a plain listener without `h2c`; TLS that did not negotiate `h2`): the
    /// HTTP/2 preface is refused like any head that is not HTTP/1 (400, closed).
    Http1,
    /// HTTP/2 only (TLS negotiated `h2`): anything but the preface is a connection error
    /// (RFC 9113 §3.4), and the connection is closed without an answer.
    Http2,
}

/// What hyper is given in place of a rejected head: a request line whose method is not a
/// token. hyper's parser refuses it at the first byte (`400 Bad Request`, connection closed).
const REJECTED_HEAD: &[u8] = b"@ / HTTP/1.1\r\n\r\n";

/// What hyper is given in place of a head whose request line alone is longer than the limit:
/// a request the service knows for a stand-in by the note the guard takes with it
/// ([`OptionsForms::note_uri_too_long`]), and answers `414`, closing the connection.
const URI_TOO_LONG_STAND_IN: &[u8] = b"OPTIONS * HTTP/1.1\r\nconnection: close\r\n\r\n";

/// The longest method a request line too long to read is taken to have: past it, the long
/// part is the method, and the head goes to hyper as it is.
const LONGEST_METHOD: usize = 32;

/// hyper's own limit on the fields of a request head, and `client.max_header_fields`' default
/// (hyper's limit is set only when the option differs: `server.rs`). Also the header slots
/// parsed on the stack here; heads with more are parsed again with up to
/// [`MAX_HEADERS_FALLBACK`] slots on the heap (hyper answers 431 past its limit). Heads with
/// more than that are handed to hyper unchecked, and refused by it, as long as its limit
/// (`client.max_header_fields`, at most 1024: `Config::validate`) is not raised above that.
pub(crate) const HYPER_MAX_HEADERS: usize = 100;
const MAX_HEADERS_FALLBACK: usize = 1024;

/// First size of the buffer for heads that arrive in pieces.
const HOLD_INITIAL: usize = 4096;

/// A hold buffer larger than this is freed once empty.
const HOLD_KEEP: usize = 16 * 1024;

/// A client connection with HTTP/1 request framing enforced on what it reads. See the
/// module documentation.
pub struct StrictHttp1<IO> {
    io: IO,
    scan: Scanner,
    /// Bytes read from `io` but not yet given to the reader: `hold[lo..ok]` are cleared for
    /// release, `hold[ok..hi]` are the start of a head still incomplete.
    hold: Vec<u8>,
    lo: usize,
    ok: usize,
    hi: usize,
    /// Set once hyper shuts a connection down whose client was cut off ([`Framing::Closed`]).
    linger: Option<Lingering>,
}

/// How long, and for how many bytes, a connection cut off after a refused request keeps
/// reading (and dropping) what its client still sends once the refusal is written and the
/// connection shut for writing. Closing a socket with unread data sends a reset, which can
/// make the client lose the refusal itself (a `431` for a head still arriving, a `400`
/// with a body behind it); nginx's "lingering close".
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);
const LINGER_BYTES: usize = 1 << 20;

/// A lingering close in progress.
struct Lingering {
    until: Pin<Box<tokio::time::Sleep>>,
    drained: usize,
}

impl<IO> StrictHttp1<IO> {
    /// Wraps `io`. `max_head` should be the reader's own limit on a request head (hyper's
    /// `max_buf_size`): a head still incomplete beyond it is handed over for the reader to
    /// refuse.
    pub fn new(io: IO, max_head: usize) -> Self {
        Self { io, scan: Scanner::new(max_head), hold: Vec::new(), lo: 0, ok: 0, hi: 0, linger: None }
    }

    /// Notes the target form of every `OPTIONS` request let through in `forms`, for the
    /// service (see [`crate::options_form`]).
    pub fn noting_options(mut self, forms: Arc<OptionsForms>) -> Self {
        self.scan.options = Some(forms);
        self
    }

    /// Learns from `outcome` whether each request that may switch protocols did, and holds
    /// what follows such a request until it knows (see the module documentation).
    pub fn noting_switches(mut self, outcome: Arc<SwitchOutcome>) -> Self {
        self.scan.switches = Some(outcome);
        self
    }

    /// Holds the connection to `speaks` ([`Speaks::Either`] unless set).
    pub fn speaking(mut self, speaks: Speaks) -> Self {
        self.scan.speaks = speaks;
        self
    }

    /// After `n` bytes were released from `hold[lo..]`: resets the buffer once it is empty.
    fn released(&mut self, n: usize) {
        self.lo += n;
        if self.lo == self.hi {
            (self.lo, self.ok, self.hi) = (0, 0, 0);
            if self.hold.len() > HOLD_KEEP {
                self.hold = Vec::new();
            }
        }
    }

    /// Keeps `partial` (the start of a head) when nothing else is held.
    fn keep(&mut self, partial: &[u8]) {
        debug_assert_eq!(self.hi, 0);
        if self.hold.len() < partial.len() {
            self.hold.resize(partial.len().max(HOLD_INITIAL), 0);
        }
        self.hold[..partial.len()].copy_from_slice(partial);
        (self.lo, self.ok, self.hi) = (0, 0, partial.len());
    }

    /// Drops what is held past `ok` and queues `head` (the rejected head's replacement) for
    /// release.
    fn queue_rejection(&mut self, head: &[u8]) {
        let end = self.ok + head.len();
        if self.hold.len() < end {
            self.hold.resize(end, 0);
        }
        self.hold[self.ok..end].copy_from_slice(head);
        (self.ok, self.hi) = (end, end);
    }
}

impl<IO: AsyncRead + Unpin> StrictHttp1<IO> {
    /// Reads more of an incomplete head into `hold` (nothing is cleared for release).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.ok > 0 {
            self.hold.copy_within(self.ok..self.hi, 0);
            (self.lo, self.ok, self.hi) = (0, 0, self.hi - self.ok);
        }
        if self.hi == self.hold.len() {
            // Bounded: a head held is at most `max_head` bytes, so this stays below
            // `max(HOLD_INITIAL, max_head + 1)`.
            let len = (self.hold.len() * 2).max(HOLD_INITIAL).min(self.scan.max_head + 1).max(self.hi + 1);
            self.hold.resize(len, 0);
        }
        let mut buf = ReadBuf::new(&mut self.hold[self.hi..]);
        ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf))?;
        let n = buf.filled().len();
        self.hi += n;
        Poll::Ready(Ok(n))
    }
}

impl<IO: AsyncRead + Unpin> StrictHttp1<IO> {
    /// [`Framing::Draining`]: reads and drops what the client sends; ready (the end) only
    /// when the client's side ends or fails. At most 64 KiB a call, so that a client sending
    /// without pause does not hold the task.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut scratch = [0u8; 4096];
        for _ in 0..16 {
            let mut buf = ReadBuf::new(&mut scratch);
            ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf))?;
            if buf.filled().is_empty() {
                return Poll::Ready(Ok(()));
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for StrictHttp1<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            // Cleared bytes first.
            if this.lo < this.ok {
                let n = (this.ok - this.lo).min(out.remaining());
                out.put_slice(&this.hold[this.lo..this.lo + n]);
                this.released(n);
                return Poll::Ready(Ok(()));
            }
            // An incomplete head is held: read the rest of it next to it. What follows a
            // request that may switch protocols waits for its outcome instead.
            if this.ok < this.hi {
                // Once known, what is held is looked at again before anything more is read.
                let waited = match this.scan.switch_awaited() {
                    Some(outcome) => {
                        ready!(outcome.poll_decided(cx));
                        true
                    }
                    None => false,
                };
                if !waited && ready!(this.poll_fill(cx))? == 0 {
                    // The client closed mid-head: hyper gets what there is, then the end.
                    this.ok = this.hi;
                    this.scan.framing = Framing::Closed;
                    continue;
                }
                let (pass, tail) = this.scan.drive(&this.hold[this.ok..this.hi]);
                this.ok += pass;
                match tail {
                    Tail::Done | Tail::Hold => {}
                    Tail::Discard => this.hi = this.ok,
                    Tail::Reject(head) => this.queue_rejection(head),
                }
                continue;
            }
            // Nothing held: read straight into the caller's buffer and check it there.
            match this.scan.framing {
                Framing::Closed => return Poll::Ready(Ok(())),
                Framing::PassThrough => return Pin::new(&mut this.io).poll_read(cx, out),
                Framing::Draining => return this.poll_drain(cx),
                _ => {}
            }
            let start = out.filled().len();
            ready!(Pin::new(&mut this.io).poll_read(cx, out))?;
            if out.filled().len() == start {
                return Poll::Ready(Ok(()));
            }
            let (pass, tail) = this.scan.drive(&out.filled()[start..]);
            let end = start + pass;
            match tail {
                Tail::Done => return Poll::Ready(Ok(())),
                Tail::Hold => this.keep(&out.filled()[end..]),
                Tail::Discard => {}
                Tail::Reject(head) => this.queue_rejection(head),
            }
            out.set_filled(end);
            if pass > 0 {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for StrictHttp1<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    /// Shuts the connection for writing; then, for a client that was cut off, lingers
    /// ([`LINGER`]) before the connection is closed.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.linger.is_none() {
            ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
            if !matches!(this.scan.framing, Framing::Closed | Framing::Draining) {
                return Poll::Ready(Ok(()));
            }
            this.linger = Some(Lingering { until: Box::pin(tokio::time::sleep(LINGER)), drained: 0 });
        }
        let linger = this.linger.as_mut().expect("set above");
        let mut scratch = [0u8; 4096];
        loop {
            if linger.drained >= LINGER_BYTES || linger.until.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.io).poll_read(cx, &mut buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => linger.drained += buf.filled().len(),
                // The client closed its side too, or the connection broke: done.
                Poll::Ready(_) => return Poll::Ready(Ok(())),
            }
        }
    }
}

/// Where the client's byte stream is, as hyper will see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// A request head is next.
    Head,
    /// Inside a body of known length; this many bytes are left (never 0).
    Length(u64),
    /// Inside a chunked body.
    Chunked(Chunked),
    /// No more checks: HTTP/2, or another protocol after an upgrade.
    PassThrough,
    /// Nothing more from the client reaches hyper: reads end.
    Closed,
    /// Nothing more from the client reaches hyper, which still has a request to answer (the
    /// [`URI_TOO_LONG_STAND_IN`]): what comes is read and dropped, and reads end only when
    /// the client's do (hyper drops a request in flight when its connection's reads end).
    Draining,
}

/// How a run of bytes ended, after its first `n` were cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// All of it was cleared.
    Done,
    /// The rest is the start of a head: hold it until more arrives.
    Hold,
    /// The rest starts with a rejected head: give hyper this in its place ([`REJECTED_HEAD`]
    /// or [`URI_TOO_LONG_STAND_IN`]), drop the rest.
    Reject(&'static [u8]),
    /// Drop the rest.
    Discard,
}

/// What one step of the scanner decided about the bytes in front of it.
enum Step {
    /// This many (at least one) are cleared.
    Pass(usize),
    Hold,
    /// The head in front is refused: hyper gets this in its place.
    Reject(&'static [u8]),
    Discard,
}

/// The framing state machine, separate from the buffers so that it can scan either.
#[derive(Debug)]
struct Scanner {
    framing: Framing,
    max_head: usize,
    /// Nothing looked at yet: the HTTP/2 preface may still come.
    at_start: bool,
    /// What the connection may speak.
    speaks: Speaks,
    /// The last request may have switched protocols (CONNECT, or Upgrade in HTTP/1.1): a
    /// next "head" that is not HTTP/1 at all turns the checks off rather than being refused.
    after_switch: bool,
    /// How many bytes of the head in front were already found incomplete.
    checked: usize,
    /// Where the forms of `OPTIONS` requests are noted, if anywhere.
    options: Option<Arc<OptionsForms>>,
    /// Where the service tells whether a request that may switch protocols did, if anywhere.
    switches: Option<Arc<SwitchOutcome>>,
}

impl Scanner {
    fn new(max_head: usize) -> Self {
        Self {
            framing: Framing::Head,
            max_head,
            at_start: true,
            speaks: Speaks::Either,
            after_switch: false,
            checked: 0,
            options: None,
            switches: None,
        }
    }

    /// The outcome to learn before anything after a request that may switch protocols is
    /// looked at (known already or not).
    fn switch_awaited(&self) -> Option<Arc<SwitchOutcome>> {
        self.switches.as_ref().filter(|_| self.after_switch && self.framing == Framing::Head).cloned()
    }

    /// Scans `data`, the next bytes from the client: how many of them hyper may have, and
    /// what to do with the rest.
    fn drive(&mut self, data: &[u8]) -> (usize, Tail) {
        let mut at = 0;
        while at < data.len() {
            match self.step(&data[at..]) {
                Step::Pass(n) => at += n,
                Step::Hold => return (at, Tail::Hold),
                Step::Reject(head) => return (at, Tail::Reject(head)),
                Step::Discard => return (at, Tail::Discard),
            }
        }
        (at, Tail::Done)
    }

    fn step(&mut self, data: &[u8]) -> Step {
        match &mut self.framing {
            Framing::Head => self.head(data),
            Framing::Length(left) => {
                let n = (*left).min(data.len() as u64);
                *left -= n;
                if *left == 0 {
                    self.framing = Framing::Head;
                }
                Step::Pass(n as usize)
            }
            Framing::Chunked(chunked) => match chunked.scan(data) {
                Ok((n, ended)) => {
                    if ended {
                        self.framing = Framing::Head;
                    }
                    Step::Pass(n)
                }
                Err(at) => {
                    // hyper's decoder fails on the same byte; nothing after it is trusted.
                    tracing::info!("closing a client connection: malformed chunked request body");
                    self.framing = Framing::Closed;
                    Step::Pass(at + 1)
                }
            },
            Framing::PassThrough => Step::Pass(data.len()),
            Framing::Closed | Framing::Draining => Step::Discard,
        }
    }

    /// `data` starts with a request head, maybe incomplete.
    fn head(&mut self, data: &[u8]) -> Step {
        if self.at_start {
            let n = data.len().min(H2_PREFACE.len());
            if data[..n] == H2_PREFACE[..n] {
                if n < H2_PREFACE.len() {
                    return Step::Hold;
                }
                if self.speaks == Speaks::Http1 {
                    tracing::debug!("HTTP/2 on a connection that speaks HTTP/1 only; refused");
                    self.framing = Framing::Closed;
                    return Step::Reject(REJECTED_HEAD);
                }
                self.framing = Framing::PassThrough;
                return Step::Pass(data.len());
            }
            if self.speaks == Speaks::Http2 {
                tracing::debug!("a connection that negotiated h2 did not start with its preface; closed");
                self.framing = Framing::Closed;
                return Step::Discard;
            }
            self.at_start = false;
        }
        if let Some(outcome) = self.switches.as_ref().filter(|_| self.after_switch) {
            match outcome.decided() {
                None => return Step::Hold,
                Some(true) => {
                    // A tunnel or another protocol from here on: never looked at again.
                    self.after_switch = false;
                    self.framing = Framing::PassThrough;
                    return Step::Pass(data.len());
                }
                // Refused: HTTP/1 goes on, checked like any other request.
                Some(false) => self.after_switch = false,
            }
        }
        // A head ends with a line feed: if none arrived since it was last found incomplete,
        // it still is (this keeps a head trickling in from costing one parse per read).
        // Not after a protocol switch, where bytes that are not HTTP/1 must flow at once.
        if self.checked > 0
            && !self.after_switch
            && data.len() <= self.max_head
            && data.get(self.checked..).is_some_and(|new| !new.contains(&b'\n'))
        {
            self.checked = data.len();
            return Step::Hold;
        }
        let mut headers = [MaybeUninit::<httparse::Header<'_>>::uninit(); HYPER_MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(data, &mut headers) {
            Err(httparse::Error::TooManyHeaders) => {}
            parsed => return self.parsed(data, parsed, &req),
        }
        // More header lines than slots: parse again with one slot per line.
        let lines = data[..data.len().min(self.max_head + 1)].iter().filter(|&&b| b == b'\n').count();
        let mut headers = vec![httparse::EMPTY_HEADER; lines.min(MAX_HEADERS_FALLBACK)];
        let mut req = httparse::Request::new(&mut headers);
        let parsed = req.parse(data);
        if parsed == Err(httparse::Error::TooManyHeaders) && data.len() <= self.max_head && !head_ends(data) {
            // Too many fields for anyone, but hyper parses a head only once it has its end
            // (and would see the connection end first): hold it until then, for its 431.
            self.checked = data.len();
            return Step::Hold;
        }
        self.parsed(data, parsed, &req)
    }

    fn parsed(&mut self, data: &[u8], parsed: httparse::Result<usize>, req: &httparse::Request<'_, '_>) -> Step {
        let after_switch = std::mem::take(&mut self.after_switch);
        match parsed {
            Ok(httparse::Status::Complete(len)) => {
                self.checked = 0;
                match check(req) {
                    Ok((framing, switch)) => {
                        self.framing = framing;
                        self.after_switch = switch;
                        if let Some(outcome) = self.switches.as_ref().filter(|_| switch) {
                            outcome.expect();
                        }
                        if let (Some(forms), Some("OPTIONS")) = (&self.options, req.method) {
                            forms.note(req.path.unwrap_or(""));
                        }
                        Step::Pass(len)
                    }
                    Err(reason) => {
                        tracing::info!(
                            method = req.method.unwrap_or(""),
                            "rejected a request with ambiguous framing ({reason}); closing the client connection"
                        );
                        self.framing = Framing::Closed;
                        Step::Reject(REJECTED_HEAD)
                    }
                }
            }
            Ok(httparse::Status::Partial) if data.len() <= self.max_head => {
                self.checked = data.len();
                self.after_switch = after_switch;
                Step::Hold
            }
            // Too large or not HTTP/1: hyper refuses it (431 or 400) with the same limit and
            // parser, and reads nothing after it. After a protocol switch, it is the new
            // protocol. A request line longer than the limit by itself is answered 414.
            _ => {
                self.checked = 0;
                if !after_switch && parsed == Ok(httparse::Status::Partial) && self.request_line_too_long(data) {
                    if let Some(forms) = &self.options {
                        tracing::debug!("a request line longer than {} bytes; answered 414", self.max_head);
                        forms.note_uri_too_long();
                        self.framing = Framing::Draining;
                        return Step::Reject(URI_TOO_LONG_STAND_IN);
                    }
                }
                self.framing = if after_switch { Framing::PassThrough } else { Framing::Closed };
                Step::Pass(data.len())
            }
        }
    }

    /// Whether `data`, the valid start of a head longer than the limit, is a request line
    /// that alone is longer (its method ended, its line did not).
    fn request_line_too_long(&self, data: &[u8]) -> bool {
        data[..data.len().min(LONGEST_METHOD)].contains(&b' ')
            && !data[..data.len().min(self.max_head)].contains(&b'\n')
    }
}

/// Whether `data` holds the empty line that ends a head (`CRLF CRLF`, or bare `LF`s).
fn head_ends(data: &[u8]) -> bool {
    data.windows(2).any(|w| w == b"\n\n") || data.windows(3).any(|w| w == b"\n\r\n")
}

/// Checks a complete request head (RFC 9112 §6.1, §6.3) and says how its message continues:
/// the framing of what follows the head, and whether the request may switch protocols.
/// Refused: `Transfer-Encoding` with `Content-Length` (either order), `Transfer-Encoding` in
/// HTTP/1.0, `Transfer-Encoding` whose final coding is not `chunked` or that applies `chunked`
/// more than once, `Content-Length` values that do not parse or differ.
fn check(req: &httparse::Request<'_, '_>) -> Result<(Framing, bool), &'static str> {
    let http11 = req.version == Some(1);
    let mut length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut chunked = false;
    let mut chunked_codings = 0;
    let mut upgrade = false;
    for header in req.headers.iter() {
        let name = header.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            for value in header.value.split(|&b| b == b',') {
                let n = digits(trim(value)).ok_or("Content-Length is not a number")?;
                if length.is_some_and(|l| l != n) {
                    return Err("Content-Length values differ");
                }
                length = Some(n);
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
            // As hyper reads it: the last coding of the last field line counts.
            if !header.value.iter().all(|&b| b == b'\t' || (b' '..=b'~').contains(&b)) {
                return Err("Transfer-Encoding is not visible ASCII");
            }
            chunked = header
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| trim(last).eq_ignore_ascii_case(b"chunked"));
            // RFC 9112 §6.1: chunked is never applied more than once (over all field lines).
            chunked_codings +=
                header.value.split(|&b| b == b',').filter(|c| trim(c).eq_ignore_ascii_case(b"chunked")).count();
            if chunked_codings > 1 {
                return Err("chunked applied more than once");
            }
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade = true;
        }
    }
    if transfer_encoding {
        if !http11 {
            return Err("Transfer-Encoding in an HTTP/1.0 request");
        }
        if length.is_some() {
            return Err("both Content-Length and Transfer-Encoding");
        }
        if !chunked {
            return Err("Transfer-Encoding does not end with chunked");
        }
    }
    let framing = match length {
        _ if transfer_encoding => Framing::Chunked(Chunked::default()),
        Some(n) if n > 0 => Framing::Length(n),
        _ => Framing::Head,
    };
    let switch = req.method == Some("CONNECT") || (upgrade && http11);
    Ok((framing, switch))
}

/// Trims optional whitespace (SP, HTAB).
fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// `1*DIGIT` as a u64 (no sign, no overflow).
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(
        0u64,
        |n, &b| if b.is_ascii_digit() { n.checked_mul(10)?.checked_add(u64::from(b - b'0')) } else { None },
    )
}

/// Where a chunked body is (RFC 9112 §7.1), state for state as hyper's decoder sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Chunk {
    /// Before the first digit of a chunk size.
    #[default]
    Start,
    /// In the chunk size.
    Size,
    /// Whitespace after the size.
    SizeLws,
    /// In chunk extensions, up to CR.
    Ext,
    /// After the CR ending the size line.
    SizeLf,
    /// In chunk data; `Chunked::size` bytes are left.
    Data,
    /// After chunk data.
    DataCr,
    DataLf,
    /// In a trailer field line, up to CR.
    Trailer,
    TrailerLf,
    /// At the start of a trailer line, or the CR of the final empty line.
    EndCr,
    EndLf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Chunked {
    at: Chunk,
    /// The chunk size being read, then the chunk data left.
    size: u64,
}

impl Chunked {
    /// Follows `data` through the body: `Ok((n, ended))` when its first `n` bytes belong to the
    /// body (`ended`: they finish it), `Err(i)` when byte `i` breaks the framing (hyper's
    /// decoder refuses the same byte).
    fn scan(&mut self, data: &[u8]) -> Result<(usize, bool), usize> {
        let mut i = 0;
        while i < data.len() {
            if self.at == Chunk::Data {
                let n = self.size.min((data.len() - i) as u64);
                self.size -= n;
                i += n as usize;
                if self.size == 0 {
                    self.at = Chunk::DataCr;
                }
                continue;
            }
            let b = data[i];
            self.at = match (self.at, b) {
                (Chunk::Start | Chunk::Size, _) if b.is_ascii_hexdigit() => {
                    let digit = u64::from((b as char).to_digit(16).unwrap_or(0));
                    self.size = self.size.checked_mul(16).and_then(|s| s.checked_add(digit)).ok_or(i)?;
                    Chunk::Size
                }
                (Chunk::Size | Chunk::SizeLws, b' ' | b'\t') => Chunk::SizeLws,
                (Chunk::Size | Chunk::SizeLws, b';') => Chunk::Ext,
                (Chunk::Size | Chunk::SizeLws | Chunk::Ext, b'\r') => Chunk::SizeLf,
                (Chunk::Ext, b'\n') => return Err(i),
                (Chunk::Ext, _) => Chunk::Ext,
                (Chunk::SizeLf, b'\n') if self.size == 0 => Chunk::EndCr,
                (Chunk::SizeLf, b'\n') => Chunk::Data,
                (Chunk::DataCr, b'\r') => Chunk::DataLf,
                (Chunk::DataLf, b'\n') => Chunk::Start,
                (Chunk::Trailer, b'\r') => Chunk::TrailerLf,
                (Chunk::Trailer, _) => Chunk::Trailer,
                (Chunk::TrailerLf, b'\n') => Chunk::EndCr,
                (Chunk::EndCr, b'\r') => Chunk::EndLf,
                (Chunk::EndCr, _) => Chunk::Trailer,
                (Chunk::EndLf, b'\n') => {
                    *self = Self::default();
                    return Ok((i + 1, true));
                }
                _ => return Err(i),
            };
            i += 1;
        }
        Ok((i, false))
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A client that sends `chunks` one read at a time, saying "not yet" before each, then
    /// closes.
    struct Client {
        chunks: VecDeque<Vec<u8>>,
        ready: bool,
        shut: bool,
    }

    impl Client {
        fn new<C: AsRef<[u8]>>(chunks: impl IntoIterator<Item = C>) -> Self {
            Self { chunks: chunks.into_iter().map(|c| c.as_ref().to_vec()).collect(), ready: false, shut: false }
        }
    }

    impl AsyncRead for Client {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            if !this.ready {
                this.ready = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            this.ready = false;
            if let Some(chunk) = this.chunks.front_mut() {
                let n = chunk.len().min(buf.remaining());
                buf.put_slice(&chunk[..n]);
                chunk.drain(..n);
                if chunk.is_empty() {
                    this.chunks.pop_front();
                }
            }
            Poll::Ready(Ok(()))
        }
    }

    /// Writes go nowhere; a shutdown is noted.
    impl AsyncWrite for Client {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().shut = true;
            Poll::Ready(Ok(()))
        }
    }

    const MAX: usize = 8192;

    /// What hyper would read, with `read` bytes per read.
    async fn read_all(mut guard: StrictHttp1<Client>, read: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = vec![0; read];
        loop {
            let n = guard.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        // The end is the end.
        assert_eq!(guard.read(&mut buf).await.unwrap(), 0);
        out
    }

    pub(super) async fn through<C: AsRef<[u8]>>(chunks: impl IntoIterator<Item = C>, read: usize) -> Vec<u8> {
        read_all(StrictHttp1::new(Client::new(chunks), MAX), read).await
    }

    /// [`through`] on a connection held to `speaks`.
    async fn through_speaking<C: AsRef<[u8]>>(
        chunks: impl IntoIterator<Item = C>,
        read: usize,
        speaks: Speaks,
    ) -> Vec<u8> {
        read_all(StrictHttp1::new(Client::new(chunks), MAX).speaking(speaks), read).await
    }

    /// Every way of delivering `input`: whole, byte by byte, split at every position; read
    /// with large, small (hyper-util's 24-byte version sniff) and one-byte buffers.
    async fn each_delivery(input: &[u8], expected: &[u8]) {
        for read in [16384, 24, 1] {
            assert_eq!(show(&through([input], read).await), show(expected), "in one piece, reads of {read}");
        }
        assert_eq!(show(&through(input.chunks(1), 8192).await), show(expected), "byte by byte");
        for cut in 1..input.len() {
            let got = through([&input[..cut], &input[cut..]], 8192).await;
            assert_eq!(show(&got), show(expected), "split at {cut}");
        }
    }

    fn show(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    fn rejected_after(prefix: &[u8]) -> Vec<u8> {
        [prefix, REJECTED_HEAD].concat()
    }

    const GET: &[u8] = b"GET http://a/x HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n";
    pub(super) const SMUGGLE: &[u8] = b"POST /s HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n";

    #[tokio::test]
    async fn a_get_passes_unchanged_however_it_arrives() {
        each_delivery(GET, GET).await;
    }

    #[tokio::test]
    async fn pipelined_requests_pass_unchanged() {
        let input = [GET, GET, b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", GET].concat();
        each_delivery(&input, &input).await;
    }

    #[tokio::test]
    async fn a_whole_head_in_one_read_is_not_copied() {
        let input = [GET, GET, GET].concat();
        let mut guard = StrictHttp1::new(Client::new([&input]), MAX);
        let mut buf = vec![0; 8192];
        let n = guard.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], &input[..]);
        assert_eq!(guard.hold.capacity(), 0, "no buffer of its own");
    }

    #[tokio::test]
    async fn ambiguous_framing_is_replaced_and_the_rest_dropped() {
        each_delivery(SMUGGLE, REJECTED_HEAD).await;
        let input = [GET, SMUGGLE, GET].concat();
        each_delivery(&input, &rejected_after(GET)).await;
    }

    #[tokio::test]
    async fn each_rejection_rule() {
        let bad: &[&[u8]] = &[
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\ncontent-length: 0\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked,\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \xffchunked, chunked\r\n\r\n",
            b"POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4, 5\r\n\r\nabcde",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +4\r\n\r\nabcd",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x4\r\n\r\nabcd",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4,\r\n\r\nabcd",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n",
            b"CONNECT a:443 HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ];
        for head in bad {
            assert_eq!(show(&through([head], 8192).await), show(REJECTED_HEAD), "{}", show(head));
            let after_a_get = [GET, head].concat();
            assert_eq!(show(&through([&after_a_get], 8192).await), show(&rejected_after(GET)), "{}", show(head));
        }
    }

    #[tokio::test]
    async fn unambiguous_framing_is_accepted() {
        let good: &[&[u8]] = &[
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4 , 4\r\n\r\nabcd",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0004\r\n\r\nabcd",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            b"POST / HTTP/1.0\r\nHost: a\r\nContent-Length: 2\r\n\r\nab",
            b"GET / HTTP/1.0\r\n\r\n",
            b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
        ];
        for message in good {
            let input = [message, GET].concat();
            assert_eq!(show(&through([&input], 8192).await), show(&input));
        }
    }

    #[tokio::test]
    async fn content_length_bodies_are_skipped_not_inspected() {
        // The body looks like a smuggled head; it is body, and the request after it is checked.
        let post = [b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 76\r\n\r\n".as_slice(), &SMUGGLE[..76]].concat();
        let input = [&post[..], GET].concat();
        each_delivery(&input, &input).await;
        let input = [&post[..], SMUGGLE].concat();
        each_delivery(&input, &rejected_after(&post)).await;
    }

    #[tokio::test]
    async fn chunked_bodies_with_extensions_and_trailers_are_followed() {
        let post = b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
            5;name=value;other=\"q;r\"\r\nhello\r\n\
            1A ; ext\r\nabcdefghijklmnopqrstuvwxyz\r\n\
            a\t\r\n0123456789\r\n\
            0;last\r\nExpires: never\r\nX-Sum: 1\r\n\r\n";
        let input = [&post[..], GET].concat();
        each_delivery(&input, &input).await;
        let input = [&post[..], SMUGGLE].concat();
        each_delivery(&input, &rejected_after(post)).await;
        // Chunk data that looks like framing is data.
        let tricky = b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n0\r\n\r\n\r\n0\r\n\r\n";
        let input = [&tricky[..], SMUGGLE].concat();
        each_delivery(&input, &rejected_after(tricky)).await;
    }

    #[tokio::test]
    async fn malformed_chunked_framing_ends_the_stream_at_the_bad_byte() {
        let head = b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".as_slice();
        for (body, good) in [
            (b"zz\r\n".as_slice(), 0),
            (b"3\r\nabcX", 6),
            (b"3\r\nabc\rX", 7),
            (b"3 4\r\n", 2),
            (b"3;a\nb\r\n", 3),
            (b"0\r\nX: y\rZ", 8),
            (b"0\r\n\rX", 4),
            (b"fffffffffffffffff\r\n", 16),
        ] {
            let input = [head, body, GET].concat();
            let expected = &input[..head.len() + good + 1];
            assert_eq!(show(&through([&input], 8192).await), show(expected), "{}", show(body));
        }
    }

    #[tokio::test]
    async fn http2_prior_knowledge_passes_through() {
        let input = [H2_PREFACE, b"\x00\x00\x00\x04\x00\x00\x00\x00\x00", SMUGGLE].concat();
        each_delivery(&input, &input).await;
        // Only at the start of the connection.
        let input = [GET, H2_PREFACE].concat();
        assert_eq!(show(&through([&input], 8192).await), show(&input), "released to hyper, which refuses it");
        // Nearly the preface is HTTP/1.
        let input = [b"PRX / HTTP/1.1\r\nHost: a\r\n\r\n".as_slice(), SMUGGLE].concat();
        assert_eq!(show(&through([&input], 8192).await), show(&rejected_after(b"PRX / HTTP/1.1\r\nHost: a\r\n\r\n")));
    }

    #[tokio::test]
    async fn a_connection_held_to_one_protocol_refuses_the_other() {
        let h2 = [H2_PREFACE, b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"].concat();
        let refused = through_speaking([&h2], 8192, Speaks::Http1).await;
        assert_eq!(show(&refused), show(REJECTED_HEAD), "the preface is refused (400)");
        assert_eq!(show(&through_speaking([GET], 8192, Speaks::Http1).await), show(GET));
        assert_eq!(show(&through_speaking([&h2], 8192, Speaks::Http2).await), show(&h2));
        let closed = through_speaking([GET], 8192, Speaks::Http2).await;
        assert_eq!(show(&closed), "", "not the preface: closed, nothing for hyper");
        // The preface arriving byte by byte is held until it is whole.
        assert_eq!(show(&through_speaking(h2.chunks(1), 8192, Speaks::Http2).await), show(&h2));
    }

    #[tokio::test]
    async fn a_tunnel_after_connect_passes_through() {
        let connect = b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n".as_slice();
        let tls = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".as_slice();
        let input = [connect, tls, SMUGGLE].concat();
        each_delivery(&input, &input).await;
        // CONNECT in HTTP/1.0 too.
        let input = [b"CONNECT a:443 HTTP/1.0\r\n\r\n".as_slice(), tls, SMUGGLE].concat();
        assert_eq!(show(&through([&input], 8192).await), show(&input));
    }

    #[tokio::test]
    async fn websocket_frames_after_upgrade_pass_through() {
        let upgrade = b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".as_slice();
        let frame = b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58".as_slice();
        let input = [upgrade, frame, SMUGGLE].concat();
        each_delivery(&input, &input).await;
        // h2c upgrade: the preface after it.
        let h2c = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n".as_slice();
        let input = [h2c, H2_PREFACE, SMUGGLE].concat();
        each_delivery(&input, &input).await;
    }

    #[tokio::test]
    async fn http1_after_a_refused_switch_is_still_checked() {
        // hyper keeps serving HTTP/1.1 when the switch is refused (403 to CONNECT, no 101).
        for switch in [
            b"CONNECT a:25 HTTP/1.1\r\nHost: a:25\r\n\r\n".as_slice(),
            b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
            b"POST /u HTTP/1.1\r\nHost: a\r\nUpgrade: x\r\nContent-Length: 2\r\n\r\nab",
        ] {
            let input = [switch, GET, SMUGGLE].concat();
            let expected = rejected_after(&[switch, GET].concat());
            assert_eq!(show(&through([&input], 8192).await), show(&expected));
            assert_eq!(show(&through(input.chunks(1), 24).await), show(&expected));
        }
        // After a switch, what is not HTTP/1 is the new protocol; without one (Upgrade means
        // nothing in HTTP/1.0), hyper refuses it and nothing after it is read.
        let not_http = b"NOT HTTP\r\n\r\n".as_slice();
        for (head, switched) in [
            (b"GET / HTTP/1.0\r\nUpgrade: x\r\n\r\n".as_slice(), false),
            (b"GET / HTTP/1.1\r\nUpgrade: x\r\n\r\n", true),
        ] {
            let first = [head, not_http].concat();
            let expected = if switched { [&first[..], GET].concat() } else { first.clone() };
            assert_eq!(show(&through([&first[..], GET], 8192).await), show(&expected));
        }
    }

    #[tokio::test]
    async fn what_httparse_refuses_goes_to_hyper_unchanged_and_nothing_after() {
        let junk = b"THIS IS NOT HTTP\r\n\r\n".as_slice();
        let input = [junk, GET].concat();
        assert_eq!(show(&through([&input], 8192).await), show(&input));
        assert_eq!(show(&through(input.chunks(1), 8192).await), "THIS IS NOT HTTP\r\n", "found at its first line feed");
        let input = [GET, b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", GET].concat();
        assert_eq!(show(&through([&input], 8192).await), show(&input));
        let split = [&input[..GET.len() + 3], &input[GET.len() + 3..]];
        assert_eq!(show(&through(split, 8192).await), show(&input));
    }

    #[tokio::test]
    async fn an_oversized_head_is_released_unchanged_and_ends_the_stream() {
        let max = 256;
        let big = format!("GET / HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n", "x".repeat(1000));
        // Arriving in pieces: held up to the limit, then handed over as it is.
        let got = read_all(StrictHttp1::new(Client::new(big.as_bytes().chunks(100)), max), 8192).await;
        assert!(got.len() > max && big.as_bytes().starts_with(&got), "{} bytes", got.len());
        let got = read_all(StrictHttp1::new(Client::new(big.as_bytes().chunks(1)), max), 8192).await;
        assert_eq!(got.len(), max + 1);
        assert!(big.as_bytes().starts_with(&got));
        // Arriving whole: complete, so checked like any head (hyper applies its own limit).
        let got = read_all(StrictHttp1::new(Client::new([&big]), max), 8192).await;
        assert_eq!(show(&got), big);
    }

    #[tokio::test]
    async fn a_request_line_longer_than_the_limit_becomes_the_414_stand_in() {
        let max = 256;
        let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "x".repeat(1000));
        let input = [GET, long.as_bytes()].concat();
        for piece in [100, 1] {
            let forms = Arc::new(OptionsForms::default());
            let guard = StrictHttp1::new(Client::new(input.chunks(piece)), max).noting_options(Arc::clone(&forms));
            let got = read_all(guard, 8192).await;
            assert_eq!(show(&got), show(&[GET, URI_TOO_LONG_STAND_IN].concat()), "in pieces of {piece}");
            let mut stand_in = http::Request::builder().method(http::Method::OPTIONS).body(()).unwrap();
            assert!(OptionsForms::mark(Some(&forms), &mut stand_in), "noted for the service");
        }
        // A long field, not the request line, is hyper's to refuse (431); so is a long method.
        for big in [
            format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "x".repeat(1000)),
            format!("{} / HTTP/1.1\r\n\r\n", "G".repeat(1000)),
        ] {
            let forms = Arc::new(OptionsForms::default());
            let guard =
                StrictHttp1::new(Client::new(big.as_bytes().chunks(100)), max).noting_options(Arc::clone(&forms));
            let got = read_all(guard, 8192).await;
            assert!(got.len() > max && big.as_bytes().starts_with(&got), "{} bytes", got.len());
            assert_eq!(forms.pending(), 0, "nothing noted");
        }
        // Without a service to note it for, the head goes to hyper as it is.
        let got = read_all(StrictHttp1::new(Client::new(long.as_bytes().chunks(100)), max), 8192).await;
        assert!(got.len() > max && long.as_bytes().starts_with(&got), "{} bytes", got.len());
    }

    #[tokio::test]
    async fn more_headers_than_the_stack_slots_are_still_checked() {
        let many: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
        let bad = format!(
            "POST / HTTP/1.1\r\nHost: a\r\n{many}Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        );
        assert_eq!(show(&through([&bad], 8192).await), show(REJECTED_HEAD));
        let good = format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n");
        let input = [good.as_bytes(), SMUGGLE].concat();
        assert_eq!(show(&through([&input], 8192).await), show(&rejected_after(good.as_bytes())));

        // Beyond the fallback too: hyper gets it as it is (and answers 431), nothing after it.
        let too_many: String = (0..1100).map(|i| format!("X-H{i}: v\r\n")).collect();
        let bad =
            format!("POST / HTTP/1.1\r\nHost: a\r\n{too_many}Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
        let guard = StrictHttp1::new(Client::new([bad.as_bytes(), GET]), 65536);
        assert_eq!(show(&read_all(guard, 65536).await), bad);

        // Such a head whose end comes in a later read is held for it: hyper parses a head only
        // once it has its end, so cut off at the first read it would see the connection end
        // instead, and answer nothing.
        let open = format!("GET / HTTP/1.1\r\nHost: a\r\n{too_many}");
        let guard = StrictHttp1::new(Client::new([open.as_bytes(), b"\r\n", GET]), 65536);
        assert_eq!(show(&read_all(guard, 65536).await), format!("{open}\r\n"));
    }

    #[tokio::test]
    async fn rfc9112_9_6_a_cut_off_client_is_read_to_its_end_before_the_close() {
        let bad = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
        let mut guard = StrictHttp1::new(Client::new([&bad[..], &[b'x'; 5000], &[b'y'; 5000]]), MAX);
        let mut buf = vec![0; 8192];
        let n = guard.read(&mut buf).await.unwrap();
        assert_eq!(show(&buf[..n]), show(REJECTED_HEAD));
        assert_eq!(guard.read(&mut buf).await.unwrap(), 0, "nothing after it reaches hyper");
        assert_eq!(guard.io.chunks.len(), 2, "what came after is still unread");
        guard.shutdown().await.unwrap();
        assert!(guard.io.shut, "shut for writing first");
        assert!(guard.io.chunks.is_empty(), "then read to the client's end, so closing resets nothing");

        // A connection ending normally is closed at once.
        let mut guard = StrictHttp1::new(Client::new([GET, GET]), MAX);
        let n = guard.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], GET);
        guard.shutdown().await.unwrap();
        assert_eq!(guard.io.chunks.len(), 1, "no lingering");
    }

    #[tokio::test]
    async fn a_client_closing_mid_head_gives_hyper_the_fragment() {
        let input = [GET, &GET[..20]].concat();
        each_delivery(&input, &input).await;
    }

    #[tokio::test]
    async fn over_a_duplex_stream_writes_pass_through() {
        let (client, server) = tokio::io::duplex(64);
        let mut guard = StrictHttp1::new(server, MAX);
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let writer = tokio::spawn(async move {
            for piece in SMUGGLE.chunks(7) {
                client_write.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
            client_write
        });
        let mut got = Vec::new();
        guard.read_to_end(&mut got).await.unwrap();
        assert_eq!(show(&got), show(REJECTED_HEAD));
        drop(writer.await.unwrap());
        assert_eq!(guard.is_write_vectored(), guard.io.is_write_vectored());
        guard.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await.unwrap();
        guard.flush().await.unwrap();
        let mut answer = [0; 28];
        client_read.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"HTTP/1.1 400 Bad Request\r\n\r\n");
    }

    #[test]
    fn the_rejected_head_is_refused_by_httparse_at_once() {
        let mut headers = [httparse::EMPTY_HEADER; 4];
        assert!(httparse::Request::new(&mut headers).parse(&REJECTED_HEAD[..1]).is_err());
        assert!(!REJECTED_HEAD.starts_with(&H2_PREFACE[..1]));
    }
}
