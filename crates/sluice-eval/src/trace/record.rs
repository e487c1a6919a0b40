//! The reader-neutral view of one log line.

/// How a trace names an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key<'a> {
    /// A URL or other text key.
    Text(&'a str),
    /// A numeric id (binary traces).
    Id(u64),
}

/// One parsed line: the object, its size and what the filter looks at. Fields a format
/// does not log are `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// The object requested.
    pub key: Key<'a>,
    /// Response body bytes, if logged (`-` means unknown).
    pub size: Option<u64>,
    /// Request method, if logged.
    pub method: Option<&'a str>,
    /// Response status, if logged.
    pub status: Option<u16>,
}
