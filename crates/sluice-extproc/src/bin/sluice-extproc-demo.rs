//! A demonstration ext_proc processor (the server side of Envoy's
//! `envoy.service.ext_proc.v3.ExternalProcessor`) on a Unix socket, for trying Sluice's helper
//! processes and for its tests. It works with Envoy too.
//!
//! Usage: `sluice-extproc-demo [--socket PATH] [--max-message-bytes N]` (defaults:
//! `$SLUICE_EXTPROC_SOCKET`, and `$SLUICE_EXTPROC_MAX_MESSAGE_BYTES`, which Sluice sets from
//! its `max_body_bytes`, else 4 MiB). A message it cannot read (too large, malformed) ends
//! the stream with an error status, never a clean end.
//!
//! Request headers:
//! - sets `x-extproc-demo: request`, appends `x-extproc-trace: demo`, removes `x-demo-remove`;
//! - `x-demo-rewrite: /path` rewrites the path (`:path`);
//! - a path starting with `/blocked` gets an immediate 403 (`x-extproc-demo: immediate`);
//! - `x-demo-crash` makes the process exit at once (status 3), mid-stream;
//! - `x-demo-hold: FILE` holds the answer until FILE exists (at most 30 s).
//!
//! Response headers:
//! - sets `x-extproc-demo: response` and `x-extproc-demo-pid: <pid>`, removes
//!   `x-origin-secret`;
//! - a response with `x-demo-replace` is replaced by an immediate 451;
//! - a response with `x-demo-set: name=value; name=value` gets those fields set (as a
//!   careless or hostile processor would set framing fields; Sluice keeps its own);
//! - a response with `x-demo-hold: FILE` is answered once FILE exists (at most 30 s).
//!
//! Bodies (sent when Sluice's body modes ask for them), as the request header `x-demo-body`
//! says:
//! - `upcase`: the request body and the response body in upper case; the response also gets
//!   `x-extproc-body-bytes: <its original length>`;
//! - `clear`: the response body cleared;
//! - `immediate`: after the response body, an immediate 403;
//! - `early`: the response body replaced with `replaced early` from the response headers'
//!   answer (`CONTINUE_AND_REPLACE`), without seeing it;
//! - `stall`: the response body is never answered (Sluice's message timeout).
//!
//! When its stdin is a pipe (as Sluice starts helpers), it exits at the pipe's end-of-file:
//! with Sluice, even a `SIGKILL`ed one.

use sluice_extproc::pb::envoy::config::core::v3::{
    header_value_option::HeaderAppendAction, HeaderValue, HeaderValueOption,
};
use sluice_extproc::pb::envoy::r#type::v3::HttpStatus;
use sluice_extproc::pb::envoy::service::ext_proc::v3::external_processor_server::{
    ExternalProcessor, ExternalProcessorServer,
};
use sluice_extproc::pb::envoy::service::ext_proc::v3::{
    body_mutation, common_response::ResponseStatus, processing_request, processing_response, BodyMutation,
    BodyResponse, CommonResponse, HeaderMutation, HeadersResponse, HttpBody, HttpHeaders, ImmediateResponse,
    ProcessingRequest, ProcessingResponse,
};
use std::pin::Pin;
use std::time::{Duration, Instant};
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

fn set(key: &str, value: &str, action: HeaderAppendAction) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue { key: key.into(), value: String::new(), raw_value: value.as_bytes().to_vec() }),
        append: None,
        append_action: action as i32,
        keep_empty_value: false,
    }
}

/// An appending set. `append_action` 0 (APPEND_IF_EXISTS_OR_ADD) is also the proto default,
/// which Envoy reads as "not set" and then falls back to `append`, whose default for ext_proc is
/// false (replace): so appending takes `append: true`.
fn append(key: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption { append: Some(true), ..set(key, value, HeaderAppendAction::AppendIfExistsOrAdd) }
}

fn header<'a>(headers: &'a HttpHeaders, key: &str) -> Option<&'a str> {
    let map = headers.headers.as_ref()?;
    let entry = map.headers.iter().find(|h| h.key == key)?;
    let raw = if entry.raw_value.is_empty() { entry.value.as_bytes() } else { &entry.raw_value };
    std::str::from_utf8(raw).ok()
}

fn headers_answer(mutation: HeaderMutation) -> HeadersResponse {
    HeadersResponse { response: Some(CommonResponse { header_mutation: Some(mutation), ..Default::default() }) }
}

fn immediate(code: i32, tag: &str, body: &str, details: &str) -> processing_response::Response {
    processing_response::Response::ImmediateResponse(ImmediateResponse {
        status: Some(HttpStatus { code }),
        headers: Some(HeaderMutation {
            set_headers: vec![set("x-extproc-demo", tag, HeaderAppendAction::OverwriteIfExistsOrAdd)],
            remove_headers: vec![],
        }),
        body: body.as_bytes().to_vec(),
        grpc_status: None,
        details: details.into(),
    })
}

async fn on_request(headers: &HttpHeaders) -> processing_response::Response {
    if header(headers, "x-demo-crash").is_some() {
        eprintln!("sluice-extproc-demo: asked to crash");
        std::process::exit(3);
    }
    if let Some(file) = header(headers, "x-demo-hold") {
        hold(file).await;
    }
    if header(headers, ":path").is_some_and(|p| p.starts_with("/blocked")) {
        return immediate(403, "immediate", "blocked by sluice-extproc-demo\n", "demo-blocked");
    }
    let mut mutation = HeaderMutation {
        set_headers: vec![
            set("x-extproc-demo", "request", HeaderAppendAction::OverwriteIfExistsOrAdd),
            append("x-extproc-trace", "demo"),
        ],
        remove_headers: vec!["x-demo-remove".into()],
    };
    if let Some(path) = header(headers, "x-demo-rewrite") {
        mutation.set_headers.push(set(":path", path, HeaderAppendAction::OverwriteIfExistsOrAdd));
    }
    processing_response::Response::RequestHeaders(headers_answer(mutation))
}

async fn hold(file: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::path::Path::new(file).exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn on_response(headers: &HttpHeaders, body: Option<&str>) -> processing_response::Response {
    if let Some(file) = header(headers, "x-demo-hold") {
        hold(file).await;
    }
    if header(headers, "x-demo-replace").is_some() {
        return immediate(451, "replaced", "replaced by sluice-extproc-demo\n", "demo-replaced");
    }
    let mut mutation = HeaderMutation {
        set_headers: vec![
            set("x-extproc-demo", "response", HeaderAppendAction::OverwriteIfExistsOrAdd),
            set("x-extproc-demo-pid", &std::process::id().to_string(), HeaderAppendAction::OverwriteIfExistsOrAdd),
        ],
        remove_headers: vec!["x-origin-secret".into()],
    };
    let asked = header(headers, "x-demo-set").unwrap_or_default();
    for (name, value) in asked.split(';').filter_map(|field| field.trim().split_once('=')) {
        mutation.set_headers.push(set(name, value, HeaderAppendAction::OverwriteIfExistsOrAdd));
    }
    let mut answer = headers_answer(mutation);
    if body == Some("early") {
        if let Some(common) = answer.response.as_mut() {
            common.status = ResponseStatus::ContinueAndReplace as i32;
            common.body_mutation = Some(replace_body(b"replaced early\n".to_vec()));
        }
    }
    processing_response::Response::ResponseHeaders(answer)
}

fn replace_body(body: Vec<u8>) -> BodyMutation {
    BodyMutation { mutation: Some(body_mutation::Mutation::Body(body)) }
}

/// The answer to a request body, as the request's `x-demo-body` (`body`) says.
fn on_request_body(message: &HttpBody, body: Option<&str>) -> processing_response::Response {
    let body_mutation = (body == Some("upcase")).then(|| replace_body(message.body.to_ascii_uppercase()));
    processing_response::Response::RequestBody(BodyResponse {
        response: Some(CommonResponse { body_mutation, ..Default::default() }),
    })
}

/// The answer to a response body, as the request's `x-demo-body` (`body`) says.
fn on_response_body(message: &HttpBody, body: Option<&str>) -> processing_response::Response {
    let common = match body {
        Some("upcase") => CommonResponse {
            header_mutation: Some(HeaderMutation {
                set_headers: vec![set(
                    "x-extproc-body-bytes",
                    &message.body.len().to_string(),
                    HeaderAppendAction::OverwriteIfExistsOrAdd,
                )],
                remove_headers: vec![],
            }),
            body_mutation: Some(replace_body(message.body.to_ascii_uppercase())),
            ..Default::default()
        },
        Some("clear") => CommonResponse {
            body_mutation: Some(BodyMutation { mutation: Some(body_mutation::Mutation::ClearBody(true)) }),
            ..Default::default()
        },
        Some("immediate") => return immediate(403, "immediate", "blocked after its body\n", "demo-body-blocked"),
        _ => CommonResponse::default(),
    };
    processing_response::Response::ResponseBody(BodyResponse { response: Some(common) })
}

struct Demo;

#[tonic::async_trait]
impl ExternalProcessor for Demo {
    type ProcessStream = Pin<Box<dyn Stream<Item = Result<ProcessingResponse, Status>> + Send>>;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Self::ProcessStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            // The request's `x-demo-body`, for the bodies of the same transaction.
            let mut body: Option<String> = None;
            loop {
                let message = match inbound.message().await {
                    Ok(Some(message)) => message,
                    Ok(None) => break,
                    // A failed read (a message over the size limit, a broken stream) ends the
                    // stream with an error: a clean end would tell Sluice to go on without
                    // this processor, whatever its `on_unavailable` says.
                    Err(status) => {
                        eprintln!("sluice-extproc-demo: reading a message failed: {status}");
                        let _ = tx.send(Err(status)).await;
                        break;
                    }
                };
                if message.observability_mode {
                    continue;
                }
                let answer = match message.request {
                    Some(processing_request::Request::RequestHeaders(h)) => {
                        body = header(&h, "x-demo-body").map(str::to_owned);
                        on_request(&h).await
                    }
                    Some(processing_request::Request::ResponseHeaders(h)) => on_response(&h, body.as_deref()).await,
                    Some(processing_request::Request::RequestBody(b)) => on_request_body(&b, body.as_deref()),
                    Some(processing_request::Request::ResponseBody(_)) if body.as_deref() == Some("stall") => {
                        // Never answered: this stream waits for Sluice to give up on it.
                        std::future::pending::<()>().await;
                        break;
                    }
                    Some(processing_request::Request::ResponseBody(b)) => on_response_body(&b, body.as_deref()),
                    // Trailers are not asked for; answer "continue" anyway.
                    Some(processing_request::Request::RequestTrailers(_)) => {
                        processing_response::Response::RequestTrailers(Default::default())
                    }
                    Some(processing_request::Request::ResponseTrailers(_)) => {
                        processing_response::Response::ResponseTrailers(Default::default())
                    }
                    None => break,
                };
                if tx.send(Ok(ProcessingResponse { response: Some(answer) })).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut socket = std::env::var_os("SLUICE_EXTPROC_SOCKET").map(std::path::PathBuf::from);
    // gRPC's default limit is 4 MiB; Sluice sends bodies up to its `max_body_bytes`.
    let mut max_message: usize =
        std::env::var("SLUICE_EXTPROC_MAX_MESSAGE_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(4 << 20);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--socket" => socket = args.next().map(Into::into),
            "--max-message-bytes" => {
                max_message = args.next().and_then(|v| v.parse().ok()).ok_or("--max-message-bytes needs a number")?;
            }
            "-h" | "--help" => {
                println!(
                    "usage: sluice-extproc-demo [--socket PATH] [--max-message-bytes N]   \
                     (defaults: $SLUICE_EXTPROC_SOCKET, $SLUICE_EXTPROC_MAX_MESSAGE_BYTES or 4 MiB)"
                );
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let socket = socket.ok_or("no socket: pass --socket PATH or set SLUICE_EXTPROC_SOCKET")?;
    exit_with_the_parent();
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket)?;
    eprintln!("sluice-extproc-demo: pid {} serving on {}", std::process::id(), socket.display());
    tonic::transport::Server::builder()
        .add_service(
            ExternalProcessorServer::new(Demo)
                .max_decoding_message_size(max_message)
                .max_encoding_message_size(max_message),
        )
        .serve_with_incoming(UnixListenerStream::new(listener))
        .await?;
    Ok(())
}

/// When stdin is a pipe, exits (status 0) once it reaches end-of-file: the writer, the Sluice
/// that started this helper, is gone. Anything else on stdin (a terminal, `/dev/null`) is
/// left alone.
fn exit_with_the_parent() {
    use std::os::unix::fs::FileTypeExt;
    let piped = std::fs::metadata("/proc/self/fd/0").is_ok_and(|m| m.file_type().is_fifo());
    if piped {
        std::thread::spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            std::process::exit(0);
        });
    }
}
