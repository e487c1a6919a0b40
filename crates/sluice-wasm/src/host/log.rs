//! `proxy_log`, `proxy_get_log_level`.

use super::{memory_and_state, status, HostState};
use crate::abi::{LogLevel, Status};
use crate::memory;
use wasmtime::{Caller, Linker};

/// Longest log message kept; longer ones are cut.
const MAX_MESSAGE: usize = 8 << 10;

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_log", |mut caller: Caller<'_, HostState>, level: i32, ptr: i32, len: i32| {
        let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
        status((|| {
            let level = LogLevel::from_guest(level);
            if level < state.shared.log_level {
                return Ok(Status::Ok);
            }
            let message = memory::slice(mem, ptr, len)?;
            let message = &message[..message.len().min(MAX_MESSAGE)];
            state.shared.log(level, &String::from_utf8_lossy(message));
            Ok(Status::Ok)
        })())
    })?;
    linker.func_wrap("env", "proxy_get_log_level", |mut caller: Caller<'_, HostState>, ret: i32| {
        let Some((mem, state)) = memory_and_state(&mut caller) else { return Status::InternalFailure.code() };
        let level = state.shared.log_level as u32;
        status(memory::write_u32(mem, ret, level).map(|()| Status::Ok))
    })?;
    Ok(())
}
