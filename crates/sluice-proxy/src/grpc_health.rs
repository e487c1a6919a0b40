//! gRPC health checks of origins (`health_check.grpc_service` on a route with `http2`): the
//! standard health service's `Check` call (`grpc.health.v1.Health`, as Envoy's and
//! Kubernetes' gRPC probes make it), passed when the origin answers `SERVING` for the service.
//! Its two messages, `HealthCheckRequest { string service = 1; }` and `HealthCheckResponse {
//! ServingStatus status = 1; }`, are declared here for `prost`, each in gRPC's length-prefixed
//! framing on the wire.

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, StatusCode};
use prost::Message;

/// The call's path.
pub(crate) const PATH: &str = "/grpc.health.v1.Health/Check";

/// `HealthCheckResponse.status` of a service that serves.
const SERVING: i32 = 1;

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse` (its `ServingStatus` enum as the number it is).
#[derive(Clone, PartialEq, Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// The request message asking about `service` ("" for the server as a whole), framed.
pub(crate) fn request_body(service: &str) -> Bytes {
    let message = HealthCheckRequest { service: service.to_owned() };
    let mut framed = BytesMut::with_capacity(5 + message.encoded_len());
    framed.put_u8(0); // not compressed
    framed.put_u32(message.encoded_len() as u32);
    message.encode(&mut framed).expect("the buffer has room for the message");
    framed.freeze()
}

/// Whether a response (its status, head, body and trailers) says the service serves: `200`,
/// `grpc-status: 0` (in the trailers, or in the head of a trailers-only response) and one
/// uncompressed message whose status is `SERVING`.
pub(crate) fn serving(status: StatusCode, head: &HeaderMap, body: &[u8], trailers: Option<&HeaderMap>) -> bool {
    let grpc_status = trailers.and_then(|t| t.get("grpc-status")).or_else(|| head.get("grpc-status"));
    if status != StatusCode::OK || grpc_status.is_none_or(|s| s != "0") {
        return false;
    }
    let Some((&compressed, rest)) = body.split_first() else { return false };
    let Some((length, message)) = rest.split_first_chunk::<4>() else { return false };
    if compressed != 0 || u32::from_be_bytes(*length) as usize != message.len() {
        return false;
    }
    HealthCheckResponse::decode(message).is_ok_and(|response| response.status == SERVING)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trailers(status: &'static str) -> HeaderMap {
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static(status));
        trailers
    }

    #[test]
    fn the_request_frames_the_service_name() {
        assert_eq!(&request_body("")[..], [0, 0, 0, 0, 0]);
        assert_eq!(&request_body("a.B")[..], [0, 0, 0, 0, 5, 0x0a, 3, b'a', b'.', b'B']);
    }

    #[test]
    fn only_serving_with_status_0_passes() {
        let serving_body = [0, 0, 0, 0, 2, 0x08, 1];
        let ok = StatusCode::OK;
        let none = HeaderMap::new();
        assert!(serving(ok, &none, &serving_body, Some(&trailers("0"))));
        assert!(!serving(ok, &none, &[0, 0, 0, 0, 2, 0x08, 2], Some(&trailers("0"))), "NOT_SERVING");
        assert!(!serving(ok, &none, &[0, 0, 0, 0, 0], Some(&trailers("0"))), "UNKNOWN, the field absent");
        assert!(!serving(ok, &none, &serving_body, Some(&trailers("5"))), "grpc-status NOT_FOUND");
        assert!(!serving(ok, &trailers("5"), &[], None), "trailers-only NOT_FOUND");
        assert!(!serving(ok, &none, &serving_body, None), "no status at all");
        assert!(!serving(StatusCode::BAD_GATEWAY, &none, &serving_body, Some(&trailers("0"))));
        assert!(!serving(ok, &none, &[1, 0, 0, 0, 2, 0x08, 1], Some(&trailers("0"))), "compressed");
        assert!(!serving(ok, &none, &[0, 0, 0, 0, 3, 0x08, 1], Some(&trailers("0"))), "cut short");
        let with_unknown_fields = [0, 0, 0, 0, 7, 0x12, 2, b'h', b'i', 0x08, 1, 0x18];
        assert!(!serving(ok, &none, &with_unknown_fields, Some(&trailers("0"))), "a key without its value");
        let with_unknown_fields = [0, 0, 0, 0, 6, 0x12, 2, b'h', b'i', 0x08, 1];
        assert!(serving(ok, &none, &with_unknown_fields, Some(&trailers("0"))), "unknown fields skipped");
    }
}
