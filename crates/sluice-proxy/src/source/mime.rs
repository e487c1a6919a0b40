//! `Content-Type` of a served file, by its extension (case-insensitive). A small table of
//! the types a web site serves; anything else is `application/octet-stream` (what RFC 9110
//! §8.3 suggests when the type is unknown), never sniffed.

use std::path::Path;

/// Sorted by extension (binary search).
const TYPES: &[(&str, &str)] = &[
    ("avif", "image/avif"),
    ("bmp", "image/bmp"),
    ("css", "text/css; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("gif", "image/gif"),
    ("gz", "application/gzip"),
    ("htm", "text/html; charset=utf-8"),
    ("html", "text/html; charset=utf-8"),
    ("ico", "image/vnd.microsoft.icon"),
    ("jpeg", "image/jpeg"),
    ("jpg", "image/jpeg"),
    ("js", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("map", "application/json"),
    ("md", "text/markdown; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("mp3", "audio/mpeg"),
    ("mp4", "video/mp4"),
    ("ogg", "audio/ogg"),
    ("otf", "font/otf"),
    ("pdf", "application/pdf"),
    ("png", "image/png"),
    ("svg", "image/svg+xml"),
    ("tar", "application/x-tar"),
    ("ttf", "font/ttf"),
    ("txt", "text/plain; charset=utf-8"),
    ("wasm", "application/wasm"),
    ("wav", "audio/wav"),
    ("webm", "video/webm"),
    ("webmanifest", "application/manifest+json"),
    ("webp", "image/webp"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("xml", "application/xml"),
    ("zip", "application/zip"),
];

const DEFAULT: &str = "application/octet-stream";

/// The media type for the file at `path`.
pub fn content_type(path: &Path) -> &'static str {
    let Some(ext) = path.extension().and_then(|e| e.to_str()) else { return DEFAULT };
    let ext = ext.to_ascii_lowercase();
    TYPES.binary_search_by(|(e, _)| (*e).cmp(ext.as_str())).map_or(DEFAULT, |i| TYPES[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_for_binary_search() {
        assert!(TYPES.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn types_by_extension_case_insensitive() {
        assert_eq!(content_type(Path::new("a/b.CSS")), "text/css; charset=utf-8");
        assert_eq!(content_type(Path::new("x.woff2")), "font/woff2");
        assert_eq!(content_type(Path::new("README")), DEFAULT);
        assert_eq!(content_type(Path::new("x.unknown")), DEFAULT);
    }
}
