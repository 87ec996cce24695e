//! Device memory that frees itself: the one owner of every device allocation of the backend.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, DriverError};

/// Device memory from `cuMemAlloc`, freed (`cuMemFree`, with its context bound) when dropped; or
/// none ([`DeviceBuffer::default`]: address 0, 0 bytes), which frees nothing. Holds its context
/// alive until then. The address is a plain number: kernels and copies that use it must be done
/// (or ordered before the free, which synchronizes) when the buffer goes.
#[derive(Default)]
pub(super) struct DeviceBuffer {
    ctx: Option<Arc<CudaContext>>,
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

// A device address; the driver calls on it (the free) bind its context first.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// `bytes` of device memory in `ctx`, which must be bound to this thread.
    pub(super) fn alloc(ctx: &Arc<CudaContext>, bytes: usize) -> Result<DeviceBuffer, DriverError> {
        // SAFETY: a plain allocation; the caller has bound the context.
        let ptr = unsafe { result::malloc_sync(bytes) }?;
        Ok(DeviceBuffer {
            ctx: Some(ctx.clone()),
            ptr,
            bytes,
        })
    }

    /// The device address of the first byte (0: none).
    pub(super) fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Its size in bytes (0: none).
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether this holds no memory.
    pub(super) fn is_none(&self) -> bool {
        self.ptr == 0
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Some(ctx) = &self.ctx {
            // Without the context nothing can be freed: the memory goes with the context.
            if ctx.bind_to_thread().is_ok() {
                // SAFETY: allocated by `alloc` in this context and freed only here.
                unsafe { result::free_sync(self.ptr).ok() };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DeviceBuffer;

    /// The backend's state starts with empty buffers and replaces them freely: an empty one
    /// must never call the driver (without CUDA that call would panic).
    #[test]
    fn an_empty_buffer_holds_nothing_and_frees_nothing() {
        let mut bufs: [DeviceBuffer; 2] = Default::default();
        assert!(bufs
            .iter()
            .all(|b| b.is_none() && b.ptr() == 0 && b.bytes() == 0));
        bufs[0] = DeviceBuffer::default();
        drop(bufs);
    }
}
