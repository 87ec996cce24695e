//! The kernels: CUDA C (`kernels.cu`, `saca.cu`) compiled by NVRTC to PTX for the device's
//! architecture once per process, kept on disk between runs ([`GpuOptions::kernel_cache`]), and
//! loaded into a context.
//!
//! [`GpuOptions::kernel_cache`]: crate::GpuOptions::kernel_cache

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc;

use super::device::Device;
use super::error::{drv, GpuError};

/// The CUDA C source of the kernels.
pub(super) const KERNELS: &str = concat!(include_str!("kernels.cu"), include_str!("saca.cu"));

/// Threads per block of the hist and scatter kernels (`BLOCK` in kernels.cu).
pub(super) const BLOCK: u32 = 256;

/// The compiled kernels of one context.
pub(super) struct Kernels {
    _module: Arc<CudaModule>,
    pub(super) orand: [CudaFunction; 2],
    pub(super) hist: [CudaFunction; 2],
    pub(super) scatter: [CudaFunction; 2],
    pub(super) scan: CudaFunction,
    pub(super) digit_hist: [CudaFunction; 2],
    pub(super) onesweep: [CudaFunction; 2],
    pub(super) saca: SacaKernels,
    /// Blocks of the hist/scatter grid: one full wave of scatter blocks.
    pub(super) max_blocks: [u32; 2],
}

/// Compiled PTX per architecture, so that NVRTC runs once per process.
type PtxCache = Mutex<HashMap<(i32, i32), Result<nvrtc::Ptx, GpuError>>>;
static PTX_CACHE: OnceLock<PtxCache> = OnceLock::new();

impl Kernels {
    /// Compiles the kernels for `dev` (or takes them from the process's cache, then from the disk
    /// cache in `cache_dir`) and loads them into its context.
    pub(super) fn load(dev: &Device, cache_dir: Option<&Path>) -> Result<Kernels, GpuError> {
        let ptx = ptx(dev.arch, cache_dir)?;
        let module = dev
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
        let saca = SacaKernels::load(&f)?;
        let mut max_blocks = [0u32; 2];
        for (i, s) in scatter.iter().enumerate() {
            let occ = s
                .occupancy_max_active_blocks_per_multiprocessor(BLOCK, 0, None)
                .map_err(drv("cannot read the scatter kernel's occupancy"))?;
            max_blocks[i] = dev.sms * occ.max(1);
        }
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

    /// Bytes of the digit-major count table of the classic passes: 256 u32 per block of the
    /// largest grid.
    pub(super) fn counts_bytes(&self) -> usize {
        256 * 4 * self.max_blocks.iter().copied().max().unwrap_or(1) as usize
    }
}

/// The PTX for architecture `arch`: from the process's cache, else the disk cache, else NVRTC
/// (whose result both caches keep; a failure too, in the process's).
fn ptx(arch: (i32, i32), dir: Option<&Path>) -> Result<nvrtc::Ptx, GpuError> {
    let cache = PTX_CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    cache
        .entry(arch)
        .or_insert_with(|| {
            if let Some(ptx) = disk_cache::load(dir, arch) {
                return Ok(ptx);
            }
            let t0 = Instant::now();
            let opts = nvrtc::CompileOptions {
                options: vec![
                    format!("--gpu-architecture=compute_{}{}", arch.0, arch.1),
                    "-std=c++17".into(),
                ],
                name: Some("psa_radix.cu".into()),
                ..Default::default()
            };
            let r = nvrtc::compile_ptx_with_opts(KERNELS, opts).map_err(GpuError::from);
            log::debug!(
                "gpu: NVRTC compiled the kernels in {:.3}s",
                t0.elapsed().as_secs_f64()
            );
            if let Ok(ptx) = &r {
                disk_cache::store(dir, arch, ptx);
            }
            r
        })
        .clone()
}

/// Compiled kernels kept on disk between runs in [`crate::GpuOptions::kernel_cache`] (none: no
/// disk cache), so that NVRTC (about 0.4 s) runs once per machine and source version. Any
/// failure to read or write it only means compiling again.
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

/// The kernels of the device suffix array.
pub(super) struct SacaKernels {
    pub(super) keys: CudaFunction,
    pub(super) hist: CudaFunction,
    pub(super) select: CudaFunction,
    pub(super) place: CudaFunction,
    pub(super) group_heads: CudaFunction,
    pub(super) group_ranks: CudaFunction,
    pub(super) group_keep: CudaFunction,
    pub(super) group_start: CudaFunction,
    pub(super) group_end: CudaFunction,
    pub(super) round_keys: CudaFunction,
    pub(super) heads: CudaFunction,
    pub(super) ranks: CudaFunction,
    pub(super) compact: CudaFunction,
    /// [add, max] for each of the three scan steps.
    pub(super) reduce: [CudaFunction; 2],
    pub(super) part: [CudaFunction; 2],
    pub(super) apply: [CudaFunction; 2],
}

impl SacaKernels {
    pub(super) fn load(
        f: &dyn Fn(&str) -> Result<CudaFunction, GpuError>,
    ) -> Result<Self, GpuError> {
        Ok(SacaKernels {
            keys: f("sa_keys")?,
            hist: f("sa_hist")?,
            select: f("sa_select")?,
            place: f("sa_place")?,
            group_heads: f("sa_group_heads")?,
            group_ranks: f("sa_group_ranks")?,
            group_keep: f("sa_group_keep")?,
            group_start: f("sa_group_start")?,
            group_end: f("sa_group_end")?,
            round_keys: f("sa_round_keys")?,
            heads: f("sa_heads")?,
            ranks: f("sa_ranks")?,
            compact: f("sa_compact")?,
            reduce: [f("scan_reduce_add")?, f("scan_reduce_max")?],
            part: [f("scan_part_add")?, f("scan_part_max")?],
            apply: [f("scan_apply_add")?, f("scan_apply_max")?],
        })
    }
}
