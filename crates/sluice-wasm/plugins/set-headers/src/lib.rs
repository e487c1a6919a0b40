//! Sets the response fields its plugin configuration lists, `name=value; name=value`, in
//! `on_http_response_headers`, one `proxy_replace_header_map_value` each; with a
//! configuration starting `all:`, reads the whole map, adds the fields and writes the map back
//! (`proxy_set_header_map_pairs`). A careless or hostile plugin setting framing fields
//! (`content-length`, `transfer-encoding`, `connection`): the host keeps its own.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::rc::Rc;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root::default()) });
}}

/// The fields to set, and whether to write them back with the whole map.
#[derive(Default)]
struct Fields {
    pairs: Vec<(String, String)>,
    whole_map: bool,
}

#[derive(Default)]
struct Root {
    fields: Rc<Fields>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let config = self.get_plugin_configuration().unwrap_or_default();
        let config = String::from_utf8_lossy(&config);
        let (whole_map, list) = match config.strip_prefix("all:") {
            Some(list) => (true, list),
            None => (false, &config[..]),
        };
        let pairs = list
            .split(';')
            .filter_map(|field| field.trim().split_once('='))
            .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
            .collect();
        self.fields = Rc::new(Fields { pairs, whole_map });
        true
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(SetHeaders(Rc::clone(&self.fields))))
    }
}

struct SetHeaders(Rc<Fields>);

impl Context for SetHeaders {}

impl HttpContext for SetHeaders {
    fn on_http_response_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        if self.0.whole_map {
            let mut map = self.get_http_response_headers();
            map.extend(self.0.pairs.iter().cloned());
            let map = map.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
            self.set_http_response_headers(map);
        } else {
            for (name, value) in &self.0.pairs {
                self.set_http_response_header(name, Some(value));
            }
        }
        Action::Continue
    }
}
