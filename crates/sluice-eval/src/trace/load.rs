//! [`load`]: read, filter and intern a whole trace.

use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use super::intern::Interner;
use super::readers::RecordSource;
use super::{source, Filter, Format, FormatError, Request, Trace, MAX_KEPT_ERRORS};

/// How to read a trace.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// The format; `None` detects it from the first line (text formats only).
    pub format: Option<Format>,
    /// Which records to keep.
    pub filter: Filter,
    /// Stop after this many kept requests.
    pub limit: Option<u64>,
}

impl ReadOptions {
    /// Reads `format` with the cacheable filter and no limit.
    pub fn new(format: Format) -> Self {
        Self { format: Some(format), ..Self::default() }
    }
}

/// A trace could not be read at all (malformed lines are not errors: they are counted).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Opening or reading failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The trace file.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// The format could not be set up (detection failed, CSV column missing).
    #[error("{path}: {source}")]
    Format {
        /// The trace file.
        path: PathBuf,
        /// What went wrong.
        source: FormatError,
    },
}

/// Reads the trace at `path` (plain, `.gz` or `.zst`, recognised by content).
///
/// # Errors
/// [`LoadError`] when the file cannot be read or its format cannot be set up.
pub fn load(path: &Path, opts: &ReadOptions) -> Result<Trace, LoadError> {
    let input = source::open(path).map_err(|e| LoadError::Io { path: path.to_owned(), source: e })?;
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    load_from(&name, input, opts).map_err(|e| match e {
        LoadError::Io { source, .. } => LoadError::Io { path: path.to_owned(), source },
        LoadError::Format { source, .. } => LoadError::Format { path: path.to_owned(), source },
    })
}

/// Reads a trace from `input` (decompressing it if needed); `name` labels reports.
///
/// # Errors
/// As [`load`]; paths in errors are `name`.
pub fn load_from(name: &str, input: impl io::Read + Send + 'static, opts: &ReadOptions) -> Result<Trace, LoadError> {
    let io_err = |source| LoadError::Io { path: name.into(), source };
    let fmt_err = |source| LoadError::Format { path: name.into(), source };
    let mut input = source::decompress(input).map_err(io_err)?;
    let format = match &opts.format {
        Some(f) => f.clone(),
        None => detect(&mut input).map_err(io_err)?.map_err(fmt_err)?,
    };
    let mut source = RecordSource::new(&format, input).map_err(fmt_err)?;
    let mut trace = Trace { name: name.to_owned(), ..Trace::default() };
    let mut interner = Interner::default();
    let limit = opts.limit.unwrap_or(u64::MAX);
    let kept = std::cell::Cell::new(0u64);
    let mut sink = |line: u64, rec: Result<super::Record<'_>, String>| {
        let stats = &mut trace.stats;
        stats.records += 1;
        match rec {
            Err(reason) => {
                stats.malformed += 1;
                if stats.errors.len() < MAX_KEPT_ERRORS {
                    stats.errors.push((line, reason));
                }
            }
            Ok(r) if opts.filter.keeps(&r) => {
                let size = r.size.unwrap_or(0);
                let id = interner.id(r.key, size);
                trace.requests.push(Request { id, size });
                stats.kept += 1;
                kept.set(stats.kept);
            }
            Ok(_) => stats.filtered += 1,
        }
    };
    while kept.get() < limit && source.next(&mut sink).map_err(io_err)? {}
    interner.finish(&mut trace);
    Ok(trace)
}

/// Detects the format from the first non-blank, non-comment line in the buffer.
fn detect(input: &mut Box<dyn BufRead + Send>) -> io::Result<Result<Format, FormatError>> {
    let head = input.fill_buf()?;
    let text = String::from_utf8_lossy(&head[..head.len().min(8192)]);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or("");
    Ok(Format::detect(first).ok_or_else(|| FormatError::Undetected(first.chars().take(80).collect())))
}
