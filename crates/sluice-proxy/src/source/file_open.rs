//! Opening a served file without ever leaving the root.
//!
//! The root directory is opened once; files are opened relative to it with `openat2` and
//! `RESOLVE_BENEATH`, so the kernel refuses any resolution (a `..` or a symbolic link)
//! that would leave the root, atomically: no check-then-open race. Symbolic links that stay
//! inside the root are followed. With `follow_outside_symlinks`, links may lead anywhere
//! (only `/proc` magic links are refused). On a kernel without `openat2` (before 5.6, or a
//! seccomp filter that hides it) the file's canonical path is checked against the root
//! before opening it: the same rule, with a window in which a swapped link could win.
//!
//! Files are opened non-blocking (a FIFO must not hang the opener) and only regular files
//! are served.

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What opening a path found.
#[derive(Debug)]
pub enum Opened {
    /// A regular file, open for reading, and its metadata.
    File(File, Metadata),
    /// Nothing there (or a path through a non-directory).
    NotFound,
    /// A directory: nothing to serve (no listings, no index files).
    Directory,
    /// Outside the root, through a refused link, not readable, or not a regular file.
    Forbidden,
}

/// A served directory.
#[derive(Debug)]
pub struct Root {
    /// Canonical (absolute, no links).
    pub path: PathBuf,
    dir: File,
    follow_outside_symlinks: bool,
}

/// Set once `openat2` turned out to be unavailable.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

impl Root {
    /// Opens the directory `path`.
    pub fn open(path: &Path, follow_outside_symlinks: bool) -> io::Result<Self> {
        let path = std::fs::canonicalize(path)?;
        let dir = File::open(&path)?;
        if !dir.metadata()?.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, "not a directory"));
        }
        Ok(Self { path, dir, follow_outside_symlinks })
    }

    /// Opens `relative` (already free of `.`/`..` segments) under the root. Blocking: call
    /// it from a blocking task. `Err` only for unexpected I/O errors.
    pub fn open_file(&self, relative: &Path) -> io::Result<Opened> {
        if relative.as_os_str().is_empty() {
            return Ok(Opened::Directory);
        }
        let file = match self.open_beneath(relative) {
            Ok(file) => file,
            Err(e) => {
                return match e.raw_os_error().map(Errno::from_raw_os_error) {
                    Some(Errno::NOENT | Errno::NOTDIR | Errno::NAMETOOLONG) => Ok(Opened::NotFound),
                    // EXDEV: the resolution would leave the root.
                    Some(Errno::XDEV | Errno::LOOP | Errno::ACCESS | Errno::PERM | Errno::NXIO) => {
                        Ok(Opened::Forbidden)
                    }
                    _ => Err(e),
                };
            }
        };
        let meta = file.metadata()?;
        Ok(if meta.is_file() {
            Opened::File(file, meta)
        } else if meta.is_dir() {
            Opened::Directory
        } else {
            Opened::Forbidden
        })
    }

    fn open_beneath(&self, relative: &Path) -> io::Result<File> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        let resolve = if self.follow_outside_symlinks {
            ResolveFlags::NO_MAGICLINKS
        } else {
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
        };
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            match rustix::fs::openat2(&self.dir, relative, flags, Mode::empty(), resolve) {
                Ok(fd) => return Ok(File::from(fd)),
                Err(Errno::NOSYS) => {
                    tracing::warn!("openat2 is not available; files are checked by their canonical path");
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.open_checked(relative)
    }

    /// The fallback without `openat2`.
    fn open_checked(&self, relative: &Path) -> io::Result<File> {
        let canonical = std::fs::canonicalize(self.path.join(relative))?;
        if !self.follow_outside_symlinks && !canonical.starts_with(&self.path) {
            return Err(Errno::XDEV.into());
        }
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
            .open(canonical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        std::fs::create_dir_all(base.join("www/sub")).unwrap();
        std::fs::write(base.join("www/a.txt"), "a").unwrap();
        std::fs::write(base.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), base.join("www/out")).unwrap();
        std::os::unix::fs::symlink("../a.txt", base.join("www/sub/in")).unwrap();
        let root = Root::open(&base.join("www"), false).unwrap();
        (dir, root)
    }

    fn kind(opened: io::Result<Opened>) -> &'static str {
        match opened.unwrap() {
            Opened::File(..) => "file",
            Opened::NotFound => "not found",
            Opened::Directory => "directory",
            Opened::Forbidden => "forbidden",
        }
    }

    #[test]
    fn links_may_not_leave_the_root() {
        let (_dir, root) = tree();
        assert_eq!(kind(root.open_file(Path::new("a.txt"))), "file");
        assert_eq!(kind(root.open_file(Path::new("sub/in"))), "file");
        assert_eq!(kind(root.open_file(Path::new("out"))), "forbidden");
        assert_eq!(kind(root.open_file(Path::new("sub"))), "directory");
        assert_eq!(kind(root.open_file(Path::new(""))), "directory");
        assert_eq!(kind(root.open_file(Path::new("nope"))), "not found");
        assert_eq!(kind(root.open_file(Path::new("a.txt/x"))), "not found");
    }

    #[test]
    fn without_openat2_the_canonical_path_is_checked() {
        let (_dir, root) = tree();
        assert!(root.open_checked(Path::new("a.txt")).is_ok());
        assert!(root.open_checked(Path::new("sub/in")).is_ok());
        let escaped = root.open_checked(Path::new("out")).unwrap_err();
        assert_eq!(escaped.raw_os_error(), Some(Errno::XDEV.raw_os_error()));
        let outside = Root::open(&root.path, true).unwrap();
        assert!(outside.open_checked(Path::new("out")).is_ok());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let (_dir, root) = tree();
        let made = std::process::Command::new("mkfifo").arg(root.path.join("pipe")).status().unwrap();
        assert!(made.success());
        assert_eq!(kind(root.open_file(Path::new("pipe"))), "forbidden");
    }
}
