//! The PROXY protocol (HAProxy's, versions 1 and 2) for listeners behind a TCP load
//! balancer (`[[listener]] proxy_protocol = true`): the balancer opens each connection with
//! a header naming the client's address, which then stands for the client everywhere: the
//! `access.allow` check, `X-Forwarded-For`, the access log, modules.
//!
//! The header is read before anything else (TLS included), without reading a byte past it:
//! version 2's length is in its first 16 bytes; version 1's line is consumed as far as the
//! bytes already received reach (peeked first, so the next protocol's bytes stay in the
//! socket). A `LOCAL` header (version 2), an `UNKNOWN` one (version 1) or an address family
//! other than IPv4 and IPv6 is the balancer speaking for itself (its health checks): the
//! connection's own address stands. Anything else is an error: the caller closes the
//! connection.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Longest version 1 header, CRLF included (the specification's limit).
const V1_MAX: usize = 107;
/// Version 2's signature.
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// Longest version 2 address block (with TLVs) accepted: the addresses take at most 216
/// bytes, and TLVs (which are skipped) rarely much more.
const V2_MAX_BODY: usize = 4096;

/// Why a connection's PROXY header was refused.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("the connection does not start with a PROXY protocol header")]
    Missing,
    #[error("malformed PROXY protocol header: {0}")]
    Malformed(&'static str),
    #[error("reading the PROXY protocol header: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads the PROXY header at the start of `stream`. Returns the client address it names, or
/// `None` when the balancer speaks for itself (module docs).
pub async fn read_header(stream: &mut TcpStream) -> Result<Option<SocketAddr>, HeaderError> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 0 {
        return Err(HeaderError::Missing);
    }
    match first[0] {
        b'P' => parse_v1(&read_v1_line(stream).await?),
        b'\r' => {
            let mut head = [0u8; 16];
            stream.read_exact(&mut head).await?;
            if head[..12] != V2_SIGNATURE {
                return Err(HeaderError::Missing);
            }
            let len = usize::from(u16::from_be_bytes([head[14], head[15]]));
            if len > V2_MAX_BODY {
                return Err(HeaderError::Malformed("version 2 header too long"));
            }
            let mut body = vec![0u8; len];
            stream.read_exact(&mut body).await?;
            parse_v2(head[12], head[13], &body)
        }
        _ => Err(HeaderError::Missing),
    }
}

/// The version 1 line, CRLF included: each round peeks at what has arrived and consumes it
/// up to the CRLF, so nothing after the header is read.
async fn read_v1_line(stream: &mut TcpStream) -> Result<Vec<u8>, HeaderError> {
    let mut line = Vec::with_capacity(V1_MAX);
    let mut buf = [0u8; V1_MAX];
    loop {
        let room = V1_MAX - line.len();
        if room == 0 {
            return Err(HeaderError::Malformed("version 1 header longer than 107 bytes"));
        }
        let n = stream.peek(&mut buf[..room]).await?;
        if n == 0 {
            return Err(HeaderError::Malformed("connection closed within the header"));
        }
        // The CRLF may straddle what was consumed before and what is new.
        let ends_in_cr = line.last() == Some(&b'\r');
        let end = if ends_in_cr && buf[0] == b'\n' {
            Some(1)
        } else {
            buf[..n].windows(2).position(|w| w == b"\r\n").map(|i| i + 2)
        };
        let take = end.unwrap_or(n);
        stream.read_exact(&mut buf[..take]).await?;
        line.extend_from_slice(&buf[..take]);
        if end.is_some() {
            return Ok(line);
        }
    }
}

/// `PROXY TCP4|TCP6 <src> <dst> <sport> <dport>\r\n`, or `PROXY UNKNOWN ...\r\n`.
fn parse_v1(line: &[u8]) -> Result<Option<SocketAddr>, HeaderError> {
    let text = std::str::from_utf8(line).map_err(|_| HeaderError::Malformed("version 1 header is not text"))?;
    let text = text.strip_suffix("\r\n").ok_or(HeaderError::Malformed("version 1 header without CRLF"))?;
    let mut fields = text.split(' ');
    if fields.next() != Some("PROXY") {
        return Err(HeaderError::Missing);
    }
    let family = fields.next().ok_or(HeaderError::Malformed("no protocol"))?;
    if family == "UNKNOWN" {
        return Ok(None);
    }
    let [Some(src), Some(_dst), Some(sport), Some(_dport), None] =
        [fields.next(), fields.next(), fields.next(), fields.next(), fields.next()]
    else {
        return Err(HeaderError::Malformed("version 1 header needs 4 fields after the protocol"));
    };
    let ip = match family {
        "TCP4" => src.parse::<Ipv4Addr>().map(IpAddr::V4).map_err(|_| HeaderError::Malformed("bad IPv4 source"))?,
        "TCP6" => src.parse::<Ipv6Addr>().map(IpAddr::V6).map_err(|_| HeaderError::Malformed("bad IPv6 source"))?,
        _ => return Err(HeaderError::Malformed("protocol is not TCP4, TCP6 or UNKNOWN")),
    };
    let port = sport.parse::<u16>().map_err(|_| HeaderError::Malformed("bad source port"))?;
    Ok(Some(SocketAddr::new(ip, port)))
}

/// Version 2 after its signature: version and command, family and protocol, then `body`.
fn parse_v2(version_command: u8, family: u8, body: &[u8]) -> Result<Option<SocketAddr>, HeaderError> {
    if version_command >> 4 != 2 {
        return Err(HeaderError::Malformed("version 2 signature with another version"));
    }
    match version_command & 0x0f {
        0 => return Ok(None), // LOCAL
        1 => {}               // PROXY
        _ => return Err(HeaderError::Malformed("unknown version 2 command")),
    }
    let short = HeaderError::Malformed("version 2 address block too short");
    match family >> 4 {
        1 => {
            let a: [u8; 12] = body.get(..12).ok_or(short)?.try_into().expect("12 bytes");
            let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            Ok(Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be_bytes([a[8], a[9]]))))
        }
        2 => {
            let a: [u8; 36] = body.get(..36).ok_or(short)?.try_into().expect("36 bytes");
            let ip: [u8; 16] = a[..16].try_into().expect("16 bytes");
            Ok(Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), u16::from_be_bytes([a[32], a[33]]))))
        }
        // AF_UNSPEC, AF_UNIX: no address of a TCP client.
        0 | 3 => Ok(None),
        _ => Err(HeaderError::Malformed("unknown version 2 address family")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Writes `bytes` into a fresh connection, reads the header on the other side, and
    /// returns it with what the socket still holds after it.
    async fn through_socket(bytes: &[u8]) -> (Result<Option<SocketAddr>, String>, Vec<u8>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        client.write_all(bytes).await.unwrap();
        client.shutdown().await.unwrap();
        let header = read_header(&mut server).await.map_err(|e| e.to_string());
        let mut rest = Vec::new();
        server.read_to_end(&mut rest).await.unwrap();
        (header, rest)
    }

    fn v2(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = V2_SIGNATURE.to_vec();
        bytes.extend([0x20 | command, family]);
        bytes.extend((body.len() as u16).to_be_bytes());
        bytes.extend(body);
        bytes
    }

    #[tokio::test]
    async fn version_1_names_the_client_and_leaves_the_request_unread() {
        let (header, rest) =
            through_socket(b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\nGET / HTTP/1.1\r\n\r\n").await;
        assert_eq!(header.unwrap(), Some("203.0.113.7:51234".parse().unwrap()));
        assert_eq!(rest, b"GET / HTTP/1.1\r\n\r\n");
        let (header, _) = through_socket(b"PROXY TCP6 2001:db8::1 2001:db8::2 7 8\r\n").await;
        assert_eq!(header.unwrap(), Some("[2001:db8::1]:7".parse().unwrap()));
        let (header, rest) = through_socket(b"PROXY UNKNOWN ff ee\r\nX").await;
        assert_eq!((header.unwrap(), rest), (None, b"X".to_vec()));
    }

    #[tokio::test]
    async fn version_2_names_the_client_and_skips_its_tlvs() {
        let mut inet = vec![198, 51, 100, 9, 10, 0, 0, 1, 0x1f, 0x90, 0x01, 0xbb];
        inet.extend([0x04, 0x00, 0x02, b'h', b'i']); // a TLV: type 4, 2 bytes
        let mut bytes = v2(1, 0x11, &inet);
        bytes.extend(b"rest");
        let (header, rest) = through_socket(&bytes).await;
        assert_eq!(header.unwrap(), Some("198.51.100.9:8080".parse().unwrap()));
        assert_eq!(rest, b"rest");
        let mut inet6 = vec![0u8; 36];
        inet6[..16].copy_from_slice(&"2001:db8::9".parse::<Ipv6Addr>().unwrap().octets());
        inet6[32..34].copy_from_slice(&443u16.to_be_bytes());
        let (header, _) = through_socket(&v2(1, 0x21, &inet6)).await;
        assert_eq!(header.unwrap(), Some("[2001:db8::9]:443".parse().unwrap()));
        let (header, _) = through_socket(&v2(0, 0x00, &[])).await;
        assert_eq!(header.unwrap(), None, "LOCAL: the balancer itself");
    }

    #[tokio::test]
    async fn anything_else_is_refused() {
        for (bytes, why) in [
            (&b"GET / HTTP/1.1\r\n\r\n"[..], "plain HTTP"),
            (b"POST / HTTP/1.1\r\n\r\n", "plain HTTP starting with P"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2", "no CRLF before the end"),
            (b"PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n", "bad address"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "a field missing"),
            (b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", "unknown protocol"),
            (b"\r\n\r\n\0\r\nQUIT\n\x31\x11\0\0", "version 3"),
            (b"", "nothing"),
        ] {
            let (header, _) = through_socket(bytes).await;
            assert!(header.is_err(), "{why}: {header:?}");
        }
        let long = format!("PROXY UNKNOWN {}\r\n", "x".repeat(100));
        assert!(through_socket(long.as_bytes()).await.0.is_err(), "over 107 bytes");
        assert!(through_socket(&v2(1, 0x11, &[1, 2, 3])).await.0.is_err(), "short address block");
    }
}
