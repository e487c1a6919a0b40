//! Passes values from requests to a root context through shared queues:
//! - each instance's root context registers queues `events` and `parked` when it starts (the
//!   last to register owns them); told of new `events` (`on_queue_ready`), it takes one item
//!   per notice and appends it to shared data `received` (`,`-separated); it leaves
//!   `parked` alone;
//! - a request with `x-enqueue: VALUE` enqueues VALUE on `events`, `x-park: VALUE` on
//!   `parked`, `x-enqueue-to: NAME` on queue NAME (`404` when there is none); each queue is
//!   resolved by name under the VM id in `x-vm`, or this plugin's own (`plugin_vm_id`);
//! - `x-unpark: 1` answers `200` with the item it dequeues from `parked`, `204` when empty;
//! - `x-read: 1` answers with `received`;
//! - with `x-plugin: NAME`, only the plugin whose VM id is NAME acts on the request.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root { events: 0 }) });
}}

struct Root {
    events: u32,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_vm_start(&mut self, _vm_configuration_size: usize) -> bool {
        self.events = self.register_shared_queue("events");
        self.register_shared_queue("parked");
        true
    }

    fn on_queue_ready(&mut self, queue_id: u32) {
        if queue_id != self.events {
            return;
        }
        let Ok(Some(item)) = self.dequeue_shared_queue(queue_id) else { return };
        // Only this context writes `received`; the CAS still guards against a lost update.
        loop {
            let (current, cas) = self.get_shared_data("received");
            let mut received = current.unwrap_or_default();
            if !received.is_empty() {
                received.push(b',');
            }
            received.extend_from_slice(&item);
            if self.set_shared_data("received", Some(&received), cas).is_ok() {
                return;
            }
        }
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Requester))
    }
}

struct Requester;

impl Requester {
    /// This plugin's VM id.
    fn vm_id(&self) -> String {
        String::from_utf8_lossy(&self.get_property(vec!["plugin_vm_id"]).unwrap_or_default()).into_owned()
    }

    /// Queue `name` of the VM in `x-vm`, or of this plugin.
    fn queue(&self, name: &str) -> Option<u32> {
        let vm_id = self.get_http_request_header("x-vm").unwrap_or_else(|| self.vm_id());
        self.resolve_shared_queue(&vm_id, name)
    }

    fn answer(&self, status: u32, body: &[u8]) -> Action {
        self.send_http_response(status, vec![], Some(body));
        Action::Pause
    }
}

impl Context for Requester {}

impl HttpContext for Requester {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        let header = |name: &str| self.get_http_request_header(name);
        if header("x-plugin").is_some_and(|plugin| plugin != self.vm_id()) {
            return Action::Continue;
        }
        let target = match (header("x-enqueue"), header("x-park"), header("x-enqueue-to")) {
            (Some(value), _, _) => Some(("events".to_string(), value)),
            (_, Some(value), _) => Some(("parked".to_string(), value)),
            (_, _, Some(name)) => Some((name, "to a named queue".to_string())),
            _ => None,
        };
        if let Some((name, value)) = target {
            let Some(id) = self.queue(&name) else { return self.answer(404, b"no such queue") };
            return match self.enqueue_shared_queue(id, Some(value.as_bytes())) {
                Ok(()) => self.answer(200, b"enqueued"),
                Err(status) => self.answer(500, format!("enqueue: {status:?}").as_bytes()),
            };
        }
        if header("x-unpark").is_some() {
            let id = self.queue("parked").unwrap_or_default();
            return match self.dequeue_shared_queue(id) {
                Ok(Some(item)) => self.answer(200, &item),
                Ok(None) => self.answer(204, b""),
                Err(status) => self.answer(500, format!("dequeue: {status:?}").as_bytes()),
            };
        }
        if header("x-read").is_some() {
            let received = self.get_shared_data("received").0.unwrap_or_default();
            return self.answer(200, &received);
        }
        Action::Continue
    }
}
