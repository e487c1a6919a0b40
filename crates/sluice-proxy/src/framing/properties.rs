//! Property tests of the framing guard over generated conversations: valid requests with
//! any bodies (bytes that look like heads or chunk framing included), cut at any points and
//! read in any sizes, reach hyper unchanged; an ambiguous request anywhere in them ends what
//! hyper gets, right after the requests before it, with the rejected head; whatever the
//! bytes, hyper gets a prefix of them, maybe followed by the rejected head; and, checked
//! against hyper's own server behind the guard, hyper serves exactly the requests generated.

use super::tests::{through, SMUGGLE};
use super::REJECTED_HEAD;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use sluice_testkit::wire::{chunked, cut_at, ChunkStyle};

/// One valid HTTP/1.1 request of a generated conversation.
#[derive(Debug, Clone)]
enum Message {
    Get(String),
    WithLength(Vec<u8>),
    Chunked(Vec<Vec<u8>>, ChunkStyle),
}

impl Message {
    /// What a server should see of it: request target and body.
    fn seen(&self) -> (String, Vec<u8>) {
        match self {
            Message::Get(path) => (format!("GET /{path}"), Vec::new()),
            Message::WithLength(body) => ("POST /l".to_owned(), body.clone()),
            Message::Chunked(chunks, _) => ("POST /c".to_owned(), chunks.concat()),
        }
    }

    fn wire(&self) -> Vec<u8> {
        match self {
            Message::Get(path) => format!("GET /{path} HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n").into_bytes(),
            Message::WithLength(body) => {
                let head = format!("POST /l HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n", body.len());
                [head.as_bytes(), body].concat()
            }
            Message::Chunked(chunks, style) => {
                let head = b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
                [&head[..], &chunked(chunks, *style)].concat()
            }
        }
    }
}

/// Body bytes, mostly ones that mean something to a parser.
fn body_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let meaningful = prop_oneof![
        Just(b"\r\n".to_vec()),
        Just(b"0\r\n\r\n".to_vec()),
        Just(SMUGGLE.to_vec()),
        Just(b"GET / HTTP/1.1\r\n".to_vec()),
        vec(any::<u8>(), 1..8),
    ];
    vec(meaningful, 0..4).prop_map(move |parts| parts.concat().into_iter().take(max).collect())
}

fn message() -> impl Strategy<Value = Message> {
    let style = (any::<bool>(), any::<bool>(), any::<bool>())
        .prop_map(|(upper_hex, extensions, trailers)| ChunkStyle { upper_hex, extensions, trailers });
    prop_oneof![
        "[a-z0-9]{0,8}".prop_map(Message::Get),
        body_bytes(120).prop_map(Message::WithLength),
        (vec(body_bytes(40), 0..4), style).prop_map(|(chunks, style)| Message::Chunked(chunks, style)),
    ]
}

/// `input` cut at the points `cuts` pick.
fn pieces<'a>(input: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    cut_at(input, cuts.iter().map(|c| c.index(input.len() + 1)))
}

/// What hyper reads through the guard when the client sends `pieces`, `read` bytes a read.
fn hyper_reads(pieces: Vec<&[u8]>, read: usize) -> Vec<u8> {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(through(pieces, read))
}

/// The requests, with their bodies, that hyper's HTTP/1.1 server serves on a connection
/// behind the guard, the client sending `pieces` (each its own write) and then closing its
/// side. The differential check: the guard's idea of where requests begin and end is hyper's.
fn hyper_serves(pieces: Vec<&[u8]>) -> Vec<(String, Vec<u8>)> {
    use http_body_util::BodyExt;
    use hyper::service::service_fn;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let served = Arc::new(Mutex::new(Vec::new()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let record = Arc::clone(&served);
        let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let record = Arc::clone(&record);
            async move {
                let target = format!("{} {}", req.method(), req.uri());
                let body = req.into_body().collect().await?.to_bytes().to_vec();
                record.lock().unwrap().push((target, body));
                Ok::<_, hyper::Error>(hyper::Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
            }
        });
        let io = hyper_util::rt::TokioIo::new(super::StrictHttp1::new(server, 8192));
        let connection = hyper::server::conn::http1::Builder::new().half_close(true).serve_connection(io, service);
        let serving = tokio::spawn(connection);
        // After a rejected head the server closes: later writes fail, as they would on a socket.
        for piece in pieces {
            if client.write_all(piece).await.is_err() {
                break;
            }
            tokio::task::yield_now().await;
        }
        let _ = client.shutdown().await;
        let mut answers = Vec::new();
        client.read_to_end(&mut answers).await.unwrap();
        let _ = serving.await.unwrap();
    });
    let served = served.lock().unwrap().clone();
    served
}

fn read_size() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1usize), Just(24), 2..200usize, Just(8192)]
}

proptest! {
    #[test]
    fn valid_conversations_pass_unchanged_however_they_arrive(
        messages in vec(message(), 1..6),
        cuts in vec(any::<Index>(), 0..6),
        read in read_size(),
    ) {
        let input: Vec<u8> = messages.iter().flat_map(Message::wire).collect();
        let got = hyper_reads(pieces(&input, &cuts), read);
        prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&input));
    }

    #[test]
    fn hyper_serves_exactly_the_requests_sent(
        messages in vec(message(), 1..6),
        smuggled_at in proptest::option::of(any::<Index>()),
        cuts in vec(any::<Index>(), 0..6),
    ) {
        let at = smuggled_at.map(|i| i.index(messages.len() + 1));
        let served_part = &messages[..at.unwrap_or(messages.len())];
        let mut input: Vec<u8> = served_part.iter().flat_map(Message::wire).collect();
        if let Some(at) = at {
            input.extend_from_slice(SMUGGLE);
            input.extend(messages[at..].iter().flat_map(Message::wire));
        }
        let expected: Vec<_> = served_part.iter().map(Message::seen).collect();
        prop_assert_eq!(hyper_serves(pieces(&input, &cuts)), expected);
    }

    #[test]
    fn an_ambiguous_request_ends_the_conversation_where_it_starts(
        messages in vec(message(), 0..5),
        at in any::<Index>(),
        cuts in vec(any::<Index>(), 0..6),
        read in read_size(),
    ) {
        let at = at.index(messages.len() + 1);
        let before: Vec<u8> = messages[..at].iter().flat_map(Message::wire).collect();
        let after: Vec<u8> = messages[at..].iter().flat_map(Message::wire).collect();
        let input = [&before[..], SMUGGLE, &after].concat();
        let got = hyper_reads(pieces(&input, &cuts), read);
        let expected = [&before[..], REJECTED_HEAD].concat();
        prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&expected));
    }

    #[test]
    fn any_bytes_give_hyper_a_prefix_of_them(
        parts in vec(prop_oneof![message().prop_map(|m| m.wire()), Just(SMUGGLE.to_vec()), vec(any::<u8>(), 0..40)], 1..5),
        cuts in vec(any::<Index>(), 0..6),
        read in read_size(),
    ) {
        let input = parts.concat();
        let got = hyper_reads(pieces(&input, &cuts), read);
        let prefix = got.strip_suffix(REJECTED_HEAD).unwrap_or(&got);
        prop_assert!(
            input.starts_with(prefix),
            "hyper got {:?} from {:?}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&input)
        );
    }
}
