//! The subset of Structured Field Values (RFC 8941) this crate needs: parsing a Dictionary
//! (the syntax of targeted cache-control fields, RFC 9213 §2.1) and serialising Tokens and
//! Strings (for `Cache-Status`, RFC 9211).

/// A Dictionary member value, reduced to what cache directives use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    Integer(i64),
    Boolean(bool),
    /// A String, Token, Decimal, Byte Sequence or Inner List.
    Other,
}

/// Parses an `sf-dictionary` per RFC 8941 §4.2.2. `None` on any parse error. Duplicate keys
/// keep only their last value (§4.2.2), in the position of the first occurrence.
pub(crate) fn parse_dictionary(input: &[u8]) -> Option<Vec<(String, Value)>> {
    let mut p = Parser { s: input, i: 0 };
    p.skip_sp();
    let mut dict: Vec<(String, Value)> = Vec::new();
    while !p.at_end() {
        let key = p.key()?;
        let value = if p.eat(b'=') {
            p.member_value()?
        } else {
            p.parameters()?;
            Value::Boolean(true)
        };
        match dict.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => dict.push((key, value)),
        }
        p.skip_ows();
        if p.at_end() {
            break;
        }
        if !p.eat(b',') {
            return None;
        }
        p.skip_ows();
        if p.at_end() {
            // A trailing comma is an error.
            return None;
        }
    }
    Some(dict)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        if hit {
            self.i += 1;
        }
        hit
    }

    fn skip_sp(&mut self) {
        while self.eat(b' ') {}
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &[u8] {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// `key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )`.
    fn key(&mut self) -> Option<String> {
        if !matches!(self.peek(), Some(b'a'..=b'z' | b'*')) {
            return None;
        }
        let key = self.take_while(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*'));
        // Keys are ASCII by construction.
        Some(key.iter().map(|&b| char::from(b)).collect())
    }

    fn member_value(&mut self) -> Option<Value> {
        if self.peek() == Some(b'(') {
            self.inner_list()?;
            self.parameters()?;
            return Some(Value::Other);
        }
        let v = self.bare_item()?;
        self.parameters()?;
        Some(v)
    }

    fn inner_list(&mut self) -> Option<()> {
        self.i += 1; // '('
        loop {
            self.skip_sp();
            if self.eat(b')') {
                return Some(());
            }
            self.bare_item()?;
            self.parameters()?;
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return None;
            }
        }
    }

    fn parameters(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.skip_sp();
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Some(())
    }

    fn bare_item(&mut self) -> Option<Value> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string().map(|_| Value::Other),
            b':' => self.byte_sequence().map(|()| Value::Other),
            b'?' => self.boolean(),
            b'A'..=b'Z' | b'a'..=b'z' | b'*' => {
                self.take_while(|b| crate::parse::is_tchar(b) || b == b':' || b == b'/');
                Some(Value::Other)
            }
            _ => None,
        }
    }

    /// `sf-integer = ["-"] 1*15DIGIT`, `sf-decimal = ["-"] 1*12DIGIT "." 1*3DIGIT`.
    fn number(&mut self) -> Option<Value> {
        let negative = self.eat(b'-');
        let int = self.take_while(|b| b.is_ascii_digit());
        if int.is_empty() {
            return None;
        }
        let int_digits = int.len();
        let magnitude = int.iter().fold(0i64, |acc, &d| acc.saturating_mul(10).saturating_add(i64::from(d - b'0')));
        if self.eat(b'.') {
            let frac = self.take_while(|b| b.is_ascii_digit());
            return (int_digits <= 12 && (1..=3).contains(&frac.len())).then_some(Value::Other);
        }
        (int_digits <= 15).then_some(Value::Integer(if negative { -magnitude } else { magnitude }))
    }

    /// `sf-string`: printable ASCII with `\"` and `\\` escapes.
    fn string(&mut self) -> Option<()> {
        self.i += 1; // opening quote
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    self.i += 1;
                    if !matches!(self.peek()?, b'"' | b'\\') {
                        return None;
                    }
                    self.i += 1;
                }
                0x20..=0x7e => self.i += 1,
                _ => return None,
            }
        }
    }

    fn byte_sequence(&mut self) -> Option<()> {
        self.i += 1; // ':'
        self.take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
        self.eat(b':').then_some(())
    }

    fn boolean(&mut self) -> Option<Value> {
        self.i += 1; // '?'
        let v = match self.peek()? {
            b'0' => false,
            b'1' => true,
            _ => return None,
        };
        self.i += 1;
        Some(Value::Boolean(v))
    }
}

/// True when `s` can be serialised as an `sf-token` (RFC 8941 §3.3.4).
pub(crate) fn is_token(s: &str) -> bool {
    let b = s.as_bytes();
    matches!(b.first(), Some(c) if c.is_ascii_alphabetic() || *c == b'*')
        && b.iter().all(|&c| crate::parse::is_tchar(c) || c == b':' || c == b'/')
}

/// Appends `s` as an sf-token when it is one, else as an sf-string. Characters an sf-string
/// cannot carry (controls, non-ASCII) are dropped rather than failing the whole field.
pub(crate) fn write_token_or_string(out: &mut String, s: &str) {
    if is_token(s) {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => {}
        }
    }
    out.push('"');
}

/// Appends `n` in decimal, `-` first when negative (an sf-integer's serialisation, RFC 8941
/// §4.1.4, for values within its range), without going through `fmt`.
pub(crate) fn write_integer(out: &mut String, n: i64) {
    if n < 0 {
        out.push('-');
    }
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = n.unsigned_abs();
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    // ASCII digits: always UTF-8.
    out.push_str(std::str::from_utf8(&digits[start..]).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(s: &str) -> Option<Vec<(String, Value)>> {
        parse_dictionary(s.as_bytes())
    }

    #[test]
    fn rfc8941_4_2_2_parses_cache_directive_dictionary() {
        let d = dict(r#"max-age=60, no-store, private="set-cookie", x=?0, y=1.5;a=b, z=(1 2)"#);
        assert_eq!(
            d,
            Some(vec![
                ("max-age".into(), Value::Integer(60)),
                ("no-store".into(), Value::Boolean(true)),
                ("private".into(), Value::Other),
                ("x".into(), Value::Boolean(false)),
                ("y".into(), Value::Other),
                ("z".into(), Value::Other),
            ])
        );
    }

    #[test]
    fn rfc8941_4_2_2_last_duplicate_wins() {
        assert_eq!(dict("max-age=1, max-age=2"), Some(vec![("max-age".into(), Value::Integer(2))]));
    }

    #[test]
    fn rfc8941_4_2_2_rejects_invalid_dictionaries() {
        for bad in [
            "Max-Age=60",
            "max-age=60,",
            "max-age=60 no-store",
            "max-age=1234567890123456",
            "a=\"unterminated",
            "a=?2",
            "a=1.2345",
            "a=:abc",
            "=1",
            "a=(1 2",
            "a=@",
        ] {
            assert_eq!(dict(bad), None, "{bad}");
        }
    }

    #[test]
    fn rfc8941_4_2_2_empty_and_whitespace_are_empty_dictionaries() {
        assert_eq!(dict(""), Some(vec![]));
        assert_eq!(dict("   "), Some(vec![]));
    }

    #[test]
    fn rfc8941_3_3_4_token_or_string_serialisation() {
        let mut out = String::new();
        write_token_or_string(&mut out, "Sluice");
        out.push('|');
        write_token_or_string(&mut out, "my cache \"1\"\\\n\u{e9}");
        out.push('|');
        write_token_or_string(&mut out, "1abc");
        out.push('|');
        write_token_or_string(&mut out, "");
        assert_eq!(out, r#"Sluice|"my cache \"1\"\\"|"1abc"|"""#);
    }

    #[test]
    fn rfc8941_4_1_4_integer_serialisation() {
        for n in [0, 7, -7, 200, 504, 3600, -3600, 999_999_999_999_999, -999_999_999_999_999, i64::MAX, i64::MIN] {
            let mut out = String::from("x=");
            write_integer(&mut out, n);
            assert_eq!(out, format!("x={n}"));
        }
    }
}
