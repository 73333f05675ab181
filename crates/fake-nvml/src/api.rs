//! Return codes, writing answers through C pointers, and the system-wide
//! calls (`nvmlInit`, `nvmlShutdown`, the device count and handles).

use crate::handles::Handle;
use crate::state::{lock, Fake};
use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlEventSet_t, nvmlReturn_t};
use std::os::raw::{c_char, c_uint};

/// Return codes of nvml.h.
pub mod ret {
    use nvml_wrapper_sys::bindings as sys;
    pub use sys::nvmlReturn_t as Ret;
    pub const SUCCESS: Ret = sys::nvmlReturn_enum_NVML_SUCCESS;
    pub const UNINITIALIZED: Ret = sys::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
    pub const INVALID_ARGUMENT: Ret = sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
    pub const NOT_SUPPORTED: Ret = sys::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
    pub const NOT_FOUND: Ret = sys::nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
    pub const INSUFFICIENT_SIZE: Ret = sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
    pub const DRIVER_NOT_LOADED: Ret = sys::nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED;
    pub const GPU_IS_LOST: Ret = sys::nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
    pub const IN_USE: Ret = sys::nvmlReturn_enum_NVML_ERROR_IN_USE;
    pub const INSUFFICIENT_RESOURCES: Ret = sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES;
}

use ret::*;

/// Runs `f` on the loaded fake; `NVML_ERROR_UNINITIALIZED` before
/// `nvmlInit` (or after the last `nvmlShutdown`).
pub fn with(f: impl FnOnce(&mut Fake) -> Result<(), Ret>) -> Ret {
    let mut guard = lock();
    match guard.as_mut() {
        Some(fake) if fake.inits > 0 => match f(fake) {
            Ok(()) => SUCCESS,
            Err(e) => e,
        },
        _ => UNINITIALIZED,
    }
}

/// Writes `value` through `out`, or `NVML_ERROR_INVALID_ARGUMENT` for null.
pub unsafe fn put<T>(out: *mut T, value: T) -> Result<(), Ret> {
    if out.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: not null, and valid for the call by nvml.h's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Copies `s` and its terminating NUL into the caller's buffer of `length`
/// bytes; `NVML_ERROR_INSUFFICIENT_SIZE` when it does not fit (nvml.h).
pub unsafe fn put_str(buf: *mut c_char, length: c_uint, s: &str) -> Result<(), Ret> {
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    let bytes = s.as_bytes();
    if bytes.len() + 1 > length as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: the buffer holds `length` bytes (nvml.h's contract), and
    // `bytes.len() + 1 <= length`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, bytes.len());
        buf.add(bytes.len()).write(0);
    }
    Ok(())
}

/// `nvmlInit_v2`: loads the simulated host on first use.
/// `NVML_ERROR_DRIVER_NOT_LOADED` when there is none (no driver).
#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    let mut guard = lock();
    if guard.is_none() {
        match Fake::load() {
            Ok(fake) => *guard = Some(fake),
            Err(e) => {
                eprintln!("fake NVML: {e}");
                return DRIVER_NOT_LOADED;
            }
        }
    }
    if let Some(fake) = guard.as_mut() {
        fake.inits += 1;
    }
    SUCCESS
}

/// `nvmlInitWithFlags`: as `nvmlInit_v2`.
#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    nvmlInit_v2()
}

/// `nvmlShutdown`: one `nvmlInit` less; the GPUs keep their state.
#[no_mangle]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    let mut guard = lock();
    match guard.as_mut() {
        Some(fake) if fake.inits > 0 => {
            fake.inits -= 1;
            SUCCESS
        }
        _ => UNINITIALIZED,
    }
}

/// `nvmlErrorString`: a static description of a return code.
#[no_mangle]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static [u8] = match result {
        SUCCESS => b"Success\0",
        UNINITIALIZED => b"Uninitialized\0",
        INVALID_ARGUMENT => b"Invalid Argument\0",
        NOT_SUPPORTED => b"Not Supported\0",
        NOT_FOUND => b"Not Found\0",
        INSUFFICIENT_SIZE => b"Insufficient Size\0",
        DRIVER_NOT_LOADED => b"Driver Not Loaded\0",
        GPU_IS_LOST => b"GPU is lost\0",
        IN_USE => b"In use by another client\0",
        INSUFFICIENT_RESOURCES => b"Insufficient Resources\0",
        _ => b"Unknown Error\0",
    };
    s.as_ptr().cast()
}

/// `nvmlSystemGetDriverVersion`: the host file's `driver_version`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    with(|f| unsafe { put_str(version, length, &f.host.driver_version) })
}

/// `nvmlDeviceGetCount_v2`: every GPU, lost ones included (they are
/// still on the list; their handles fail).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    with(|f| unsafe { put(count, f.count()) })
}

/// `nvmlDeviceGetHandleByIndex_v2`: `NVML_ERROR_INVALID_ARGUMENT` past the
/// last GPU, `NVML_ERROR_GPU_IS_LOST` for a GPU that fell off the bus
/// (nvml.h).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    with(|f| {
        if index >= f.count() {
            return Err(INVALID_ARGUMENT);
        }
        if f.health(index).lost {
            return Err(GPU_IS_LOST);
        }
        unsafe { put(device, Handle::Gpu(index).device()) }
    })
}

/// `nvmlEventSetCreate`: events are not simulated.
#[no_mangle]
pub extern "C" fn nvmlEventSetCreate(_set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    NOT_SUPPORTED
}
