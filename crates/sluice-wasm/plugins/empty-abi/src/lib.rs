//! Every Proxy-Wasm 0.2.1 HTTP callback, written against the ABI directly and empty: the
//! "empty callbacks" benchmark plugin without an SDK. The `empty` plugin does the same through
//! the `proxy-wasm` SDK, whose dispatcher adds its own work to every callback (a `HashMap`
//! lookup of the context, with SipHash, and a boxed trait call); the difference between the
//! two is the SDK's share, the rest is the host's (docs/benchmarks.md, "Module overhead").

/// The ABI version this plugin speaks.
#[no_mangle]
pub extern "C" fn proxy_abi_version_0_2_1() {}

/// Host-to-plugin copies land in memory the plugin allocates.
#[no_mangle]
pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
    let mut buffer = Vec::<u8>::with_capacity(size);
    let pointer = buffer.as_mut_ptr();
    std::mem::forget(buffer);
    pointer
}

#[no_mangle]
pub extern "C" fn proxy_on_vm_start(_root_context_id: u32, _vm_configuration_size: usize) -> bool {
    true
}

#[no_mangle]
pub extern "C" fn proxy_on_configure(_root_context_id: u32, _plugin_configuration_size: usize) -> bool {
    true
}

#[no_mangle]
pub extern "C" fn proxy_on_context_create(_context_id: u32, _root_context_id: u32) {}

/// `Action::Continue`.
const CONTINUE: u32 = 0;

#[no_mangle]
pub extern "C" fn proxy_on_request_headers(_context_id: u32, _num_headers: usize, _end_of_stream: bool) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn proxy_on_request_body(_context_id: u32, _body_size: usize, _end_of_stream: bool) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn proxy_on_request_trailers(_context_id: u32, _num_trailers: usize) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn proxy_on_response_headers(_context_id: u32, _num_headers: usize, _end_of_stream: bool) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn proxy_on_response_body(_context_id: u32, _body_size: usize, _end_of_stream: bool) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn proxy_on_response_trailers(_context_id: u32, _num_trailers: usize) -> u32 {
    CONTINUE
}

/// True: the context is done at once (nothing pending).
#[no_mangle]
pub extern "C" fn proxy_on_done(_context_id: u32) -> bool {
    true
}

#[no_mangle]
pub extern "C" fn proxy_on_log(_context_id: u32) {}

#[no_mangle]
pub extern "C" fn proxy_on_delete(_context_id: u32) {}

#[no_mangle]
pub extern "C" fn proxy_on_tick(_root_context_id: u32) {}
