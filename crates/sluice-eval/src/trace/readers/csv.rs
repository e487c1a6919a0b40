//! Delimited text with user-chosen columns (see [`CsvColumns`]).

use std::io::{self, BufRead};

use crate::trace::format::Column;
use crate::trace::{CsvColumns, FormatError, Key, Record};

use super::Sink;

/// 0-based positions of the columns, resolved against the header when named.
struct Positions {
    key: usize,
    size: Option<usize>,
    method: Option<usize>,
    status: Option<usize>,
}

pub(crate) struct CsvSource<R: BufRead> {
    reader: csv::Reader<R>,
    at: Positions,
    record: csv::StringRecord,
}

impl<R: BufRead> CsvSource<R> {
    pub(crate) fn new(cols: &CsvColumns, input: R) -> Result<Self, FormatError> {
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(cols.delimiter)
            .has_headers(cols.header)
            .flexible(true)
            .from_reader(input);
        let header = if cols.header { reader.headers().ok().cloned() } else { None };
        let resolve = |c: &Column| -> Result<usize, FormatError> {
            match c {
                Column::Index(n) => Ok(n - 1),
                Column::Name(name) => header
                    .as_ref()
                    .and_then(|h| h.iter().position(|f| f.trim() == name))
                    .ok_or_else(|| FormatError::NoSuchColumn(name.clone())),
            }
        };
        let at = Positions {
            key: resolve(&cols.key)?,
            size: cols.size.as_ref().map(resolve).transpose()?,
            method: cols.method.as_ref().map(resolve).transpose()?,
            status: cols.status.as_ref().map(resolve).transpose()?,
        };
        Ok(Self { reader, at, record: csv::StringRecord::new() })
    }

    pub(crate) fn next(&mut self, sink: &mut Sink<'_>) -> io::Result<bool> {
        let more = match self.reader.read_record(&mut self.record) {
            Ok(more) => more,
            Err(e) => match e.kind() {
                csv::ErrorKind::Io(_) => return Err(io::Error::other(e)),
                _ => {
                    let line = e.position().map_or(0, |p| p.line());
                    sink(line, Err(e.to_string()));
                    return Ok(true);
                }
            },
        };
        if !more {
            return Ok(false);
        }
        let line = self.record.position().map_or(0, |p| p.line());
        sink(line, parse(&self.record, &self.at).map_err(str::to_owned));
        Ok(true)
    }
}

fn parse<'r>(rec: &'r csv::StringRecord, at: &Positions) -> Result<Record<'r>, &'static str> {
    let key = rec.get(at.key).map(str::trim).filter(|k| !k.is_empty()).ok_or("missing key column")?;
    let size = match at.size {
        None => Some(1),
        Some(i) => match rec.get(i).map(str::trim).ok_or("missing size column")? {
            "" | "-" => None,
            n => Some(n.parse::<u64>().map_err(|_| "bad size")?),
        },
    };
    let method = at.method.map(|i| rec.get(i).map(str::trim).ok_or("missing method column")).transpose()?;
    let status =
        at.status.map(|i| rec.get(i).and_then(|s| s.trim().parse::<u16>().ok()).ok_or("bad status")).transpose()?;
    Ok(Record { key: Key::Text(key), size, method, status })
}
