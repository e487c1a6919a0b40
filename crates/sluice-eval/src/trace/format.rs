//! The trace formats `sluice sim` reads, their names and auto-detection.

use std::fmt;
use std::str::FromStr;

/// A trace format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// Squid's native `access.log`: `time elapsed client code/status bytes method URL ...`.
    Squid,
    /// NCSA Common or Combined log: `host ident user [date] "request" status bytes ...`.
    Clf,
    /// The Internet Traffic Archive's EPA-HTTP layout: `host [DD:HH:MM:SS] "request" status
    /// bytes`.
    Epa,
    /// Delimited text with the columns named in [`CsvColumns`].
    Csv(CsvColumns),
    /// libCacheSim's `oracleGeneral` binary: packed little-endian records of `u32` time,
    /// `u64` object id, `u32` size, `i64` next access (ignored: `sluice sim` computes its own).
    OracleGeneral,
}

impl Format {
    /// The names [`Format::from_str`] accepts, for help texts.
    pub const NAMES: &'static str = "squid, clf (common or combined), epa (ita), csv, oracle-general";

    /// Guesses a text format from the first line of a trace; `None` when nothing matches
    /// (CSV is never guessed: its columns must be given).
    pub fn detect(first_line: &str) -> Option<Format> {
        let mut fields = first_line.split_ascii_whitespace();
        let first = fields.next()?;
        let second = fields.next()?;
        if first.contains('.') && first.parse::<f64>().is_ok() && second.parse::<u64>().is_ok() {
            return Some(Format::Squid);
        }
        if second.starts_with('[') && second.ends_with(']') && second.matches(':').count() == 3 {
            return Some(Format::Epa);
        }
        let third = fields.next()?;
        let fourth = fields.next()?;
        let _ = third;
        if fourth.starts_with('[') && fourth.contains('/') && first_line.contains('"') {
            return Some(Format::Clf);
        }
        None
    }
}

impl FromStr for Format {
    type Err = FormatError;

    /// Parses a format name; `csv` gets default columns (`key=1,size=2`).
    fn from_str(s: &str) -> Result<Self, FormatError> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "squid" => Ok(Format::Squid),
            "clf" | "common" | "combined" => Ok(Format::Clf),
            "epa" | "ita" => Ok(Format::Epa),
            "csv" => Ok(Format::Csv(CsvColumns::default())),
            "oracle-general" | "oraclegeneral" | "oracle" => Ok(Format::OracleGeneral),
            _ => Err(FormatError::UnknownFormat(s.to_owned())),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Squid => "squid",
            Format::Clf => "clf",
            Format::Epa => "epa",
            Format::Csv(_) => "csv",
            Format::OracleGeneral => "oracle-general",
        })
    }
}

/// One column of a CSV trace: 1-based position or header name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    /// 1-based column number.
    Index(usize),
    /// Header name (implies the file has a header line).
    Name(String),
}

/// Which CSV columns hold what. Parse with [`CsvColumns::from_str`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvColumns {
    /// The object key (URL or id). Required.
    pub key: Column,
    /// Response size in bytes. Without it every object has size 1.
    pub size: Option<Column>,
    /// Request method, checked by the cacheable filter when given.
    pub method: Option<Column>,
    /// Response status, checked by the cacheable filter when given.
    pub status: Option<Column>,
    /// Field delimiter.
    pub delimiter: u8,
    /// Whether the first line is a header (implied by any named column).
    pub header: bool,
}

impl Default for CsvColumns {
    fn default() -> Self {
        Self {
            key: Column::Index(1),
            size: Some(Column::Index(2)),
            method: None,
            status: None,
            delimiter: b',',
            header: false,
        }
    }
}

impl FromStr for CsvColumns {
    type Err = FormatError;

    /// Parses `key=COL[,size=COL][,method=COL][,status=COL]`, where `COL` is a 1-based
    /// number or a header name. Example: `key=2,size=5` or `key=url,size=bytes`.
    fn from_str(spec: &str) -> Result<Self, FormatError> {
        let bad = |why: &str| FormatError::CsvColumns(format!("{why} in {spec:?}"));
        let mut cols = CsvColumns { key: Column::Index(0), size: None, ..CsvColumns::default() };
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, col) = part.split_once('=').ok_or_else(|| bad("expected NAME=COLUMN"))?;
            let col = match col.trim().parse::<usize>() {
                Ok(0) => return Err(bad("columns are numbered from 1")),
                Ok(n) => Column::Index(n),
                Err(_) if !col.trim().is_empty() => {
                    cols.header = true;
                    Column::Name(col.trim().to_owned())
                }
                Err(_) => return Err(bad("empty column")),
            };
            match name.trim() {
                "key" | "url" | "id" => cols.key = col,
                "size" | "bytes" => cols.size = Some(col),
                "method" => cols.method = Some(col),
                "status" => cols.status = Some(col),
                other => return Err(bad(&format!("unknown field {other:?} (key, size, method, status)"))),
            }
        }
        if cols.key == Column::Index(0) {
            return Err(bad("missing key=COLUMN"));
        }
        Ok(cols)
    }
}

/// A format name, CSV column spec or detection failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    /// Not a format name.
    #[error("unknown trace format {0:?}; valid formats: {names}", names = Format::NAMES)]
    UnknownFormat(String),
    /// A bad `--csv-columns` value.
    #[error("bad CSV columns: {0}")]
    CsvColumns(String),
    /// Auto-detection failed.
    #[error("cannot tell the trace format from its first line {0:?}; pass --format ({names})", names = Format::NAMES)]
    Undetected(String),
    /// A named CSV column is not in the header.
    #[error("CSV header has no column {0:?}")]
    NoSuchColumn(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_text_formats() {
        let squid = "1686638434.172 344 10.1.2.3 TCP_TUNNEL/200 103428 CONNECT a.ru:443 - HIER_DIRECT/1.2.3.4 -";
        let epa = r#"port11.annex1.naples.net [30:00:00:00] "GET / HTTP/1.0" 200 4889"#;
        let clf = r#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326"#;
        assert_eq!(Format::detect(squid), Some(Format::Squid));
        assert_eq!(Format::detect(epa), Some(Format::Epa));
        assert_eq!(Format::detect(clf), Some(Format::Clf));
        assert_eq!(Format::detect("url,bytes"), None);
    }

    #[test]
    fn parses_csv_columns() {
        let c: CsvColumns = "key=url, size=bytes".parse().unwrap();
        assert_eq!(c.key, Column::Name("url".into()));
        assert!(c.header);
        let c: CsvColumns = "key=2,size=5,status=3".parse().unwrap();
        assert_eq!((c.key, c.size, c.status), (Column::Index(2), Some(Column::Index(5)), Some(Column::Index(3))));
        assert!("size=2".parse::<CsvColumns>().is_err());
        assert!("key=0".parse::<CsvColumns>().is_err());
        assert!("colour=2,key=1".parse::<CsvColumns>().is_err());
    }

    #[test]
    fn unknown_format_lists_valid_ones() {
        let e = "w3c".parse::<Format>().unwrap_err().to_string();
        assert!(e.contains("squid") && e.contains("oracle-general"), "{e}");
    }
}
