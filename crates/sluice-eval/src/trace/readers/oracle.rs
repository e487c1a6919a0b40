//! libCacheSim `oracleGeneral` binary: packed little-endian 24-byte records
//! `{ u32 clock_time; u64 obj_id; u32 obj_size; i64 next_access_vtime }`.

use std::io::{self, BufRead};

use crate::trace::{Key, Record};

use super::Sink;

const RECORD: usize = 24;

pub(crate) struct OracleSource<R> {
    input: R,
    index: u64,
    done: bool,
}

impl<R: BufRead> OracleSource<R> {
    pub(crate) fn new(input: R) -> Self {
        Self { input, index: 0, done: false }
    }

    /// Reports record numbers (1-based) in place of line numbers.
    pub(crate) fn next(&mut self, sink: &mut Sink<'_>) -> io::Result<bool> {
        if self.done {
            return Ok(false);
        }
        let mut buf = [0u8; RECORD];
        let mut filled = 0;
        while filled < RECORD {
            match self.input.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if filled == 0 {
            self.done = true;
            return Ok(false);
        }
        self.index += 1;
        if filled < RECORD {
            self.done = true;
            sink(self.index, Err(format!("truncated record: {filled} of {RECORD} bytes")));
            return Ok(true);
        }
        let id = u64::from_le_bytes(buf[4..12].try_into().unwrap_or_default());
        let size = u32::from_le_bytes(buf[12..16].try_into().unwrap_or_default());
        sink(self.index, Ok(Record { key: Key::Id(id), size: Some(u64::from(size)), method: None, status: None }));
        Ok(true)
    }
}

/// Encodes `(id, size)` pairs as `oracleGeneral` records (next access -1), for fixtures and
/// generated traces.
pub fn encode(pairs: impl IntoIterator<Item = (u64, u32)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (time, (id, size)) in pairs.into_iter().enumerate() {
        out.extend_from_slice(&(time as u32).to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(-1i64).to_le_bytes());
    }
    out
}
