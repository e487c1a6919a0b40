//! Property tests of the origin side's wire parsing over generated responses: chunked bodies
//! in every sender's style and response heads, cut at any points, parse as they do in one
//! piece, consume exactly their own bytes and leave the next response's alone; and no bytes
//! at all make either parser panic or invent body data.

use super::{parse_response_head, ChunkedDecoder, FieldNames, Framing};
use bytes::BytesMut;
use http::Method;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use sluice_testkit::wire::{chunked, cut_at, ChunkStyle};

/// What follows a message on a kept-alive connection: the next response, not to be touched.
const NEXT: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

/// `input` cut at the points `cuts` pick.
fn pieces<'a>(input: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    cut_at(input, cuts.iter().map(|c| c.index(input.len() + 1)))
}

fn style() -> impl Strategy<Value = ChunkStyle> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(upper_hex, extensions, trailers)| ChunkStyle {
        upper_hex,
        extensions,
        trailers,
    })
}

/// Bytes a body may hold, framing look-alikes among them.
fn body_bytes() -> impl Strategy<Value = Vec<u8>> {
    let part = prop_oneof![Just(b"\r\n".to_vec()), Just(b"0\r\n\r\n".to_vec()), vec(any::<u8>(), 1..24)];
    vec(part, 0..4).prop_map(|parts| parts.concat())
}

/// A response head of `status` with `fields` and a `Content-Length` of `length`.
fn head_wire(status: u16, fields: &[(String, String)], length: usize) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status} Whatever\r\n");
    for (name, value) in fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {length}\r\n\r\n"));
    head.into_bytes()
}

proptest! {
    #[test]
    fn chunked_bodies_decode_whole_however_they_arrive(
        chunks in vec(body_bytes(), 0..6),
        style in style(),
        cuts in vec(any::<Index>(), 0..8),
    ) {
        let input = [chunked(&chunks, style), NEXT.to_vec()].concat();
        let mut decoder = ChunkedDecoder::default();
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        for piece in pieces(&input, &cuts) {
            buf.extend_from_slice(piece);
            while let Some(data) = decoder.decode(&mut buf).unwrap() {
                body.extend_from_slice(&data);
            }
        }
        prop_assert_eq!(body, chunks.concat());
        prop_assert!(decoder.is_done());
        prop_assert_eq!(&buf[..], NEXT, "the next response is left as it came");
    }

    #[test]
    fn no_bytes_make_the_chunked_decoder_panic_or_invent_data(
        input in prop_oneof![
            vec(any::<u8>(), 0..200),
            (vec(body_bytes(), 0..4), style(), any::<Index>(), any::<u8>()).prop_map(|(chunks, style, at, byte)| {
                let mut wire = chunked(&chunks, style);
                let at = at.index(wire.len());
                wire[at] = byte;
                wire
            }),
        ],
        cuts in vec(any::<Index>(), 0..8),
    ) {
        let mut decoder = ChunkedDecoder::default();
        let mut buf = BytesMut::new();
        let mut decoded = 0;
        'feed: for piece in pieces(&input, &cuts) {
            buf.extend_from_slice(piece);
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(data)) => decoded += data.len(),
                    Ok(None) => break,
                    Err(_) => break 'feed,
                }
            }
        }
        prop_assert!(decoded <= input.len());
    }

    #[test]
    fn response_heads_parse_the_same_however_they_arrive(
        status in prop::sample::select(vec![200u16, 201, 203, 206, 301, 404, 500, 503]),
        fields in vec(("x-[a-z0-9-]{1,12}", "[!-~]([ -~]{0,16}[!-~])?"), 0..12),
        length in 0..100_000usize,
        cuts in vec(any::<Index>(), 0..8),
    ) {
        let head = head_wire(status, &fields, length);
        let input = [&head[..], NEXT].concat();
        let mut names = FieldNames::default();
        let mut buf = BytesMut::new();
        let mut parsed = None;
        for piece in pieces(&input, &cuts) {
            buf.extend_from_slice(piece);
            if parsed.is_none() {
                let before = buf.len();
                parsed = parse_response_head(&mut buf, &Method::GET, &mut names).unwrap();
                if parsed.is_none() {
                    prop_assert_eq!(buf.len(), before, "an incomplete head is not consumed");
                }
            }
        }
        let parsed = parsed.expect("the whole head arrived");
        prop_assert_eq!(parsed.parts.status.as_u16(), status);
        prop_assert_eq!(parsed.framing, Framing::Length(length as u64));
        prop_assert!(parsed.keep_alive);
        let got: Vec<(String, String)> = parsed
            .parts
            .headers
            .iter()
            .filter(|(name, _)| *name != http::header::CONTENT_LENGTH)
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
            .collect();
        // A `HeaderMap` iterates by name; compare each name's values, in the order sent.
        for (name, _) in &fields {
            let sent: Vec<&str> = fields.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect();
            let kept: Vec<&str> = got.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect();
            prop_assert_eq!(sent, kept, "values of {}", name);
        }
        prop_assert_eq!(got.len(), fields.len());
        prop_assert_eq!(&buf[..], NEXT, "exactly the head was consumed");
    }

    #[test]
    fn no_bytes_make_the_head_parser_panic_or_take_more_than_it_has(
        input in prop_oneof![
            vec(any::<u8>(), 0..300),
            (vec(("x-[a-z]{1,6}", "[ -~]{0,10}"), 0..6), any::<Index>(), any::<u8>()).prop_map(|(fields, at, byte)| {
                let mut wire = head_wire(200, &fields, 5);
                let at = at.index(wire.len());
                wire[at] = byte;
                wire
            }),
        ],
        method in prop::sample::select(vec![Method::GET, Method::HEAD]),
    ) {
        let mut buf = BytesMut::from(&input[..]);
        // After an error the connection is closed, whatever is left in its buffer.
        match parse_response_head(&mut buf, &method, &mut FieldNames::default()) {
            Ok(Some(_)) => prop_assert!(input.ends_with(&buf), "what is left is the input's tail"),
            Ok(None) => prop_assert_eq!(&buf[..], &input[..], "nothing consumed without a head"),
            Err(_) => {}
        }
    }
}
