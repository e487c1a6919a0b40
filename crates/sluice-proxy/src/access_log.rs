//! The access log: Squid's native format (so existing analysers work), Combined, or one JSON
//! object per line (for log pipelines: Loki, Elasticsearch, Vector, ...).
//!
//! Records are formatted and written by a dedicated thread, off the request path
//! (`crate::access_log_writer`: batches, and what it does when a write fails).
//!
//! For log rotation the file can be reopened ([`AccessLog::reopen`]: `SIGUSR1`, as with nginx
//! and `squid -k rotate`, or `POST /log/reopen` on the admin listener): a rotator renames the
//! file, asks for the reopen, and every line queued before it goes to the renamed file,
//! every later one to a new file at the configured path.
//!
//! Every log is opened through the proxy's [`AccessLogs`], which shutdown closes
//! ([`AccessLogs::close`]): each writer writes what it was sent, and the process exits only
//! then.

use crate::access_log_writer::{Destination, Message};
use crate::config::LogFormat;
use crate::metrics::Metrics;
use crate::outcome::ResultCode;
use http::{HeaderValue, Method, Version};
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One finished transaction, as logged.
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// When the transaction ended.
    pub end: SystemTime,
    pub elapsed: Duration,
    pub client: IpAddr,
    pub code: ResultCode,
    /// The response was sent whole; if not, the result code is logged with Squid's
    /// `_ABORTED` suffix (`TCP_MISS_ABORTED/200`).
    pub completed: bool,
    pub status: u16,
    /// Bytes sent to the client, head and body.
    pub bytes: u64,
    pub method: Method,
    /// The URL (`host:port` for CONNECT).
    pub url: String,
    pub version: Version,
    /// The origin address when the request went forward.
    pub peer: Option<IpAddr>,
    pub content_type: Option<HeaderValue>,
    pub referer: Option<HeaderValue>,
    pub user_agent: Option<HeaderValue>,
    /// The user proxy authentication proved.
    pub user: Option<std::sync::Arc<str>>,
    /// Extra `name=value` fields from modules, appended to the line.
    pub extra: Vec<(String, String)>,
}

/// Sends records to the writer thread. Cheap to clone: clones share the thread, which
/// ends once the last clone is dropped (or at [`AccessLogs::close`]).
#[derive(Debug, Clone)]
pub struct AccessLog {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    tx: mpsc::Sender<Message>,
    metrics: Arc<Metrics>,
}

/// Where the lines go: standard output, or a file opened for appending at its path.
enum Output {
    Stdout,
    File(std::path::PathBuf),
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Stdout => f.write_str("(standard output)"),
            Output::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl Destination for Output {
    type Out = Box<dyn std::io::Write + Send>;

    fn open(&self) -> std::io::Result<Self::Out> {
        Ok(match self {
            Output::Stdout => Box::new(std::io::stdout()),
            Output::File(path) => Box::new(std::fs::OpenOptions::new().create(true).append(true).open(path)?),
        })
    }

    fn reopens(&self) -> bool {
        matches!(self, Output::File(_))
    }
}

impl AccessLog {
    /// Queues a record. Never blocks. A record is dropped (and counted in
    /// `sluice_access_log_lines_dropped_total`) only when its write fails or the log is
    /// closed.
    pub fn log(&self, record: LogRecord) {
        if self.shared.tx.send(Message::Record(record)).is_err() {
            self.shared.metrics.access_log_lines_dropped.fetch_add(1, Relaxed);
        }
    }

    /// Reopens the log file at its path, once every record queued before this call is
    /// written to the file open until now, or dropped if that write failed (log rotation).
    /// Works whether or not writes are failing. When the path cannot be opened, the error
    /// comes back and the log goes on in the file it was writing. Standard output is not
    /// reopened. Fails too once the log is closed.
    pub async fn reopen(&self) -> std::io::Result<()> {
        let closed = || std::io::Error::other("the access log is closed (the proxy is shutting down)");
        let (done, outcome) = tokio::sync::oneshot::channel();
        self.shared.tx.send(Message::Reopen(done)).map_err(|_| closed())?;
        outcome.await.map_err(|_| closed())?
    }
}

/// The access logs a proxy has opened: at start, and one more by each reload that changes
/// `[log]` (the earlier one goes on for the transactions of the earlier generation, and
/// its thread ends with them). Shared by every generation.
#[derive(Debug, Default)]
pub struct AccessLogs {
    writers: parking_lot::Mutex<Vec<Writer>>,
}

/// One log's writer thread.
#[derive(Debug)]
struct Writer {
    log: Weak<Shared>,
    thread: std::thread::JoinHandle<()>,
}

impl AccessLogs {
    /// Opens `path` (`-` for standard output) for appending and starts its writer thread,
    /// which counts the lines it drops in `metrics`.
    pub fn open(&self, path: &Path, format: LogFormat, metrics: &Arc<Metrics>) -> std::io::Result<AccessLog> {
        let output = if path == Path::new("-") { Output::Stdout } else { Output::File(path.to_owned()) };
        let out = output.open()?;
        let (tx, rx) = mpsc::channel::<Message>();
        let writer_metrics = Arc::clone(metrics);
        let thread = std::thread::Builder::new()
            .name("sluice-access-log".into())
            .spawn(move || crate::access_log_writer::run(rx, output, out, format, writer_metrics))?;
        let shared = Arc::new(Shared { tx, metrics: Arc::clone(metrics) });
        let mut writers = self.writers.lock();
        writers.retain(|writer| !writer.thread.is_finished());
        writers.push(Writer { log: Arc::downgrade(&shared), thread });
        Ok(AccessLog { shared })
    }

    /// Closes every log opened: each writer writes (or, when the write fails, counts
    /// dropped) every record it was sent before this call, then ends; returns once all
    /// have ended. Records sent later are dropped and counted. For the end of shutdown,
    /// once connections are drained.
    pub async fn close(&self) {
        let writers = std::mem::take(&mut *self.writers.lock());
        let mut threads = Vec::with_capacity(writers.len());
        for Writer { log, thread } in writers {
            // A log whose handles are all gone has its thread ending by itself.
            if let Some(log) = log.upgrade() {
                let _ = log.tx.send(Message::Close);
            }
            threads.push(thread);
        }
        let joined = tokio::task::spawn_blocking(move || {
            for thread in threads {
                if thread.join().is_err() {
                    tracing::error!("the access log's writer thread panicked");
                }
            }
        });
        let _ = joined.await;
    }
}

/// Formats one record as a line (with its newline) in `format`.
pub fn format_record(r: &LogRecord, format: LogFormat, out: &mut String) {
    use std::fmt::Write as _;
    let peer = r.peer.map(|p| p.to_string());
    let hier = match &peer {
        Some(p) => format!("HIER_DIRECT/{p}"),
        None => "HIER_NONE/-".to_owned(),
    };
    let user = r.user.as_deref().map_or_else(|| "-".to_owned(), log_safe);
    match format {
        LogFormat::Json => {
            // The modules' fields are inside the object.
            out.push_str(&json_line(r, &hier));
            out.push('\n');
            return;
        }
        LogFormat::Squid => {
            // logformat squid %ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt
            let since = r.end.duration_since(UNIX_EPOCH).unwrap_or_default();
            let _ = write!(
                out,
                "{}.{:03} {:>6} {} {}{}/{:03} {} {} {} {} {} {}",
                since.as_secs(),
                since.subsec_millis(),
                r.elapsed.as_millis(),
                r.client,
                r.code.as_str(),
                aborted(r),
                r.status,
                r.bytes,
                r.method,
                squid_escape(r.url.as_bytes()),
                user,
                hier,
                squid_or_dash(r.content_type.as_ref()),
            );
        }
        LogFormat::Combined => {
            // logformat combined %>a %[ui %[un [%tl] "%rm %ru HTTP/%rv" %>Hs %<st "%{Referer}>h" "%{User-Agent}>h" %Ss:%Sh
            let _ = write!(
                out,
                "{} - {} [{}] \"{} {} {}\" {} {} \"{}\" \"{}\" {}{}:{}",
                r.client,
                user,
                clf_time(r.end),
                r.method,
                apache_escape(r.url.as_bytes()),
                version_str(r.version),
                r.status,
                r.bytes,
                apache_or_dash(r.referer.as_ref()),
                apache_or_dash(r.user_agent.as_ref()),
                r.code.as_str(),
                aborted(r),
                hier.split('/').next().unwrap_or("HIER_NONE"),
            );
        }
    }
    for (name, value) in &r.extra {
        let _ = write!(out, " {name}={value}");
    }
    out.push('\n');
}

/// Squid's suffix for a transfer that did not complete (`LogTags::c_str`: `_ABORTED`).
fn aborted(r: &LogRecord) -> &'static str {
    if r.completed {
        ""
    } else {
        "_ABORTED"
    }
}

/// One record as a JSON object: the fields of the Squid line under their own names (and
/// `null` where the Squid line has `-`), the Combined line's referer, user agent and HTTP
/// version, and the modules' fields as an object, in this order.
fn json_line(r: &LogRecord, hier: &str) -> String {
    fn text(v: Option<&HeaderValue>) -> Option<std::borrow::Cow<'_, str>> {
        v.map(|v| String::from_utf8_lossy(v.as_bytes()))
    }
    let line = JsonLine {
        time: rfc3339_millis(r.end),
        duration_ms: r.elapsed.as_millis() as u64,
        client: r.client,
        result: if r.completed {
            std::borrow::Cow::Borrowed(r.code.as_str())
        } else {
            std::borrow::Cow::Owned(format!("{}{}", r.code.as_str(), aborted(r)))
        },
        status: r.status,
        bytes: r.bytes,
        method: r.method.as_str(),
        url: &r.url,
        version: version_str(r.version),
        user: r.user.as_deref(),
        hierarchy: hier.split('/').next().unwrap_or("HIER_NONE"),
        peer: r.peer,
        content_type: text(r.content_type.as_ref()),
        referer: text(r.referer.as_ref()),
        user_agent: text(r.user_agent.as_ref()),
        fields: Fields(&r.extra),
    };
    serde_json::to_string(&line).expect("a log line serialises")
}

#[derive(serde::Serialize)]
struct JsonLine<'a> {
    time: String,
    duration_ms: u64,
    client: IpAddr,
    result: std::borrow::Cow<'static, str>,
    status: u16,
    bytes: u64,
    method: &'a str,
    url: &'a str,
    version: &'static str,
    user: Option<&'a str>,
    hierarchy: &'a str,
    peer: Option<IpAddr>,
    content_type: Option<std::borrow::Cow<'a, str>>,
    referer: Option<std::borrow::Cow<'a, str>>,
    user_agent: Option<std::borrow::Cow<'a, str>>,
    fields: Fields<'a>,
}

/// The modules' `name=value` fields as a JSON object, in their order.
struct Fields<'a>(&'a [(String, String)]);

impl serde::Serialize for Fields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// `text` with every byte but ASCII letters, digits and `.`, `_`, `@`, `-` percent-encoded,
/// so that a user name stays one field of the line.
fn log_safe(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The Squid format's escaping of a field (the URL, the content type): as Squid writes
/// URLs, percent-encoded where a byte would split the line's space-separated fields or
/// could not be read back as it was: spaces, control bytes, `"` and non-ASCII bytes.
/// A URL parsed from a request line never has a space or a control byte; the rule is for
/// what may still reach the log.
fn squid_escape(text: &[u8]) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    let plain = |b: u8| b.is_ascii_graphic() && b != b'"';
    if text.iter().all(|&b| plain(b)) {
        return String::from_utf8_lossy(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for &b in text {
        if plain(b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out.into()
}

/// A header field in the Squid format: [`squid_escape`]d, `-` when absent or empty.
fn squid_or_dash(v: Option<&HeaderValue>) -> String {
    match v.map(HeaderValue::as_bytes) {
        Some(bytes) if !bytes.is_empty() => squid_escape(bytes).into_owned(),
        _ => "-".to_owned(),
    }
}

/// The Combined format's escaping of a quoted field (the request line, `Referer`,
/// `User-Agent`), as Apache httpd's `ap_escape_logitem`: `\"` for a quote, `\\` for a
/// backslash, `\xhh` for a control byte or a byte outside printable ASCII, so that a
/// field never ends early and every line parses with the usual Combined regular expression.
fn apache_escape(text: &[u8]) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    let plain = |b: u8| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\';
    if text.iter().all(|&b| plain(b)) {
        return String::from_utf8_lossy(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for &b in text {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            _ if plain(b) => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.into()
}

/// A header field in the Combined format: [`apache_escape`]d, `-` when absent or empty.
fn apache_or_dash(v: Option<&HeaderValue>) -> String {
    match v.map(HeaderValue::as_bytes) {
        Some(bytes) if !bytes.is_empty() => apache_escape(bytes).into_owned(),
        _ => "-".to_owned(),
    }
}

fn version_str(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// `dd/Mon/yyyy:hh:mm:ss +0000` (Common Log Format time, in UTC).
fn clf_time(t: SystemTime) -> String {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (year, month, day, rem) = civil(t);
    format!(
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        day,
        MONTHS[(month - 1) as usize],
        year,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `yyyy-mm-ddThh:mm:ss.mmmZ` (RFC 3339, in UTC, to the millisecond).
fn rfc3339_millis(t: SystemTime) -> String {
    let (year, month, day, rem) = civil(t);
    let millis = t.duration_since(UNIX_EPOCH).unwrap_or_default().subsec_millis();
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The UTC date of `t` (year, month 1–12, day 1–31) and the seconds since its midnight.
fn civil(t: SystemTime) -> (i64, i64, i64, i64) {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A record as Squid logs it (a `CONNECT` tunnel), which tests change a field or two of.
    pub(crate) fn record() -> LogRecord {
        LogRecord {
            end: UNIX_EPOCH + Duration::from_millis(1_686_638_434_172),
            elapsed: Duration::from_millis(344),
            client: "10.157.217.66".parse().unwrap(),
            code: ResultCode::Tunnel,
            completed: true,
            status: 200,
            bytes: 103_428,
            method: Method::CONNECT,
            url: "sassoft.ru:443".into(),
            version: Version::HTTP_11,
            peer: Some("172.67.149.81".parse().unwrap()),
            content_type: None,
            referer: None,
            user_agent: Some(HeaderValue::from_static("curl/8.0")),
            user: None,
            extra: vec![],
        }
    }

    fn url_of(line: &str) -> &str {
        line.split_whitespace().nth(6).unwrap()
    }

    /// A Squid-format log at `path`, the logs it is one of, and the metrics it counts in.
    fn open(path: &Path) -> (AccessLog, AccessLogs, Arc<Metrics>) {
        let (logs, metrics) = (AccessLogs::default(), Arc::new(Metrics::default()));
        let log = logs.open(path, LogFormat::Squid, &metrics).unwrap();
        (log, logs, metrics)
    }

    fn urls(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path).unwrap().lines().map(|line| url_of(line).to_owned()).collect()
    }

    #[tokio::test]
    async fn close_returns_once_every_record_sent_before_is_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let (log, logs, metrics) = open(&path);
        let urls_sent: Vec<String> = (0..5000).map(|i| format!("/{i}")).collect();
        for url in &urls_sent {
            log.log(LogRecord { url: url.clone(), ..record() });
        }
        logs.close().await;
        assert_eq!(urls(&path), urls_sent);
        // Closed: later records are dropped and counted, reopening fails.
        log.log(LogRecord { url: "late".into(), ..record() });
        assert_eq!(metrics.access_log_lines_dropped.load(Relaxed), 1);
        assert!(log.reopen().await.is_err());
    }

    #[tokio::test]
    async fn close_waits_for_a_log_a_reload_replaced_and_closes_one_still_held() {
        let dir = tempfile::tempdir().unwrap();
        let (old_path, held_path) = (dir.path().join("old.log"), dir.path().join("held.log"));
        let (logs, metrics) = (AccessLogs::default(), Arc::new(Metrics::default()));
        let old = logs.open(&old_path, LogFormat::Squid, &metrics).unwrap();
        let held = logs.open(&held_path, LogFormat::Squid, &metrics).unwrap();
        old.log(LogRecord { url: "old".into(), ..record() });
        drop(old); // its generation is gone: the thread writes what it holds and ends
        held.log(LogRecord { url: "held".into(), ..record() });
        logs.close().await;
        assert_eq!(urls(&old_path), ["old"]);
        assert_eq!(urls(&held_path), ["held"]);
    }

    /// Writes to `/dev/full` fail with `ENOSPC`, as to a file on a full disk.
    #[tokio::test]
    async fn while_writes_fail_lines_are_counted_dropped_and_a_reopen_to_a_writable_file_brings_them_back() {
        let full = Path::new("/dev/full");
        if !full.exists() {
            eprintln!("skipped: no /dev/full");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        // The log's path leads to the full device first.
        std::os::unix::fs::symlink(full, &path).unwrap();
        let (log, logs, metrics) = open(&path);
        log.log(LogRecord { url: "lost-1".into(), ..record() });
        log.log(LogRecord { url: "lost-2".into(), ..record() });
        // The rotator replaces the path with a writable file and asks for the reopen; the
        // writer is still alive, and answers once the two lines are dropped.
        std::fs::remove_file(&path).unwrap();
        log.reopen().await.unwrap();
        assert_eq!(metrics.access_log_lines_dropped.load(Relaxed), 2);
        log.log(LogRecord { url: "kept".into(), ..record() });
        logs.close().await;
        assert_eq!(urls(&path), ["kept"]);
        assert_eq!(metrics.access_log_lines_dropped.load(Relaxed), 2);
    }

    #[tokio::test]
    async fn reopening_after_a_rename_puts_earlier_lines_in_the_renamed_file_and_later_ones_in_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let (path, rotated) = (dir.path().join("access.log"), dir.path().join("access.log.1"));
        let (log, _logs, _) = open(&path);
        log.log(LogRecord { url: "first".into(), ..record() });
        log.log(LogRecord { url: "second".into(), ..record() });
        // The rotator renames the file while lines may still be queued for it.
        std::fs::rename(&path, &rotated).unwrap();
        log.reopen().await.unwrap();
        log.log(LogRecord { url: "third".into(), ..record() });
        log.reopen().await.unwrap(); // (flushes the third line: its answer follows the write)
        let old = std::fs::read_to_string(&rotated).unwrap();
        assert_eq!(old.lines().map(url_of).collect::<Vec<_>>(), ["first", "second"]);
        let new = std::fs::read_to_string(&path).unwrap();
        assert_eq!(new.lines().map(url_of).collect::<Vec<_>>(), ["third"]);
    }

    #[tokio::test]
    async fn a_path_that_cannot_be_reopened_is_an_error_and_the_log_goes_on_in_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        let (path, moved) = (logs.join("access.log"), dir.path().join("moved"));
        let (log, _logs, _) = open(&path);
        // The directory goes away with the open file in it: the path can no longer be made.
        std::fs::rename(&logs, &moved).unwrap();
        let err = log.reopen().await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
        log.log(LogRecord { url: "kept".into(), ..record() });
        let _ = log.reopen().await;
        let text = std::fs::read_to_string(moved.join("access.log")).unwrap();
        assert_eq!(text.lines().map(url_of).collect::<Vec<_>>(), ["kept"]);
    }

    #[test]
    fn the_user_proxy_authentication_proved_is_one_field_of_either_format() {
        let record = LogRecord { user: Some("ann o'neil".into()), ..record() };
        let mut line = String::new();
        format_record(&record, LogFormat::Squid, &mut line);
        assert!(line.contains(" sassoft.ru:443 ann%20o%27neil HIER_DIRECT/"), "{line}");
        line.clear();
        format_record(&record, LogFormat::Combined, &mut line);
        assert!(line.starts_with("10.157.217.66 - ann%20o%27neil [13/Jun/2023"), "{line}");
    }

    #[test]
    fn squid_native_line_matches_a_real_squid_line_byte_for_byte() {
        // The first line of ../shared/traces/squid-access-2023.log, written by Squid itself.
        let squid = "1686638434.172    344 10.157.217.66 TCP_TUNNEL/200 103428 CONNECT sassoft.ru:443 - HIER_DIRECT/172.67.149.81 -\n";
        let mut line = String::new();
        format_record(&record(), LogFormat::Squid, &mut line);
        assert_eq!(line, squid);
    }

    #[test]
    fn a_json_line_is_one_object_with_every_field() {
        let record = LogRecord {
            user: Some("ann".into()),
            content_type: Some(HeaderValue::from_static("text/html")),
            extra: vec![("ab".into(), "b".into())],
            ..record()
        };
        let mut line = String::new();
        format_record(&record, LogFormat::Json, &mut line);
        assert!(line.ends_with("}\n") && line.matches('\n').count() == 1, "{line}");
        assert!(line.starts_with("{\"time\":\"2023-06-13T06:40:34.172Z\",\"duration_ms\":344,"), "in order: {line}");
        let object: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            object,
            serde_json::json!({
                "time": "2023-06-13T06:40:34.172Z", "duration_ms": 344, "client": "10.157.217.66",
                "result": "TCP_TUNNEL", "status": 200, "bytes": 103_428, "method": "CONNECT",
                "url": "sassoft.ru:443", "version": "HTTP/1.1", "user": "ann", "hierarchy": "HIER_DIRECT",
                "peer": "172.67.149.81", "content_type": "text/html", "referer": null,
                "user_agent": "curl/8.0", "fields": { "ab": "b" },
            })
        );
    }

    #[test]
    fn combined_fields_are_escaped_as_apache_does() {
        let record = LogRecord {
            method: Method::GET,
            url: "http://h/a\"b\\c".into(),
            referer: Some(HeaderValue::from_bytes(b"http://r/\"q\" x\t\xe9").unwrap()),
            user_agent: Some(HeaderValue::from_static("tester \"quoted\" \\o/")),
            ..record()
        };
        let mut line = String::new();
        format_record(&record, LogFormat::Combined, &mut line);
        assert!(line.contains(r#" "GET http://h/a\"b\\c HTTP/1.1" "#), "{line}");
        assert!(line.contains(r#" "http://r/\"q\" x\x09\xe9" "#), "{line}");
        assert!(line.contains(r#" "tester \"quoted\" \\o/" "#), "{line}");
        // A quoted field holds no bare quote: the line splits as the Combined regex splits it.
        let quoted: Vec<&str> = line.split(" \"").skip(1).collect();
        assert_eq!(quoted.len(), 3, "{line}");
        let record = LogRecord { referer: Some(HeaderValue::from_static("")), user_agent: None, ..record };
        line.clear();
        format_record(&record, LogFormat::Combined, &mut line);
        assert!(line.contains(" \"-\" \"-\" "), "empty or absent: {line}");
    }

    #[test]
    fn squid_fields_are_percent_encoded_where_they_would_split_the_line() {
        let record = LogRecord {
            method: Method::GET,
            url: "http://h/a\"b c\x7f\u{e9}".into(),
            content_type: Some(HeaderValue::from_static("text/html; charset=\"utf-8\"")),
            ..record()
        };
        let mut line = String::new();
        format_record(&record, LogFormat::Squid, &mut line);
        assert!(line.contains(" GET http://h/a%22b%20c%7F%C3%A9 - "), "{line}");
        assert!(line.ends_with(" text/html;%20charset=%22utf-8%22\n"), "{line}");
        assert_eq!(line.split(' ').filter(|f| !f.is_empty()).count(), 10, "{line}");
    }

    #[test]
    fn combined_line_has_clf_time_and_quoted_request() {
        let mut line = String::new();
        format_record(&record(), LogFormat::Combined, &mut line);
        assert_eq!(
            line,
            "10.157.217.66 - - [13/Jun/2023:06:40:34 +0000] \"CONNECT sassoft.ru:443 HTTP/1.1\" 200 103428 \"-\" \"curl/8.0\" TCP_TUNNEL:HIER_DIRECT\n"
        );
    }
}
