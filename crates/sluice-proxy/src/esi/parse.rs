//! The streaming ESI parser: bytes in (in chunks of any size), [`Event`]s out.
//!
//! Contract: the events produced for a document do not depend on how it is split into
//! chunks (feeding it whole or byte by byte gives the same events once adjacent
//! [`Event::Text`]s are joined). Text is released as soon as it cannot be the start of an
//! ESI construct, so a template streams; only a possible tag start (at most
//! [`MAX_TAG`] bytes) is held back across a chunk boundary.
//!
//! The subset (docs/esi.md): `<esi:include src=".." [alt=".."] [onerror="continue"]/>`
//! (also with an explicit `</esi:include>`), `<esi:remove>..</esi:remove>` (content dropped),
//! `<esi:comment .../>` (dropped), and `<!--esi .. -->` (markers dropped, content
//! processed). Everything else, other `esi:` elements included, is text. Tags are
//! case-sensitive, as in XML.

use bytes::{Bytes, BytesMut};

/// The longest tag (from `<` to `>`) accepted; a longer one is treated as text.
pub const MAX_TAG: usize = 4096;

/// What the parser found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Template text to send as is (never empty).
    Text(Bytes),
    /// An `<esi:include>` to replace by the fragment it names.
    Include(Include),
}

/// One `<esi:include>`, attributes decoded (`&amp;` and friends).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Include {
    /// The `src` attribute ("" when missing: the include fails).
    pub src: String,
    /// The `alt` attribute: fetched when `src` fails.
    pub alt: Option<String>,
    /// `onerror="continue"`: a failure is silently omitted.
    pub continue_on_error: bool,
}

const INCLUDE: &[u8] = b"<esi:include";
const INCLUDE_END: &[u8] = b"</esi:include>";
const COMMENT: &[u8] = b"<esi:comment";
const REMOVE: &[u8] = b"<esi:remove>";
const REMOVE_END: &[u8] = b"</esi:remove>";
const ESI_OPEN: &[u8] = b"<!--esi";
const ESI_CLOSE: &[u8] = b"-->";

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct Parser {
    /// Bytes not yet decided on (a possible construct at the start).
    buf: BytesMut,
    /// Inside `<esi:remove>`: everything up to `</esi:remove>` is dropped.
    removing: bool,
    /// Inside `<!--esi`: the next `-->` closes it.
    in_esi_comment: bool,
}

/// What is at the start of the buffer.
enum Head {
    /// A complete construct of this many bytes, and what it is.
    Construct(usize, Construct),
    /// Maybe a construct, but more bytes are needed to know.
    NeedMore,
    /// Not a construct: its first byte is text.
    Text,
}

enum Construct {
    Include(Include),
    Drop,
    RemoveStart,
    EsiOpen,
    EsiClose,
}

impl Parser {
    /// A parser at the start of a document.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses the next piece of the document, appending events to `out`.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<Event>) {
        self.buf.extend_from_slice(data);
        self.run(false, out);
    }

    /// Ends the document: what is held back is released as text (dropped inside an
    /// unterminated `<esi:remove>`).
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        self.run(true, out);
        let rest = self.buf.split().freeze();
        if !self.removing && !rest.is_empty() {
            push_text(out, rest);
        }
    }

    fn run(&mut self, last: bool, out: &mut Vec<Event>) {
        loop {
            if self.removing {
                match find(&self.buf, REMOVE_END, last) {
                    Found::At(i) => {
                        let _ = self.buf.split_to(i + REMOVE_END.len());
                        self.removing = false;
                        continue;
                    }
                    Found::Partial(i) => {
                        let _ = self.buf.split_to(i);
                        return;
                    }
                    Found::None => {
                        self.buf.clear();
                        return;
                    }
                }
            }
            // The buffer's first `decided` bytes are text; look for a construct after them.
            let mut decided = 0;
            loop {
                let start = self.buf[decided..]
                    .iter()
                    .position(|&b| b == b'<' || (b == b'-' && self.in_esi_comment))
                    .map(|i| decided + i);
                let Some(start) = start else {
                    let text = self.buf.split().freeze();
                    push_text(out, text);
                    return;
                };
                match self.head(start, last) {
                    Head::NeedMore => {
                        let text = self.buf.split_to(start).freeze();
                        push_text(out, text);
                        return;
                    }
                    Head::Text => decided = start + 1,
                    Head::Construct(len, construct) => {
                        let text = self.buf.split_to(start).freeze();
                        push_text(out, text);
                        let _ = self.buf.split_to(len);
                        match construct {
                            Construct::Include(include) => out.push(Event::Include(include)),
                            Construct::Drop => {}
                            Construct::RemoveStart => self.removing = true,
                            Construct::EsiOpen => self.in_esi_comment = true,
                            Construct::EsiClose => self.in_esi_comment = false,
                        }
                        break;
                    }
                }
            }
        }
    }

    /// Classifies what starts at `at` in the buffer (a `<`, or a `-` inside `<!--esi`).
    fn head(&self, at: usize, last: bool) -> Head {
        let buf = &self.buf[at..];
        if self.in_esi_comment {
            match literal(buf, ESI_CLOSE, last) {
                Head::Text => {}
                other => return other.with(|| Construct::EsiClose),
            }
            if buf[0] == b'-' {
                return Head::Text;
            }
        } else {
            match literal(buf, ESI_OPEN, last) {
                Head::Text => {}
                other => return other.with(|| Construct::EsiOpen),
            }
        }
        for (name, literal_tag) in [(REMOVE, true), (INCLUDE_END, true), (INCLUDE, false), (COMMENT, false)] {
            let head = if literal_tag { literal(buf, name, last) } else { element(buf, name, last) };
            match head {
                Head::Text => continue,
                Head::NeedMore => return Head::NeedMore,
                Head::Construct(len, _) => {
                    let construct = if name == REMOVE {
                        Construct::RemoveStart
                    } else if name == INCLUDE {
                        Construct::Include(include(&buf[name.len()..len - 1]))
                    } else {
                        Construct::Drop
                    };
                    return Head::Construct(len, construct);
                }
            }
        }
        Head::Text
    }
}

impl Head {
    fn with(self, construct: impl FnOnce() -> Construct) -> Head {
        match self {
            Head::Construct(len, _) => Head::Construct(len, construct()),
            other => other,
        }
    }
}

fn push_text(out: &mut Vec<Event>, text: Bytes) {
    if !text.is_empty() {
        out.push(Event::Text(text));
    }
}

enum Found {
    At(usize),
    /// Not found, but the buffer from here on is a prefix of the needle.
    Partial(usize),
    None,
}

/// Where `needle` is in `hay`; at the end of input (`last`) a partial match does not count.
fn find(hay: &[u8], needle: &[u8], last: bool) -> Found {
    if let Some(i) = hay.windows(needle.len()).position(|w| w == needle) {
        return Found::At(i);
    }
    if !last {
        let from = hay.len().saturating_sub(needle.len() - 1);
        if let Some(i) = (from..hay.len()).find(|&i| needle.starts_with(&hay[i..])) {
            return Found::Partial(i);
        }
    }
    Found::None
}

/// Does `buf` start with exactly `lit`?
fn literal(buf: &[u8], lit: &[u8], last: bool) -> Head {
    if buf.len() < lit.len() {
        return if !last && lit.starts_with(buf) { Head::NeedMore } else { Head::Text };
    }
    if buf.starts_with(lit) {
        Head::Construct(lit.len(), Construct::Drop)
    } else {
        Head::Text
    }
}

/// Does `buf` start with the element `<name ...>` (up to its `>`, outside quotes)?
fn element(buf: &[u8], name: &[u8], last: bool) -> Head {
    let n = name.len();
    if buf.len() <= n {
        return if !last && name.starts_with(buf) { Head::NeedMore } else { Head::Text };
    }
    if !buf.starts_with(name) || !matches!(buf[n], b' ' | b'\t' | b'\r' | b'\n' | b'/' | b'>') {
        return Head::Text;
    }
    let mut quote = None;
    for (i, &b) in buf.iter().enumerate().skip(n).take(MAX_TAG - n) {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), _) if q == b => quote = None,
            (None, b'>') => return Head::Construct(i + 1, Construct::Drop),
            _ => {}
        }
    }
    if buf.len() >= MAX_TAG || last {
        Head::Text
    } else {
        Head::NeedMore
    }
}

/// The attributes of an include tag (`attrs` is between the name and the closing `>`).
fn include(attrs: &[u8]) -> Include {
    let text = String::from_utf8_lossy(attrs);
    let mut include = Include::default();
    for (name, value) in attributes(text.trim_end_matches('/')) {
        match name.as_str() {
            "src" => include.src = value,
            "alt" => include.alt = Some(value),
            "onerror" => include.continue_on_error = value == "continue",
            _ => {}
        }
    }
    include
}

/// `name="value"` pairs (single or double quotes, or unquoted), entities decoded.
fn attributes(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let name_end = rest.find(|c: char| c == '=' || c.is_whitespace()).unwrap_or(rest.len());
        let name = rest[..name_end].to_owned();
        rest = rest[name_end..].trim_start();
        let Some(after_eq) = rest.strip_prefix('=') else {
            out.push((name, String::new()));
            if name_end == 0 {
                // A stray character: skip it.
                rest = rest.get(1..).unwrap_or("").trim_start();
            }
            continue;
        };
        let after_eq = after_eq.trim_start();
        let (value, tail) = match after_eq.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let body = &after_eq[1..];
                let end = body.find(q).unwrap_or(body.len());
                (&body[..end], body.get(end + 1..).unwrap_or(""))
            }
            _ => {
                let end = after_eq.find(char::is_whitespace).unwrap_or(after_eq.len());
                (&after_eq[..end], &after_eq[end..])
            }
        };
        out.push((name, decode_entities(value)));
        rest = tail.trim_start();
    }
    out
}

/// Decodes the five XML entities.
fn decode_entities(value: &str) -> String {
    if !value.contains('&') {
        return value.to_owned();
    }
    value.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Events with adjacent texts joined, for comparing parses.
    fn parse_chunks(chunks: &[&[u8]]) -> Vec<Event> {
        let mut parser = Parser::new();
        let mut raw = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut raw);
        }
        parser.finish(&mut raw);
        let mut out: Vec<Event> = Vec::new();
        for event in raw {
            match (out.last_mut(), event) {
                (Some(Event::Text(prev)), Event::Text(next)) => {
                    let mut joined = BytesMut::from(&prev[..]);
                    joined.extend_from_slice(&next);
                    *prev = joined.freeze();
                }
                (_, event) => out.push(event),
            }
        }
        out
    }

    fn parse(doc: &str) -> Vec<Event> {
        parse_chunks(&[doc.as_bytes()])
    }

    fn text(t: &str) -> Event {
        Event::Text(Bytes::copy_from_slice(t.as_bytes()))
    }

    fn inc(src: &str) -> Event {
        Event::Include(Include { src: src.into(), ..Default::default() })
    }

    #[test]
    fn includes_with_attributes() {
        assert_eq!(
            parse(r#"a<esi:include src="/x?a=1&amp;b=2" alt='/y' onerror="continue"/>b"#),
            vec![
                text("a"),
                Event::Include(Include { src: "/x?a=1&b=2".into(), alt: Some("/y".into()), continue_on_error: true }),
                text("b")
            ]
        );
        assert_eq!(parse("<esi:include src=/z></esi:include>!"), vec![inc("/z"), text("!")]);
        assert_eq!(parse("<esi:include/>"), vec![inc("")]);
    }

    #[test]
    fn remove_comment_and_esi_comments() {
        assert_eq!(parse("a<esi:remove>gone<b>x</b></esi:remove>b"), vec![text("ab")]);
        assert_eq!(parse(r#"a<esi:comment text="hi > there"/>b"#), vec![text("ab")]);
        assert_eq!(
            parse(r#"a<!--esi <p>x</p><esi:include src="/f"/> -- -->b"#),
            vec![text("a <p>x</p>"), inc("/f"), text(" -- b")]
        );
        assert_eq!(parse("a<!-- plain -->b"), vec![text("a<!-- plain -->b")]);
    }

    #[test]
    fn non_esi_markup_and_lookalikes_are_text() {
        for doc in ["<esi:includes src=x/>", "<esi:try><esi:attempt>x</esi:attempt></esi:try>", "<p>a -> b</p>", "<"] {
            assert_eq!(parse(doc), vec![text(doc)], "{doc}");
        }
    }

    #[test]
    fn unterminated_constructs() {
        assert_eq!(parse("a<esi:remove>never closed"), vec![text("a")]);
        assert_eq!(parse("a<esi:include src=x"), vec![text("a<esi:include src=x")]);
        let long = format!("<esi:include src=\"{}", "x".repeat(MAX_TAG));
        assert_eq!(parse(&long), vec![text(&long)]);
    }

    #[test]
    fn text_comes_in_one_piece_per_run() {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        parser.feed(b"<html><p>a -> b</p><esi:include src=/x/><p>c</p>", &mut out);
        assert_eq!(out, vec![text("<html><p>a -> b</p>"), inc("/x"), text("<p>c</p>")]);
    }

    #[test]
    fn text_is_released_before_the_document_ends() {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        parser.feed(b"hello <b>world</b> <esi:inc", &mut out);
        let released: Vec<u8> = out
            .iter()
            .flat_map(|e| match e {
                Event::Text(t) => t.to_vec(),
                Event::Include(_) => panic!("no include yet"),
            })
            .collect();
        assert_eq!(released, b"hello <b>world</b> ");
        parser.feed(b"lude src=/x/>", &mut out);
        assert_eq!(out.last(), Some(&inc("/x")));
    }

    const DOC: &str = concat!(
        "<html><esi:include src=\"/a\"/> and <esi:include src='/b?x=1&amp;y' alt=\"/c\" onerror=\"continue\"></esi:include>",
        "<esi:remove><esi:include src=\"/never\"/></esi:remove><!--esi <i>hidden</i> <esi:include src=\"/d\"/>-->",
        "<esi:comment text=\"x\"/><!-- html --> a - b -- c <esi:try>x</esi:try><esi:remove>y</esi:remove</html>"
    );

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(cuts in proptest::collection::vec(0..DOC.len(), 0..40)) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            let bytes = DOC.as_bytes();
            let mut chunks = Vec::new();
            let mut at = 0;
            for cut in cuts {
                chunks.push(&bytes[at..cut]);
                at = cut;
            }
            chunks.push(&bytes[at..]);
            prop_assert_eq!(parse_chunks(&chunks), parse(DOC));
        }

        #[test]
        fn byte_by_byte_of_any_document(doc in "(<esi:include src=\"/[a-z]{0,3}\"/>|<esi:remove>|</esi:remove>|<!--esi|-->|<esi:comment text=\"q\"/>|[a-z<>/ -]{0,6}){0,12}") {
            let bytes = doc.as_bytes();
            let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
            prop_assert_eq!(parse_chunks(&chunks), parse(&doc));
        }
    }
}
