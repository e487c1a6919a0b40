//! Where things live under the tier's directory, and the directory-level durability steps.
//!
//! ```text
//! <dir>/LOCK                                   flock'd by the process that has the tier open
//! <dir>/tmp/<id>-<pid>-<seq>.tmp               writes in progress (deleted at recovery)
//! <dir>/objects/<id[0]>/<id[1]>/<id>-<gen>.obj complete, durable objects (hex; id bytes big-endian)
//! ```

use rustix::fs::FlockOperation;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// Paths of one tier directory.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn objects(&self) -> PathBuf {
        self.root.join("objects")
    }

    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The directory holding the files of variant `id`.
    pub fn object_dir(&self, id: u64) -> PathBuf {
        let b = id.to_be_bytes();
        self.objects().join(format!("{:02x}", b[0])).join(format!("{:02x}", b[1]))
    }

    /// The file of variant `id`, generation `generation`.
    pub fn object_path(&self, id: u64, generation: u64) -> PathBuf {
        self.object_dir(id).join(file_name(id, generation))
    }

    /// A fresh temporary path for a write of variant `id`.
    pub fn tmp_path(&self, id: u64, seq: u64) -> PathBuf {
        self.tmp().join(format!("{id:016x}-{}-{seq}.tmp", std::process::id()))
    }

    /// Creates the top-level directories (durably) and takes the directory lock, so two
    /// processes never recover or write the same directory at once.
    pub fn prepare(&self) -> io::Result<File> {
        create_dir_durable(&self.root)?;
        create_dir_durable(&self.objects())?;
        create_dir_durable(&self.tmp())?;
        let lock = fs::OpenOptions::new().create(true).truncate(false).write(true).open(self.root.join("LOCK"))?;
        rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).map_err(|e| {
            if e == rustix::io::Errno::WOULDBLOCK {
                io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("{} is in use by another process", self.root.display()),
                )
            } else {
                io::Error::from(e)
            }
        })?;
        Ok(lock)
    }

    /// Makes sure the directory of `id` exists, durably: every directory created here is
    /// followed by an fsync of its parent.
    pub fn ensure_object_dir(&self, id: u64) -> io::Result<PathBuf> {
        let dir = self.object_dir(id);
        if !dir.is_dir() {
            let parent = dir.parent().expect("object dirs have parents").to_path_buf();
            create_dir_durable(&parent)?;
            create_dir_durable(&dir)?;
        }
        Ok(dir)
    }
}

/// `<id>-<generation>.obj`, both 16 hex digits.
pub fn file_name(id: u64, generation: u64) -> String {
    format!("{id:016x}-{generation:016x}.obj")
}

/// Parses a name made by [`file_name`].
pub fn parse_file_name(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_suffix(".obj")?;
    let (id, generation) = stem.split_once('-')?;
    if id.len() != 16 || generation.len() != 16 {
        return None;
    }
    Some((u64::from_str_radix(id, 16).ok()?, u64::from_str_radix(generation, 16).ok()?))
}

/// Creates `dir` if missing; when created, fsyncs its parent so the entry survives a crash.
fn create_dir_durable(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => match dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
            _ => Ok(()),
        },
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// fsyncs a directory, making the entries created, renamed or removed in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_ignored() {
        assert_eq!(parse_file_name(&file_name(0xdead_beef, 42)), Some((0xdead_beef, 42)));
        assert_eq!(parse_file_name("notes.txt"), None);
        assert_eq!(parse_file_name("00000000deadbeef.obj"), None);
        assert_eq!(parse_file_name("zz00000000000000-0000000000000001.obj"), None);
    }

    #[test]
    fn objects_fan_out_by_the_top_id_bytes() {
        let l = Layout::new(Path::new("/c"));
        assert_eq!(
            l.object_path(0xabcd_0000_0000_0001, 2),
            PathBuf::from("/c/objects/ab/cd/abcd000000000001-0000000000000002.obj")
        );
    }
}
