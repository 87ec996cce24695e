//! What a [`GpuSort`] holds: one device, its kernels (loaded at the first use, with the sort
//! engine's tables), the device memory of the sort engine ([`State`], behind a mutex), the
//! staging of transfers, the page-locked host memory it handed out, and the [`Profile`] of the
//! last sort; freed when it is dropped. Opening one and its settings are `backend.rs`'s.

use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::buffer::DeviceBuffer;
use super::device::Device;
use super::error::{drv, GpuError};
use super::host_mem::HostRanges;
use super::kernels::Kernels;
use super::stage::Staging;
use crate::config::GpuOptions;
use crate::local::cpu::CpuSort;

/// One digit-count table of a one-sweep sort: 16 digit positions × 256 u32.
pub(super) const HIST_BYTES: usize = 16 * 256 * 4;
/// The two tables: the whole input's (slot 0) and one group's (slot 1).
pub(super) const HISTS_BYTES: usize = 2 * HIST_BYTES;

/// Where the time of the last GPU sort went (host clock, stream synchronized between phases).
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Keys sorted.
    pub keys: usize,
    /// Device chunks (1 when the input fit on the device).
    pub chunks: usize,
    /// Counting passes run per chunk (digits that were not constant), summed over chunks; for a
    /// grouped sort the split pass plus those digits (a group of one top digit value skips one).
    pub passes: usize,
    /// Seconds copying host to device (staging copies included).
    pub h2d_s: f64,
    /// Of `h2d_s`: seconds the host spent copying into the pinned staging buffers.
    pub h2d_stage_s: f64,
    /// Seconds of kernels (OR/AND, digit counts, the passes).
    pub sort_s: f64,
    /// Seconds copying device to host.
    pub d2h_s: f64,
    /// Seconds the host spent copying out of the pinned staging buffers (all of them, also
    /// those that overlapped the sort of later groups).
    pub d2h_stage_s: f64,
    /// Seconds merging chunk runs on the CPU (0 for one chunk).
    pub merge_s: f64,
    /// Seconds allocating device buffers.
    pub alloc_s: f64,
    /// Whether the keys were in page-locked memory from this backend and copied directly (no
    /// staging; then `h2d_stage_s` and `d2h_stage_s` are 0).
    pub direct: bool,
    /// Groups of a grouped sort (0: not grouped, the copy followed the sort), each copied home
    /// while the next was sorted. Then `sort_s` is the kernels (the split and the group sorts by
    /// the device clock; the copies of earlier groups ran meanwhile) and `d2h_s` what the copies
    /// added after them.
    pub groups: usize,
}

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
    pub(super) threads: usize,
    /// Copy piece, pin method and kernel cache (the staging shape went to [`Staging`]).
    pub(super) opts: GpuOptions,
    pub(super) max_chunk: Option<usize>,
    /// Overlap groups forced by a test (None: by size, see `sort::overlap_groups`).
    pub(super) groups: Option<usize>,
    /// One-sweep passes (default) or the classic histogram, scan and scatter per pass.
    pub(super) onesweep: bool,
    /// The page-locked host memory handed out by [`crate::local::LocalSort::host_mem`]. Copies
    /// from or to memory in one of them skip the staging buffers.
    pub(super) host_ranges: HostRanges,
    pub(super) kernels: OnceLock<Result<Kernels, GpuError>>,
    pub(super) state: Mutex<State>,
    /// Sorts done on the GPU, and GPU sorts (or suffix arrays) that failed and were redone on
    /// the CPU.
    pub(super) gpu_sorts: AtomicU64,
    pub(super) fallbacks: AtomicU64,
}

impl GpuSort {
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
