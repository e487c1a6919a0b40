//! Exercises Sluice's foreign functions (`proxy_call_foreign_function`).
//!
//! Request headers drive it:
//! - `x-call: NAME` (with optional `x-arg: ARG`): calls foreign function NAME and answers
//!   locally: `200` with the result as body and `x-result: ok`, or `500` with
//!   `x-result: err` and `x-status: N` (the ABI status).
//! - `x-done: 1`: calls `sluice.no_more_callbacks`; this plugin would otherwise add
//!   `x-after-done: yes` to the response.
//!
//! - `x-log: NAME=VALUE`: calls `sluice.log_field` with it, and again with `phase=log` from
//!   `proxy_on_log`; a refused field is logged (`log_field err N`) and the request goes on.
//!
//! - `x-shared: KEY`: increments the number in shared data under KEY (compare-and-swap) and
//!   answers `200` with the new value.
//!
//! Every request also increments the counter metric `foreign_requests`.
//!
//! Plugin configuration `tick=MS` sets a tick period; every tick calls
//! `sluice.cache_expire` for `http://tick.example/` and logs the result.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::hostcalls;
use proxy_wasm::types::{Action, ContextType, LogLevel, MetricType, Status};
use std::time::Duration;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let config = self.get_plugin_configuration().unwrap_or_default();
        let config = String::from_utf8_lossy(&config);
        if let Some(ms) = config.strip_prefix("tick=").and_then(|ms| ms.trim().parse::<u64>().ok()) {
            self.set_tick_period(Duration::from_millis(ms));
        }
        true
    }

    fn on_tick(&mut self) {
        match self.call_foreign_function("sluice.cache_expire", Some(b"http://tick.example/")) {
            Ok(result) => log::info!("tick expire ok {}", String::from_utf8_lossy(&result.unwrap_or_default())),
            Err(status) => log::info!("tick expire err {}", status as u32),
        }
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Caller { logs: false }))
    }
}

struct Caller {
    /// The request asked for log fields (`x-log`).
    logs: bool,
}

impl Context for Caller {}

/// Adds `field` (`NAME=VALUE`) to the access log line through `sluice.log_field`.
fn log_field(field: &str) {
    if let Err(status) = hostcalls::call_foreign_function("sluice.log_field", Some(field.as_bytes())) {
        log::info!("log_field err {}", status as u32);
    }
}

impl HttpContext for Caller {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        if let Ok(metric) = hostcalls::define_metric(MetricType::Counter, "foreign_requests") {
            let _ = hostcalls::increment_metric(metric, 1);
        }
        if let Some(key) = self.get_http_request_header("x-shared") {
            let value = loop {
                let (current, cas) = self.get_shared_data(&key);
                let count = current.and_then(|v| String::from_utf8(v).ok()).and_then(|v| v.parse::<u64>().ok());
                let next = (count.unwrap_or(0) + 1).to_string();
                match self.set_shared_data(&key, Some(next.as_bytes()), cas) {
                    Ok(()) => break next,
                    Err(Status::CasMismatch) => continue,
                    Err(status) => break format!("error {}", status as u32),
                }
            };
            self.send_http_response(200, vec![], Some(value.as_bytes()));
            return Action::Pause;
        }
        if let Some(field) = self.get_http_request_header("x-log") {
            log_field(&field);
            self.logs = true;
            return Action::Continue;
        }
        if self.get_http_request_header("x-done").is_some() {
            if let Err(status) = self.call_foreign_function("sluice.no_more_callbacks", None) {
                log::info!("no_more_callbacks err {}", status as u32);
            }
            return Action::Continue;
        }
        let Some(name) = self.get_http_request_header("x-call") else {
            return Action::Continue;
        };
        let arg = self.get_http_request_header("x-arg");
        match self.call_foreign_function(&name, arg.as_deref().map(str::as_bytes)) {
            Ok(result) => {
                let body = result.unwrap_or_default();
                self.send_http_response(200, vec![("x-result", "ok")], Some(&body));
            }
            Err(status) => {
                let code = (status as u32).to_string();
                self.send_http_response(500, vec![("x-result", "err"), ("x-status", &code)], None);
            }
        }
        Action::Pause
    }

    fn on_log(&mut self) {
        if self.logs {
            log_field("phase=log");
        }
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        self.add_http_response_header("x-after-done", "yes");
        Action::Continue
    }
}
