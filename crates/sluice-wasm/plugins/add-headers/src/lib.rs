//! Adds four response headers to every response (the "add four headers" benchmark plugin).

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

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
        Some(Box::new(AddHeaders))
    }
}

struct AddHeaders;

impl Context for AddHeaders {}

impl HttpContext for AddHeaders {
    fn on_http_response_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        self.add_http_response_header("x-wasm-1", "one");
        self.add_http_response_header("x-wasm-2", "two");
        self.add_http_response_header("x-wasm-3", "three");
        self.add_http_response_header("x-wasm-4", "four");
        Action::Continue
    }
}
