use super::*;

fn head(raw: &str, method: &Method) -> Result<Option<ResponseHead>, WireError> {
    let mut buf = BytesMut::from(raw);
    parse_response_head(&mut buf, method, &mut FieldNames::default())
}

fn complete(raw: &str) -> ResponseHead {
    head(raw, &Method::GET).unwrap().expect("a complete head")
}

#[test]
fn request_head_in_origin_form_with_framing_rewritten() {
    let (mut parts, ()) = http::Request::builder()
        .method("POST")
        .uri("/a?b=c")
        .header("host", "example.com")
        .header("content-length", "99")
        .header("transfer-encoding", "gzip")
        .body(())
        .unwrap()
        .into_parts();
    let mut out = Vec::new();
    encode_request_head(&parts, RequestFraming::Length(5), &mut out);
    assert_eq!(out, b"POST /a?b=c HTTP/1.1\r\nhost: example.com\r\ncontent-length: 5\r\n\r\n");
    parts.method = Method::GET;
    out.clear();
    encode_request_head(&parts, RequestFraming::None, &mut out);
    assert_eq!(out, b"GET /a?b=c HTTP/1.1\r\nhost: example.com\r\n\r\n");
    out.clear();
    encode_request_head(&parts, RequestFraming::Chunked, &mut out);
    assert!(out.ends_with(b"transfer-encoding: chunked\r\n\r\n"));
}

#[test]
fn rfc9112_3_2_4_asterisk_form_for_options() {
    let (parts, ()) = http::Request::builder().method("OPTIONS").uri("*").body(()).unwrap().into_parts();
    let mut out = Vec::new();
    encode_request_head(&parts, RequestFraming::None, &mut out);
    assert!(out.starts_with(b"OPTIONS * HTTP/1.1\r\n"), "{}", String::from_utf8_lossy(&out));
}

#[test]
fn rfc9112_6_3_framing() {
    assert_eq!(complete("HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\n").framing, Framing::Length(12));
    assert_eq!(complete("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n").framing, Framing::Length(3));
    assert_eq!(complete("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n").framing, Framing::Chunked);
    assert_eq!(complete("HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked \r\n\r\n").framing, Framing::Chunked);
    assert_eq!(complete("HTTP/1.1 200 OK\r\n\r\n").framing, Framing::UntilClose);
    assert_eq!(complete("HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n").framing, Framing::Empty);
    assert_eq!(complete("HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\n").framing, Framing::Empty);
    assert_eq!(complete("HTTP/1.1 103 Early Hints\r\n\r\n").framing, Framing::Empty);
    let on_head = head("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", &Method::HEAD).unwrap().unwrap();
    assert_eq!(on_head.framing, Framing::Empty);
}

#[test]
fn rfc9110_8_6_one_content_length_goes_on() {
    let lengths = |raw: &str, method: &Method| {
        let head = head(raw, method).unwrap().unwrap();
        head.parts
            .headers
            .get_all(header::CONTENT_LENGTH)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(lengths("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n", &Method::GET), ["3"]);
    assert_eq!(lengths("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 3\r\n\r\n", &Method::GET), ["3"]);
    assert_eq!(lengths("HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\n", &Method::GET), ["12"]);
    assert!(lengths("HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n", &Method::GET).is_empty());
    assert_eq!(lengths("HTTP/1.1 304 Not Modified\r\ncontent-length: 5, 5\r\n\r\n", &Method::GET), ["5"]);
    // Where the length frames nothing, lengths that disagree are dropped, not an error.
    assert!(lengths("HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\n", &Method::HEAD).is_empty());
}

#[test]
fn rfc9112_6_3_bad_or_ambiguous_lengths() {
    assert!(head("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n", &Method::GET).is_err());
    assert!(head("HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n", &Method::GET).is_err());
    assert!(head("HTTP/1.1 200 OK\r\ncontent-length: 0x10\r\n\r\n", &Method::GET).is_err());
    // Both: Transfer-Encoding wins, the Content-Length is removed, and the connection is not
    // reused.
    let both = complete("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n");
    assert_eq!(both.framing, Framing::Chunked);
    assert!(!both.keep_alive);
    assert!(!both.parts.headers.contains_key(header::CONTENT_LENGTH));
}

#[test]
fn rfc9112_6_1_transfer_codings_other_than_chunked_are_refused() {
    for te in ["gzip, chunked", "gzip", "chunked, chunked", "chunked, gzip", "identity"] {
        let raw = format!("HTTP/1.1 200 OK\r\ntransfer-encoding: {te}\r\n\r\n");
        assert_eq!(head(&raw, &Method::GET).unwrap_err(), WireError("unsupported transfer coding"), "{te}");
    }
    let two_lines = "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n";
    assert!(head(two_lines, &Method::GET).is_err());
    // No body, no framing: a 304's Transfer-Encoding is not looked at.
    assert_eq!(complete("HTTP/1.1 304 Not Modified\r\ntransfer-encoding: gzip\r\n\r\n").framing, Framing::Empty);
}

#[test]
fn rfc9112_9_3_persistence() {
    assert!(complete("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").keep_alive);
    assert!(!complete("HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: Close\r\n\r\n").keep_alive);
    assert!(!complete("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n").keep_alive);
    assert!(complete("HTTP/1.0 200 OK\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n").keep_alive);
    assert!(!complete("HTTP/1.1 200 OK\r\n\r\n").keep_alive, "a close-delimited body ends the connection");
}

#[test]
fn partial_heads_wait_and_oversized_or_garbage_heads_fail() {
    assert!(head("HTTP/1.1 200 OK\r\ncontent-len", &Method::GET).unwrap().is_none());
    let huge = format!("HTTP/1.1 200 OK\r\nx: {}", "a".repeat(MAX_HEAD + 1));
    assert!(head(&huge, &Method::GET).is_err());
    assert!(head("garbage\r\n\r\n", &Method::GET).is_err());
    let many: String = (0..200).map(|i| format!("x-{i}: 1\r\n")).collect();
    assert!(head(&format!("HTTP/1.1 200 OK\r\n{many}\r\n"), &Method::GET).is_err());
}

#[test]
fn head_parsing_consumes_exactly_the_head() {
    let mut buf = BytesMut::from("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\nhi");
    let head = parse_response_head(&mut buf, &Method::GET, &mut FieldNames::default()).unwrap().unwrap();
    assert_eq!(&buf[..], b"hi");
    assert_eq!(head.parts.status, StatusCode::OK);
    assert_eq!(head.parts.headers["x-a"], "b");
}

#[test]
fn head_fields_keep_their_values_and_not_the_read_buffer() {
    let raw = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Custom-Name:  spaced value\r\nX-Empty:\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\n\r\n";
    let mut buf = BytesMut::with_capacity(4096);
    buf.extend_from_slice(raw.as_bytes());
    let head = parse_response_head(&mut buf, &Method::GET, &mut FieldNames::default()).unwrap().unwrap();
    let h = &head.parts.headers;
    assert_eq!(h["content-length"], "0");
    assert_eq!(h["x-custom-name"], "spaced value");
    assert_eq!(h["x-empty"], "");
    let cookies: Vec<_> = h.get_all("set-cookie").iter().collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    assert!(buf.is_empty());
    assert!(buf.try_reclaim(4096), "the fields must not share the connection's read buffer");
}

fn decode_all(decoder: &mut ChunkedDecoder, buf: &mut BytesMut) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(data) = decoder.decode(buf).unwrap() {
        body.extend_from_slice(&data);
    }
    body
}

#[test]
fn rfc9112_7_1_chunked_whole_and_byte_by_byte() {
    let wire = b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nx-trailer: 1\r\n\r\n";
    let mut decoder = ChunkedDecoder::default();
    let mut buf = BytesMut::from(&wire[..]);
    assert_eq!(decode_all(&mut decoder, &mut buf), b"hello, world");
    assert!(decoder.is_done());
    assert!(buf.is_empty());

    let mut decoder = ChunkedDecoder::default();
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    for &byte in wire {
        buf.extend_from_slice(&[byte]);
        body.extend(decode_all(&mut decoder, &mut buf));
    }
    assert_eq!(body, b"hello, world");
    assert!(decoder.is_done());
}

#[test]
fn rfc9112_7_1_chunk_sizes_may_have_leading_zeros() {
    let mut decoder = ChunkedDecoder::default();
    let mut buf = BytesMut::from(&b"00000000000000000000003\r\nabc\r\n0000\r\n\r\n"[..]);
    assert_eq!(&decoder.decode(&mut buf).unwrap().unwrap()[..], b"abc");
    assert!(decoder.is_done());
}

#[test]
fn rfc9112_7_1_end_is_seen_with_the_last_data() {
    let mut decoder = ChunkedDecoder::default();
    let mut buf = BytesMut::from(&b"3\r\nabc\r\n0\r\n\r\n"[..]);
    assert_eq!(&decoder.decode(&mut buf).unwrap().unwrap()[..], b"abc");
    assert!(decoder.is_done(), "the terminator was already in the buffer");
}

#[test]
fn rfc9112_7_1_bad_chunks_fail() {
    for wire in [&b"zz\r\n"[..], b"3\r\nabcX\r\n", b"-1\r\n", b"3\nabc", b"3\r\nabc\r\n0\n", b"10000000000000000\r\n"] {
        let mut decoder = ChunkedDecoder::default();
        let mut buf = BytesMut::from(wire);
        let mut failed = false;
        for _ in 0..3 {
            match decoder.decode(&mut buf) {
                Err(_) => failed = true,
                Ok(Some(_)) => continue,
                Ok(None) => break,
            }
        }
        assert!(failed, "{:?} must fail", String::from_utf8_lossy(wire));
    }
    let mut decoder = ChunkedDecoder::default();
    let mut buf = BytesMut::from(&[b'1'; MAX_CHUNK_LINE + 1][..]);
    assert!(decoder.decode(&mut buf).is_err());
}
