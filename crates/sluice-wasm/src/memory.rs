//! Bounds-checked access to a plugin's linear memory.
//!
//! Every pointer and length a plugin passes is untrusted: each access goes through
//! [`slice`] / [`write_u32`] / [`write_u64`], which answer `InvalidMemoryAccess` instead of
//! panicking, and data handed to the plugin is placed in memory the plugin allocated itself
//! ([`copy_out`], through its exported `proxy_on_memory_allocate` or `malloc`).

use crate::abi::Status;
use crate::host::HostState;
use wasmtime::Caller;

/// Converts a guest `i32` pointer or size to a host offset (wasm32 addresses are unsigned).
pub(crate) fn offset(value: i32) -> usize {
    value as u32 as usize
}

/// The `len` bytes at `ptr`, or `InvalidMemoryAccess` when they are not all inside `mem`.
pub(crate) fn slice(mem: &[u8], ptr: i32, len: i32) -> Result<&[u8], Status> {
    let start = offset(ptr);
    let end = start.checked_add(offset(len)).ok_or(Status::InvalidMemoryAccess)?;
    mem.get(start..end).ok_or(Status::InvalidMemoryAccess)
}

/// Mutable form of [`slice`].
pub(crate) fn slice_mut(mem: &mut [u8], ptr: i32, len: usize) -> Result<&mut [u8], Status> {
    let start = offset(ptr);
    let end = start.checked_add(len).ok_or(Status::InvalidMemoryAccess)?;
    mem.get_mut(start..end).ok_or(Status::InvalidMemoryAccess)
}

/// Writes `value` little-endian at `ptr`.
pub(crate) fn write_u32(mem: &mut [u8], ptr: i32, value: u32) -> Result<(), Status> {
    slice_mut(mem, ptr, 4)?.copy_from_slice(&value.to_le_bytes());
    Ok(())
}

/// Writes `value` little-endian at `ptr`.
pub(crate) fn write_u64(mem: &mut [u8], ptr: i32, value: u64) -> Result<(), Status> {
    slice_mut(mem, ptr, 8)?.copy_from_slice(&value.to_le_bytes());
    Ok(())
}

/// Reads a little-endian `u32` at `ptr`.
pub(crate) fn read_u32(mem: &[u8], ptr: i32) -> Result<u32, Status> {
    let bytes = slice(mem, ptr, 4)?;
    let mut le = [0u8; 4];
    le.copy_from_slice(bytes);
    Ok(u32::from_le_bytes(le))
}

/// Hands `data` to the plugin: allocates `data.len()` bytes with the plugin's allocator,
/// copies `data` there and writes the pointer and length to `ret_ptr` / `ret_size` (the
/// plugin owns and frees the copy). A trap inside the allocator is returned as `Err` (the
/// callback then fails); bad pointers give `Ok(InvalidMemoryAccess)`.
pub(crate) fn copy_out(
    caller: &mut Caller<'_, HostState>,
    data: &[u8],
    ret_ptr: i32,
    ret_size: i32,
) -> wasmtime::Result<Status> {
    let Some(exports) = caller.data().exports.clone() else {
        return Ok(Status::InternalFailure);
    };
    let Ok(len) = i32::try_from(data.len()) else {
        return Ok(Status::InternalFailure);
    };
    let ptr = exports.alloc.call(&mut *caller, len)?;
    if ptr == 0 && len > 0 {
        return Ok(Status::InternalFailure);
    }
    let mem = exports.memory.data_mut(&mut *caller);
    let status = (|| {
        slice_mut(mem, ptr, data.len())?.copy_from_slice(data);
        write_u32(mem, ret_ptr, ptr as u32)?;
        write_u32(mem, ret_size, len as u32)?;
        Ok(Status::Ok)
    })();
    Ok(status.unwrap_or_else(|status| status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_bounds_accesses_are_refused() {
        let mut mem = vec![0u8; 16];
        assert_eq!(slice(&mem, 8, 8).map(<[u8]>::len), Ok(8));
        assert_eq!(slice(&mem, 8, 9), Err(Status::InvalidMemoryAccess));
        assert_eq!(slice(&mem, -1, 1), Err(Status::InvalidMemoryAccess));
        assert_eq!(slice(&mem, 1, -1), Err(Status::InvalidMemoryAccess));
        assert_eq!(write_u32(&mut mem, 13, 1), Err(Status::InvalidMemoryAccess));
        assert_eq!(write_u64(&mut mem, 8, 7), Ok(()));
        assert_eq!(read_u32(&mem, 8), Ok(7));
        assert_eq!(write_u64(&mut mem, 9, 7), Err(Status::InvalidMemoryAccess));
    }
}
