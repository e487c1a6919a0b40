//! One parser per format. Text parsers map a line to a [`Record`] or a reason it is
//! malformed; [`RecordSource`] drives them (or the CSV and binary readers) over a stream.

mod clf;
mod csv;
mod epa;
mod oracle;
mod request_line;
mod squid;

use std::io::{self, BufRead};

pub use oracle::encode as encode_oracle_general;

use super::{Format, FormatError, Record};

/// Receives each record (or malformed-record reason) with its 1-based line number.
pub(crate) type Sink<'s> = dyn FnMut(u64, Result<Record<'_>, String>) + 's;

/// A stream of records in one format.
pub(crate) enum RecordSource<R: BufRead> {
    Text { input: R, parse: fn(&str) -> Result<Record<'_>, &'static str>, line: u64, buf: Vec<u8> },
    Csv(csv::CsvSource<R>),
    Oracle(oracle::OracleSource<R>),
}

impl<R: BufRead> RecordSource<R> {
    /// A source reading `format` from `input`.
    pub(crate) fn new(format: &Format, input: R) -> Result<Self, FormatError> {
        let parse: fn(&str) -> Result<Record<'_>, &'static str> = match format {
            Format::Squid => squid::parse,
            Format::Clf => clf::parse,
            Format::Epa => epa::parse,
            Format::Csv(cols) => return Ok(RecordSource::Csv(csv::CsvSource::new(cols, input)?)),
            Format::OracleGeneral => return Ok(RecordSource::Oracle(oracle::OracleSource::new(input))),
        };
        Ok(RecordSource::Text { input, parse, line: 0, buf: Vec::new() })
    }

    /// Feeds the next record to `sink`; `Ok(false)` at the end of the input. Blank lines
    /// and `#` comments are skipped without a record.
    pub(crate) fn next(&mut self, sink: &mut Sink<'_>) -> io::Result<bool> {
        match self {
            RecordSource::Text { input, parse, line, buf } => loop {
                buf.clear();
                if input.read_until(b'\n', buf)? == 0 {
                    return Ok(false);
                }
                *line += 1;
                let text = String::from_utf8_lossy(buf);
                let text = text.trim_end_matches(['\n', '\r']);
                if text.trim().is_empty() || text.starts_with('#') {
                    continue;
                }
                sink(*line, parse(text).map_err(str::to_owned));
                return Ok(true);
            },
            RecordSource::Csv(c) => c.next(sink),
            RecordSource::Oracle(o) => o.next(sink),
        }
    }
}
