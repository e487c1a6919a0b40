//! Calls host functions with bad arguments, as a hostile plugin would: pointers past the end
//! of memory, negative lengths, malformed maps, unknown enum values. On every request it logs
//! `hostile NAME=STATUS ...` with the status each call returned, so a test can check the host
//! refused each one cleanly (and kept running). It also logs `bounds NAME=STATUS ...` for
//! calls past the host's size limits (local responses with statuses outside 200-599, long
//! shared-data keys, metric, queue and property names, an item larger than a queue), and
//! `late CALLBACK=STATUS` for a local response asked for in `proxy_on_done` and
//! `proxy_on_log`.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_log(level: u32, data: *const u8, size: usize) -> u32;
    fn proxy_get_header_map_value(
        map: u32,
        key: *const u8,
        key_size: usize,
        ret: *mut *mut u8,
        ret_size: *mut usize,
    ) -> u32;
    fn proxy_add_header_map_value(
        map: u32,
        key: *const u8,
        key_size: usize,
        value: *const u8,
        value_size: usize,
    ) -> u32;
    fn proxy_set_header_map_pairs(map: u32, data: *const u8, size: usize) -> u32;
    fn proxy_get_buffer_bytes(kind: u32, start: usize, max: usize, ret: *mut *mut u8, ret_size: *mut usize) -> u32;
    fn proxy_set_buffer_bytes(kind: u32, start: usize, size: usize, data: *const u8, data_size: usize) -> u32;
    fn proxy_get_property(path: *const u8, path_size: usize, ret: *mut *mut u8, ret_size: *mut usize) -> u32;
    fn proxy_send_local_response(
        status: u32,
        details: *const u8,
        details_size: usize,
        body: *const u8,
        body_size: usize,
        headers: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
    fn proxy_call_foreign_function(
        name: *const u8,
        name_size: usize,
        args: *const u8,
        args_size: usize,
        ret: *mut *mut u8,
        ret_size: *mut usize,
    ) -> u32;
    fn proxy_get_current_time_nanoseconds(ret: *mut u64) -> u32;
    fn proxy_set_shared_data(key: *const u8, key_size: usize, value: *const u8, value_size: usize, cas: u32) -> u32;
    fn proxy_define_metric(kind: u32, name: *const u8, name_size: usize, ret_id: *mut u32) -> u32;
    fn proxy_register_shared_queue(name: *const u8, name_size: usize, ret_id: *mut u32) -> u32;
    fn proxy_enqueue_shared_queue(id: u32, value: *const u8, value_size: usize) -> u32;
    fn proxy_set_property(path: *const u8, path_size: usize, value: *const u8, value_size: usize) -> u32;
}

/// Longer than any key, name or path the host takes; and one byte more than a queue holds.
const LONG: usize = 5000;
const PAST_A_QUEUE: usize = (16 << 20) + 1;

/// `proxy_send_local_response` with `status` and nothing else.
fn local_response(status: u32) -> u32 {
    unsafe { proxy_send_local_response(status, far(), 0, far(), 0, far(), 0, 0) }
}

#[link(wasm_import_module = "wasi_snapshot_preview1")]
extern "C" {
    fn fd_write(fd: u32, iovs: *const u32, iovs_len: usize, written: *mut usize) -> u32;
}

/// An address far past the end of any plugin memory.
const FAR: usize = 0xFFFF_FF00;

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Hostile))
    }
}

struct Hostile;

fn far<T>() -> *mut T {
    FAR as *mut T
}

impl HttpContext for Hostile {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        let key = b"host";
        let mut ptr: *mut u8 = std::ptr::null_mut();
        let mut len: usize = 0;
        let bad_map = [0xff_u8, 0xff, 0xff, 0x7f, 1, 2, 3];
        let iov: [u32; 2] = [FAR as u32, 64];
        let mut written: usize = 0;
        let results = unsafe {
            [
                ("log_far", proxy_log(2, far(), 16)),
                ("log_negative", proxy_log(2, key.as_ptr(), usize::MAX)),
                ("get_value_far_key", proxy_get_header_map_value(0, far(), 4, &mut ptr, &mut len)),
                ("get_value_far_return", proxy_get_header_map_value(0, key.as_ptr(), key.len(), far(), far())),
                ("get_value_bad_map", proxy_get_header_map_value(77, key.as_ptr(), key.len(), &mut ptr, &mut len)),
                ("add_bad_name", proxy_add_header_map_value(0, b"a b".as_ptr(), 3, b"v".as_ptr(), 1)),
                ("add_far_value", proxy_add_header_map_value(0, key.as_ptr(), key.len(), far(), 8)),
                ("add_response_header_now", proxy_add_header_map_value(2, key.as_ptr(), key.len(), key.as_ptr(), 1)),
                ("set_pairs_malformed", proxy_set_header_map_pairs(0, bad_map.as_ptr(), bad_map.len())),
                ("get_buffer_unknown", proxy_get_buffer_bytes(99, 0, 10, &mut ptr, &mut len)),
                ("set_buffer_no_body", proxy_set_buffer_bytes(1, 0, 0, b"x".as_ptr(), 1)),
                ("property_far", proxy_get_property(far(), 8, &mut ptr, &mut len)),
                ("local_response_bad_status", proxy_send_local_response(7, far(), 0, far(), 0, far(), 0, 0)),
                ("foreign_far_name", proxy_call_foreign_function(far(), 12, far(), 0, &mut ptr, &mut len)),
                ("time_far", proxy_get_current_time_nanoseconds(far())),
                ("fd_write_far_iov", fd_write(1, iov.as_ptr(), 1, &mut written)),
                ("fd_write_far_list", fd_write(1, far(), 4, &mut written)),
            ]
        };
        let line: Vec<String> = results.iter().map(|(name, status)| format!("{name}={status}")).collect();
        log::info!("hostile {}", line.join(" "));
        log::info!("bounds {}", bounds());
        Action::Continue
    }

    fn on_log(&mut self) {
        log::info!("late log={}", local_response(200));
    }
}

impl Context for Hostile {
    fn on_done(&mut self) -> bool {
        log::info!("late done={}", local_response(200));
        true
    }
}

/// The calls past the host's size limits, and their statuses.
fn bounds() -> String {
    let long = vec![b'x'; LONG];
    let mut id = 0u32;
    let results = unsafe {
        [
            ("local_response_101", local_response(101)),
            ("local_response_600", local_response(600)),
            ("shared_key_long", proxy_set_shared_data(long.as_ptr(), long.len(), b"v".as_ptr(), 1, 0)),
            ("metric_name_long", proxy_define_metric(0, long.as_ptr(), long.len(), &mut id)),
            ("queue_name_long", proxy_register_shared_queue(long.as_ptr(), long.len(), &mut id)),
            ("queue_register", proxy_register_shared_queue(b"hostile".as_ptr(), 7, &mut id)),
            ("queue_item_long", proxy_enqueue_shared_queue(id, far(), PAST_A_QUEUE)),
            ("property_path_long", proxy_set_property(long.as_ptr(), long.len(), b"v".as_ptr(), 1)),
        ]
    };
    let line: Vec<String> = results.iter().map(|(name, status)| format!("{name}={status}")).collect();
    line.join(" ")
}
