//! GPU backend: LSD radix sort on an NVIDIA GPU through cudarc.
//!
//! cudarc loads libcuda and libnvrtc at run time, so a build with `--features gpu` runs (and fails
//! cleanly in [`GpuSort::open`]) on machines without CUDA. The kernels (`kernels.cu`) are CUDA C
//! compiled by NVRTC to PTX for the device's architecture on the first GPU sort of the process and
//! cached.
//!
//! One sort: the keys are copied to the device through two pinned staging buffers (the CPU copies
//! into one while the other is in flight), the digits that are constant over the input are found
//! (OR and AND of all keys), and every other 8-bit digit gets one stable counting pass. A pass is
//! one-sweep: the digit counts of all positions come from one kernel per sort, and each pass is
//! one launch whose blocks take tiles in order and add up the counts of the tiles before them
//! (decoupled look-back), so the keys are read once and written once per digit; the classic pass
//! (histogram, scan, scatter) remains the fallback. The result comes back the same way. A large
//! input is first split by its highest varying digit into groups that are sorted one after
//! another, each copied home on a second stream while the next is sorted. Inputs larger than
//! what fits on the device are sorted in chunks whose sorted runs are merged on the CPU. Inputs
//! of fewer than [`MIN_GPU_KEYS`] keys are sorted by the CPU backend. Keys that live in
//! page-locked memory from this backend ([`LocalSort::host_mem`], e.g. a
//! [`HostBuf`](super::HostBuf)) skip the staging: the DMA engine copies them directly.
//!
//! The result is exactly the ascending order of the CPU backend (keys are compared as whole
//! unsigned integers).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use std::ffi::c_void;

use cudarc::driver::{result, sys, CudaContext, CudaFunction, CudaModule, CudaStream, DriverError};
use cudarc::nvrtc;
use rayon::prelude::*;

use super::cpu::CpuSort;
use super::{Alphabet, HostMem, LocalSort, PooledSa};
use crate::config::{GpuOptions, PinMethod};
use crate::{Error, Result};

mod merge;

/// Kernel parameter array: pointers to the given locals (which must outlive the launch call).
macro_rules! params {
    ($($a:ident),*) => { [$(&$a as *const _ as *mut c_void),*] };
}

pub mod saca;
pub use saca::{SacaText, MIN_GPU_SA};

/// Inputs with fewer keys than this are sorted on the CPU: the transfers and launches cost more.
pub const MIN_GPU_KEYS: usize = 1 << 16;

/// The CUDA C source of the kernels.
const KERNELS: &str = concat!(include_str!("kernels.cu"), include_str!("saca.cu"));

/// Threads per block of the hist and scatter kernels (`BLOCK` in kernels.cu).
const BLOCK: u32 = 256;
/// Device memory left free for the driver, the count table and other processes' headroom.
const RESERVE_BYTES: usize = 512 << 20;
/// Keys per overlap group of a large sort (see [`GpuSort::sort_grouped`]), and the most groups:
/// smaller groups would leave the device idle between launches.
const GROUP_KEYS: usize = 1 << 21;
const MAX_GROUPS: usize = 16;

/// Groups for a one-chunk sort of `n` keys: 1 (no overlap) below 2 × [`GROUP_KEYS`].
fn overlap_groups(n: usize) -> usize {
    (n / GROUP_KEYS).clamp(1, MAX_GROUPS)
}

/// One digit-count table of a one-sweep sort: 16 digit positions × 256 u32.
const HIST_BYTES: usize = 16 * 256 * 4;
/// The two tables: the whole input's (slot 0) and one group's (slot 1).
const HISTS_BYTES: usize = 2 * HIST_BYTES;

/// Chunks hold at most this many keys so that the kernels' 32-bit offsets cannot overflow.
const MAX_CHUNK_KEYS: usize = 1 << 31;

/// A key type the kernels sort: `u64` or `u128` (two little-endian 64-bit words).
pub trait GpuKey: bytemuck::Pod + Ord + Send + Sync {
    /// 64-bit words per key.
    const WORDS: usize;
    /// Keys per scatter tile (`BLOCK * IPT` in kernels.cu).
    const TILE: usize;
    /// Suffix of the kernel names.
    const NAME: &'static str;
}

impl GpuKey for u64 {
    const WORDS: usize = 1;
    const TILE: usize = 256 * 16;
    const NAME: &'static str = "u64";
}

impl GpuKey for u128 {
    const WORDS: usize = 2;
    const TILE: usize = 256 * 8;
    const NAME: &'static str = "u128";
}

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

/// The compiled kernels of one context.
struct Kernels {
    _module: Arc<CudaModule>,
    orand: [CudaFunction; 2],
    hist: [CudaFunction; 2],
    scatter: [CudaFunction; 2],
    scan: CudaFunction,
    digit_hist: [CudaFunction; 2],
    onesweep: [CudaFunction; 2],
    saca: saca::SacaKernels,
    /// Blocks of the hist/scatter grid: one full wave of scatter blocks.
    max_blocks: [u32; 2],
}

/// Device and pinned host memory owned by one [`GpuSort`]; guarded by its mutex.
struct State {
    /// Two key buffers (ping-pong) of `buf_bytes` each, or 0.
    bufs: [sys::CUdeviceptr; 2],
    buf_bytes: usize,
    /// The digit-major count table (256 × max blocks u32) and the 4-word OR/AND result.
    counts: sys::CUdeviceptr,
    counts_bytes: usize,
    orand: sys::CUdeviceptr,
    /// Two digit-count tables of a one-sweep sort (16 positions × 256 u32 each).
    hists: sys::CUdeviceptr,
    /// One-sweep pass state (tile counter and tile status words) for `status_bytes`, or 0.
    status: sys::CUdeviceptr,
    status_bytes: usize,
    /// The pinned staging buffers and their events, once allocated.
    stage: Option<Stage>,
    /// The staging buffers being allocated in the background since `open` (pinning 128 MiB takes
    /// ~50 ms, which then overlaps reading the input).
    stage_pending: Option<std::thread::JoinHandle<Option<Stage>>>,
    /// Whether pinned staging could not be had (then pageable copies are used).
    stage_failed: bool,
    /// Host staging copy seconds of the current sort: [into, out of] the staging buffers.
    stage_s: [f64; 2],
    profile: Profile,
}

impl State {
    /// Device memory of the sort buffers and pass state, which a suffix array may take over.
    fn own_bytes(&self) -> usize {
        2 * self.buf_bytes + self.status_bytes
    }
}

// The raw pointers are only used under the mutex with the context bound.
unsafe impl Send for State {}

/// GPU radix sort backend. Every sort is serialized on the device's sort stream (a second stream
/// only copies results home while the sort goes on).
pub struct GpuSort {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Device-to-host copies that overlap the sort ([`GpuSort::sort_grouped`]).
    copy_stream: Arc<CudaStream>,
    ordinal: usize,
    name: String,
    arch: (i32, i32),
    sms: u32,
    cpu: CpuSort,
    threads: usize,
    /// Staging shape, copy piece, pin method and kernel cache.
    opts: GpuOptions,
    max_chunk: Option<usize>,
    /// Overlap groups forced by a test (None: by size, see [`overlap_groups`]).
    groups: Option<usize>,
    /// One-sweep passes (default) or the classic histogram, scan and scatter per pass.
    onesweep: bool,
    pinned: bool,
    /// The page-locked host memory handed out by [`LocalSort::host_mem`]: (address, bytes) of
    /// each live allocation. Copies from or to memory in one of them skip the staging buffers.
    host_ranges: Arc<Mutex<Vec<(usize, usize)>>>,
    kernels: OnceLock<std::result::Result<Kernels, String>>,
    state: Mutex<State>,
    /// Sorts done on the GPU, and GPU sorts that failed and were redone on the CPU.
    gpu_sorts: AtomicU64,
    fallbacks: AtomicU64,
}

/// Compiled PTX per architecture, so that NVRTC runs once per process.
type PtxCache = Mutex<HashMap<(i32, i32), std::result::Result<nvrtc::Ptx, String>>>;
static PTX_CACHE: OnceLock<PtxCache> = OnceLock::new();

fn unsupported(msg: impl Into<String>) -> Error {
    Error::Unsupported(msg.into())
}

fn drv(what: &str) -> impl Fn(DriverError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl GpuSort {
    /// Checks, without creating a context, that pe `rank` could open its device (`rank mod device
    /// count`): the CUDA driver and NVRTC load, a device is there, and it is new enough. Returns
    /// the device's ordinal. Errors (never panics) with what is missing.
    pub fn probe(rank: usize) -> Result<usize> {
        // With dynamic loading the first CUDA call panics when the library is missing: probe first.
        if !unsafe { sys::is_culib_present() } {
            return Err(unsupported(
                "--gpu: no CUDA driver found (libcuda.so could not be loaded); run on a machine with an NVIDIA GPU \
                 and its driver, or leave out --gpu",
            ));
        }
        if !unsafe { nvrtc::sys::is_culib_present() } {
            return Err(unsupported(
                "--gpu: the CUDA driver is there but NVRTC (libnvrtc.so) could not be loaded; add CUDA's lib64 \
                 folder (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH, or leave out --gpu",
            ));
        }
        result::init().map_err(|e| {
            unsupported(format!("--gpu: the CUDA driver failed to initialize: {e}"))
        })?;
        let count = result::device::get_count()
            .map_err(|e| unsupported(format!("--gpu: cannot count CUDA devices: {e}")))?;
        if count <= 0 {
            return Err(unsupported(
                "--gpu: the CUDA driver found no GPU on this machine; leave out --gpu",
            ));
        }
        let ordinal = rank % count as usize;
        let fail = |what: &str, e: DriverError| {
            unsupported(format!("--gpu: device {ordinal}: {what}: {e}"))
        };
        let dev = result::device::get(ordinal as i32).map_err(|e| fail("cannot open", e))?;
        let attr = |a| unsafe { result::device::get_attribute(dev, a) };
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .map_err(|e| fail("cannot read the compute capability", e))?;
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            .map_err(|e| fail("cannot read the compute capability", e))?;
        if major < 7 {
            return Err(unsupported(format!(
                "--gpu: device {ordinal} has compute capability {major}.{minor}; the kernels need 7.0 or newer"
            )));
        }
        Ok(ordinal)
    }

    /// Opens device `rank mod device count` (a context, a stream; pinned staging buffers are
    /// allocated in the background) with `threads` CPU threads (for the sorts it leaves to the
    /// CPU) and the settings `opts` (`GpuOptions::default()` unless measuring). Errors (never
    /// panics) when there is no CUDA driver, no NVRTC or no usable device.
    pub fn open(rank: usize, threads: usize, opts: GpuOptions) -> Result<GpuSort> {
        let ordinal = Self::probe(rank)?;
        let count = result::device::get_count().unwrap_or(0);
        let fail = |what: &str, e: DriverError| {
            unsupported(format!("--gpu: device {ordinal}: {what}: {e}"))
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
        let ctx_bg = ctx.clone();
        let (stage_count, stage_bytes) = stage_shape(&opts);
        Ok(GpuSort {
            ctx,
            stream,
            copy_stream,
            ordinal,
            name,
            arch,
            sms,
            cpu: CpuSort::new(threads),
            threads: threads.max(1),
            opts,
            max_chunk: None,
            groups: None,
            onesweep: true,
            pinned: true,
            host_ranges: Arc::default(),
            kernels: OnceLock::new(),
            gpu_sorts: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            state: Mutex::new(State {
                bufs: [0, 0],
                buf_bytes: 0,
                counts: 0,
                counts_bytes: 0,
                orand: 0,
                hists: 0,
                status: 0,
                status_bytes: 0,
                stage: None,
                stage_pending: Some(std::thread::spawn(move || {
                    ctx_bg.bind_to_thread().ok()?;
                    alloc_staging(stage_count, stage_bytes).ok()
                })),
                stage_failed: false,
                stage_s: [0.0; 2],
                profile: Profile::default(),
            }),
        })
    }

    /// The device's name and ordinal, e.g. "NVIDIA H100 80GB HBM3 (device 0, sm_90)".
    pub fn device(&self) -> String {
        format!(
            "{} (device {}, sm_{}{})",
            self.name, self.ordinal, self.arch.0, self.arch.1
        )
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
        self.pinned = on;
    }

    /// Compiles and loads the kernels now instead of at the first sort.
    pub fn prepare(&self) -> Result<()> {
        self.kernels()
            .map(|_| ())
            .map_err(|e| unsupported(format!("--gpu: {e}")))
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

    /// Whether `[ptr, ptr + len)` lies in page-locked memory from [`LocalSort::host_mem`]
    /// (then the DMA engine copies it directly, with no staging copy by the CPU).
    fn is_host_mem(&self, ptr: *const u8, len: usize) -> bool {
        let (a, ranges) = (ptr as usize, self.host_ranges.lock());
        let ranges = ranges.unwrap_or_else(|p| p.into_inner());
        ranges
            .iter()
            .any(|&(b, bytes)| a >= b && a + len <= b + bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn kernels(&self) -> std::result::Result<&Kernels, String> {
        self.kernels
            .get_or_init(|| self.load_kernels())
            .as_ref()
            .map_err(|e| e.clone())
    }

    fn load_kernels(&self) -> std::result::Result<Kernels, String> {
        let ptx = {
            let cache = PTX_CACHE.get_or_init(|| Mutex::new(HashMap::new()));
            let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
            cache
                .entry(self.arch)
                .or_insert_with(|| {
                    let dir = self.opts.kernel_cache.as_deref();
                    if let Some(ptx) = disk_cache::load(dir, self.arch) {
                        return Ok(ptx);
                    }
                    let t0 = Instant::now();
                    let opts = nvrtc::CompileOptions {
                        options: vec![
                            format!("--gpu-architecture=compute_{}{}", self.arch.0, self.arch.1),
                            "-std=c++17".into(),
                        ],
                        name: Some("psa_radix.cu".into()),
                        ..Default::default()
                    };
                    let r = nvrtc::compile_ptx_with_opts(KERNELS, opts).map_err(|e| match e {
                        nvrtc::CompileError::CompileError { log, .. } => {
                            format!(
                                "NVRTC failed to compile the sort kernels:\n{}",
                                log.to_string_lossy()
                            )
                        }
                        e => format!("NVRTC failed: {e}"),
                    });
                    log::debug!(
                        "gpu: NVRTC compiled the kernels in {:.3}s",
                        t0.elapsed().as_secs_f64()
                    );
                    if let Ok(ptx) = &r {
                        disk_cache::store(dir, self.arch, ptx);
                    }
                    r
                })
                .clone()?
        };
        let module = self
            .ctx
            .load_module(ptx)
            .map_err(drv("cannot load the kernels"))?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(drv("cannot find a kernel"))
        };
        let orand = [f("orand_u64")?, f("orand_u128")?];
        let hist = [f("hist_u64")?, f("hist_u128")?];
        let scatter = [f("scatter_u64")?, f("scatter_u128")?];
        let scan = f("scan_counts")?;
        let digit_hist = [f("digit_hist_u64")?, f("digit_hist_u128")?];
        let onesweep = [f("onesweep_u64")?, f("onesweep_u128")?];
        let saca = saca::SacaKernels::load(&f)?;
        let mut max_blocks = [0u32; 2];
        for (i, s) in scatter.iter().enumerate() {
            let occ = s
                .occupancy_max_active_blocks_per_multiprocessor(BLOCK, 0, None)
                .map_err(drv("cannot read the scatter kernel's occupancy"))?;
            max_blocks[i] = self.sms * occ.max(1);
        }
        let counts_bytes = 256 * 4 * max_blocks.iter().copied().max().unwrap_or(1) as usize;
        let mut st = self.lock();
        self.ctx
            .bind_to_thread()
            .map_err(drv("cannot bind the context"))?;
        unsafe {
            st.counts = result::malloc_sync(counts_bytes)
                .map_err(drv("cannot allocate the count table"))?;
            st.counts_bytes = counts_bytes;
            st.orand = result::malloc_sync(32).map_err(drv("cannot allocate the OR/AND words"))?;
            // Without them the one-sweep passes are off (ensure_status); the classic ones need none.
            st.hists = result::malloc_sync(HISTS_BYTES).unwrap_or(0);
        }
        log::debug!("gpu: scatter grid {max_blocks:?} blocks");
        Ok(Kernels {
            _module: module,
            orand,
            hist,
            scatter,
            scan,
            digit_hist,
            onesweep,
            saca,
            max_blocks,
        })
    }

    /// Sorts `v`: on the CPU when small, else on the GPU; if the GPU fails before `v` was
    /// touched, on the CPU with a warning.
    /// `high_only`: sort by the high 64 bits of u128 keys only (LSD passes over the high digits).
    fn sort_keys<K: GpuKey>(&self, v: &mut [K], high_only: bool, cpu: impl Fn(&CpuSort, &mut [K])) {
        if v.len() < MIN_GPU_KEYS {
            return cpu(&self.cpu, v);
        }
        match self.gpu_sort(v, high_only) {
            Ok(()) => {
                self.gpu_sorts.fetch_add(1, Ordering::Relaxed);
            }
            Err(Failure::Untouched(e)) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "gpu sort of {} {} keys failed, sorting on the CPU instead: {e}",
                    v.len(),
                    K::NAME
                );
                cpu(&self.cpu, v);
            }
            Err(Failure::Clobbered(e)) => {
                panic!(
                    "gpu sort of {} {} keys failed while copying the result back: {e}",
                    v.len(),
                    K::NAME
                )
            }
        }
    }

    fn gpu_sort<K: GpuKey>(
        &self,
        v: &mut [K],
        high_only: bool,
    ) -> std::result::Result<(), Failure> {
        let n = v.len();
        let kernels = self.kernels().map_err(Failure::Untouched)?;
        let mut st = self.lock();
        let st = &mut *st;
        self.ctx
            .bind_to_thread()
            .map_err(drv("cannot bind the context"))
            .map_err(Failure::Untouched)?;
        let mut prof = Profile {
            keys: n,
            direct: self.is_host_mem(v.as_ptr() as *const u8, std::mem::size_of_val(v)),
            ..Default::default()
        };
        st.stage_s = [0.0; 2];
        let t0 = Instant::now();
        let chunk = self.reserve::<K>(st, n).map_err(Failure::Untouched)?;
        prof.alloc_s = t0.elapsed().as_secs_f64();
        let size = std::mem::size_of::<K>();
        if chunk >= n {
            prof.chunks = 1;
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(v);
            let t = Instant::now();
            let buf0 = st.bufs[0];
            self.upload(st, bytes, buf0).map_err(Failure::Untouched)?;
            prof.h2d_s = t.elapsed().as_secs_f64();
            let groups = self.groups.unwrap_or_else(|| overlap_groups(n));
            if groups > 1 {
                let r = self.sort_grouped::<K>(kernels, st, high_only, groups, bytes, &mut prof);
                if r.is_err() {
                    // Copies and passes may still be queued on either stream: let them end
                    // before anything else uses the buffers.
                    self.copy_stream.synchronize().ok();
                    self.stream.synchronize().ok();
                }
                r?;
            } else {
                let t = Instant::now();
                let (at, passes) = self
                    .sort_on_device::<K>(kernels, st, n, high_only)
                    .map_err(Failure::Untouched)?;
                prof.sort_s = t.elapsed().as_secs_f64();
                prof.passes = passes;
                let t = Instant::now();
                if passes > 0 {
                    let src = st.bufs[at];
                    self.download(st, src, bytes.as_mut_ptr(), bytes.len())
                        .map_err(Failure::Clobbered)?;
                }
                prof.d2h_s = t.elapsed().as_secs_f64();
            }
        } else {
            // Balanced chunks; each sorted run lands in `runs`, then they are merged into `v`.
            let k = n.div_ceil(chunk);
            let len = n.div_ceil(k);
            let mut runs: Vec<K> = Vec::with_capacity(n);
            let runs_ptr = runs.as_mut_ptr() as *mut u8;
            let mut bounds = vec![0usize];
            for (c, part) in v.chunks(len).enumerate() {
                let bytes: &[u8] = bytemuck::cast_slice(part);
                let t = Instant::now();
                let buf0 = st.bufs[0];
                self.upload(st, bytes, buf0).map_err(Failure::Untouched)?;
                prof.h2d_s += t.elapsed().as_secs_f64();
                let t = Instant::now();
                // Full sorts here: the merge compares whole keys, so runs must be sorted by them.
                let (at, passes) = self
                    .sort_on_device::<K>(kernels, st, part.len(), false)
                    .map_err(Failure::Untouched)?;
                prof.sort_s += t.elapsed().as_secs_f64();
                prof.passes += passes;
                let t = Instant::now();
                // SAFETY: runs has capacity n; this writes bytes [c*len*size, +part bytes).
                let dst = unsafe { runs_ptr.add(c * len * size) };
                let src = st.bufs[at];
                self.download(st, src, dst, bytes.len())
                    .map_err(Failure::Untouched)?;
                prof.d2h_s += t.elapsed().as_secs_f64();
                bounds.push(bounds.last().unwrap() + part.len());
            }
            // SAFETY: every byte of runs[..n] was written by the downloads above, and K is Pod.
            unsafe { runs.set_len(n) };
            prof.chunks = k;
            let t = Instant::now();
            merge::merge_runs(&runs, &bounds, v);
            prof.merge_s = t.elapsed().as_secs_f64();
        }
        log::debug!(
            "gpu: sorted {n} {} keys{}: {} chunk(s), {} passes, h2d {:.4}s, kernels {:.4}s, d2h {:.4}s, merge {:.4}s",
            K::NAME,
            if high_only { " by high word" } else { "" },
            prof.chunks,
            prof.passes,
            prof.h2d_s,
            prof.sort_s,
            prof.d2h_s,
            prof.merge_s
        );
        [prof.h2d_stage_s, prof.d2h_stage_s] = st.stage_s;
        st.profile = prof;
        Ok(())
    }

    /// Makes sure both device buffers exist and returns how many keys one chunk can hold (at
    /// least `n` when the input fits).
    fn reserve<K: GpuKey>(&self, st: &mut State, n: usize) -> std::result::Result<usize, String> {
        let size = std::mem::size_of::<K>();
        let cap = self.max_chunk.unwrap_or(usize::MAX).min(MAX_CHUNK_KEYS);
        let want = n.min(cap);
        if st.buf_bytes >= want * size {
            return Ok((st.buf_bytes / size).min(cap));
        }
        self.free_bufs(st);
        let (free, _total) =
            result::mem_get_info().map_err(drv("cannot read the free device memory"))?;
        // Two key buffers and the one-sweep pass state (at most 1 byte per key).
        let fit = free.saturating_sub(RESERVE_BYTES) / (2 * size + 1);
        let mut keys = want.min(fit);
        // Another process may take memory between the query and the allocation: halve and retry.
        loop {
            if keys < MIN_GPU_KEYS.min(n) {
                return Err(format!(
                    "not enough free device memory for a sort ({} MiB free on device {})",
                    free >> 20,
                    self.ordinal
                ));
            }
            let bytes = keys * size;
            match unsafe { (result::malloc_sync(bytes), result::malloc_sync(bytes)) } {
                (Ok(a), Ok(b)) => {
                    st.bufs = [a, b];
                    st.buf_bytes = bytes;
                    return Ok(keys);
                }
                (a, b) => {
                    for p in [a, b].into_iter().flatten() {
                        unsafe { result::free_sync(p).ok() };
                    }
                    keys /= 2;
                }
            }
        }
    }

    fn free_bufs(&self, st: &mut State) {
        for p in st.bufs {
            if p != 0 {
                unsafe { result::free_sync(p).ok() };
            }
        }
        st.bufs = [0, 0];
        st.buf_bytes = 0;
        if st.status != 0 {
            unsafe { result::free_sync(st.status).ok() };
        }
        st.status = 0;
        st.status_bytes = 0;
    }

    /// Whether one-sweep passes over `n` keys can run: on, and their state allocated (a failed
    /// allocation leaves the classic passes, which need none).
    fn ensure_status<K: GpuKey>(&self, st: &mut State, n: usize) -> bool {
        if !self.onesweep || st.hists == 0 {
            return false;
        }
        let bytes = 8 + n.div_ceil(K::TILE) * 256 * 8;
        if st.status_bytes >= bytes {
            return true;
        }
        if st.status != 0 {
            unsafe { result::free_sync(st.status).ok() };
            st.status = 0;
            st.status_bytes = 0;
        }
        match unsafe { result::malloc_sync(bytes) } {
            Ok(p) => {
                st.status = p;
                st.status_bytes = bytes;
                true
            }
            Err(e) => {
                log::debug!("gpu: no one-sweep pass state for {n} keys ({e}); classic passes");
                false
            }
        }
    }

    /// Enqueues the digit counts of the `n` keys at `src` for the digit positions of `shifts`
    /// into table `slot` of `hists` (whose row for shift s starts at `hist_row(slot, s)`).
    fn digit_hist<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &State,
        src: sys::CUdeviceptr,
        n: usize,
        shifts: &[u32],
        slot: usize,
    ) -> std::result::Result<(), String> {
        let ki = K::WORDS - 1;
        let out = st.hists + (slot * HIST_BYTES) as u64;
        let mask: u32 = shifts
            .iter()
            .map(|&s| 1u32 << (s / 8))
            .fold(0, |a, b| a | b);
        unsafe { result::memset_d8_async(out, 0, HIST_BYTES, self.stream.cu_stream()) }
            .map_err(drv("cannot clear the digit counts"))?;
        let grid = (n.div_ceil(BLOCK as usize) as u32).clamp(1, self.sms * 4);
        let n64 = n as u64;
        self.launch(
            &k.digit_hist[ki],
            grid,
            BLOCK,
            &mut params!(src, n64, mask, out),
        )
    }

    /// Device address of the counts of digit `shift` in table `slot`.
    fn hist_row(st: &State, slot: usize, shift: u32) -> sys::CUdeviceptr {
        st.hists + (slot * HIST_BYTES + (shift as usize / 8) * 256 * 4) as u64
    }

    /// Enqueues one one-sweep pass of the `n` keys at `src` by digit `shift` into `dst`, with
    /// the digit counts at `hist_row` (needs [`Self::ensure_status`] for at least `n` keys).
    #[allow(clippy::too_many_arguments)]
    fn pass_onesweep<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &State,
        src: sys::CUdeviceptr,
        dst: sys::CUdeviceptr,
        n: usize,
        shift: u32,
        hist_row: sys::CUdeviceptr,
    ) -> std::result::Result<(), String> {
        let ki = K::WORDS - 1;
        let tiles = n.div_ceil(K::TILE);
        let bytes = 8 + tiles * 256 * 8;
        debug_assert!(bytes <= st.status_bytes);
        let state = st.status;
        unsafe { result::memset_d8_async(state, 0, bytes, self.stream.cu_stream()) }
            .map_err(drv("cannot clear the pass state"))?;
        let n64 = n as u64;
        self.launch(
            &k.onesweep[ki],
            tiles as u32,
            BLOCK,
            &mut params!(src, dst, n64, shift, hist_row, state),
        )
    }

    /// Radix-sorts the `n` keys in `bufs[0]` (by the high word only when `high_only`); returns
    /// which buffer holds the result and how many passes ran.
    fn sort_on_device<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &mut State,
        n: usize,
        high_only: bool,
    ) -> std::result::Result<(usize, usize), String> {
        let shifts = self.varying_shifts::<K>(k, st, n, high_only)?;
        let onesweep = !shifts.is_empty() && self.ensure_status::<K>(st, n);
        if onesweep {
            self.digit_hist::<K>(k, st, st.bufs[0], n, &shifts, 0)?;
        }
        let mut cur = 0usize;
        for &shift in &shifts {
            let (src, dst) = (st.bufs[cur], st.bufs[1 - cur]);
            if onesweep {
                let row = Self::hist_row(st, 0, shift);
                self.pass_onesweep::<K>(k, st, src, dst, n, shift, row)?;
            } else {
                self.pass::<K>(k, st, src, dst, n, shift)?;
            }
            cur = 1 - cur;
        }
        self.stream
            .synchronize()
            .map_err(drv("a sort kernel failed"))?;
        Ok((cur, shifts.len()))
    }

    /// The bit shifts of the 8-bit digits that are not constant over the `n` keys in `bufs[0]`
    /// (OR and AND of all keys), ascending; with `high_only` only those of the high word.
    fn varying_shifts<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &mut State,
        n: usize,
        high_only: bool,
    ) -> std::result::Result<Vec<u32>, String> {
        let ki = K::WORDS - 1;
        let stream = &self.stream;
        let n64 = n as u64;
        let mut words = [0u64, !0, 0, !0];
        unsafe {
            result::memcpy_htod_async(st.orand, &words, stream.cu_stream()).map_err(drv("copy"))?;
        }
        let grid = (n.div_ceil(BLOCK as usize) as u32).min(self.sms * 8);
        let (buf0, orand) = (st.bufs[0], st.orand);
        self.launch(&k.orand[ki], grid, BLOCK, &mut params!(buf0, n64, orand))?;
        unsafe {
            result::memcpy_dtoh_async(&mut words, st.orand, stream.cu_stream())
                .map_err(drv("copy"))?;
        }
        stream
            .synchronize()
            .map_err(drv("the OR/AND kernel failed"))?;
        let varying = [words[0] ^ words[1], words[2] ^ words[3]];
        let first = if high_only {
            64 * (K::WORDS as u32 - 1)
        } else {
            0
        };
        Ok((0..8 * K::WORDS as u32)
            .filter(|&d| (varying[d as usize / 8] >> (8 * (d % 8))) & 0xff != 0)
            .map(|d| 8 * d)
            .filter(|&s| s >= first)
            .collect())
    }

    /// Enqueues one stable counting pass (histogram, scan, scatter) of the `n` keys at device
    /// address `src` by the digit at `shift`, into `dst`. Returns the number of blocks, so that
    /// the scanned count table (digit-major, `256 × blocks`) can be read: digit d starts at
    /// `counts[d * blocks]`.
    fn pass<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &State,
        src: sys::CUdeviceptr,
        dst: sys::CUdeviceptr,
        n: usize,
        shift: u32,
    ) -> std::result::Result<u32, String> {
        let ki = K::WORDS - 1;
        let tiles = n.div_ceil(K::TILE);
        let blocks = tiles.min(k.max_blocks[ki] as usize).max(1);
        let per = tiles.div_ceil(blocks) * K::TILE;
        let blocks = n.div_ceil(per).max(1) as u32;
        let (n64, per64) = (n as u64, per as u64);
        let m = 256 * blocks;
        debug_assert!(m as usize * 4 <= st.counts_bytes);
        let counts = st.counts;
        self.launch(
            &k.hist[ki],
            blocks,
            BLOCK,
            &mut params!(src, n64, per64, shift, counts),
        )?;
        self.launch(&k.scan, 1, 1024, &mut params!(counts, m))?;
        self.launch(
            &k.scatter[ki],
            blocks,
            BLOCK,
            &mut params!(src, dst, n64, per64, shift, counts),
        )?;
        Ok(blocks)
    }

    /// Sorts the keys in `bufs[0]` and copies them into `host` (as many keys' bytes), the copy
    /// overlapping the sort: one pass by the highest varying digit splits the keys into
    /// contiguous groups of whole digit values (about `n / groups` keys each); each group is then
    /// radix-sorted on its own, and while the device sorts group g + 1 the copy stream brings
    /// group g home. Without this the device-to-host copy (a third of a u128 sort) would start
    /// only after the last pass. Fills `prof`'s passes (the split included), groups and times.
    /// Errors: `Untouched` while `host` has not been written, else `Clobbered`.
    fn sort_grouped<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &mut State,
        high_only: bool,
        groups: usize,
        host: &mut [u8],
        prof: &mut Profile,
    ) -> std::result::Result<(), Failure> {
        let size = std::mem::size_of::<K>();
        let n = host.len() / size;
        let untouched = Failure::Untouched;
        let t = Instant::now();
        let shifts = self
            .varying_shifts::<K>(k, st, n, high_only)
            .map_err(untouched)?;
        let shifts_s = t.elapsed().as_secs_f64();
        let Some(&top) = shifts.last() else {
            // Nothing to sort: the keys are all equal (in the digits that count).
            prof.sort_s = shifts_s;
            return Ok(());
        };
        let timing = Events::new(2, true).map_err(untouched)?;
        unsafe { result::event::record(timing.0[0], self.stream.cu_stream()) }
            .map_err(drv("cannot record an event"))
            .map_err(untouched)?;
        // The split: a stable pass by the top varying digit into bufs[1], then the bucket starts.
        let onesweep = self.ensure_status::<K>(st, n);
        let mut starts: Vec<usize> = if onesweep {
            self.digit_hist::<K>(k, st, st.bufs[0], n, &[top], 0)
                .map_err(untouched)?;
            let row = Self::hist_row(st, 0, top);
            self.pass_onesweep::<K>(k, st, st.bufs[0], st.bufs[1], n, top, row)
                .map_err(untouched)?;
            let mut counts = [0u32; 256];
            unsafe {
                result::memcpy_dtoh_async(&mut counts, row, self.stream.cu_stream())
                    .map_err(drv("copy"))
                    .map_err(untouched)?;
            }
            self.stream
                .synchronize()
                .map_err(drv("a sort kernel failed"))
                .map_err(untouched)?;
            counts
                .iter()
                .scan(0usize, |acc, &c| {
                    let start = *acc;
                    *acc += c as usize;
                    Some(start)
                })
                .collect()
        } else {
            let blocks = self
                .pass::<K>(k, st, st.bufs[0], st.bufs[1], n, top)
                .map_err(untouched)?;
            let mut table = vec![0u32; 256 * blocks as usize];
            unsafe {
                result::memcpy_dtoh_async(&mut table, st.counts, self.stream.cu_stream())
                    .map_err(drv("copy"))
                    .map_err(untouched)?;
            }
            self.stream
                .synchronize()
                .map_err(drv("a sort kernel failed"))
                .map_err(untouched)?;
            (0..256)
                .map(|d| table[d * blocks as usize] as usize)
                .collect()
        };
        starts.push(n);
        let spans = group_spans(&starts, groups);
        // Enqueue every group's passes on the sort stream, an event after each.
        let events = Events::new(spans.len(), false).map_err(untouched)?;
        let mut at = Vec::with_capacity(spans.len());
        for (g, &(b, e, single)) in spans.iter().enumerate() {
            let mut cur = 1usize;
            // Within one digit value the split digit is constant: its pass can be left out.
            let own: Vec<u32> = shifts
                .iter()
                .copied()
                .filter(|&s| !(single && s == top))
                .collect();
            let off = (b * size) as u64;
            if onesweep && !own.is_empty() {
                self.digit_hist::<K>(k, st, st.bufs[1] + off, e - b, &own, 1)
                    .map_err(untouched)?;
            }
            for &shift in &own {
                let (src, dst) = (st.bufs[cur] + off, st.bufs[1 - cur] + off);
                if onesweep {
                    let row = Self::hist_row(st, 1, shift);
                    self.pass_onesweep::<K>(k, st, src, dst, e - b, shift, row)
                } else {
                    self.pass::<K>(k, st, src, dst, e - b, shift).map(|_| ())
                }
                .map_err(untouched)?;
                cur = 1 - cur;
            }
            unsafe { result::event::record(events.0[g], self.stream.cu_stream()) }
                .map_err(drv("cannot record an event"))
                .map_err(untouched)?;
            at.push(cur);
        }
        prof.passes = 1 + shifts.len();
        prof.groups = spans.len();
        unsafe { result::event::record(timing.0[1], self.stream.cu_stream()) }
            .map_err(drv("cannot record an event"))
            .map_err(untouched)?;
        // Bring each group home once its sort is done (the copy stream waits for its event).
        let host = host.as_mut_ptr();
        let copies: Vec<_> = spans
            .iter()
            .enumerate()
            .map(|(g, &(b, e, _))| {
                let src = st.bufs[at[g]] + (b * size) as u64;
                // SAFETY: host holds n keys' bytes and b <= e <= n.
                (
                    src,
                    unsafe { host.add(b * size) },
                    (e - b) * size,
                    Some(events.0[g]),
                )
            })
            .collect();
        let copy = self.copy_stream.cu_stream();
        self.download_spans(st, copy, &copies)?;
        // Split and group sorts by the device clock; what the copies added after them is D2H.
        let total = t.elapsed().as_secs_f64();
        let kernels_ms = unsafe {
            result::event::synchronize(timing.0[1])
                .and_then(|()| result::event::elapsed(timing.0[0], timing.0[1]))
        }
        .unwrap_or(f32::NAN);
        prof.sort_s = shifts_s + kernels_ms as f64 / 1e3;
        prof.d2h_s = (total - prof.sort_s).max(0.0);
        Ok(())
    }

    /// Launches `f` on this backend's stream with a 1-D grid.
    fn launch(
        &self,
        f: &CudaFunction,
        grid: u32,
        block: u32,
        params: &mut [*mut c_void],
    ) -> std::result::Result<(), String> {
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

    /// Pinned staging buffers, allocated on first use; None when they cannot be had or are off.
    fn staging(&self, st: &mut State) -> Option<Stage> {
        if !self.pinned || st.stage_failed {
            return None;
        }
        if st.stage.is_none() {
            if let Some(h) = st.stage_pending.take() {
                st.stage = h.join().ok().flatten();
            }
        }
        if st.stage.is_none() {
            let (count, bytes) = stage_shape(&self.opts);
            match alloc_staging(count, bytes) {
                Ok(s) => st.stage = Some(s),
                Err(e) => {
                    log::warn!("gpu: no pinned staging buffers ({e}); using pageable copies");
                    st.stage_failed = true;
                }
            }
        }
        st.stage.clone()
    }

    /// Copies `host` to device address `dst`; the copy is complete (stream-ordered) on return.
    fn upload(
        &self,
        st: &mut State,
        host: &[u8],
        dst: sys::CUdeviceptr,
    ) -> std::result::Result<(), String> {
        let stream = self.stream.cu_stream();
        let stage = match self.is_host_mem(host.as_ptr(), host.len()) {
            true => None,
            false => self.staging(st),
        };
        match stage {
            Some(stage) => {
                let (pins, events) = (&stage.pins, &stage.events);
                for (i, part) in host.chunks(stage.bytes).enumerate() {
                    let b = i % pins.len();
                    unsafe {
                        result::event::synchronize(events[b])
                            .map_err(drv("host-to-device copy"))?;
                        let pin = std::slice::from_raw_parts_mut(pins[b], part.len());
                        let t = Instant::now();
                        par_copy(pin, part, self.opts.copy_piece);
                        st.stage_s[0] += t.elapsed().as_secs_f64();
                        result::memcpy_htod_async(dst + (i * stage.bytes) as u64, pin, stream)
                            .map_err(drv("host-to-device copy"))?;
                        result::event::record(events[b], stream)
                            .map_err(drv("host-to-device copy"))?;
                    }
                }
            }
            None => unsafe {
                result::memcpy_htod_async(dst, host, stream).map_err(drv("host-to-device copy"))?;
            },
        }
        self.stream
            .synchronize()
            .map_err(drv("host-to-device copy"))
    }

    /// Copies `len` bytes from device address `src` to `host`.
    fn download(
        &self,
        st: &mut State,
        src: sys::CUdeviceptr,
        host: *mut u8,
        len: usize,
    ) -> std::result::Result<(), String> {
        self.download_on(st, self.stream.cu_stream(), src, host, len)
    }

    /// [`Self::download`] on `stream` (after whatever that stream waits for); complete on return.
    fn download_on(
        &self,
        st: &mut State,
        stream: sys::CUstream,
        src: sys::CUdeviceptr,
        host: *mut u8,
        len: usize,
    ) -> std::result::Result<(), String> {
        self.download_spans(st, stream, &[(src, host, len, None)])
            .map_err(|f| match f {
                Failure::Untouched(e) | Failure::Clobbered(e) => e,
            })
    }

    /// Copies each span `(src, host, len, after)` — `len` bytes from device address `src` to
    /// `host`, once event `after` (if any) has completed — on `stream`, in order, as one pipeline:
    /// the staging copy of one piece overlaps the transfer of the next, across spans too.
    /// Complete on return. An error is `Untouched` while no host byte has been written (a fault
    /// of a kernel that `after` waits for shows up here first), else `Clobbered`.
    fn download_spans(
        &self,
        st: &mut State,
        stream: sys::CUstream,
        spans: &[(sys::CUdeviceptr, *mut u8, usize, Option<sys::CUevent>)],
    ) -> std::result::Result<(), Failure> {
        let mut touched = false;
        let fail = |touched: bool, e: String| match touched {
            false => Failure::Untouched(e),
            true => Failure::Clobbered(e),
        };
        let wait = |after: Option<sys::CUevent>| -> std::result::Result<(), String> {
            match after {
                Some(e) => unsafe {
                    let flags = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
                    result::stream::wait_event(stream, e, flags)
                        .map_err(drv("cannot order a copy after the sort"))
                },
                None => Ok(()),
            }
        };
        let direct = spans
            .iter()
            .all(|&(_, host, len, _)| self.is_host_mem(host, len));
        let stage = match direct {
            true => None,
            false => self.staging(st),
        };
        match stage {
            Some(stage) => {
                let (pins, events, nb) = (&stage.pins, &stage.events, stage.pins.len());
                // Pieces of at most one staging buffer: (src, host, len, wait first).
                let mut pieces = Vec::new();
                for &(src, host, len, after) in spans {
                    for off in (0..len).step_by(stage.bytes) {
                        let l = stage.bytes.min(len - off);
                        let first = if off == 0 { after } else { None };
                        // SAFETY: callers pass `len` writable bytes at `host`.
                        pieces.push((src + off as u64, unsafe { host.add(off) }, l, first));
                    }
                }
                let issue = |i: usize| -> std::result::Result<(), String> {
                    let (src, _, l, after) = pieces[i];
                    wait(after)?;
                    let b = i % nb;
                    unsafe {
                        let pin = std::slice::from_raw_parts_mut(pins[b], l);
                        result::memcpy_dtoh_async(pin, src, stream)
                            .map_err(drv("device-to-host copy"))?;
                        result::event::record(events[b], stream).map_err(drv("device-to-host copy"))
                    }
                };
                // Piece i goes through buffer i % nb; the copies run nb - 1 pieces ahead of the
                // host, which issues piece i + nb - 1 once it has emptied that buffer (piece i - 1).
                for j in 0..(nb - 1).min(pieces.len()) {
                    issue(j).map_err(|e| fail(touched, e))?;
                }
                for i in 0..pieces.len() {
                    if i + nb - 1 < pieces.len() {
                        issue(i + nb - 1).map_err(|e| fail(touched, e))?;
                    }
                    let (_, host, l, _) = pieces[i];
                    unsafe { result::event::synchronize(events[i % nb]) }
                        .map_err(drv("device-to-host copy"))
                        .map_err(|e| fail(touched, e))?;
                    touched = true;
                    let t = Instant::now();
                    unsafe {
                        let pin = std::slice::from_raw_parts(pins[i % nb], l);
                        let piece = self.opts.copy_piece;
                        par_copy(std::slice::from_raw_parts_mut(host, l), pin, piece);
                    }
                    st.stage_s[1] += t.elapsed().as_secs_f64();
                }
                Ok(())
            }
            None => {
                for &(src, host, len, after) in spans {
                    wait(after).map_err(|e| fail(touched, e))?;
                    touched = true;
                    unsafe {
                        // SAFETY: callers pass `len` writable bytes at `host`.
                        let host = std::slice::from_raw_parts_mut(host, len);
                        result::memcpy_dtoh_async(host, src, stream)
                            .map_err(drv("device-to-host copy"))
                            .map_err(|e| fail(true, e))?;
                    }
                }
                unsafe { result::stream::synchronize(stream) }
                    .map_err(drv("device-to-host copy"))
                    .map_err(|e| fail(touched, e))
            }
        }
    }
}

/// The groups of a grouped sort: `starts[d]` is where the keys of top digit d begin after the
/// split (257 entries, the last = n). Returns `(begin, end, one digit value)` spans of whole
/// buckets in order, none empty, each closed once it holds n / `groups` keys; a bucket that big
/// on its own gets a span of its own (so a skewed digit does not merge a small bucket into it,
/// which would cost the big one the split digit's pass again).
fn group_spans(starts: &[usize], groups: usize) -> Vec<(usize, usize, bool)> {
    let n = starts[starts.len() - 1];
    let target = n.div_ceil(groups.max(1)).max(1);
    let mut spans = Vec::new();
    let (mut begin, mut digits) = (starts[0], 0usize);
    for d in 0..starts.len() - 1 {
        let (b, e) = (starts[d], starts[d + 1]);
        if e - b >= target && b > begin {
            spans.push((begin, b, digits <= 1));
            begin = b;
            digits = 0;
        }
        if e > b {
            digits += 1;
        }
        if e - begin >= target || d + 2 == starts.len() {
            if e > begin {
                spans.push((begin, e, digits <= 1));
            }
            begin = e;
            digits = 0;
        }
    }
    spans
}

/// Events that are destroyed with their owner (the context must be bound).
struct Events(Vec<sys::CUevent>);

impl Events {
    /// `count` events; `timing`: they record times (for [`result::event::elapsed`]).
    fn new(count: usize, timing: bool) -> std::result::Result<Events, String> {
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

/// Pinned staging buffers, an event for each (recorded after the copy that uses the buffer).
#[derive(Clone)]
struct Stage {
    pins: Vec<*mut u8>,
    events: Vec<sys::CUevent>,
    /// Bytes per buffer.
    bytes: usize,
}

// Plain addresses, used under the GpuSort mutex with the context bound (or handed over once
// from the thread that allocated them).
unsafe impl Send for Stage {}

impl Stage {
    /// Frees the buffers and events (the context must be bound, nothing using them in flight).
    fn free(&self) {
        for &p in &self.pins {
            unsafe { result::free_host(p as _).ok() };
        }
        for &e in &self.events {
            unsafe { result::event::destroy(e).ok() };
        }
    }
}

/// Buffers and bytes per buffer of the staging memory (at least 2 buffers of at least 1 byte).
fn stage_shape(opts: &GpuOptions) -> (usize, usize) {
    (opts.stage_buffers.max(2), opts.stage_buffer_bytes.max(1))
}

/// Allocates `count` staging buffers of `bytes` bytes and their events (the context must be
/// bound); on an error frees what it got.
fn alloc_staging(count: usize, bytes: usize) -> std::result::Result<Stage, DriverError> {
    let mut stage = Stage {
        pins: Vec::with_capacity(count),
        events: Vec::with_capacity(count),
        bytes,
    };
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
    for _ in 0..count {
        let got = unsafe { result::malloc_host(bytes, 0) }.and_then(|p| {
            stage.pins.push(p as *mut u8);
            result::event::create(flags).map(|e| stage.events.push(e))
        });
        if let Err(e) = got {
            stage.free();
            return Err(e);
        }
    }
    Ok(stage)
}

/// Copies `src` into `dst` (same length) with the rayon pool, in tasks of `piece` bytes (at least
/// 4096). 1 MiB, the default ([`GpuOptions::copy_piece`]), beat one share per thread (4 MiB of a
/// 64 MiB staging buffer) and 16 MiB on the H100 host (2026-11-23,
/// `bench-results/2026-11-23-h100-sort-copy-piece.md`): larger pieces balance worse.
fn par_copy(dst: &mut [u8], src: &[u8], piece: usize) {
    let piece = piece.max(4096);
    dst.par_chunks_mut(piece)
        .zip(src.par_chunks(piece))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// Compiled kernels kept on disk between runs in [`GpuOptions::kernel_cache`] (none: no disk
/// cache), so that NVRTC (about 0.4 s) runs once per machine and source version. Any failure to
/// read or write it only means compiling again.
mod disk_cache {
    use std::hash::{Hash, Hasher};
    use std::path::{Path, PathBuf};

    use cudarc::nvrtc::Ptx;

    fn path(dir: Option<&Path>, arch: (i32, i32)) -> Option<PathBuf> {
        let dir = dir?;
        // A hash of the source, the architecture and the NVRTC version.
        let (mut major, mut minor) = (0, 0);
        // SAFETY: called after the library was found present; writes two ints.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        super::KERNELS.hash(&mut h);
        (arch, major, minor).hash(&mut h);
        Some(dir.join(format!(
            "kernels-sm{}{}-{:016x}.ptx",
            arch.0,
            arch.1,
            h.finish()
        )))
    }

    pub(super) fn load(dir: Option<&Path>, arch: (i32, i32)) -> Option<Ptx> {
        let p = path(dir, arch)?;
        let src = std::fs::read_to_string(&p).ok()?;
        log::debug!("gpu: kernels from the cache {}", p.display());
        Some(Ptx::from_src(src))
    }

    pub(super) fn store(dir: Option<&Path>, arch: (i32, i32), ptx: &Ptx) {
        let Some(p) = path(dir, arch) else { return };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(p.parent().unwrap_or(&p))?;
            // Written under a name of this process, then renamed: concurrent pes never see half a file.
            let tmp = p.with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, ptx.to_src())?;
            std::fs::rename(&tmp, &p)
        };
        if let Err(e) = write() {
            log::debug!("gpu: cannot cache the kernels in {}: {e}", p.display());
        }
    }
}

/// How a GPU sort failed: before or after it started writing into the caller's slice.
enum Failure {
    Untouched(String),
    Clobbered(String),
}

impl Drop for GpuSort {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        self.stream.synchronize().ok();
        self.copy_stream.synchronize().ok();
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        for p in [
            st.bufs[0], st.bufs[1], st.counts, st.orand, st.hists, st.status,
        ] {
            if p != 0 {
                unsafe { result::free_sync(p).ok() };
            }
        }
        if let Some(h) = st.stage_pending.take() {
            st.stage = h.join().ok().flatten();
        }
        if let Some(stage) = st.stage.take() {
            stage.free();
        }
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

    fn suffix_array_bytes(&self, text: &[u8]) -> Option<Vec<u64>> {
        self.suffix_array_or_cpu(SacaText::Bytes(text))
    }

    fn suffix_array_ints(&self, text: &[u64]) -> Option<Vec<u64>> {
        self.suffix_array_or_cpu(SacaText::Ints(text))
    }

    fn host_mem(&self, bytes: usize) -> Option<Box<dyn HostMem>> {
        if let Err(e) = self.ctx.bind_to_thread() {
            log::warn!("gpu: no page-locked host memory (cannot bind the context: {e})");
            return None;
        }
        let got = match self.opts.pin {
            PinMethod::Alloc => unsafe { result::malloc_host(bytes, 0) }
                .map(|p| (p as *mut u8, None))
                .map_err(|e| e.to_string()),
            PinMethod::Register => register_host(bytes).map(|(p, map)| (p, Some(map))),
        };
        match got {
            Ok((ptr, mapped)) => {
                let mut ranges = self.host_ranges.lock().unwrap_or_else(|p| p.into_inner());
                ranges.push((ptr as usize, bytes));
                Some(Box::new(PinnedMem {
                    ctx: self.ctx.clone(),
                    ptr,
                    bytes,
                    mapped,
                    ranges: self.host_ranges.clone(),
                }))
            }
            Err(e) => {
                log::warn!("gpu: cannot page-lock {bytes} bytes of host memory ({e}); using pageable memory");
                None
            }
        }
    }

    fn pooled_sa(&self, n: usize, alphabet: &Alphabet) -> Option<Box<dyn PooledSa + '_>> {
        if !(MIN_GPU_SA..=saca::MAX_GPU_SA).contains(&n) {
            return None;
        }
        match self.device_sa(n, *alphabet) {
            Ok(s) => Some(Box::new(s)),
            Err(e) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                log::warn!("gpu suffix array of {n} characters cannot start on the device, the distributed algorithm builds it instead: {e}");
                None
            }
        }
    }

    fn suffix_array_max_len(&self) -> usize {
        if self.ctx.bind_to_thread().is_err() {
            return 0;
        }
        match result::mem_get_info() {
            // The free memory now, plus what this backend's own sort buffers would give back.
            // The same margin as the check before a suffix array starts.
            Ok((free, _)) => ((free + self.lock().own_bytes()).saturating_sub(64 << 20)
                / saca::DEVICE_BYTES_PER_CHAR)
                .min(saca::MAX_GPU_SA),
            Err(_) => 0,
        }
    }
}

/// Page-locked host memory from [`LocalSort::host_mem`] (`cuMemHostAlloc`): registered with its
/// backend while it lives, freed when dropped (the context is kept alive until then).
struct PinnedMem {
    ctx: Arc<CudaContext>,
    ptr: *mut u8,
    bytes: usize,
    /// Some((address, bytes)) of an anonymous mapping that holds it, registered with the driver
    /// ([`PinMethod::Register`]); None: from `cuMemHostAlloc`.
    mapped: Option<(usize, usize)>,
    ranges: Arc<Mutex<Vec<(usize, usize)>>>,
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
        let mut ranges = self.ranges.lock().unwrap_or_else(|p| p.into_inner());
        ranges.retain(|&(b, _)| b != self.ptr as usize);
        drop(ranges);
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
fn register_host(bytes: usize) -> std::result::Result<(*mut u8, (usize, usize)), String> {
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
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
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
            Err(format!("cuMemHostRegister: {e}"))
        }
    }
}

/// A GPU backend whose device is opened at its first use (after [`GpuSort::probe`] checked that
/// it can be). With --gpu at p > 1 a text that fits pe 0's device never needs the others' devices
/// (`algo::pooled`); opening them anyway costs each pe a CUDA context (~0.3 s, ~280 MB of host
/// memory). If the opening fails after all, this pe sorts on the CPU, with a warning.
pub struct LazyGpu {
    rank: usize,
    threads: usize,
    opts: GpuOptions,
    cpu: CpuSort,
    gpu: OnceLock<Option<GpuSort>>,
}

impl LazyGpu {
    /// A backend for pe `rank`, whose device `probe` has accepted, with `threads` CPU threads and
    /// the settings `opts` (see [`GpuSort::open`]).
    pub fn new(rank: usize, threads: usize, opts: GpuOptions) -> LazyGpu {
        LazyGpu {
            rank,
            threads,
            opts,
            cpu: CpuSort::new(threads),
            gpu: OnceLock::new(),
        }
    }

    fn gpu(&self) -> Option<&GpuSort> {
        self.gpu
            .get_or_init(
                || match GpuSort::open(self.rank, self.threads, self.opts.clone()) {
                    Ok(g) => Some(g),
                    Err(e) => {
                        log::warn!("[pe {}] {e}; this pe sorts on the CPU", self.rank);
                        None
                    }
                },
            )
            .as_ref()
    }
}

impl LocalSort for LazyGpu {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn threads(&self) -> usize {
        self.threads.max(1)
    }

    fn sort_u64(&self, v: &mut [u64]) {
        match self.gpu() {
            Some(g) => g.sort_u64(v),
            None => self.cpu.sort_u64(v),
        }
    }

    fn sort_u128(&self, v: &mut [u128]) {
        match self.gpu() {
            Some(g) => g.sort_u128(v),
            None => self.cpu.sort_u128(v),
        }
    }

    fn sort_u128_by_high(&self, v: &mut [u128]) {
        match self.gpu() {
            Some(g) => g.sort_u128_by_high(v),
            None => self.cpu.sort_u128_by_high(v),
        }
    }

    fn suffix_array_bytes(&self, text: &[u8]) -> Option<Vec<u64>> {
        self.gpu()?.suffix_array_bytes(text)
    }

    fn suffix_array_ints(&self, text: &[u64]) -> Option<Vec<u64>> {
        self.gpu()?.suffix_array_ints(text)
    }

    fn pooled_sa(&self, n: usize, alphabet: &Alphabet) -> Option<Box<dyn PooledSa + '_>> {
        self.gpu()?.pooled_sa(n, alphabet)
    }

    fn host_mem(&self, bytes: usize) -> Option<Box<dyn HostMem>> {
        self.gpu()?.host_mem(bytes)
    }

    fn suffix_array_max_len(&self) -> usize {
        self.gpu().map_or(0, |g| g.suffix_array_max_len())
    }
}

impl GpuSort {
    /// The device suffix array for texts in the device path's range; None (with a warning when
    /// the device failed) otherwise.
    fn suffix_array_or_cpu(&self, text: SacaText) -> Option<Vec<u64>> {
        let n = text.len();
        if !(MIN_GPU_SA..=saca::MAX_GPU_SA).contains(&n) {
            return None;
        }
        match self.suffix_array_on_device(text) {
            Ok(sa) => Some(sa),
            Err(e) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                log::warn!("gpu suffix array of {n} characters failed, building it on the CPU instead: {e}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{group_spans, par_copy};

    #[test]
    fn parallel_copy_copies_every_byte() {
        let big: Vec<u8> = (0..(3 << 20) + 77)
            .map(|i: usize| (i ^ (i >> 9)) as u8)
            .collect();
        let mut out = vec![0u8; big.len()];
        par_copy(&mut out[..], &big, 1 << 20);
        assert!(out == big);
    }

    fn starts_of(counts: &[usize]) -> Vec<usize> {
        let mut s = vec![0];
        for c in counts {
            s.push(s.last().unwrap() + c);
        }
        s
    }

    /// Spans cover [0, n) in order, are not empty, end on bucket boundaries, know whether they
    /// hold one digit value, and never put a bucket of >= n / groups keys with another.
    fn check(counts: &[usize], groups: usize) -> Vec<(usize, usize, bool)> {
        let starts = starts_of(counts);
        let n = *starts.last().unwrap();
        let spans = group_spans(&starts, groups);
        let target = n.div_ceil(groups.max(1)).max(1);
        let mut at = 0;
        for &(b, e, single) in &spans {
            assert_eq!(b, at, "spans must be contiguous: {spans:?}");
            assert!(e > b, "empty span: {spans:?}");
            let inside: Vec<usize> = (0..counts.len())
                .filter(|&d| counts[d] > 0 && starts[d] >= b && starts[d + 1] <= e)
                .collect();
            assert!(starts.contains(&e), "span end {e} is not a bucket boundary");
            assert_eq!(single, inside.len() == 1, "one-value flag of ({b}, {e})");
            if inside.len() > 1 {
                assert!(
                    inside.iter().all(|&d| counts[d] < target),
                    "big bucket shared"
                );
            }
            at = e;
        }
        assert_eq!(at, n, "spans must end at n: {spans:?}");
        spans
    }

    #[test]
    fn even_buckets_make_the_asked_groups() {
        let spans = check(&[10; 256], 16);
        assert_eq!(spans.len(), 16);
        assert!(spans.iter().all(|&(b, e, single)| e - b == 160 && !single));
    }

    #[test]
    fn a_dominant_bucket_gets_its_own_span() {
        // One small key before a bucket holding all the others (u64 keys 0xFF<<56 | r, and 0).
        let mut counts = vec![0; 256];
        counts[0] = 1;
        counts[255] = 999_999;
        assert_eq!(check(&counts, 16), vec![(0, 1, true), (1, 1_000_000, true)]);
        // Small buckets on both sides of a big one.
        let mut counts = vec![1; 256];
        counts[100] = 10_000;
        let spans = check(&counts, 4);
        assert!(spans.contains(&(100, 10_100, true)), "{spans:?}");
    }

    #[test]
    fn one_bucket_and_sparse_buckets() {
        let mut counts = vec![0; 256];
        counts[7] = 5;
        assert_eq!(check(&counts, 16), vec![(0, 5, true)]);
        let mut x = 12345u64;
        for groups in [1, 2, 5, 16, 300] {
            for _ in 0..200 {
                let counts: Vec<usize> = (0..256)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        match x % 10 {
                            0..=5 => 0,
                            6..=8 => (x >> 8) as usize % 50,
                            _ => (x >> 8) as usize % 5000,
                        }
                    })
                    .collect();
                if counts.iter().sum::<usize>() > 0 {
                    check(&counts, groups);
                }
            }
        }
    }
}
