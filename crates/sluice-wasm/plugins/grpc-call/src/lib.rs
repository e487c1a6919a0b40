//! Asks a gRPC health service (`grpc.health.v1.Health/Check`, cluster `health`) before
//! letting requests through, with `dispatch_grpc_call`:
//! - a request with `x-check: SERVICE` waits for that service's health (metadata
//!   `x-asked-by: wasm`, timeout `x-timeout-ms` or 5 s); the answer's status (`1` serving,
//!   `2` not serving) goes on to the origin as `x-health`;
//! - a call that fails answers `503` with `grpc CODE: MESSAGE` (`get_grpc_status`);
//! - with `x-cancel: 1` too, the call is cancelled at once and the request goes on with
//!   `x-cancelled: ok`;
//! - a call that cannot be made answers `500` with `call failed: STATUS`.
//!
//! The protobuf messages are encoded by hand: `HealthCheckRequest { string service = 1; }`
//! and `HealthCheckResponse { ServingStatus status = 1; }`.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::time::Duration;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Checker))
    }
}

struct Checker;

/// `HealthCheckRequest { service }`.
fn health_check_request(service: &str) -> Vec<u8> {
    let mut message = vec![0x0a, service.len() as u8];
    message.extend_from_slice(service.as_bytes());
    message
}

/// The status of a `HealthCheckResponse` (0, unknown, when absent).
fn serving_status(message: &[u8]) -> u8 {
    match message {
        [0x08, status, ..] => *status,
        _ => 0,
    }
}

impl Context for Checker {
    fn on_grpc_call_response(&mut self, _token: u32, status_code: u32, response_size: usize) {
        if status_code != 0 {
            let (code, message) = proxy_wasm::hostcalls::get_grpc_status().unwrap_or((status_code, None));
            let body = format!("grpc {code}: {}", message.unwrap_or_default());
            self.send_http_response(503, vec![], Some(body.as_bytes()));
            return;
        }
        let answer = self.get_grpc_call_response_body(0, response_size).unwrap_or_default();
        self.set_http_request_header("x-health", Some(&serving_status(&answer).to_string()));
        self.resume_http_request();
    }
}

impl HttpContext for Checker {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        let Some(service) = self.get_http_request_header("x-check") else { return Action::Continue };
        let message = health_check_request(&service);
        let metadata = vec![("x-asked-by", &b"wasm"[..])];
        let millis = self.get_http_request_header("x-timeout-ms").and_then(|ms| ms.parse().ok()).unwrap_or(5000);
        let timeout = Duration::from_millis(millis);
        match self.dispatch_grpc_call("health", "grpc.health.v1.Health", "Check", metadata, Some(&message), timeout) {
            Ok(token) if self.get_http_request_header("x-cancel").is_some() => {
                let cancelled = match proxy_wasm::hostcalls::cancel_grpc_call(token) {
                    Ok(()) => "ok".to_string(),
                    Err(status) => format!("{status:?}"),
                };
                self.set_http_request_header("x-cancelled", Some(&cancelled));
                Action::Continue
            }
            Ok(_) => Action::Pause,
            Err(status) => {
                self.send_http_response(500, vec![], Some(format!("call failed: {status:?}").as_bytes()));
                Action::Pause
            }
        }
    }
}
