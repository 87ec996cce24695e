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
//! // Serialized: psa may call MPI from a thread of its own pool (see `Ctx`).
//! let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized).unwrap();
//! psa::abort_on_panic(); // a panic on one pe ends the job instead of hanging the others
//! let ctx = psa::Ctx::new(universe.world(), psa::Config::default());
//! let my_slice: Vec<u8> = b"banana".to_vec(); // this pe's contiguous part of the text
//! let sa_slice = psa::suffix_array(&ctx, &my_slice).unwrap();
//! ```
//!
//! Every setting is a field of [`Config`]; the library reads no environment variables. The
//! `psa` binary and its command-line dependencies (clap, env_logger) are behind the default
//! feature `cli`: a library user may build with `default-features = false`.

pub mod affinity;
pub mod algo;
pub mod alloc;
pub mod comm;
pub mod config;
pub mod dist;
pub mod driver;
pub mod error;
pub mod io;
pub mod local;
pub mod plan;
pub mod stats;

use std::cell::OnceCell;
use std::time::Instant;

pub use config::{Algo, Backend, Config, GpuOptions, PinMethod, Predicted, Tunables};
pub use error::{Error, Result};

use comm::Comm;
use local::{DeviceSuffixArray, LocalSort};
use stats::{PhaseLog, PhaseRecord};

/// Everything a pe needs to take part in a distributed run: the communicator, the local sort
/// backend, settings, the phase log and the thread pool of its parallel work.
///
/// Threads: the library's parallel loops (rayon) run on `config.threads` threads. When the pool
/// of the calling thread has that many (the `psa` binary sizes the global pool so), the work runs
/// right there, on the calling thread; otherwise on a pool of the context's own, made at the first
/// call, and MPI is then called from one of its threads (one call at a time, while the caller
/// waits): initialise MPI with at least `mpi::Threading::Serialized` for that. The entry points
/// ([`suffix_array`], [`suffix_array_or_write`], [`driver::run`], [`algo::check::check`]) do
/// this themselves; [`Ctx::install`] does it for any other part of the library.
pub struct Ctx {
    /// The communicator (with the MPI count limit of [`Config::mpi_max_count`]).
    pub comm: Comm,
    /// The local sort backend ([`local::cpu::CpuSort`] unless replaced, see [`backend_for`]).
    pub sorter: Box<dyn LocalSort>,
    /// The settings, with `threads` resolved (never 0).
    pub config: Config,
    /// The phases recorded so far.
    pub log: PhaseLog,
    /// The algorithms' switches: a copy of `config.tune` made by [`Ctx::new`].
    pub tune: Tunables,
    /// The CPUs of this node that its pes may run on together (an affinity mask): pe 0 runs the
    /// sequential base case on all of them while every other pe waits asleep.
    pub node_cpus: Vec<u64>,
    /// The context's own rayon pool, made when first needed (None when it could not be made).
    pool: OnceCell<Option<rayon::ThreadPool>>,
}

/// Threads per pe by default: the cores this process may use over the pes on its node, at least 1.
fn default_threads(local_pes: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    (cores / local_pes.max(1)).max(1)
}

/// A value that may cross to another thread although its type says not: see [`Ctx::install`].
struct AssertSend<T>(T);

// SAFETY: only used by `Ctx::install` to hand `&Ctx` to one thread of a rayon pool while the
// calling thread is blocked in `ThreadPool::install` until that thread is done with it: the
// context is never used by two threads at once, and the pool's latch orders the accesses.
unsafe impl<T> Send for AssertSend<T> {}

impl<T> AssertSend<T> {
    fn into_inner(self) -> T {
        self.0
    }
}

impl Ctx {
    /// A context on `world` with the CPU backend, for `config` (threads 0: resolved to the cores
    /// of this process over the pes of its node). Collective: every pe must make one, with the
    /// same settings.
    pub fn new(world: mpi::topology::SimpleCommunicator, mut config: Config) -> Self {
        let comm = Comm::with_max_count(world, config.mpi_max_count);
        if let Some(b) = config.round_bytes {
            comm.set_round_bytes(b);
        }
        if config.threads == 0 {
            config.threads = default_threads(comm.local_size());
        }
        let sorter: Box<dyn LocalSort> = Box::new(local::cpu::CpuSort::new(config.threads));
        alloc::set_rank(comm.rank());
        let node_cpus = comm.node_cpus();
        Ctx {
            comm,
            sorter,
            tune: config.tune.clone(),
            config,
            log: PhaseLog::default(),
            node_cpus,
            pool: OnceCell::new(),
        }
    }

    /// Runs `f` (given this context) where the library runs its parallel work: on the calling
    /// thread when its rayon pool has `config.threads` threads, else on one thread of the
    /// context's own pool of that size while the caller waits (see [`Ctx`] for what that asks of
    /// MPI). A panic in `f` comes back to the caller. (Asking for the size of the calling thread's
    /// pool starts rayon's global pool if nothing has started it yet.)
    pub fn install<R: Send>(&self, f: impl FnOnce(&Ctx) -> R + Send) -> R {
        if rayon::current_num_threads() == self.config.threads {
            return f(self);
        }
        let pool = self.pool.get_or_init(|| {
            let built = rayon::ThreadPoolBuilder::new()
                .num_threads(self.config.threads)
                .thread_name(|i| format!("psa-{i}"))
                .build();
            built
                .map_err(|e| {
                    log::warn!(
                        "cannot start a pool of {} threads, running on the caller's: {e}",
                        self.config.threads
                    )
                })
                .ok()
        });
        match pool {
            Some(pool) => {
                let me = AssertSend(self);
                pool.install(move || f(me.into_inner()))
            }
            None => f(self),
        }
    }

    /// Replaces the local sort backend.
    pub fn with_sorter(mut self, sorter: Box<dyn LocalSort>) -> Self {
        self.sorter = sorter;
        self
    }

    /// The device of this pe's backend that builds whole suffix arrays (with `--gpu`), if it
    /// has one. Local.
    pub fn device_suffix_array(&self) -> Option<&dyn DeviceSuffixArray> {
        self.sorter.device_suffix_array()
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
    ctx.install(|ctx| suffix_array_here(ctx, text))
}

/// [`suffix_array`] on the calling thread's pool.
fn suffix_array_here(ctx: &Ctx, text: &[u8]) -> Result<Vec<u64>> {
    check_config(ctx)?;
    let layout = dist::Layout::from_local_len(&ctx.comm, text.len());
    if ctx.config.backend == Backend::Gpu {
        // A backend that builds suffix arrays itself does it all when the text fits: at p = 1
        // from the one slice, at p > 1 streamed through pe 0 to its device (algo::pooled).
        let sa = if ctx.comm.size() == 1 {
            ctx.phase("device suffix array", || {
                ctx.device_suffix_array()?.suffix_array_bytes(text)
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
    ctx.install(|ctx| suffix_array_or_write_here(ctx, text, out))
}

/// [`suffix_array_or_write`] on the calling thread's pool.
fn suffix_array_or_write_here(
    ctx: &Ctx,
    text: &[u8],
    out: &io::OutputFile,
) -> Result<Option<Vec<u64>>> {
    if ctx.config.backend != Backend::Gpu || ctx.comm.size() == 1 || !ctx.tune.gpu_pool {
        return suffix_array_here(ctx, text).map(Some);
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
        Backend::Gpu if ctx.comm.rank() == 0 => {
            let gpu = local::gpu::GpuSort::open(0, ctx.config.threads, ctx.config.gpu.clone())?;
            Ok(Box::new(gpu))
        }
        #[cfg(feature = "gpu")]
        Backend::Gpu => {
            local::gpu::GpuSort::probe(ctx.comm.rank())?;
            Ok(Box::new(local::gpu::LazyGpu::new(
                ctx.comm.rank(),
                ctx.config.threads,
                ctx.config.gpu.clone(),
            )))
        }
        #[cfg(not(feature = "gpu"))]
        Backend::Gpu => Err(Error::Unsupported(
            "--gpu needs a build with GPU support: cargo build --release --features gpu".into(),
        )),
    }
}

/// Makes a panic on this pe, on any thread, end the whole MPI job at once instead of leaving the
/// other pes waiting in their next collective: the hook prints `psa: internal error on pe R: …`,
/// removes the partial output file of a running job ([`io::OutputFile`]) and calls MPI_Abort
/// (exit status 101). Without MPI running it only prints the message (the panic then goes on as
/// usual). Replaces the panic hook of the process; the `psa` binary installs it at start-up.
pub fn abort_on_panic() {
    std::panic::set_hook(Box::new(|info| {
        use mpi::traits::Communicator;
        let running = mpi::environment::is_initialized() && !mpi::environment::is_finalized();
        if !running {
            eprintln!("psa: internal error: {info}");
            return;
        }
        let rank = mpi::topology::SimpleCommunicator::world().rank();
        eprintln!("psa: internal error on pe {rank}: {info}");
        io::remove_partial_now();
        // No collective here: the other pes may be anywhere.
        comm::abort_world(101);
    }));
}
