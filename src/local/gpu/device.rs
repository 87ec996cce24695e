//! The device: finding it ([`Device::probe`]), opening it (a context and two streams), launching
//! kernels on it, and events.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, CudaFunction, CudaStream, DriverError};
use cudarc::nvrtc;

use super::error::{drv, GpuError};

/// One opened device: its context, the stream every sort and suffix array runs on, and a second
/// stream that only copies results home while the sort goes on.
pub(super) struct Device {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    /// Device-to-host copies that overlap the sort (`GpuSort::sort_grouped`).
    pub(super) copy_stream: Arc<CudaStream>,
    pub(super) ordinal: usize,
    pub(super) name: String,
    pub(super) arch: (i32, i32),
    /// Multiprocessors.
    pub(super) sms: u32,
}

impl Device {
    /// Checks, without creating a context, that pe `rank` could open its device (`rank mod device
    /// count`): the CUDA driver and NVRTC load, a device is there, and it is new enough. Returns
    /// the device's ordinal. Errors (never panics) with what is missing.
    pub(super) fn probe(rank: usize) -> Result<usize, GpuError> {
        // With dynamic loading the first CUDA call panics when the library is missing: probe first.
        if !unsafe { sys::is_culib_present() } {
            return Err(GpuError::NoDriver);
        }
        if !unsafe { nvrtc::sys::is_culib_present() } {
            return Err(GpuError::NoNvrtc);
        }
        result::init().map_err(drv("the CUDA driver failed to initialize"))?;
        let count = result::device::get_count().map_err(drv("cannot count CUDA devices"))?;
        if count <= 0 {
            return Err(GpuError::NoDevice);
        }
        let ordinal = rank % count as usize;
        let fail = |what: &str, source: DriverError| GpuError::Driver {
            what: format!("device {ordinal}: {what}"),
            source,
        };
        let dev = result::device::get(ordinal as i32).map_err(|e| fail("cannot open", e))?;
        let attr = |a| unsafe { result::device::get_attribute(dev, a) };
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .map_err(|e| fail("cannot read the compute capability", e))?;
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            .map_err(|e| fail("cannot read the compute capability", e))?;
        if major < 7 {
            return Err(GpuError::OldDevice {
                ordinal,
                major,
                minor,
            });
        }
        Ok(ordinal)
    }

    /// Opens device `rank mod device count`: a context and two streams (see [`Device::probe`]
    /// for what is checked first).
    pub(super) fn open(rank: usize) -> Result<Device, GpuError> {
        let ordinal = Self::probe(rank)?;
        let count = result::device::get_count().unwrap_or(0);
        let fail = |what: &str, source: DriverError| GpuError::Driver {
            what: format!("device {ordinal}: {what}"),
            source,
        };
        let ctx = CudaContext::new(ordinal).map_err(|e| fail("cannot create a context", e))?;
        let stream = ctx
            .new_stream()
            .map_err(|e| fail("cannot create a stream", e))?;
        let copy_stream = ctx
            .new_stream()
            .map_err(|e| fail("cannot create a stream", e))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let arch = ctx
            .compute_capability()
            .map_err(|e| fail("cannot read the compute capability", e))?;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| fail("cannot read the multiprocessor count", e))? as u32;
        log::debug!(
            "[pe {rank}] gpu: device {ordinal} of {count}: {name}, sm_{}{}, {sms} SMs",
            arch.0,
            arch.1
        );
        Ok(Device {
            ctx,
            stream,
            copy_stream,
            ordinal,
            name,
            arch,
            sms,
        })
    }

    /// The device's name and ordinal, e.g. "NVIDIA H100 80GB HBM3 (device 0, sm_90)".
    pub(super) fn describe(&self) -> String {
        format!(
            "{} (device {}, sm_{}{})",
            self.name, self.ordinal, self.arch.0, self.arch.1
        )
    }

    /// Makes the context current on this thread (every raw driver call needs it).
    pub(super) fn bind(&self) -> Result<(), GpuError> {
        self.ctx
            .bind_to_thread()
            .map_err(drv("cannot bind the context"))
    }

    /// Launches `f` on the sort stream with a 1-D grid.
    pub(super) fn launch(
        &self,
        f: &CudaFunction,
        grid: u32,
        block: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), GpuError> {
        // SAFETY: callers pass params pointing at locals of the argument types the kernel
        // declares; all device pointers are live allocations of this context.
        unsafe {
            result::launch_kernel(
                f.cu_function(),
                (grid, 1, 1),
                (block, 1, 1),
                0,
                self.stream.cu_stream(),
                params,
            )
        }
        .map_err(drv("kernel launch failed"))
    }
}

/// Events that are destroyed with their owner (the context must be bound then).
pub(super) struct Events(pub(super) Vec<sys::CUevent>);

impl Events {
    /// `count` events; `timing`: they record times (for [`result::event::elapsed`]).
    pub(super) fn new(count: usize, timing: bool) -> Result<Events, GpuError> {
        let mut ev = Events(Vec::with_capacity(count));
        let flags = match timing {
            true => sys::CUevent_flags::CU_EVENT_DEFAULT,
            false => sys::CUevent_flags::CU_EVENT_DISABLE_TIMING,
        };
        for _ in 0..count {
            ev.0.push(result::event::create(flags).map_err(drv("cannot create an event"))?);
        }
        Ok(ev)
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        for &e in &self.0 {
            unsafe { result::event::destroy(e).ok() };
        }
    }
}
