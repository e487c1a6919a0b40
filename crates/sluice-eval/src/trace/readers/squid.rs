//! Squid native `access.log`:
//! `time elapsed client code/status bytes method URL ident hierarchy/peer type`.

use crate::trace::{Key, Record};

pub(super) fn parse(line: &str) -> Result<Record<'_>, &'static str> {
    let mut f = line.split_ascii_whitespace();
    let mut field = |what| f.next().ok_or(what);
    field("missing time")?.parse::<f64>().map_err(|_| "bad time")?;
    field("missing elapsed time")?.parse::<i64>().map_err(|_| "bad elapsed time")?;
    field("missing client")?;
    let code = field("missing result code")?;
    let status = code.rsplit_once('/').and_then(|(_, s)| s.parse::<u16>().ok()).ok_or("bad result code")?;
    let size = field("missing byte count")?.parse::<u64>().map_err(|_| "bad byte count")?;
    let method = field("missing method")?;
    let url = field("missing URL")?;
    Ok(Record { key: Key::Text(url), size: Some(size), method: Some(method), status: Some(status) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_squid_lines() {
        let r =
            parse("1686826073.356 0 10.143.127.18 TCP_HIT/200 11719 GET http://a:3128/x.png - HIER_NONE/- image/png")
                .unwrap();
        assert_eq!(
            (r.key, r.size, r.method, r.status),
            (Key::Text("http://a:3128/x.png"), Some(11719), Some("GET"), Some(200))
        );
        let r =
            parse("1686826658.797 0 10.58.207.210 NONE_NONE/400 3716 - error:invalid-request - HIER_NONE/- text/html")
                .unwrap();
        assert_eq!((r.method, r.status), (Some("-"), Some(400)));
        assert!(parse("1686826073.356 0 10.143.127.18 TCP_HIT 11719 GET /x").is_err());
        assert!(parse("1686826073.356 0 10.143.127.18 TCP_HIT/200").is_err());
    }
}
