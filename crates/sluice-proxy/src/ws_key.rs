//! The WebSocket opening handshake's key and the accept value that answers it (RFC 6455
//! §4.2.2), for a WebSocket over HTTP/2 (RFC 8441), which has neither, sent on to an origin
//! as an HTTP/1.1 upgrade: the proxy makes the key and checks the origin's answer, as a
//! WebSocket client would.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use http::HeaderValue;
use sha1::{Digest, Sha1};

/// The field of the request that carries the key.
pub const SEC_WEBSOCKET_KEY: &str = "sec-websocket-key";
/// The field of the `101` that carries the accept value.
pub const SEC_WEBSOCKET_ACCEPT: &str = "sec-websocket-accept";

/// RFC 6455 §1.3: appended to the key before hashing.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A fresh, random `Sec-WebSocket-Key`: 16 random bytes in base64.
#[derive(Debug, Clone)]
pub struct WebSocketKey(String);

impl WebSocketKey {
    pub fn random() -> Self {
        Self(STANDARD.encode(rand::random::<[u8; 16]>()))
    }

    pub fn header(&self) -> HeaderValue {
        HeaderValue::from_str(&self.0).expect("base64 is a valid field value")
    }

    /// Whether `accept` is the `Sec-WebSocket-Accept` that answers this key.
    pub fn accepts(&self, accept: Option<&HeaderValue>) -> bool {
        accept.is_some_and(|value| value.as_bytes() == accept_for(&self.0).as_bytes())
    }
}

/// The `Sec-WebSocket-Accept` for `key`: the base64 of the SHA-1 of the key and [`GUID`].
pub fn accept_for(key: &str) -> String {
    let mut hash = Sha1::new();
    hash.update(key.as_bytes());
    hash.update(GUID.as_bytes());
    STANDARD.encode(hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_value_of_rfc_6455s_example() {
        assert_eq!(accept_for("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn a_key_is_16_bytes_and_only_its_own_accept_value_answers_it() {
        let key = WebSocketKey::random();
        assert_eq!(STANDARD.decode(&key.0).unwrap().len(), 16);
        let right = HeaderValue::from_str(&accept_for(&key.0)).unwrap();
        assert!(key.accepts(Some(&right)));
        assert!(!key.accepts(Some(&HeaderValue::from_static("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))));
        assert!(!key.accepts(None));
        assert_ne!(key.0, WebSocketKey::random().0);
    }
}
