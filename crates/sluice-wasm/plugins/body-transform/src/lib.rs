//! Edits request and response bodies. The plugin configuration picks the mode:
//!
//! - `upper` (default): upper-cases every chunk as it streams, and appends `<!--wasm-->` to
//!   the end of the body (on the end-of-stream call).
//! - `copy`: reads every chunk and writes it back unchanged (the "copy every response body"
//!   benchmark plugin).
//! - `buffer`: pauses (StopIterationAndBuffer) until the whole body is there, then
//!   upper-cases it at once and appends `<!--wasm:N-->` with the number of calls it saw.
//! - `hold`: pauses until the whole body is there, then lets it through unchanged (as the
//!   Rust SDK's `http_body` example does with bodies it has nothing to redact): the length
//!   never changes, so no `edits_*_body` is needed.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root { mode: Mode::Upper }) });
}}

#[derive(Clone, Copy)]
enum Mode {
    Upper,
    Copy,
    Buffer,
    Hold,
}

struct Root {
    mode: Mode,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let config = self.get_plugin_configuration().unwrap_or_default();
        self.mode = match config.as_slice() {
            b"copy" => Mode::Copy,
            b"buffer" => Mode::Buffer,
            b"hold" => Mode::Hold,
            _ => Mode::Upper,
        };
        true
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Transform { mode: self.mode, calls: 0 }))
    }
}

struct Transform {
    mode: Mode,
    calls: usize,
}

/// Which body a call is about.
#[derive(Clone, Copy)]
enum Which {
    Request,
    Response,
}

impl Transform {
    fn get(&self, which: Which, size: usize) -> Vec<u8> {
        match which {
            Which::Request => self.get_http_request_body(0, size),
            Which::Response => self.get_http_response_body(0, size),
        }
        .unwrap_or_default()
    }

    fn set(&self, which: Which, start: usize, size: usize, value: &[u8]) {
        match which {
            Which::Request => self.set_http_request_body(start, size, value),
            Which::Response => self.set_http_response_body(start, size, value),
        }
    }

    fn on_body(&mut self, which: Which, body_size: usize, end_of_stream: bool) -> Action {
        self.calls += 1;
        match self.mode {
            Mode::Copy => {
                let body = self.get(which, body_size);
                self.set(which, 0, body.len(), &body);
                Action::Continue
            }
            Mode::Upper => {
                let body = self.get(which, body_size).to_ascii_uppercase();
                self.set(which, 0, body.len(), &body);
                if end_of_stream {
                    self.set(which, body.len(), 0, b"<!--wasm-->");
                }
                Action::Continue
            }
            Mode::Hold if !end_of_stream => Action::Pause,
            Mode::Hold => Action::Continue,
            Mode::Buffer => {
                if !end_of_stream {
                    return Action::Pause;
                }
                let mut body = self.get(which, body_size).to_ascii_uppercase();
                body.extend_from_slice(format!("<!--wasm:{}-->", self.calls).as_bytes());
                self.set(which, 0, body_size, &body);
                Action::Continue
            }
        }
    }
}

impl Context for Transform {}

impl HttpContext for Transform {
    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        self.on_body(Which::Request, body_size, end_of_stream)
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        self.on_body(Which::Response, body_size, end_of_stream)
    }
}
