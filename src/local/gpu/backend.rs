//! [`GpuSort`], the backend: opening it on a device, its settings, its counters and profile, and
//! [`LocalSort`] (the sorts are `sort.rs`'s, the suffix arrays `saca/`'s; what it holds is
//! `state.rs`'s).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use super::buffer::DeviceBuffer;
use super::device::Device;
use super::error::GpuError;
use super::host_mem::{self, HostRanges};
use super::stage::Staging;
use super::state::{GpuSort, Profile, State};
use crate::config::GpuOptions;
use crate::local::cpu::CpuSort;
use crate::local::{DeviceSuffixArray, HostMem, LocalSort};

impl GpuSort {
    /// Checks, without creating a context, that pe `rank` could open its device (`rank mod device
    /// count`): the CUDA driver and NVRTC load, a device is there, and it is new enough. Returns
    /// the device's ordinal. Errors (never panics) with what is missing.
    pub fn probe(rank: usize) -> Result<usize, GpuError> {
        Device::probe(rank)
    }

    /// Opens device `rank mod device count` (a context, a stream; pinned staging buffers are
    /// allocated in the background) with `threads` CPU threads (for the sorts it leaves to the
    /// CPU) and the settings `opts` (`GpuOptions::default()` unless measuring). Errors (never
    /// panics) when there is no CUDA driver, no NVRTC or no usable device.
    pub fn open(rank: usize, threads: usize, opts: GpuOptions) -> Result<GpuSort, GpuError> {
        let dev = Device::open(rank)?;
        let host_ranges = HostRanges::default();
        let staging = Staging::new(&dev.ctx, &opts, host_ranges.clone());
        Ok(GpuSort {
            dev,
            cpu: CpuSort::new(threads),
            threads: threads.max(1),
            opts,
            max_chunk: None,
            groups: None,
            onesweep: true,
            host_ranges,
            kernels: OnceLock::new(),
            gpu_sorts: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            state: Mutex::new(State {
                bufs: Default::default(),
                counts: DeviceBuffer::default(),
                orand: DeviceBuffer::default(),
                hists: DeviceBuffer::default(),
                status: DeviceBuffer::default(),
                staging,
                profile: Profile::default(),
            }),
        })
    }

    /// The device's name and ordinal, e.g. "NVIDIA H100 80GB HBM3 (device 0, sm_90)".
    pub fn device(&self) -> String {
        self.dev.describe()
    }

    /// Caps the keys per device chunk (tests use this to exercise the chunk merge).
    pub fn set_max_chunk(&mut self, keys: Option<usize>) {
        self.max_chunk = keys.map(|k| k.max(1));
    }

    /// Forces the number of groups whose copy home overlaps the sort (1: no overlap); None
    /// chooses by size. Tests use this to run the grouped sort on small inputs.
    pub fn set_overlap_groups(&mut self, groups: Option<usize>) {
        self.groups = groups.map(|g| g.max(1));
    }

    /// Chooses one-sweep passes (default: one read and one write of the keys per digit) or the
    /// classic three launches per digit (histogram, scan, scatter), kept as the fallback when
    /// the pass state cannot be allocated; tests and benchmarks compare the two.
    pub fn set_onesweep(&mut self, on: bool) {
        self.onesweep = on;
    }

    /// Chooses pinned staging buffers (default) or plain pageable copies for the transfers.
    pub fn set_pinned_staging(&mut self, on: bool) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        st.staging.pinned = on;
    }

    /// Compiles and loads the kernels now instead of at the first sort.
    pub fn prepare(&self) -> Result<(), GpuError> {
        self.kernels().map(|_| ())
    }

    /// How many sorts ran on the GPU, and how many GPU sorts failed and were redone on the CPU
    /// (each with a warning in the log).
    pub fn counters(&self) -> (u64, u64) {
        (
            self.gpu_sorts.load(Ordering::Relaxed),
            self.fallbacks.load(Ordering::Relaxed),
        )
    }

    /// Where the time of the last GPU sort went.
    pub fn last_profile(&self) -> Profile {
        self.lock().profile.clone()
    }
}

impl LocalSort for GpuSort {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn threads(&self) -> usize {
        self.threads
    }

    fn sort_u64(&self, v: &mut [u64]) {
        self.sort_keys(v, false, |c, v| c.sort_u64(v));
    }

    fn sort_u128(&self, v: &mut [u128]) {
        self.sort_keys(v, false, |c, v| c.sort_u128(v));
    }

    fn sort_u128_by_high(&self, v: &mut [u128]) {
        self.sort_keys(v, true, |c, v| c.sort_u128_by_high(v));
    }

    fn host_mem(&self, bytes: usize) -> Option<Box<dyn HostMem>> {
        host_mem::alloc(&self.dev.ctx, self.opts.pin, bytes, &self.host_ranges)
    }

    fn device_suffix_array(&self) -> Option<&dyn DeviceSuffixArray> {
        Some(self)
    }
}
