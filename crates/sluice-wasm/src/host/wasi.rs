//! The few WASI (`wasi_snapshot_preview1`) calls a `wasm32-wasip1` plugin's standard library
//! imports, implemented here instead of pulling in `wasmtime-wasi` (a large dependency that
//! would also give plugins a file system and environment to sandbox).
//!
//! Plugins see no arguments, no environment, no files (every descriptor is `EBADF`, so the
//! standard library finds no pre-opened directories); stdout and stderr go to the plugin log
//! (info and warn); clocks and randomness are real; `proc_exit` ends the instance (a trap).
//! Other WASI calls trap when called (the linker defines unknown imports as traps).

use super::{memory_and_state, HostState};
use crate::abi::LogLevel;
use crate::memory;
use rand::RngCore;
use std::sync::OnceLock;
use std::time::Instant;
use wasmtime::{Caller, Linker};

const MODULE: &str = "wasi_snapshot_preview1";
const SUCCESS: i32 = 0;
const EBADF: i32 = 8;
const EFAULT: i32 = 21;
const EINVAL: i32 = 28;
const ENOSYS: i32 = 52;

/// Largest `random_get` request served at once.
const MAX_RANDOM: usize = 1 << 20;
/// Most stdout/stderr bytes passed to the log per `fd_write`.
const MAX_WRITE_LOG: usize = 8 << 10;

fn errno(result: Result<(), crate::abi::Status>) -> i32 {
    if result.is_ok() {
        SUCCESS
    } else {
        EFAULT
    }
}

pub(super) fn add(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(MODULE, "fd_write", fd_write)?;
    for name in ["fd_close", "fd_sync"] {
        linker.func_wrap(MODULE, name, |_: i32| EBADF)?;
    }
    for name in ["fd_fdstat_get", "fd_prestat_get", "fd_filestat_get"] {
        linker.func_wrap(MODULE, name, |_: i32, _: i32| EBADF)?;
    }
    linker.func_wrap(MODULE, "fd_prestat_dir_name", |_: i32, _: i32, _: i32| EBADF)?;
    linker.func_wrap(MODULE, "fd_seek", |_: i32, _: i64, _: i32, _: i32| EBADF)?;
    linker.func_wrap(MODULE, "fd_read", |_: i32, _: i32, _: i32, _: i32| EBADF)?;
    for name in ["environ_sizes_get", "args_sizes_get"] {
        linker.func_wrap(MODULE, name, |mut caller: Caller<'_, HostState>, count: i32, size: i32| {
            let Some((mem, _)) = memory_and_state(&mut caller) else { return EFAULT };
            errno(memory::write_u32(mem, count, 0).and_then(|()| memory::write_u32(mem, size, 0)))
        })?;
    }
    for name in ["environ_get", "args_get"] {
        linker.func_wrap(MODULE, name, |_: i32, _: i32| SUCCESS)?;
    }
    linker.func_wrap(
        MODULE,
        "clock_time_get",
        |mut caller: Caller<'_, HostState>, id: i32, _precision: i64, ret: i32| {
            let Some((mem, state)) = memory_and_state(&mut caller) else { return EFAULT };
            let nanos = match id {
                0 => state.shared.now_nanos(),
                1..=3 => u64::try_from(start().elapsed().as_nanos()).unwrap_or(u64::MAX),
                _ => return EINVAL,
            };
            errno(memory::write_u64(mem, ret, nanos))
        },
    )?;
    linker.func_wrap(MODULE, "clock_res_get", |mut caller: Caller<'_, HostState>, _id: i32, ret: i32| {
        let Some((mem, _)) = memory_and_state(&mut caller) else { return EFAULT };
        errno(memory::write_u64(mem, ret, 1))
    })?;
    linker.func_wrap(MODULE, "random_get", |mut caller: Caller<'_, HostState>, ptr: i32, len: i32| {
        let Some((mem, _)) = memory_and_state(&mut caller) else { return EFAULT };
        let len = memory::offset(len);
        if len > MAX_RANDOM {
            return EINVAL;
        }
        match memory::slice_mut(mem, ptr, len) {
            Ok(buf) => {
                rand::thread_rng().fill_bytes(buf);
                SUCCESS
            }
            Err(_) => EFAULT,
        }
    })?;
    linker.func_wrap(MODULE, "sched_yield", || SUCCESS)?;
    linker.func_wrap(MODULE, "poll_oneoff", |_: i32, _: i32, _: i32, _: i32| ENOSYS)?;
    linker.func_wrap(MODULE, "proc_exit", |code: i32| -> wasmtime::Result<()> {
        Err(wasmtime::Error::msg(format!("plugin called proc_exit({code})")))
    })?;
    Ok(())
}

/// The monotonic clock's zero.
fn start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// `fd_write(fd, iovs, iovs_len, nwritten)`: stdout and stderr to the plugin log.
fn fd_write(mut caller: Caller<'_, HostState>, fd: i32, iovs: i32, iovs_len: i32, nwritten: i32) -> i32 {
    let Some((mem, state)) = memory_and_state(&mut caller) else { return EFAULT };
    let level = match fd {
        1 => LogLevel::Info,
        2 => LogLevel::Warn,
        _ => return EBADF,
    };
    let mut text = Vec::new();
    let mut total: u32 = 0;
    for n in 0..memory::offset(iovs_len) {
        let Some(at) = n.checked_mul(8).and_then(|off| memory::offset(iovs).checked_add(off)) else { return EFAULT };
        let Ok(at) = i32::try_from(at) else { return EFAULT };
        let (Ok(ptr), Ok(len)) = (memory::read_u32(mem, at), memory::read_u32(mem, at.wrapping_add(4))) else {
            return EFAULT;
        };
        let Ok(bytes) = memory::slice(mem, ptr as i32, len as i32) else { return EFAULT };
        if text.len() < MAX_WRITE_LOG {
            text.extend_from_slice(&bytes[..bytes.len().min(MAX_WRITE_LOG - text.len())]);
        }
        total = total.saturating_add(len);
    }
    let line = String::from_utf8_lossy(&text);
    let line = line.trim_end();
    if !line.is_empty() {
        state.shared.log(level, line);
    }
    errno(memory::write_u32(mem, nwritten, total))
}
