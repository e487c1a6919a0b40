//! Recovery on open: rebuild the index from the object files, deleting whatever is
//! incomplete or corrupt, so nothing damaged can be served.
//!
//! - `tmp/*`: writes that never committed: deleted (incomplete).
//! - an object file shorter than its header says, or shorter than a header: deleted
//!   (incomplete).
//! - a bad magic, header checksum, version, metadata checksum or encoding, an id or
//!   generation that disagrees with the file name or the directory, or a file longer than
//!   its header says: deleted (corrupt).
//! - two files of the same variant: the higher generation wins, the other is deleted
//!   (superseded: a replacement whose old file's unlink was not yet durable).
//! - bodies are checked here only with [`super::BodyCheck::AtOpen`]; otherwise before the
//!   first byte is served.

use super::body::{verify_body, DiskEntry};
use super::format::{self, Header, HEADER_LEN};
use super::layout::{self, Layout};
use super::record;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use twox_hash::XxHash3_64;

/// What recovery found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Objects indexed.
    pub recovered: u64,
    /// Their disk bytes (as charged).
    pub recovered_bytes: u64,
    /// Temporary files and truncated object files deleted.
    pub dropped_incomplete: u64,
    /// Object files that failed a check, deleted.
    pub dropped_corrupt: u64,
    /// Older generations of a variant also present, deleted.
    pub dropped_superseded: u64,
    /// Bytes of all the files deleted.
    pub dropped_bytes: u64,
    /// Objects evicted right after recovery because the configured limits shrank.
    pub evicted: u64,
    /// Files and directories under `objects/` that are not ours (left alone).
    pub ignored: u64,
    /// Time recovery took.
    pub elapsed: Duration,
}

pub(super) struct Recovered {
    /// Valid entries, oldest generation first.
    pub entries: Vec<DiskEntry>,
    pub max_generation: u64,
    pub report: RecoveryReport,
}

enum Verdict {
    Incomplete,
    Corrupt,
}

/// Scans `layout`, deleting what must not be served; `check_bodies` also verifies every
/// body now.
pub(super) fn recover(layout: &Layout, check_bodies: bool) -> io::Result<Recovered> {
    let started = Instant::now();
    let mut report = RecoveryReport::default();
    for entry in fs::read_dir(layout.tmp())? {
        let path = entry?.path();
        let meta = fs::symlink_metadata(&path)?;
        report.dropped_bytes += meta.len();
        if meta.is_dir() {
            fs::remove_dir_all(&path)?;
        } else {
            remove(&path)?;
        }
        report.dropped_incomplete += 1;
    }
    let mut best: HashMap<u64, DiskEntry> = HashMap::new();
    let mut max_generation = 0;
    for dir in object_dirs(layout, &mut report)? {
        for file in fs::read_dir(&dir)? {
            let file = file?;
            let path = file.path();
            let name = file.file_name();
            // Only regular files are opened: a FIFO would block the start, a directory fail
            // it, a link lead out of the cache. Not ours: left alone.
            let regular = file.file_type()?.is_file();
            let Some((id, generation)) = name.to_str().and_then(layout::parse_file_name).filter(|_| regular) else {
                report.ignored += 1;
                continue;
            };
            let len = file.metadata()?.len();
            let verdict = if layout.object_dir(id) != dir || name.to_str() != Some(&layout::file_name(id, generation)) {
                Err(Verdict::Corrupt)
            } else {
                inspect(&path, id, generation, len, check_bodies)?
            };
            match verdict {
                Ok(entry) => {
                    max_generation = max_generation.max(generation);
                    let loser = match best.remove(&id) {
                        Some(other) if other.generation() > generation => {
                            best.insert(id, other);
                            entry
                        }
                        Some(other) => {
                            best.insert(id, entry);
                            other
                        }
                        None => {
                            best.insert(id, entry);
                            continue;
                        }
                    };
                    report.dropped_superseded += 1;
                    report.dropped_bytes += fs::metadata(&loser.path).map(|m| m.len()).unwrap_or(0);
                    remove(&loser.path)?;
                }
                Err(verdict) => {
                    match verdict {
                        Verdict::Incomplete => report.dropped_incomplete += 1,
                        Verdict::Corrupt => report.dropped_corrupt += 1,
                    }
                    report.dropped_bytes += len;
                    remove(&path)?;
                }
            }
        }
    }
    let mut entries: Vec<DiskEntry> = best.into_values().collect();
    entries.sort_by_key(DiskEntry::generation);
    report.recovered = entries.len() as u64;
    report.recovered_bytes = entries.iter().map(DiskEntry::charge).sum();
    report.elapsed = started.elapsed();
    Ok(Recovered { entries, max_generation, report })
}

/// The `objects/<aa>/<bb>` directories.
fn object_dirs(layout: &Layout, report: &mut RecoveryReport) -> io::Result<Vec<PathBuf>> {
    let is_fan = |p: &Path| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let mut dirs = Vec::new();
    for top in fs::read_dir(layout.objects())? {
        let top = top?.path();
        if !(top.is_dir() && is_fan(&top)) {
            report.ignored += 1;
            continue;
        }
        for sub in fs::read_dir(&top)? {
            let sub = sub?.path();
            if sub.is_dir() && is_fan(&sub) {
                dirs.push(sub);
            } else {
                report.ignored += 1;
            }
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Checks one object file. I/O errors other than a short read abort recovery (a disk that
/// cannot be read is not one to start on).
fn inspect(
    path: &Path,
    id: u64,
    generation: u64,
    len: u64,
    check_bodies: bool,
) -> io::Result<Result<DiskEntry, Verdict>> {
    let file = File::open(path)?;
    if len < HEADER_LEN as u64 {
        return Ok(Err(Verdict::Incomplete));
    }
    let mut buf = [0u8; HEADER_LEN];
    file.read_exact_at(&mut buf, 0)?;
    let Ok(header) = Header::decode(&buf) else { return Ok(Err(Verdict::Corrupt)) };
    if header.id != id || header.generation != generation {
        return Ok(Err(Verdict::Corrupt));
    }
    if len < header.file_len() {
        return Ok(Err(Verdict::Incomplete));
    }
    if len > header.file_len() {
        return Ok(Err(Verdict::Corrupt));
    }
    let mut meta_bytes = vec![0u8; header.meta_len as usize];
    file.read_exact_at(&mut meta_bytes, HEADER_LEN as u64)?;
    if XxHash3_64::oneshot(&meta_bytes) != header.meta_hash {
        return Ok(Err(Verdict::Corrupt));
    }
    let Ok(meta) = record::decode(&meta_bytes) else { return Ok(Err(Verdict::Corrupt)) };
    if record::variant_id(&meta.key, &meta.vary_key) != id {
        return Ok(Err(Verdict::Corrupt));
    }
    if check_bodies && !verify_body(&file, &header)? {
        return Ok(Err(Verdict::Corrupt));
    }
    let charge = format::charge(header.file_len());
    Ok(Ok(DiskEntry::new(Arc::new(meta), header, path.to_path_buf(), charge, check_bodies)))
}

fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
