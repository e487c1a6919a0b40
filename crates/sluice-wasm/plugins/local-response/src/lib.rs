//! Answers requests for paths under `/blocked` itself with `403` (header
//! `x-blocked-by: wasm`, body `blocked by plugin`); lets everything else through.

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
        Some(Box::new(Gate))
    }
}

struct Gate;

impl Context for Gate {}

impl HttpContext for Gate {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        let path = self.get_http_request_header(":path").unwrap_or_default();
        if path.starts_with("/blocked") {
            self.send_http_response(403, vec![("x-blocked-by", "wasm")], Some(b"blocked by plugin"));
            return Action::Pause;
        }
        Action::Continue
    }
}
