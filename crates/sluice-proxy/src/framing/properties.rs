//! Property tests of the framing guard over generated conversations: valid requests with
//! any bodies (bytes that look like heads or chunk framing included), cut at any points and
//! read in any sizes, reach hyper unchanged; an ambiguous request anywhere in them ends what
//! hyper gets, right after the requests before it, with the rejected head; and whatever the
//! bytes, hyper gets a prefix of them, maybe followed by the rejected head.

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
