//! [`GpuSort`], the backend: one device, its kernels, the sort engine's device memory, the
//! staging of transfers, and the page-locked host memory it hands out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::buffer::DeviceBuffer;
use super::device::Device;
use super::error::{drv, GpuError};
use super::host_mem::{self, HostRanges};
use super::kernels::Kernels;
use super::sort::{Profile, HISTS_BYTES};
use super::stage::Staging;
use crate::config::GpuOptions;
use crate::local::cpu::CpuSort;
use crate::local::{DeviceSuffixArray, HostMem, LocalSort};

/// Device and pinned host memory owned by one [`GpuSort`]; guarded by its mutex.
pub(super) struct State {
    /// Two key buffers (ping-pong) of the same size, or none.
    pub(super) bufs: [DeviceBuffer; 2],
    /// The digit-major count table (256 × max blocks u32).
    pub(super) counts: DeviceBuffer,
    /// The 4-word OR/AND result.
    pub(super) orand: DeviceBuffer,
    /// Two digit-count tables of a one-sweep sort (16 positions × 256 u32 each), or none.
    pub(super) hists: DeviceBuffer,
    /// One-sweep pass state (tile counter and tile status words), or none.
    pub(super) status: DeviceBuffer,
    /// The transfers and their pinned staging buffers.
    pub(super) staging: Staging,
    pub(super) profile: Profile,
}

impl State {
    /// Bytes of each of the two key buffers (0: none).
    pub(super) fn buf_bytes(&self) -> usize {
        self.bufs[0].bytes()
    }

    /// Device memory of the sort buffers and pass state, which a suffix array may take over.
    pub(super) fn own_bytes(&self) -> usize {
        2 * self.buf_bytes() + self.status.bytes()
    }

    /// Frees the key buffers and the pass state (sized for the last input).
    pub(super) fn free_bufs(&mut self) {
        self.bufs = Default::default();
        self.status = DeviceBuffer::default();
    }
}

/// GPU radix sort backend. Every sort is serialized on the device's sort stream (a second stream
/// only copies results home while the sort goes on).
pub struct GpuSort {
    pub(super) dev: Device,
    pub(super) cpu: CpuSort,
    threads: usize,
    /// Copy piece, pin method and kernel cache (the staging shape went to [`Staging`]).
    pub(super) opts: GpuOptions,
    pub(super) max_chunk: Option<usize>,
    /// Overlap groups forced by a test (None: by size, see `sort::overlap_groups`).
    pub(super) groups: Option<usize>,
    /// One-sweep passes (default) or the classic histogram, scan and scatter per pass.
    pub(super) onesweep: bool,
    /// The page-locked host memory handed out by [`LocalSort::host_mem`]. Copies from or to
    /// memory in one of them skip the staging buffers.
    host_ranges: HostRanges,
    kernels: OnceLock<Result<Kernels, GpuError>>,
    state: Mutex<State>,
    /// Sorts done on the GPU, and GPU sorts (or suffix arrays) that failed and were redone on
    /// the CPU.
    pub(super) gpu_sorts: AtomicU64,
    pub(super) fallbacks: AtomicU64,
}

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

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kernels, compiled and loaded at the first call (with the sort engine's tables).
    pub(super) fn kernels(&self) -> Result<&Kernels, GpuError> {
        self.kernels
            .get_or_init(|| self.load_kernels())
            .as_ref()
            .map_err(|e| e.clone())
    }

    fn load_kernels(&self) -> Result<Kernels, GpuError> {
        let kernels = Kernels::load(&self.dev, self.opts.kernel_cache.as_deref())?;
        let counts_bytes = kernels.counts_bytes();
        let mut st = self.lock();
        self.dev.bind()?;
        let ctx = &self.dev.ctx;
        st.counts = DeviceBuffer::alloc(ctx, counts_bytes)
            .map_err(drv("cannot allocate the count table"))?;
        st.orand = DeviceBuffer::alloc(ctx, 32).map_err(drv("cannot allocate the OR/AND words"))?;
        // Without them the one-sweep passes are off (ensure_status); the classic ones need none.
        st.hists = DeviceBuffer::alloc(ctx, HISTS_BYTES).unwrap_or_default();
        log::debug!("gpu: scatter grid {:?} blocks", kernels.max_blocks);
        Ok(kernels)
    }
}

impl Drop for GpuSort {
    fn drop(&mut self) {
        if self.dev.bind().is_err() {
            return;
        }
        self.dev.stream.synchronize().ok();
        self.dev.copy_stream.synchronize().ok();
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        st.free_bufs();
        for b in [&mut st.counts, &mut st.orand, &mut st.hists] {
            *b = DeviceBuffer::default();
        }
        st.staging.close();
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
