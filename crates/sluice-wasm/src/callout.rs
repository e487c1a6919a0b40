//! Calls out of a plugin: HTTP calls (`proxy_http_call`, the SDK's `dispatch_http_call`)
//! and unary gRPC calls (`proxy_grpc_call`, `dispatch_grpc_call`; framing in `crate::grpc`).
//!
//! A headers callback asks for a call; the host makes it while the transaction defers
//! (`Flow::Defer`), then calls back on the same context with the phase's head back in reach
//! (`Txn::resumed`), where the plugin reads the answer and edits the head or answers
//! locally: `proxy_on_http_call_response` (`HttpCallResponseHeaders`,
//! `HttpCallResponseBody`), or for a gRPC call `proxy_on_grpc_receive` (`GrpcReceiveBuffer`)
//! when it succeeded and `proxy_on_grpc_close` (`proxy_get_status`) when it did not. The
//! upstream is named by a cluster of the plugin's `clusters` setting, as in Envoy; HTTP/1.1
//! for HTTP calls and HTTP/2 cleartext for gRPC calls, over connections each plugin version
//! keeps per cluster and reuses ([`CallClients`]).

use crate::abi::Status;
use crate::grpc::GrpcStatus;
use crate::headermap::WirePairs;
use crate::vm::Callback;
use bytes::Bytes;
use http::{header, response, HeaderName, HeaderValue, Method, Request};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::Deserialize;
use std::sync::OnceLock;
use std::time::Duration;

/// A client for calls: pooled connections to the clusters (hyper-util's). Bodies are boxed:
/// whole for calls, fed as the plugin sends for gRPC streams.
pub(crate) type CallClient = Client<HttpConnector, CallBody>;

/// The body of a request to a cluster.
pub(crate) type CallBody = BoxBody<Bytes, std::convert::Infallible>;

/// `bytes` as a whole [`CallBody`].
pub(crate) fn whole(bytes: Bytes) -> CallBody {
    Full::new(bytes).boxed()
}

/// How long an unused connection to a cluster is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Most unused connections kept per cluster.
const MAX_IDLE_PER_CLUSTER: usize = 16;

/// The clients of one plugin version's calls, made on first use: connections to each
/// cluster are kept and reused, HTTP/1.1 keep-alive for HTTP calls and one multiplexed
/// HTTP/2 connection for gRPC calls (as Envoy's cluster pools do), so that a plugin calling
/// out on every request pays no handshake per call and leaves no socket in `TIME_WAIT`.
#[derive(Default)]
pub(crate) struct CallClients {
    http: OnceLock<CallClient>,
    grpc: OnceLock<CallClient>,
}

impl CallClients {
    /// The client for `callout` (a handle: clients are shared).
    pub(crate) fn for_call(&self, callout: &Callout) -> CallClient {
        if callout.grpc {
            self.grpc()
        } else {
            self.http.get_or_init(|| client(false)).clone()
        }
    }

    /// The client for gRPC calls and streams.
    pub(crate) fn grpc(&self) -> CallClient {
        self.grpc.get_or_init(|| client(true)).clone()
    }
}

/// A pooled client, HTTP/1.1 or HTTP/2 (cleartext, prior knowledge) only.
fn client(http2: bool) -> CallClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_max_idle_per_host(MAX_IDLE_PER_CLUSTER)
        .http2_only(http2)
        .build(connector)
}

/// `err` and its sources, `: `-separated (a client error's own text names only its kind).
pub(crate) fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// An upstream a plugin may call: `http://host:port` (or `host:port`) in the `clusters`
/// setting, under the name the plugin passes to `dispatch_http_call`, `dispatch_grpc_call` or
/// `open_grpc_stream` (gRPC speaks HTTP/2 cleartext to it).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Cluster {
    /// `host:port`, to connect to.
    address: String,
}

impl Cluster {
    /// `host:port`.
    pub(crate) fn address(&self) -> &str {
        &self.address
    }
}

impl TryFrom<String> for Cluster {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        let rest = match value.split_once("://") {
            Some(("http", rest)) => rest,
            Some((scheme, _)) => {
                return Err(format!("cluster {value:?}: only http:// upstreams can be called, not {scheme}"))
            }
            None => value.as_str(),
        };
        let authority: http::uri::Authority =
            rest.trim_end_matches('/').parse().map_err(|_| format!("cluster {value:?}: not host:port"))?;
        let port = authority.port_u16().unwrap_or(80);
        Ok(Self { address: format!("{}:{port}", authority.host()) })
    }
}

/// The call a callback asked for.
#[derive(Debug)]
pub(crate) struct Callout {
    /// What `proxy_http_call` (`proxy_grpc_call`) gave the plugin, and the callback with the
    /// answer gives back.
    pub token: u32,
    request: Request<Bytes>,
    timeout: Duration,
    grpc: bool,
}

/// What a call got. An HTTP call: the response head and body; for a call that got no head,
/// the answer Envoy's HTTP client makes up ([`CallResponse::local`]); `None` for a call that
/// failed after its head (the plugin then sees no headers, as from Envoy when a call's stream
/// is reset). A gRPC call: no head, the answer's message (empty unless the call succeeded)
/// and how the call ended.
#[derive(Debug, Default)]
pub(crate) struct CallResponse {
    pub head: Option<response::Parts>,
    pub body: Bytes,
    /// A gRPC call's status; `None` for an HTTP call.
    pub grpc: Option<GrpcStatus>,
}

impl CallResponse {
    /// The answer Envoy's HTTP client gives a plugin for a call the upstream did not answer,
    /// with its own status and text: `503` when the upstream could not be reached or reset the
    /// call before a response head ([`UNREACHABLE`]), `504` when the call timed out
    /// ([`TIMED_OUT`]). Plugins written for Envoy read `:status` and expect one.
    fn local(status: http::StatusCode, text: &'static str) -> Self {
        let (mut head, ()) = http::Response::new(()).into_parts();
        head.status = status;
        head.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
        head.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        Self { head: Some(head), body: Bytes::from_static(text.as_bytes()), grpc: None }
    }

    /// The callback that hands this answer to the plugin, for the call `token`.
    pub(crate) fn callback(&self, token: u32) -> Callback {
        match &self.grpc {
            None => {
                let headers = self.head.as_ref().map_or(0, |head| head.headers.len() + 1);
                Callback::HttpCallResponse { token, headers, body: self.body.len() }
            }
            Some(status) if status.code == crate::grpc::code::OK => {
                Callback::GrpcReceive { token, size: self.body.len() }
            }
            Some(status) => Callback::GrpcClose { token, status: status.code },
        }
    }
}

impl Callout {
    /// The HTTP call to `cluster` with the plugin's `headers` (`:method`, `:path` and
    /// `:authority` required, as Envoy requires them) and `body`.
    pub(crate) fn http(
        token: u32,
        cluster: &Cluster,
        headers: &WirePairs<'_>,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Self, Status> {
        let pseudo = |name: &[u8]| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let method =
            Method::from_bytes(pseudo(b":method").ok_or(Status::BadArgument)?).map_err(|_| Status::BadArgument)?;
        let path = pseudo(b":path").ok_or(Status::BadArgument)?;
        let authority = pseudo(b":authority").ok_or(Status::BadArgument)?;
        let path = std::str::from_utf8(path).map_err(|_| Status::BadArgument)?;
        let uri = format!("http://{}{path}", cluster.address);
        let mut request = Request::builder().method(method).uri(uri);
        request = request.header(header::HOST, HeaderValue::from_bytes(authority).map_err(|_| Status::BadArgument)?);
        for (name, value) in headers.iter().filter(|(name, _)| !name.starts_with(b":")) {
            let name = HeaderName::from_bytes(name).map_err(|_| Status::BadArgument)?;
            let value = HeaderValue::from_bytes(value).map_err(|_| Status::BadArgument)?;
            request = request.header(name, value);
        }
        if !body.is_empty() {
            request = request.header(header::CONTENT_LENGTH, body.len());
        }
        let request = request.body(Bytes::copy_from_slice(body)).map_err(|_| Status::BadArgument)?;
        Ok(Self { token, request, timeout, grpc: false })
    }

    /// The unary gRPC call of `service`/`method` on `cluster`, with the plugin's `metadata`
    /// and request `message` (see [`crate::grpc::request`]).
    pub(crate) fn grpc(
        token: u32,
        cluster: &Cluster,
        (service, method): (&[u8], &[u8]),
        metadata: &WirePairs<'_>,
        message: &[u8],
        timeout: Duration,
    ) -> Result<Self, Status> {
        let request = crate::grpc::request(&cluster.address, (service, method), metadata, message, timeout)?;
        Ok(Self { token, request, timeout, grpc: true })
    }

    /// Whether this is a gRPC call.
    pub(crate) fn is_grpc(&self) -> bool {
        self.grpc
    }

    /// How long the call may take (the plugin's timeout).
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Makes the call through `client` (from [`CallClients::for_call`]): sends, reads the
    /// response (its body at most `max_body` bytes). An HTTP call that gets no response head
    /// gets Envoy's made-up answer instead ([`CallResponse::local`]); one that fails after it
    /// (a body over `max_body`, a connection cut) an empty [`CallResponse`]. A gRPC call gets
    /// the status of the failure.
    pub(crate) async fn perform(self, client: CallClient, max_body: usize) -> CallResponse {
        let Self { request, timeout, grpc, .. } = self;
        if grpc {
            return crate::grpc::perform(&client, request, timeout, max_body).await;
        }
        let uri = request.uri().clone();
        match tokio::time::timeout(timeout, exchange(&client, request, max_body)).await {
            Ok(Ok(response)) => response,
            Ok(Err(CallFailure::BeforeHead(err))) => {
                tracing::debug!("plugin http call to {uri} failed: {err}");
                CallResponse::local(http::StatusCode::SERVICE_UNAVAILABLE, UNREACHABLE)
            }
            Ok(Err(CallFailure::AfterHead(err))) => {
                tracing::debug!("plugin http call to {uri} failed: {err}");
                CallResponse::default()
            }
            Err(_) => {
                tracing::debug!("plugin http call to {uri} timed out after {timeout:?}");
                CallResponse::local(http::StatusCode::GATEWAY_TIMEOUT, TIMED_OUT)
            }
        }
    }
}

/// The body of Envoy's `503` for a call whose upstream could not be reached or reset it
/// before a response head.
pub(crate) const UNREACHABLE: &str =
    "upstream connect error or disconnect/reset before headers. reset reason: connection failure";

/// The body of Envoy's `504` for a call that timed out.
pub(crate) const TIMED_OUT: &str = "upstream request timeout";

/// How an HTTP call failed.
enum CallFailure {
    /// No response head came.
    BeforeHead(String),
    /// The head came, the body did not (whole, or within the limit).
    AfterHead(String),
}

async fn exchange(client: &CallClient, request: Request<Bytes>, max_body: usize) -> Result<CallResponse, CallFailure> {
    let response = client.request(request.map(whole)).await.map_err(|e| CallFailure::BeforeHead(describe(&e)))?;
    let (head, body) = response.into_parts();
    let body = Limited::new(body, max_body)
        .collect()
        .await
        .map_err(|e| CallFailure::AfterHead(format!("body: {e}")))?
        .to_bytes();
    Ok(CallResponse { head: Some(head), body, grpc: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_name_http_upstreams_only() {
        let cluster = |s: &str| Cluster::try_from(s.to_owned());
        assert_eq!(cluster("http://127.0.0.1:9000").unwrap().address, "127.0.0.1:9000");
        assert_eq!(cluster("auth.internal").unwrap().address, "auth.internal:80");
        assert_eq!(cluster("http://auth.internal/").unwrap().address, "auth.internal:80");
        assert!(cluster("https://auth.internal").unwrap_err().contains("only http://"));
        assert!(cluster("not a host").is_err());
    }

    #[tokio::test]
    async fn calls_without_an_answer_get_envoys_503_or_504() {
        let pairs: WirePairs<'static> = vec![(b":method", b"GET"), (b":path", b"/"), (b":authority", b"a")];
        // Nothing listens: 503.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let cluster = Cluster::try_from(closed.to_string()).unwrap();
        let call = Callout::http(1, &cluster, &pairs, b"", Duration::from_secs(5)).unwrap();
        let clients = CallClients::default();
        let client = clients.for_call(&call);
        let answer = call.perform(client, 1024).await;
        let head = answer.head.expect("a made-up head");
        assert_eq!(head.status, 503);
        assert_eq!(answer.body, UNREACHABLE);
        assert_eq!(head.headers["content-length"], UNREACHABLE.len().to_string().as_str());
        // Accepted, never answered: 504 once the call's timeout passes.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let cluster = Cluster::try_from(silent.local_addr().unwrap().to_string()).unwrap();
        let call = Callout::http(2, &cluster, &pairs, b"", Duration::from_millis(50)).unwrap();
        let client = clients.for_call(&call);
        let answer = call.perform(client, 1024).await;
        assert_eq!(answer.head.expect("a made-up head").status, 504);
        assert_eq!(answer.body, TIMED_OUT);
        drop(silent);
    }

    #[test]
    fn a_call_needs_method_path_and_authority() {
        let cluster = Cluster::try_from("127.0.0.1:1".to_owned()).unwrap();
        let timeout = Duration::from_secs(1);
        let pairs = |list: &[(&'static str, &'static str)]| -> WirePairs<'static> {
            list.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())).collect()
        };
        let full = pairs(&[(":method", "POST"), (":path", "/check?x=1"), (":authority", "auth"), ("x-user", "ann")]);
        let call = Callout::http(7, &cluster, &full, b"payload", timeout).unwrap();
        assert_eq!((call.token, call.request.method().as_str()), (7, "POST"));
        assert_eq!(call.request.uri(), "http://127.0.0.1:1/check?x=1");
        assert_eq!(call.request.headers()["host"], "auth");
        assert_eq!(call.request.headers()["x-user"], "ann");
        assert_eq!(call.request.headers()["content-length"], "7");
        let no_path = pairs(&[(":method", "GET"), (":authority", "auth")]);
        assert_eq!(Callout::http(1, &cluster, &no_path, b"", timeout).unwrap_err(), Status::BadArgument);
    }
}
