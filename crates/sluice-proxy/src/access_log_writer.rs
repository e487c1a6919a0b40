//! The access log's writer thread: formats the records it is sent and writes them, in
//! order, to the log's destination, and goes on through write errors.
//!
//! Records are written in batches: the records queued when the thread wakes (up to
//! [`BATCH`] bytes of lines), formatted into one buffer and written straight to the file
//! with one `write_all` (no `BufWriter`: a failed write leaves nothing buffered behind to
//! poison later ones). Lines appear promptly at low load and are batched at high load.
//!
//! When a write fails (`ENOSPC` on a full disk, `EIO`, ...), the lines of the batch it did
//! not write are dropped and counted in [`Metrics::access_log_lines_dropped`]; one error is
//! reported for the whole streak of failures, and when a write works again one warning
//! says how many lines the streak lost. The thread goes on: each later batch is tried, and
//! a reopen works at any time. A line a failed write cut short is finished by the next
//! write (to the same file), so no line of the file holds the halves of two records.

use crate::access_log::{format_record, LogRecord};
use crate::config::LogFormat;
use crate::metrics::Metrics;
use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::sync::Arc;

/// Formatted lines are written once this many bytes are held, even with more records queued.
pub(crate) const BATCH: usize = 64 * 1024;

/// What the writer thread is asked to do, in order. (A record goes unboxed: it is nearly
/// every message, and a box would cost an allocation per logged request.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Message {
    Record(LogRecord),
    /// Write what came before, then open the destination anew; the outcome of the open
    /// goes back (a failed write of the earlier lines is reported as any write error is).
    Reopen(tokio::sync::oneshot::Sender<std::io::Result<()>>),
    /// Write what came before, then stop (shutdown).
    Close,
}

/// Where the lines go.
pub(crate) trait Destination: std::fmt::Display + Send + 'static {
    type Out: Write;
    /// Opens it (for appending): at start, and again on each reopen when [`Self::reopens`].
    fn open(&self) -> std::io::Result<Self::Out>;
    /// Whether a reopen opens it anew (a file at its path: yes; standard output: no).
    fn reopens(&self) -> bool;
}

/// Runs the writer until it is sent [`Message::Close`] or every sender is gone, writing
/// each record sent before that (or counting it dropped); `out` is `destination` opened.
/// Records still queued behind a `Close` are counted dropped; reopens behind it get no
/// answer.
pub(crate) fn run<D: Destination>(
    rx: mpsc::Receiver<Message>,
    destination: D,
    out: D::Out,
    format: LogFormat,
    metrics: Arc<Metrics>,
) {
    let mut writer = Writer { destination, out, batch: Vec::with_capacity(BATCH), torn: false, failing: None, metrics };
    let mut line = String::with_capacity(256);
    'running: while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(message) = next {
            match message {
                Message::Record(record) => {
                    line.clear();
                    format_record(&record, format, &mut line);
                    writer.batch.extend_from_slice(line.as_bytes());
                    if writer.batch.len() >= BATCH {
                        writer.write_batch();
                    }
                }
                Message::Reopen(done) => {
                    writer.write_batch();
                    let _ = done.send(writer.reopen());
                }
                Message::Close => break 'running,
            }
            next = rx.try_recv().ok();
        }
        writer.write_batch();
    }
    writer.write_batch();
    writer.give_up();
    let late = rx.try_iter().filter(|message| matches!(message, Message::Record(_))).count();
    writer.metrics.access_log_lines_dropped.fetch_add(late as u64, Relaxed);
}

struct Writer<D: Destination> {
    destination: D,
    out: D::Out,
    /// Formatted lines not written yet.
    batch: Vec<u8>,
    /// `batch` starts with the rest of a line a failed write cut short.
    torn: bool,
    /// While writes fail: the lines lost since the first failure.
    failing: Option<u64>,
    metrics: Arc<Metrics>,
}

impl<D: Destination> Writer<D> {
    /// Writes the batch. On an error, keeps only the rest of a line the write cut short
    /// (for the next write to finish) and drops the lines after it.
    fn write_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let (written, result) = write_some(&mut self.out, &self.batch);
        let error = match result.and_then(|()| self.out.flush()) {
            Ok(()) => {
                self.batch.clear();
                self.torn = false;
                if let Some(lost) = self.failing.take() {
                    tracing::warn!("access log {}: writing again; {lost} lines were lost", self.destination);
                }
                return;
            }
            Err(e) => e,
        };
        // The line `written` falls in, if the write stopped inside it, ends at its newline.
        let mid_line = if written == 0 { self.torn } else { self.batch[written - 1] != b'\n' };
        let cut = if mid_line {
            self.batch[written..].iter().position(|&b| b == b'\n').map_or(self.batch.len(), |at| written + at + 1)
        } else {
            written
        };
        let lost = lines(&self.batch[cut..]);
        self.batch.truncate(cut);
        self.batch.drain(..written);
        self.torn = !self.batch.is_empty();
        self.lose(lost, &error);
    }

    /// Opens the destination anew, when it reopens; the rest of a cut line that could not
    /// be written to the old file is dropped, as the new file starts with a whole line.
    /// When the open fails, the log goes on in the file it had.
    fn reopen(&mut self) -> std::io::Result<()> {
        if !self.destination.reopens() {
            return Ok(());
        }
        self.out = self.destination.open()?;
        if self.torn {
            let lost = lines(&self.batch);
            self.batch.clear();
            self.torn = false;
            self.lose(lost, &std::io::Error::other("reopened before the line could be finished"));
        }
        Ok(())
    }

    /// At the end: what is still held (the rest of a cut line) is dropped, and a streak of
    /// failures is summed up.
    fn give_up(&mut self) {
        let lost = lines(&self.batch);
        self.batch.clear();
        self.metrics.access_log_lines_dropped.fetch_add(lost, Relaxed);
        if let Some(streak) = self.failing.take() {
            let total = streak + lost;
            tracing::warn!("access log {}: closed while writes failed; {total} lines were lost", self.destination);
        }
    }

    /// Counts `lost` lines; the first failure of a streak is reported.
    fn lose(&mut self, lost: u64, error: &std::io::Error) {
        self.metrics.access_log_lines_dropped.fetch_add(lost, Relaxed);
        match &mut self.failing {
            Some(streak) => *streak += lost,
            None => {
                tracing::error!(
                    "access log {}: cannot write ({error}); dropping lines until writing works again \
                     (counted in sluice_access_log_lines_dropped_total)",
                    self.destination
                );
                self.failing = Some(lost);
            }
        }
    }
}

/// `write_all`, which also says how many bytes went out before an error.
fn write_some(out: &mut impl Write, mut bytes: &[u8]) -> (usize, std::io::Result<()>) {
    let total = bytes.len();
    while !bytes.is_empty() {
        match out.write(bytes) {
            Ok(0) => return (total - bytes.len(), Err(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (total - bytes.len(), Err(e)),
        }
    }
    (total, Ok(()))
}

/// The lines (newlines) in `bytes`.
fn lines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk that fills and empties: each write takes at most `room` bytes (the rest of
    /// what it was given is left for a later call), then fails with `ENOSPC` until `room`
    /// is set again. Each open makes a new file on it, written through a [`File`].
    #[derive(Clone)]
    struct Disk(Arc<parking_lot::Mutex<DiskState>>);

    struct DiskState {
        room: usize,
        files: Vec<Vec<u8>>,
        /// Whether a reopen opens a new file (as for a path), or keeps the one open (as for
        /// standard output).
        reopens: bool,
    }

    /// One file on a [`Disk`].
    struct File {
        disk: Disk,
        index: usize,
    }

    impl Disk {
        /// A disk with `room` bytes free, and the file the writer starts with.
        fn with_room(room: usize) -> (Self, File) {
            let disk = Disk(Arc::new(parking_lot::Mutex::new(DiskState { room, files: vec![], reopens: true })));
            let file = disk.open().unwrap();
            (disk, file)
        }
        fn set_room(&self, room: usize) {
            self.0.lock().room = room;
        }
        /// The text of the `index`th file opened.
        fn text(&self, index: usize) -> String {
            String::from_utf8(self.0.lock().files[index].clone()).unwrap()
        }
        fn files(&self) -> usize {
            self.0.lock().files.len()
        }
    }

    impl Write for File {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut disk = self.disk.0.lock();
            if disk.room == 0 {
                return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
            }
            let n = buf.len().min(disk.room);
            disk.room -= n;
            disk.files[self.index].extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl std::fmt::Display for Disk {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("test disk")
        }
    }

    impl Destination for Disk {
        type Out = File;
        fn open(&self) -> std::io::Result<File> {
            let mut disk = self.0.lock();
            disk.files.push(Vec::new());
            Ok(File { disk: self.clone(), index: disk.files.len() - 1 })
        }
        fn reopens(&self) -> bool {
            self.0.lock().reopens
        }
    }

    /// The access log tests' record, for `url`.
    fn record(url: &str) -> LogRecord {
        LogRecord { url: url.into(), ..crate::access_log::tests::record() }
    }

    fn line(url: &str) -> String {
        let mut line = String::new();
        format_record(&record(url), LogFormat::Squid, &mut line);
        line
    }

    /// A writer thread on `disk`, writing to `file` first, and what the test sends it.
    struct Running {
        tx: mpsc::Sender<Message>,
        thread: std::thread::JoinHandle<()>,
        metrics: Arc<Metrics>,
    }

    fn start(disk: &Disk, file: File) -> Running {
        let (tx, rx) = mpsc::channel();
        let metrics = Arc::new(Metrics::default());
        let (destination, m) = (disk.clone(), Arc::clone(&metrics));
        let thread = std::thread::spawn(move || run(rx, destination, file, LogFormat::Squid, m));
        Running { tx, thread, metrics }
    }

    impl Running {
        fn log(&self, url: &str) {
            self.tx.send(Message::Record(record(url))).unwrap();
        }
        /// Sends a reopen and waits for its answer: every message sent before it has been
        /// handled (its lines written or dropped).
        fn reopen(&self) -> std::io::Result<()> {
            let (done, outcome) = tokio::sync::oneshot::channel();
            self.tx.send(Message::Reopen(done)).unwrap();
            outcome.blocking_recv().unwrap()
        }
        fn dropped(&self) -> u64 {
            self.metrics.access_log_lines_dropped.load(Relaxed)
        }
        /// Closes the log and waits for the thread to end; the lines dropped in all.
        fn close(self) -> u64 {
            self.tx.send(Message::Close).unwrap();
            self.thread.join().unwrap();
            self.metrics.access_log_lines_dropped.load(Relaxed)
        }
    }

    #[test]
    fn after_failed_writes_the_thread_goes_on_and_later_lines_arrive() {
        let (disk, file) = Disk::with_room(usize::MAX);
        disk.0.lock().reopens = false; // (reopens only wait for the writes here)
        let writer = start(&disk, file);
        writer.log("/before");
        writer.reopen().unwrap();
        disk.set_room(0); // full
        writer.log("/lost-1");
        writer.reopen().unwrap();
        writer.log("/lost-2");
        writer.log("/lost-3");
        writer.reopen().unwrap();
        assert_eq!(writer.dropped(), 3);
        disk.set_room(usize::MAX); // space freed
        writer.log("/after");
        writer.reopen().unwrap();
        assert_eq!(disk.text(0), line("/before") + &line("/after"));
        assert_eq!(writer.close(), 3);
        assert_eq!(disk.files(), 1);
    }

    #[test]
    fn a_line_cut_short_by_a_failed_write_is_finished_by_the_next_write() {
        let first = line("/first");
        let (disk, file) = Disk::with_room(10); // the disk fills ten bytes into the first line
        disk.0.lock().reopens = false;
        let writer = start(&disk, file);
        writer.log("/first");
        writer.log("/second");
        writer.reopen().unwrap();
        assert_eq!(disk.text(0), first[..10]);
        assert_eq!(writer.dropped(), 1, "the second line is dropped, the rest of the first is held");
        writer.log("/third");
        writer.reopen().unwrap(); // still full: the third line is dropped too
        assert_eq!(writer.dropped(), 2);
        disk.set_room(usize::MAX);
        writer.log("/fourth");
        writer.reopen().unwrap();
        assert_eq!(disk.text(0), first + &line("/fourth"), "every line of the file whole");
        assert_eq!(writer.close(), 2);
    }

    #[test]
    fn a_reopen_works_while_writes_fail_and_the_new_file_starts_with_a_whole_line() {
        let (disk, file) = Disk::with_room(3);
        let writer = start(&disk, file);
        writer.log("/cut");
        // The write before the reopen fails 3 bytes in; the rest of the line cannot go to
        // the new file, and is dropped.
        writer.reopen().unwrap();
        assert_eq!(writer.dropped(), 1);
        disk.set_room(usize::MAX);
        writer.log("/whole");
        writer.reopen().unwrap();
        assert_eq!(disk.text(0), line("/cut")[..3]);
        assert_eq!(disk.text(1), line("/whole"));
        assert_eq!(disk.files(), 3);
        assert_eq!(writer.close(), 1);
    }

    #[test]
    fn close_writes_what_came_before_it_and_counts_what_came_after() {
        let (disk, file) = Disk::with_room(usize::MAX);
        let (tx, rx) = mpsc::channel();
        let metrics = Arc::new(Metrics::default());
        for message in [Message::Record(record("/a")), Message::Close, Message::Record(record("/late"))] {
            tx.send(message).unwrap();
        }
        // The thread's whole life, here: everything is queued before it runs.
        run(rx, disk.clone(), file, LogFormat::Squid, Arc::clone(&metrics));
        assert_eq!(disk.text(0), line("/a"));
        assert_eq!(metrics.access_log_lines_dropped.load(Relaxed), 1);
        assert!(tx.send(Message::Close).is_err(), "the receiver is gone");
    }
}
