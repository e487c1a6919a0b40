//! NCSA Common and Combined logs:
//! `host ident user [10/Oct/2000:13:55:36 -0700] "request" status bytes ["referer" "agent"]`.

use super::request_line::parse_tail;
use crate::trace::Record;

pub(super) fn parse(line: &str) -> Result<Record<'_>, &'static str> {
    let open = line.find(" [").ok_or("expected [date]")?;
    if line[..open].split_ascii_whitespace().count() != 3 {
        return Err("expected host, ident and user before the date");
    }
    let close = line[open..].find("] ").map(|i| open + i).ok_or("unterminated [date]")?;
    if !line[open + 2..close].contains('/') {
        return Err("bad date");
    }
    parse_tail(line[close + 2..].trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Key;

    #[test]
    fn parses_common_and_combined() {
        let common = r#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326"#;
        let combined = r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /a?b=c HTTP/1.1" 304 - "http://x/" "Mozilla/4.08 [en] (Win98; I ;Nav)""#;
        let r = parse(common).unwrap();
        assert_eq!((r.key, r.size, r.status), (Key::Text("/apache_pb.gif"), Some(2326), Some(200)));
        let r = parse(combined).unwrap();
        assert_eq!((r.key, r.size, r.status), (Key::Text("/a?b=c"), None, Some(304)));
        assert!(parse(r#"1.2.3.4 - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 1"#).is_err());
    }
}
