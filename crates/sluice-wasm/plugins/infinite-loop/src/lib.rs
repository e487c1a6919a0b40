//! Loops forever in `on_http_request_headers` when the request has an `x-loop` header (the
//! host's per-callback deadline must stop it); otherwise it adds `x-looped: no` to the
//! request and continues. The plugin configuration `configure` makes it loop in
//! `on_configure` instead, `tick` in `on_tick` (with a 10 ms tick period).

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

struct Root;

impl Context for Root {}

fn spin() -> ! {
    let mut spins: u64 = 0;
    loop {
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        match self.get_plugin_configuration().as_deref() {
            Some(b"configure") => spin(),
            Some(b"tick") => self.set_tick_period(std::time::Duration::from_millis(10)),
            _ => {}
        }
        true
    }

    fn on_tick(&mut self) {
        spin()
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Looper))
    }
}

struct Looper;

impl Context for Looper {}

impl HttpContext for Looper {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        if self.get_http_request_header("x-loop").is_some() {
            spin()
        }
        self.set_http_request_header("x-looped", Some("no"));
        Action::Continue
    }
}
