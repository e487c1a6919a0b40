//! Resolving URI references against a base URI, RFC 3986 §5.2 (for `Location` and
//! `Content-Location`, which may be relative, RFC 9110 §10.2.2 and §8.7).

use http::Uri;

/// The components of a URI reference (RFC 3986 §5.2.1's pre-parse), fragment dropped.
struct Parts<'a> {
    scheme: Option<&'a str>,
    authority: Option<&'a str>,
    path: &'a str,
    query: Option<&'a str>,
}

fn split(reference: &str) -> Parts<'_> {
    let without_fragment = reference.split('#').next().unwrap_or("");
    let (rest, query) = match without_fragment.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (without_fragment, None),
    };
    let (scheme, rest) = match rest.split_once(':') {
        Some((s, r)) if is_scheme(s) => (Some(s), r),
        _ => (None, rest),
    };
    let (authority, path) = match rest.strip_prefix("//") {
        Some(r) => {
            let end = r.find('/').unwrap_or(r.len());
            (Some(&r[..end]), &r[end..])
        }
        None => (None, rest),
    };
    Parts { scheme, authority, path, query }
}

/// `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
fn is_scheme(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// Resolves `reference` against `base` (§5.2.2). `None` when the result is not a valid
/// `Uri`.
pub fn resolve(base: &Uri, reference: &str) -> Option<Uri> {
    let r = split(reference);
    let base_scheme = base.scheme_str();
    let base_authority = base.authority().map(|a| a.as_str());
    let (scheme, authority, path, query) = if r.scheme.is_some() {
        (r.scheme, r.authority, remove_dot_segments(r.path), r.query)
    } else if r.authority.is_some() {
        (base_scheme, r.authority, remove_dot_segments(r.path), r.query)
    } else if r.path.is_empty() {
        (base_scheme, base_authority, base.path().to_string(), r.query.or(base.query()))
    } else if r.path.starts_with('/') {
        (base_scheme, base_authority, remove_dot_segments(r.path), r.query)
    } else {
        (base_scheme, base_authority, remove_dot_segments(&merge(base, r.path)), r.query)
    };
    let mut out = String::new();
    if let Some(s) = scheme {
        out.push_str(s);
        out.push(':');
    }
    if let Some(a) = authority {
        out.push_str("//");
        out.push_str(a);
    }
    out.push_str(&path);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out.parse().ok()
}

/// §5.2.3: the base path up to its last `/`, then the reference path.
fn merge(base: &Uri, path: &str) -> String {
    let base_path = base.path();
    if base.authority().is_some() && base_path.is_empty() {
        return format!("/{path}");
    }
    match base_path.rfind('/') {
        Some(i) => format!("{}{path}", &base_path[..=i]),
        None => path.to_string(),
    }
}

/// §5.2.4, working segment by segment.
pub(crate) fn remove_dot_segments(path: &str) -> String {
    let mut output: Vec<&str> = Vec::new();
    let absolute = path.starts_with('/');
    let segments: Vec<&str> = path.split('/').skip(usize::from(absolute)).collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing_slash = false;
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." => trailing_slash = i == last,
            ".." => {
                output.pop();
                trailing_slash = i == last;
            }
            s => {
                output.push(s);
                trailing_slash = false;
            }
        }
    }
    let mut out = String::new();
    if absolute {
        out.push('/');
    }
    out.push_str(&output.join("/"));
    if trailing_slash && !out.ends_with('/') {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(reference: &str) -> Option<String> {
        let base: Uri = "http://a/b/c/d;p?q".parse().unwrap();
        resolve(&base, reference).map(|u| u.to_string())
    }

    #[test]
    fn rfc3986_5_4_1_normal_examples() {
        for (reference, expected) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g/"),
            ("?y", "http://a/b/c/d;p?y"),
            ("g?y", "http://a/b/c/g?y"),
            ("#s", "http://a/b/c/d;p?q"),
            ("g#s", "http://a/b/c/g"),
            (";x", "http://a/b/c/;x"),
            ("", "http://a/b/c/d;p?q"),
            (".", "http://a/b/c/"),
            ("./", "http://a/b/c/"),
            ("..", "http://a/b/"),
            ("../", "http://a/b/"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../g", "http://a/g"),
        ] {
            assert_eq!(resolved(reference).as_deref(), Some(expected), "{reference}");
        }
    }

    #[test]
    fn rfc3986_5_4_2_abnormal_examples() {
        for (reference, expected) in [
            ("../../../g", "http://a/g"),
            ("/./g", "http://a/g"),
            ("/../g", "http://a/g"),
            ("g.", "http://a/b/c/g."),
            ("..g", "http://a/b/c/..g"),
            ("./../g", "http://a/b/g"),
            ("g/./h", "http://a/b/c/g/h"),
            ("g/../h", "http://a/b/c/h"),
            ("https://other/x", "https://other/x"),
        ] {
            assert_eq!(resolved(reference).as_deref(), Some(expected), "{reference}");
        }
    }

    #[test]
    fn rfc3986_5_2_invalid_results_are_none() {
        assert_eq!(resolved("http://bad host/"), None);
    }
}
