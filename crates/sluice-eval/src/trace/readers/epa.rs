//! EPA-HTTP (Internet Traffic Archive): `host [DD:HH:MM:SS] "request" status bytes`.

use super::request_line::parse_tail;
use crate::trace::Record;

pub(super) fn parse(line: &str) -> Result<Record<'_>, &'static str> {
    let (_host, rest) = line.split_once(' ').ok_or("expected host and timestamp")?;
    let rest = rest.trim_start();
    let stamp_end = rest.find("] ").filter(|_| rest.starts_with('[')).ok_or("expected [DD:HH:MM:SS]")?;
    let stamp = &rest[1..stamp_end];
    if stamp.split(':').count() != 4 || !stamp.split(':').all(|p| p.parse::<u8>().is_ok()) {
        return Err("bad timestamp");
    }
    parse_tail(rest[stamp_end + 2..].trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Key;

    #[test]
    fn parses_epa_lines() {
        let r = parse(r#"port11.annex1.naples.net [30:00:00:02] "GET /icons/circle_logo_small.gif HTTP/1.0" 200 2624"#)
            .unwrap();
        assert_eq!(r.key, Key::Text("/icons/circle_logo_small.gif"));
        assert_eq!((r.method, r.status, r.size), (Some("GET"), Some(200), Some(2624)));
        assert!(parse(r#"host [30:00:00] "GET / HTTP/1.0" 200 1"#).is_err());
        assert!(parse("truncated line").is_err());
    }
}
