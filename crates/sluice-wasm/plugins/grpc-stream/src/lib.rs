//! Asks a gRPC health service through streams (`open_grpc_stream`, cluster `health`) from
//! its root context, and records what they deliver in shared data `events`
//! (`,`-separated), which a request with `x-read: 1` gets back. On its first tick (10 ms
//! after start) the root context opens three streams (metadata `x-asked-by: wasm`), sends
//! each the request for service `shop` and ends its side:
//! - `watch`: `grpc.health.v1.Health/Watch`, which answers with a message per change of
//!   status and does not end;
//! - `check`: `grpc.health.v1.Health/Check`, one message, then the end;
//! - `nope`: a method the service does not have.
//!
//! For a stream NAME it records `NAME-meta:<content-type>` for the initial metadata,
//! `NAME-status:N` per message, `NAME-trailers` for the trailing metadata, and
//! `NAME-close:CODE:MESSAGE` at the end (`get_grpc_status`). A request with
//! `x-cancel-watch: 1` cancels the watch and answers `ok`, or the status.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::time::Duration;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Asker { streams: Vec::new() }) });
}}

struct Asker {
    /// Open streams: token and name.
    streams: Vec<(u32, &'static str)>,
}

/// Appends `event` to shared data `events`.
fn record(context: &dyn Context, event: &str) {
    loop {
        let (current, cas) = context.get_shared_data("events");
        let mut events = current.unwrap_or_default();
        if !events.is_empty() {
            events.push(b',');
        }
        events.extend_from_slice(event.as_bytes());
        if context.set_shared_data("events", Some(&events), cas).is_ok() {
            return;
        }
    }
}

impl Asker {
    fn name(&self, token: u32) -> &'static str {
        self.streams.iter().find(|(t, _)| *t == token).map_or("unknown", |(_, name)| name)
    }

    fn open(&mut self, name: &'static str, method: &str) {
        let metadata = vec![("x-asked-by", &b"wasm"[..])];
        let Ok(token) = self.open_grpc_stream("health", "grpc.health.v1.Health", method, metadata) else {
            record(self, &format!("{name}-open-failed"));
            return;
        };
        // HealthCheckRequest { service: "shop" }, then the end of this side.
        self.send_grpc_stream_message(token, Some(b"\x0a\x04shop"), true);
        self.streams.push((token, name));
        if name == "watch" {
            let _ = self.set_shared_data("watch-token", Some(token.to_string().as_bytes()), None);
        }
    }
}

impl Context for Asker {
    fn on_grpc_stream_initial_metadata(&mut self, token: u32, _count: u32) {
        let content_type = self.get_grpc_stream_initial_metadata_value("content-type").unwrap_or_default();
        record(self, &format!("{}-meta:{}", self.name(token), String::from_utf8_lossy(&content_type)));
    }

    fn on_grpc_stream_message(&mut self, token: u32, size: usize) {
        let message = self.get_grpc_stream_message(0, size).unwrap_or_default();
        // HealthCheckResponse { status = 1 }: 0x08 and the status.
        let status = message.get(1).copied().unwrap_or(0);
        record(self, &format!("{}-status:{status}", self.name(token)));
    }

    fn on_grpc_stream_trailing_metadata(&mut self, token: u32, _count: u32) {
        record(self, &format!("{}-trailers", self.name(token)));
    }

    fn on_grpc_stream_close(&mut self, token: u32, status: u32) {
        let message = self.get_grpc_status().1.unwrap_or_default();
        record(self, &format!("{}-close:{status}:{message}", self.name(token)));
    }
}

impl RootContext for Asker {
    fn on_vm_start(&mut self, _vm_configuration_size: usize) -> bool {
        self.set_tick_period(Duration::from_millis(10));
        true
    }

    fn on_tick(&mut self) {
        if self.streams.is_empty() {
            self.set_tick_period(Duration::from_secs(3600));
            self.open("watch", "Watch");
            self.open("check", "Check");
            self.open("nope", "Nope");
        }
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Reader))
    }
}

struct Reader;

impl Context for Reader {}

impl HttpContext for Reader {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        let body = if self.get_http_request_header("x-read").is_some() {
            self.get_shared_data("events").0.unwrap_or_default()
        } else if self.get_http_request_header("x-cancel-watch").is_some() {
            let token = self.get_shared_data("watch-token").0.unwrap_or_default();
            let token = String::from_utf8_lossy(&token).parse().unwrap_or(0);
            match proxy_wasm::hostcalls::cancel_grpc_stream(token) {
                Ok(()) => b"ok".to_vec(),
                Err(status) => format!("{status:?}").into_bytes(),
            }
        } else {
            return Action::Continue;
        };
        self.send_http_response(200, vec![], Some(&body));
        Action::Pause
    }
}
