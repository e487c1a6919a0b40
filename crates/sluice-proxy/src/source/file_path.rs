//! Names of served files: a request path becomes a path under the root, a file's path
//! becomes its URI `file://localhost/<absolute path>` and so its cache key, and a `file://`
//! URI path becomes a path relative to the root again (it may have been edited by a module
//! on its way, so it is checked like a request path).
//!
//! A path is a list of segments, each percent-decoded. Empty segments (`a//b`) are skipped.
//! A segment `.` or `..`, or one that decodes to something holding `/` or NUL (`%2F`,
//! `%00`), is refused: no request names anything outside the root or the same file under
//! two names. Symbolic links are the opener's business (`file_open.rs`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The authority of file URIs (RFC 8089: `file://localhost/p` is `file:///p`; `http::Uri`
/// needs a non-empty authority).
pub const AUTHORITY: &str = "localhost";

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A `.`/`..` segment, an encoded `/` or NUL, or a path outside the root: 403.
    Escape,
    /// A `%` not followed by two hex digits: 400.
    BadEncoding,
}

/// The segments of a request path (below the route's prefix), percent-decoded.
pub fn segments(path: &str) -> Result<Vec<Vec<u8>>, Refused> {
    path.split('/').filter(|s| !s.is_empty()).map(decode_segment).collect()
}

fn decode_segment(segment: &str) -> Result<Vec<u8>, Refused> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or(Refused::BadEncoding)?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    if out == b"." || out == b".." || out.contains(&b'/') || out.contains(&0) {
        return Err(Refused::Escape);
    }
    Ok(out)
}

/// `root` joined with `segments` (already checked by [`segments`]).
pub fn join(root: &Path, segments: &[Vec<u8>]) -> PathBuf {
    let mut path = root.to_path_buf();
    for segment in segments {
        path.push(OsStr::from_bytes(segment));
    }
    path
}

/// The cache key of the file at `path` (absolute): the primary key of its `file://` URI,
/// exactly as `sluice_http::key::primary_key` computes it from [`uri`]'s result.
pub fn key(path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    let mut key = String::with_capacity(16 + bytes.len());
    key.push_str("file://");
    key.push_str(AUTHORITY);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            key.push(char::from(b));
        } else {
            key.push('%');
            key.push(char::from(HEX[usize::from(b >> 4)]));
            key.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    key
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The `file://` URI of the file at `path` (absolute). Every byte but unreserved ones and
/// `/` is percent-encoded, with uppercase hex: the form the primary key keeps as it is.
pub fn uri(path: &Path) -> Result<http::Uri, http::uri::InvalidUri> {
    key(path).parse()
}

/// The path relative to `root` named by the path of a `file://` URI; refused when it is not
/// under `root` or holds a refused segment.
pub fn relative(root: &Path, uri_path: &str) -> Result<PathBuf, Refused> {
    let segments = segments(uri_path)?;
    let mut rest = segments.iter();
    for component in root.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => {
                if rest.next().map(Vec::as_slice) != Some(name.as_bytes()) {
                    return Err(Refused::Escape);
                }
            }
            // The root is canonical: no `.`, `..` or prefix.
            _ => return Err(Refused::Escape),
        }
    }
    Ok(rest.map(|s| OsStr::from_bytes(s)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_and_encoded_separators_are_refused() {
        for bad in ["../etc/passwd", "a/../../b", "%2e%2e/x", "%2E%2E/x", ".", "a/%2f/b", "a%2Fb", "a%00b", "./a"] {
            assert_eq!(segments(bad), Err(Refused::Escape), "{bad}");
        }
        assert_eq!(segments("a%zz"), Err(Refused::BadEncoding));
        assert_eq!(segments("a%2"), Err(Refused::BadEncoding));
    }

    #[test]
    fn segments_decode_and_skip_empty_ones() {
        assert_eq!(segments("/css//a%20b.css").unwrap(), vec![b"css".to_vec(), b"a b.css".to_vec()]);
        assert_eq!(segments("..a/b..").unwrap(), vec![b"..a".to_vec(), b"b..".to_vec()]);
        assert!(segments("").unwrap().is_empty());
    }

    #[test]
    fn keys_are_primary_keys_of_the_uris() {
        let path = Path::new("/srv/www/a b/ü~%.css");
        let uri = uri(path).unwrap();
        assert_eq!(uri.to_string(), "file://localhost/srv/www/a%20b/%C3%BC~%25.css");
        assert_eq!(sluice_http::key::primary_key(&uri).as_deref(), Some(key(path).as_str()));
    }

    #[test]
    fn uri_paths_map_back_under_the_root_only() {
        let root = Path::new("/srv/www");
        let path = join(root, &segments("a b/c.txt").unwrap());
        let uri = uri(&path).unwrap();
        assert_eq!(relative(root, uri.path()).unwrap(), PathBuf::from("a b/c.txt"));
        assert_eq!(relative(root, "/srv/other/c.txt"), Err(Refused::Escape));
        assert_eq!(relative(root, "/srv"), Err(Refused::Escape));
        assert_eq!(relative(root, "/srv/www/../x"), Err(Refused::Escape));
        assert_eq!(relative(root, "/srv/www").unwrap(), PathBuf::new());
    }
}
