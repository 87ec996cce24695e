//! Page-locked host memory that the backend hands out for [`HostBuf`](crate::local::HostBuf)
//! ([`LocalSort::host_mem`](crate::local::LocalSort::host_mem)): the DMA engine copies it to and
//! from the device directly, with no staging copy by the CPU.

use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys, CudaContext};
use rayon::prelude::*;

use super::error::{drv, GpuError};
use crate::config::PinMethod;
use crate::local::HostMem;

/// The page-locked host memory a backend has handed out: (address, bytes) of each live
/// allocation. Shared by the backend (which hands them out) and its transfers (which copy
/// memory inside them directly).
#[derive(Clone, Default)]
pub(super) struct HostRanges(Arc<Mutex<Vec<(usize, usize)>>>);

impl HostRanges {
    /// Whether `[ptr, ptr + len)` lies in one of them.
    pub(super) fn contains(&self, ptr: *const u8, len: usize) -> bool {
        let (a, ranges) = (ptr as usize, self.0.lock());
        let ranges = ranges.unwrap_or_else(|p| p.into_inner());
        ranges
            .iter()
            .any(|&(b, bytes)| a >= b && a + len <= b + bytes)
    }

    fn add(&self, ptr: *mut u8, bytes: usize) {
        let mut ranges = self.0.lock().unwrap_or_else(|p| p.into_inner());
        ranges.push((ptr as usize, bytes));
    }

    fn remove(&self, ptr: *mut u8) {
        let mut ranges = self.0.lock().unwrap_or_else(|p| p.into_inner());
        ranges.retain(|&(b, _)| b != ptr as usize);
    }
}

/// `bytes` of page-locked host memory in `ctx`, allocated as `pin` says and recorded in
/// `ranges` while it lives; None (with a warning) when it cannot be had.
pub(super) fn alloc(
    ctx: &Arc<CudaContext>,
    pin: PinMethod,
    bytes: usize,
    ranges: &HostRanges,
) -> Option<Box<dyn HostMem>> {
    if let Err(e) = ctx.bind_to_thread() {
        log::warn!("gpu: no page-locked host memory (cannot bind the context: {e})");
        return None;
    }
    let got = match pin {
        PinMethod::Alloc => unsafe { result::malloc_host(bytes, 0) }
            .map(|p| (p as *mut u8, None))
            .map_err(drv("cuMemHostAlloc")),
        PinMethod::Register => register_host(bytes).map(|(p, map)| (p, Some(map))),
    };
    match got {
        Ok((ptr, mapped)) => {
            ranges.add(ptr, bytes);
            Some(Box::new(PinnedMem {
                ctx: ctx.clone(),
                ptr,
                bytes,
                mapped,
                ranges: ranges.clone(),
            }))
        }
        Err(e) => {
            log::warn!(
                "gpu: cannot page-lock {bytes} bytes of host memory ({e}); using pageable memory"
            );
            None
        }
    }
}

/// Page-locked host memory from [`alloc`]: registered with its backend while it lives, freed
/// when dropped (the context is kept alive until then).
struct PinnedMem {
    ctx: Arc<CudaContext>,
    ptr: *mut u8,
    bytes: usize,
    /// Some((address, bytes)) of an anonymous mapping that holds it, registered with the driver
    /// ([`PinMethod::Register`]); None: from `cuMemHostAlloc`.
    mapped: Option<(usize, usize)>,
    ranges: HostRanges,
}

// A plain allocation; the driver calls on it (free) bind the context first.
unsafe impl Send for PinnedMem {}
unsafe impl Sync for PinnedMem {}

impl HostMem for PinnedMem {
    fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
    /// The registered mapping was zeroed when its pages were faulted in.
    fn is_zeroed(&self) -> bool {
        self.mapped.is_some()
    }
}

impl Drop for PinnedMem {
    fn drop(&mut self) {
        self.ranges.remove(self.ptr);
        let bound = self.ctx.bind_to_thread().is_ok();
        match self.mapped {
            None if bound => unsafe {
                result::free_host(self.ptr as _).ok();
            },
            None => {}
            Some((base, len)) => unsafe {
                if bound {
                    sys::cuMemHostUnregister(self.ptr as _).result().ok();
                }
                libc::munmap(base as _, len);
            },
        }
    }
}

/// [`PinMethod::Register`]: `bytes` (rounded up to 2 MiB, at a 2 MiB boundary so that huge
/// pages can back it) of zeroed, page-locked memory, and the mapping that holds it (the context
/// must be bound).
fn register_host(bytes: usize) -> Result<(*mut u8, (usize, usize)), GpuError> {
    const HUGE: usize = 2 << 20;
    let len = bytes.div_ceil(HUGE) * HUGE;
    let map_len = len + HUGE;
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(GpuError::Os {
            what: "mmap",
            message: std::io::Error::last_os_error().to_string(),
        });
    }
    let base = (p as usize).div_ceil(HUGE) * HUGE;
    unsafe { libc::madvise(base as _, len, libc::MADV_HUGEPAGE) };
    // Fault the pages in on every thread (the kernel zeroes them), so pinning finds them there.
    (0..len / HUGE).into_par_iter().for_each(|i| {
        unsafe { std::ptr::write_bytes((base + i * HUGE) as *mut u8, 0, HUGE) };
    });
    match unsafe { sys::cuMemHostRegister_v2(base as _, len, 0) }.result() {
        Ok(()) => Ok((base as *mut u8, (p as usize, map_len))),
        Err(e) => {
            unsafe { libc::munmap(p, map_len) };
            Err(drv("cuMemHostRegister")(e))
        }
    }
}
