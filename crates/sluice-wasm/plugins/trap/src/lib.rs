//! Crashes on request: the `x-trap` request header picks how.
//!
//! - `panic`: a Rust panic (an `unreachable` trap in wasm).
//! - `unreachable`: the `unreachable` instruction directly.
//! - `oom`: allocates and touches memory until the host's memory limit stops it.
//! - `response`: a panic later, in `on_http_response_headers`.
//! - `log`: a panic at the end, in `on_log` (between `on_done` and `on_delete`).
//!
//! Without the header it counts the requests its instance served and adds
//! `x-served: N` to the request, so a test can tell a fresh instance from an old one.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::cell::Cell;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

thread_local! {
    static SERVED: Cell<u64> = const { Cell::new(0) };
}

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Crasher { later: false, in_log: false }))
    }
}

struct Crasher {
    later: bool,
    in_log: bool,
}

impl Context for Crasher {}

impl HttpContext for Crasher {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        match self.get_http_request_header("x-trap").as_deref() {
            Some("panic") => panic!("asked to panic"),
            Some("unreachable") => core::arch::wasm32::unreachable(),
            Some("oom") => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            Some("response") => self.later = true,
            Some("log") => self.in_log = true,
            _ => {}
        }
        let served = SERVED.with(|s| {
            s.set(s.get() + 1);
            s.get()
        });
        self.set_http_request_header("x-served", Some(&served.to_string()));
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        if self.later {
            panic!("asked to panic in the response");
        }
        Action::Continue
    }

    fn on_log(&mut self) {
        if self.in_log {
            panic!("asked to panic in the log");
        }
    }
}
