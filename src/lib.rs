//! psa: distributed suffix array construction on MPI.
//!
//! Every pe (MPI process) holds a contiguous slice of the text; no pe ever holds all of it. The
//! suffix array comes back distributed the same way: pe r gets `SA[start_r..end_r)` for the same
//! ranges as its text slice. Two algorithms give identical output: pDC3 (Kulla–Sanders) and pCSS
//! (8-character keys with prefix-doubling refinement).
//!
//! Library use from another rsmpi program:
//!
//! ```no_run
//! let universe = mpi::initialize().unwrap();
//! let ctx = psa::Ctx::new(universe.world(), psa::Config::default());
//! let my_slice: Vec<u8> = b"banana".to_vec(); // this pe's contiguous part of the text
//! let sa_slice = psa::suffix_array(&ctx, &my_slice).unwrap();
//! ```

pub mod affinity;
pub mod algo;
pub mod alloc;
pub mod comm;
pub mod dist;
pub mod driver;
pub mod error;
pub mod io;
pub mod local;
pub mod stats;

use std::time::Instant;

pub use error::{Error, Result};

use comm::Comm;
use local::LocalSort;
use stats::{PhaseLog, PhaseRecord};

/// Which algorithm builds the suffix array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    /// Parallel DC3 (Kulla & Sanders).
    Dc3,
    /// Parallel CSS: 8-character keys, one sample sort, equal runs refined by prefix doubling.
    Css,
}

/// Which backend runs the local sorts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Cpu,
    Gpu,
}

/// Settings of a run.
#[derive(Clone, Debug)]
pub struct Config {
    pub algo: Algo,
    pub backend: Backend,
    /// Threads per pe for local work.
    pub threads: usize,
    /// A (sub)problem with at most this many characters in total is gathered on pe 0 and solved
    /// sequentially; larger ones recurse in parallel. At least 4.
    pub base_case: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            algo: Algo::Css,
            backend: Backend::Cpu,
            threads: 1,
            base_case: 1 << 22,
        }
    }
}

/// Test and tuning switches read from the environment of pe 0 and broadcast, so every pe takes
/// the same branches (other nodes may not see the same environment).
#[derive(Clone, Copy, Debug)]
pub struct Tunables {
    /// `PSA_FORCE_WIDE=1`: use the wide-record paths (normally only for n ≥ 2^32..2^41) on any
    /// input, so tests reach them.
    pub force_wide: bool,
    /// `PSA_CSS_HANDOVER`: fraction of unresolved suffixes above which pCSS hands over to DC3
    /// before doubling (default 0.9; 1 or more: never).
    pub css_handover: f64,
    /// `PSA_CSS_PREDICT=0`: pCSS always runs its first sort, even when a sample of the keys
    /// predicts the DC3 hand-over (so tests reach the hand-over after the sort).
    pub css_predict: bool,
    /// `PSA_CSS_FINISH=dc3`: pCSS's hand-over finishes with DC3 on the prefix names instead of
    /// DC7 (the default, `dc7`).
    pub css_finish_dc3: bool,
    /// `PSA_CSS_PREDICTED`: what pCSS does when its sample predicts the hand-over: `dc7` (the
    /// default) DC7 on the text from the start, `dc3` DC3 from the start, `sort` its first sort
    /// and then the DC7 finish on the prefix names.
    pub css_predicted: Predicted,
    /// `PSA_GPU_POOL=0`: with --gpu at p > 1, never build a whole text that fits pe 0's device
    /// there (see [`algo::pooled`]); run the distributed algorithm with device sorts instead (its
    /// recursion levels still go to the device when they fit).
    pub gpu_pool: bool,
    /// `PSA_POOL_PIECE`: records per message of that relay (default [`algo::pooled::PIECE`]).
    pub pool_piece: usize,
}

/// pCSS's path for inputs its sample predicts to be repetitive (see [`Tunables::css_predicted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predicted {
    Dc7 = 0,
    Dc3 = 1,
    SortThenDc7 = 2,
}

impl Tunables {
    /// Reads the switches on pe 0 and broadcasts them. Collective.
    pub fn from_root(comm: &Comm) -> Self {
        let wide = std::env::var_os("PSA_FORCE_WIDE").is_some_and(|v| v == "1");
        let handover = std::env::var("PSA_CSS_HANDOVER")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.9);
        let predict = std::env::var_os("PSA_CSS_PREDICT").is_none_or(|v| v != "0");
        let finish_dc3 = std::env::var_os("PSA_CSS_FINISH").is_some_and(|v| v == "dc3");
        let predicted = match std::env::var("PSA_CSS_PREDICTED").as_deref() {
            Ok("dc3") => Predicted::Dc3,
            Ok("sort") => Predicted::SortThenDc7,
            _ => Predicted::Dc7,
        };
        let pool = std::env::var_os("PSA_GPU_POOL").is_none_or(|v| v != "0");
        let piece = std::env::var("PSA_POOL_PIECE")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(algo::pooled::PIECE as u64)
            .max(1);
        let mut raw = [
            wide as u64,
            handover.to_bits(),
            predict as u64,
            finish_dc3 as u64,
            predicted as u64,
            pool as u64,
            piece,
        ];
        comm.broadcast(&mut raw, 0);
        Tunables {
            force_wide: raw[0] == 1,
            css_handover: f64::from_bits(raw[1]),
            css_predict: raw[2] == 1,
            css_finish_dc3: raw[3] == 1,
            css_predicted: match raw[4] {
                1 => Predicted::Dc3,
                2 => Predicted::SortThenDc7,
                _ => Predicted::Dc7,
            },
            gpu_pool: raw[5] == 1,
            pool_piece: raw[6] as usize,
        }
    }
}

/// Everything a pe needs to take part in a distributed run: the communicator, the local sort
/// backend, settings and the phase log.
pub struct Ctx {
    pub comm: Comm,
    pub sorter: Box<dyn LocalSort>,
    pub config: Config,
    pub log: PhaseLog,
    pub tune: Tunables,
    /// The CPUs of this node that its pes may run on together (an affinity mask): pe 0 runs the
    /// sequential base case on all of them while every other pe waits asleep.
    pub node_cpus: Vec<u64>,
}

impl Ctx {
    /// A context on `world` with the CPU backend. Collective: every pe must make one.
    pub fn new(world: mpi::topology::SimpleCommunicator, config: Config) -> Self {
        let sorter: Box<dyn LocalSort> = Box::new(local::cpu::CpuSort::new(config.threads));
        let comm = Comm::new(world);
        alloc::set_rank(comm.rank());
        let tune = Tunables::from_root(&comm);
        let node_cpus = comm.node_cpus();
        Ctx {
            comm,
            sorter,
            config,
            log: PhaseLog::default(),
            tune,
            node_cpus,
        }
    }

    /// Replaces the local sort backend.
    pub fn with_sorter(mut self, sorter: Box<dyn LocalSort>) -> Self {
        self.sorter = sorter;
        self
    }

    /// Runs `f` as a named phase: its wall time and the bytes this pe sends are recorded. Every pe
    /// must run the same phases in the same order. Names starting with "·" are sub-phases of the
    /// enclosing phase (recorded before it; not to be added to it).
    pub fn phase<R>(&self, name: &str, f: impl FnOnce() -> R) -> R {
        let t0 = Instant::now();
        let b0 = self.comm.bytes_sent();
        let a0 = self.comm.a2a_secs();
        let outer = alloc::current_phase();
        alloc::set_phase(name);
        // The peak of this phase: the kernel's high-water mark from now on, and the peaks of
        // the phases inside it (each of which resets the mark when it starts).
        let so_far = stats::reset_peak_rss();
        self.log.note_peak(so_far);
        {
            let mut st = self.log.peak_stack.borrow_mut();
            if let Some(top) = st.last_mut() {
                *top = (*top).max(so_far);
            }
            st.push(0);
        }
        let r = f();
        let peak_rss = {
            let mut st = self.log.peak_stack.borrow_mut();
            let inner = st.pop().unwrap_or(0);
            let peak = stats::peak_rss_bytes().max(inner);
            if let Some(top) = st.last_mut() {
                *top = (*top).max(peak);
            }
            self.log.note_peak(peak);
            peak
        };
        alloc::restore_phase(outer);
        let rec = PhaseRecord {
            level: self.log.level.get(),
            name: name.to_string(),
            secs: t0.elapsed().as_secs_f64(),
            bytes: self.comm.bytes_sent() - b0,
            a2a_secs: self.comm.a2a_secs() - a0,
            peak_rss,
        };
        log::debug!(
            "[pe {}] L{} {}: {:.3}s, {} bytes sent",
            self.comm.rank(),
            rec.level,
            rec.name,
            rec.secs,
            rec.bytes
        );
        if self.comm.rank() == 0 && rec.level == 0 && !rec.name.starts_with('·') {
            // Progress for long runs: pe 0's view of each top-level phase as it ends.
            log::info!("{} done ({:.2} s on pe 0)", rec.name, rec.secs);
        }
        self.log.phases.borrow_mut().push(rec);
        r
    }

    /// Runs `f` one recursion level deeper (for phase names).
    pub fn deeper<R>(&self, f: impl FnOnce() -> R) -> R {
        let l = self.log.level.get();
        self.log.level.set(l + 1);
        let r = f();
        self.log.level.set(l);
        r
    }

    /// Records the share of the fullest pe after a sort (for the stats).
    pub fn note_imbalance(&self, local: usize, total: usize) {
        if total == 0 {
            return;
        }
        let ratio = local as f64 * self.comm.size() as f64 / total as f64;
        if ratio > self.log.max_imbalance.get() {
            self.log.max_imbalance.set(ratio);
        }
    }
}

/// Builds the suffix array of a distributed text. Collective.
///
/// Entry: each pe holds a contiguous slice of the text, in pe order (any lengths, empty allowed).
/// Exit: each pe holds the suffix array entries for the same global range as its slice, as global
/// positions. Suffixes compare as byte strings; a proper prefix sorts first.
pub fn suffix_array(ctx: &Ctx, text: &[u8]) -> Result<Vec<u64>> {
    check_config(ctx)?;
    let layout = dist::Layout::from_local_len(&ctx.comm, text.len());
    if ctx.config.backend == Backend::Gpu {
        // A backend that builds suffix arrays itself does it all when the text fits: at p = 1
        // from the one slice, at p > 1 streamed through pe 0 to its device (algo::pooled).
        let sa = if ctx.comm.size() == 1 {
            ctx.phase("device suffix array", || {
                ctx.sorter.suffix_array_bytes(text)
            })
        } else if ctx.tune.gpu_pool {
            ctx.phase("device suffix array", || {
                algo::pooled::pooled_sa(ctx, text, &layout)
            })
        } else {
            None
        };
        if let Some(sa) = sa {
            return Ok(sa);
        }
    }
    Ok(distributed(ctx, text, &layout))
}

/// The suffix array of a distributed text for `out` (created for it). With `--gpu` at p > 1,
/// when the text fits pe 0's device, pe 0 writes the device's suffix array to `out` itself as it
/// comes (no pe holds its part, nothing goes back through MPI) and every pe gets Ok(None); else
/// Ok(Some(this pe's part)), which the caller writes. Collective.
pub fn suffix_array_or_write(
    ctx: &Ctx,
    text: &[u8],
    out: &io::OutputFile,
) -> Result<Option<Vec<u64>>> {
    if ctx.config.backend != Backend::Gpu || ctx.comm.size() == 1 || !ctx.tune.gpu_pool {
        return suffix_array(ctx, text).map(Some);
    }
    check_config(ctx)?;
    let layout = dist::Layout::from_local_len(&ctx.comm, text.len());
    match algo::pooled::pooled_sa_to_file(ctx, text, &layout, out) {
        Some(written) => written.map(|()| None),
        // The device did not take it or failed: the distributed algorithm (without asking the
        // device again), whose part each pe writes.
        None => Ok(Some(distributed(ctx, text, &layout))),
    }
}

/// Errors in the configuration, on every pe. Collective.
fn check_config(ctx: &Ctx) -> Result<()> {
    if ctx.comm.any(ctx.config.base_case < 4) {
        return ctx.comm.agree(Err(Error::Invalid(format!(
            "base case size must be at least 4, got {}",
            ctx.config.base_case
        ))));
    }
    Ok(())
}

/// The configured distributed algorithm. Collective.
fn distributed(ctx: &Ctx, text: &[u8], layout: &dist::Layout) -> Vec<u64> {
    match ctx.config.algo {
        Algo::Dc3 => algo::dc3::dc3(ctx, text, layout),
        Algo::Css => algo::css::css(ctx, text, layout),
    }
}

/// The local sort backend the configuration asks for, or a clear error when it is unavailable.
/// Local; callers agree on the result.
pub fn backend_for(ctx: &Ctx) -> Result<Box<dyn LocalSort>> {
    match ctx.config.backend {
        Backend::Cpu => Ok(Box::new(local::cpu::CpuSort::new(ctx.config.threads))),
        // Pe 0 opens its device now (it builds whatever fits there, and its errors should stop
        // the job at the start); the others check theirs now and open it when first used.
        #[cfg(feature = "gpu")]
        Backend::Gpu if ctx.comm.rank() == 0 => local::gpu::GpuSort::open(0, ctx.config.threads)
            .map(|g| Box::new(g) as Box<dyn LocalSort>),
        #[cfg(feature = "gpu")]
        Backend::Gpu => local::gpu::GpuSort::probe(ctx.comm.rank()).map(|_| {
            Box::new(local::gpu::LazyGpu::new(
                ctx.comm.rank(),
                ctx.config.threads,
            )) as Box<dyn LocalSort>
        }),
        #[cfg(not(feature = "gpu"))]
        Backend::Gpu => Err(Error::Unsupported(
            "--gpu needs a build with GPU support: cargo build --release --features gpu".into(),
        )),
    }
}
