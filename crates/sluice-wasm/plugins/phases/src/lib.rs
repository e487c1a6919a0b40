//! Records every callback it gets, with its arguments and a few properties, through
//! `proxy_log` (level info), so a test can check the host's phase mapping. One line per
//! callback, `ctx=ID EVENT key=value ...`; done, log and delete show what they can read of the
//! kept heads (request `:path` and `x-in`, response `:status` and property `response.code`).
//!
//! It also edits what it sees, so a test can check the edits land: it adds `x-phase-req: 1`
//! to the request, `x-phase-resp: 1` to the response, and rewrites a request with header
//! `x-rewrite-path: P` to path P. A request with `x-pause-headers: 1` makes it return
//! `Pause` from `on_http_response_headers` (asks the host to buffer the body). The plugin
//! configuration `reject` makes `on_configure` fail.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|id| -> Box<dyn RootContext> { Box::new(Root { id }) });
}}

fn prop(ctx: &dyn Context, path: &[&str]) -> String {
    match ctx.get_property(path.to_vec()) {
        Some(bytes) if bytes.len() == 8 && path == ["response", "code"] => {
            let mut le = [0u8; 8];
            le.copy_from_slice(&bytes);
            u64::from_le_bytes(le).to_string()
        }
        Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        None => "-".to_string(),
    }
}

struct Root {
    id: u32,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_vm_start(&mut self, _size: usize) -> bool {
        let config = self.get_vm_configuration().unwrap_or_default();
        let now = self.get_current_time().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        log::info!("ctx={} vm_start config={} now={}", self.id, String::from_utf8_lossy(&config), now);
        true
    }

    fn on_configure(&mut self, _size: usize) -> bool {
        let config = self.get_plugin_configuration().unwrap_or_default();
        log::info!("ctx={} configure config={}", self.id, String::from_utf8_lossy(&config));
        config != b"reject"
    }

    fn on_tick(&mut self) {
        log::info!("ctx={} tick", self.id);
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        log::info!("ctx={} create root={}", context_id, self.id);
        Some(Box::new(Recorder { id: context_id, pause_headers: false }))
    }
}

struct Recorder {
    id: u32,
    pause_headers: bool,
}

impl Recorder {
    /// What done, log and delete see of the heads: the request path and `x-in` header, the
    /// response status (header and property).
    fn heads(&self) -> String {
        format!(
            "path={} x-in={} status={} code={}",
            self.get_http_request_header(":path").unwrap_or_default(),
            self.get_http_request_header("x-in").unwrap_or_default(),
            self.get_http_response_header(":status").unwrap_or_default(),
            prop(self, &["response", "code"]),
        )
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        log::info!("ctx={} delete {}", self.id, self.heads());
    }
}

impl Context for Recorder {
    fn on_done(&mut self) -> bool {
        log::info!("ctx={} done {}", self.id, self.heads());
        true
    }
}

impl HttpContext for Recorder {
    fn on_http_request_headers(&mut self, num_headers: usize, end_of_stream: bool) -> Action {
        let path = self.get_http_request_header(":path").unwrap_or_default();
        let method = self.get_http_request_header(":method").unwrap_or_default();
        let authority = self.get_http_request_header(":authority").unwrap_or_default();
        log::info!(
            "ctx={} request_headers n={} eos={} method={} path={} authority={} prop_path={} prop_method={} prop_host={} source={} plugin={} txn={}",
            self.id,
            num_headers,
            end_of_stream,
            method,
            path,
            authority,
            prop(self, &["request", "path"]),
            prop(self, &["request", "method"]),
            prop(self, &["request", "host"]),
            prop(self, &["source", "address"]),
            prop(self, &["plugin_name"]),
            prop(self, &["sluice", "txn_id"]),
        );
        self.pause_headers = self.get_http_request_header("x-pause-headers").is_some();
        if let Some(new_path) = self.get_http_request_header("x-rewrite-path") {
            self.set_http_request_header(":path", Some(&new_path));
        }
        self.add_http_request_header("x-phase-req", "1");
        self.set_property(vec!["test", "marker"], Some(format!("m{}", self.id).as_bytes()));
        Action::Continue
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let body = self.get_http_request_body(0, body_size).unwrap_or_default();
        log::info!(
            "ctx={} request_body size={} eos={} data={} path={}",
            self.id,
            body_size,
            end_of_stream,
            String::from_utf8_lossy(&body),
            self.get_http_request_header(":path").unwrap_or_default()
        );
        Action::Continue
    }

    fn on_http_response_headers(&mut self, num_headers: usize, end_of_stream: bool) -> Action {
        let status = self.get_http_response_header(":status").unwrap_or_default();
        let request_path = self.get_http_request_header(":path").unwrap_or_default();
        log::info!(
            "ctx={} response_headers n={} eos={} status={} code={} request_path={} marker={}",
            self.id,
            num_headers,
            end_of_stream,
            status,
            prop(self, &["response", "code"]),
            request_path,
            prop(self, &["test", "marker"])
        );
        self.add_http_response_header("x-phase-resp", "1");
        if self.pause_headers {
            return Action::Pause;
        }
        Action::Continue
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let body = self.get_http_response_body(0, body_size).unwrap_or_default();
        log::info!(
            "ctx={} response_body size={} eos={} data={} status={} added={}",
            self.id,
            body_size,
            end_of_stream,
            String::from_utf8_lossy(&body),
            self.get_http_response_header(":status").unwrap_or_default(),
            self.get_http_response_header("x-phase-resp").unwrap_or_default()
        );
        Action::Continue
    }

    fn on_log(&mut self) {
        log::info!("ctx={} log {}", self.id, self.heads());
    }
}
