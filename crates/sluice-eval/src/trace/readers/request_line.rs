//! The quoted tail shared by the Common/Combined and EPA formats:
//! `"METHOD URL [PROTOCOL]" STATUS BYTES [...]`.

use crate::trace::{Key, Record};

/// Parses `s`, which starts at the opening quote of the request line. The request may
/// contain spaces or quotes (real logs have both); it ends at the first quote followed by
/// ` STATUS ` with a 3-digit status.
pub(super) fn parse_tail(s: &str) -> Result<Record<'_>, &'static str> {
    let body = s.strip_prefix('"').ok_or("expected a quoted request line")?;
    let (request, rest) = split_request(body).ok_or("no closing quote followed by a status")?;
    let mut fields = rest.split_ascii_whitespace();
    let status = fields.next().and_then(|s| s.parse::<u16>().ok()).ok_or("bad status")?;
    let size = match fields.next().ok_or("missing byte count")? {
        "-" => None,
        n => Some(n.parse::<u64>().map_err(|_| "bad byte count")?),
    };
    let (method, url) = split_method(request)?;
    Ok(Record { key: Key::Text(url), size, method: Some(method), status: Some(status) })
}

fn split_request(body: &str) -> Option<(&str, &str)> {
    let bytes = body.as_bytes();
    body.match_indices('"').map(|(i, _)| i).find_map(|i| {
        let after = &bytes[i + 1..];
        let is_status =
            after.len() >= 5 && after[0] == b' ' && after[1..4].iter().all(u8::is_ascii_digit) && after[4] == b' ';
        is_status.then(|| (&body[..i], &body[i + 1..]))
    })
}

/// `METHOD URL [HTTP/x.y]` -> (method, URL); the URL may contain spaces.
fn split_method(request: &str) -> Result<(&str, &str), &'static str> {
    let request = request.trim();
    let (method, rest) = request.split_once(' ').ok_or("request line has no URL")?;
    let mut url = rest.trim();
    if let Some((head, proto)) = url.rsplit_once(' ') {
        if proto.starts_with("HTTP/") {
            url = head.trim_end();
        }
    }
    if method.is_empty() || url.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err("bad request line");
    }
    Ok((method, url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_request_lines_with_spaces_and_no_protocol() {
        let r = parse_tail(r#""GET /OWOW/PubList/ publist1.html HTTP/1.0" 200 1933"#).unwrap();
        assert_eq!(r.key, Key::Text("/OWOW/PubList/ publist1.html"));
        let r = parse_tail(r#""GET /docs/GCDOAR/landfill.html" 200 10788"#).unwrap();
        assert_eq!((r.key, r.size, r.status), (Key::Text("/docs/GCDOAR/landfill.html"), Some(10788), Some(200)));
        let r = parse_tail(r#""GET /a "quoted" b HTTP/1.1" 404 -"#).unwrap();
        assert_eq!((r.key, r.size), (Key::Text("/a \"quoted\" b"), None));
    }

    #[test]
    fn rejects_broken_tails() {
        assert!(parse_tail("GET / HTTP/1.0 200 1").is_err());
        assert!(parse_tail(r#""GET / HTTP/1.0" 2x0 1"#).is_err());
        assert!(parse_tail(r#""GET / HTTP/1.0" 200 12k"#).is_err());
        assert!(parse_tail(r#""-" 408 -"#).is_err());
    }
}
