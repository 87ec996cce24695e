//! The run context: what every algorithm calls back into. [`Ctx`] holds the communicator, the
//! local sorter, the settings and the phase log; [`Ctx::phase`] times a phase, counts its bytes and
//! records its peak memory; [`Ctx::install`] runs work on the pool of `config.threads` threads.
//! [`Settings`] is one build's setting, made once before it starts from the knobs it runs with
//! and its text's size, and handed to the algorithms as a value.
//!
//! It sits below the algorithms and above the primitives: it uses `comm`, `local`, `stats` and
//! `alloc`, and the distributed primitives see it only through [`SortEnv`] (what sample sort needs).

use std::cell::OnceCell;
use std::time::Instant;

use crate::alloc;
use crate::comm::Comm;
use crate::config::{Config, Knobs, Offload};
use crate::dist::SortEnv;
use crate::local::{self, DeviceSuffixArray, LocalSort};
use crate::stats::{PhaseLog, PhaseRecord};

/// Everything a pe needs to take part in a distributed run: the communicator, the local sort
/// backend, settings, the phase log and the thread pool of its parallel work.
///
/// Threads: the library's parallel loops (rayon) run on `config.threads` threads. When the pool
/// of the calling thread has that many (the `psa` binary sizes the global pool so), the work runs
/// right there, on the calling thread; otherwise on a pool of the context's own, made at the first
/// call, and MPI is then called from one of its threads (one call at a time, while the caller
/// waits): initialise MPI with at least `mpi::Threading::Serialized` for that. The entry points
/// ([`crate::suffix_array`], [`crate::suffix_array_or_write`], [`crate::driver::run`],
/// [`crate::check`]) do this themselves; [`Ctx::install`] does it for any other part of the
/// library.
pub struct Ctx {
    /// The communicator (with the MPI count limit of [`Config::mpi_max_count`]).
    pub comm: Comm,
    /// The local sort backend ([`local::cpu::CpuSort`] unless replaced, see [`crate::backend_for`]).
    pub sorter: Box<dyn LocalSort>,
    /// The settings, with `threads` resolved (never 0); no run changes them (a build's plan
    /// travels beside them, see [`Settings`]).
    pub config: Config,
    /// The phases recorded so far.
    pub log: PhaseLog,
    /// The CPUs of this node that its pes may run on together (an affinity mask): pe 0 runs the
    /// sequential base case on all of them while every other pe waits asleep.
    pub(crate) node_cpus: Vec<u64>,
    /// The context's own rayon pool, made when first needed (None when it could not be made).
    pool: OnceCell<Option<rayon::ThreadPool>>,
}

/// A recursion level of at most this many characters may always be gathered on pe 0 (its
/// ~24 bytes a character there are small beside the fixed cost of a pe).
pub const MIN_GATHER: usize = 1 << 16;

/// Threads per pe by default: the node's cores over the pes on it, at most the cores this process
/// may run on (a pe bound to fewer, e.g. `--map-by slot:PE=4 --bind-to core`, gets those), at
/// least 1.
fn default_threads(local_pes: usize) -> usize {
    let mine = std::thread::available_parallelism().map_or(1, |c| c.get());
    // SAFETY: sysconf only reads a system setting.
    let node = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    (node / local_pes.max(1)).clamp(1, mine.max(1))
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
        let comm = Comm::with_max_count(world, config.comm.mpi_max_count);
        if let Some(b) = config.comm.round_bytes {
            comm.set_round_bytes(b);
        }
        if config.threads == 0 {
            config.threads = default_threads(comm.local_size());
        }
        let sorter: Box<dyn LocalSort> = Box::new(local::cpu::CpuSort::new(config.threads));
        alloc::set_rank(comm.rank());
        if let Some(bytes) = config.alloc.map_threshold {
            alloc::map_blocks_from(bytes, config.alloc.huge_pages);
        }
        let node_cpus = comm.node_cpus();
        Ctx {
            comm,
            sorter,
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
        // The peak of this phase: exact where the kernel's high-water mark rises during it,
        // else sampled (stats::PhaseStart); the sampler runs at least while an outermost phase
        // does (the entry points hold it for a whole build).
        let start = self.log.start_peak();
        let r = f();
        let peak_rss = self.log.end_peak(start);
        let outermost = self.log.peak_stack.borrow().is_empty();
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
        if self.comm.rank() == 0 && rec.level == 0 && outermost && !rec.name.starts_with('·') {
            // Progress for long runs: pe 0's view of each top-level phase as it ends (not of
            // the phases inside it, such as the writes of a placing).
            log::info!("{} done ({:.2} s on pe 0)", rec.name, rec.secs);
        }
        self.log.phases.borrow_mut().push(rec);
        r
    }

    /// Runs `f` with the resident-size sampler running (started if it is not), so that one
    /// thread samples all of a build's phases; it stops when the last such call ends.
    pub(crate) fn sampling<R>(&self, f: impl FnOnce() -> R) -> R {
        self.log.hold_sampler();
        let r = f();
        self.log.release_sampler();
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

    /// Runs `f` one recursion level up (for phase names: the level above's work done inside a
    /// deeper level's phase).
    pub fn shallower<R>(&self, f: impl FnOnce() -> R) -> R {
        let l = self.log.level.get();
        self.log.level.set(l.saturating_sub(1));
        let r = f();
        self.log.level.set(l);
        r
    }

    /// Records this pe's share of a sort's records (for the stats: [`crate::stats::PhaseLog::max_imbalance`]).
    pub fn note_imbalance(&self, local: usize, total: usize) {
        if total == 0 {
            return;
        }
        let ratio = local as f64 * self.comm.size() as f64 / total as f64;
        self.log.sorts.borrow_mut().push((total as u64, ratio));
    }
}

/// Sample sort's view of the run context: its communicator, its sorter and its phase log.
impl SortEnv for Ctx {
    fn comm(&self) -> &Comm {
        &self.comm
    }

    fn sorter(&self) -> &dyn LocalSort {
        self.sorter.as_ref()
    }

    fn phase<R>(&self, name: &str, f: impl FnOnce() -> R) -> R {
        Ctx::phase(self, name, f)
    }

    fn note_imbalance(&self, local: usize, total: usize) {
        Ctx::note_imbalance(self, local, total)
    }
}

/// One build's setting: the knobs it runs with (the memory plan's, or the configuration's
/// where nothing planned it: [`Knobs::configured`]) and its text's size. Made once by the entry
/// points before the build starts ([`Settings::of_text`]), never changed, and handed down the
/// algorithms as a value: what a recursion level measures itself against. The same on every pe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    /// The algorithm, exchange rounds and key ranges.
    pub(crate) knobs: Knobs,
    /// Characters of the build's text.
    pub(crate) n: usize,
    /// Characters of its largest block.
    pub(crate) block: usize,
    /// Where whole suffix arrays go to a device ([`Offload::of`] the configuration).
    pub(crate) offload: Offload,
}

impl Settings {
    /// The setting of a build with `knobs` of the text each pe holds `local` characters of.
    /// Collective (one reduction, one all-gather of the lengths by the layout).
    pub(crate) fn of_text(
        ctx: &Ctx,
        knobs: Knobs,
        layout: &crate::dist::Layout,
        local: usize,
    ) -> Self {
        Settings {
            knobs,
            n: layout.len(),
            block: ctx.comm.all_reduce_max(local as u64) as usize,
            offload: Offload::of(&ctx.config, ctx.comm.size(), &knobs),
        }
    }

    /// Whether a (sub)problem of `n` characters is gathered and solved on pe 0: at most
    /// `config.base_case` characters, and below the whole text (a recursion level) at most half
    /// the text's largest block (or [`MIN_GATHER`]) while p > 1, so that pe 0, which holds about
    /// 24 bytes per gathered character (the names, libsais' text and suffix array, the 8-byte
    /// suffix array it sends back), stays near the other pes' peak. Local.
    pub(crate) fn gathers(&self, ctx: &Ctx, n: usize) -> bool {
        n <= ctx.config.base_case.max(4)
            && (ctx.comm.size() == 1 || n >= self.n || n <= MIN_GATHER.max(self.block / 2))
    }

    /// The key ranges a difference cover's level of `n` characters merges in
    /// ([`merge_ranges`]; `bare_top`: the instance's top level holds nothing beneath its merge
    /// but its text and ranks, as pDC3's does). Local.
    pub(crate) fn merge_rounds_at(&self, n: usize, bare_top: bool) -> usize {
        merge_ranges(self.knobs.merge_rounds, n, self.n, bare_top)
    }

    /// The key ranges a difference cover's level of `n` characters names its samples in
    /// ([`name_ranges`]). Local.
    pub(crate) fn name_rounds_at(&self, n: usize) -> usize {
        name_ranges(self.knobs.merge_rounds, n, self.n)
    }
}

/// The key ranges a difference cover's level of `n` characters (of a build of `top`; 0: none
/// started) merges in, for `merge_rounds` (at most [`crate::dist::MAX_RANGES`]):
/// - at the whole text `merge_rounds`, or with `bare_top` three quarters of them (rounded up):
///   beneath pDC3's top merge lie only the text and its ranks, while a recursion level's merge
///   works beside the texts and rank arrays of every level above it (measured at eight ranges:
///   the top merge peaks 1.6 bytes/char below the first recursion level's on English, 0.9 on
///   chrX), so its ranges can be larger at the same peak; DC7 finishing pCSS holds pCSS' names;
/// - at a recursion level in proportion to its characters, each range two thirds of a top
///   range of `merge_rounds` (rounded up, at most `merge_rounds`): a deeper level's ranges are
///   smaller, but with the top's count at every level the small levels would pay a range's
///   passes and collectives for little memory.
pub(crate) fn merge_ranges(merge_rounds: usize, n: usize, top: usize, bare_top: bool) -> usize {
    let rounds = merge_rounds.clamp(1, crate::dist::MAX_RANGES);
    if top == 0 || n >= top {
        return if bare_top {
            (3 * rounds).div_ceil(4)
        } else {
            rounds
        };
    }
    let share = (3 * rounds as u128 * n as u128).div_ceil(2 * top as u128) as usize;
    share.clamp(1, rounds)
}

/// The key ranges a difference cover's level of `n` characters (of a build of `top`) names its
/// samples in: at the whole text those of a top merge ([`merge_ranges`] without `bare_top`); at
/// a recursion level half its merge's, rounded up, but never fewer than four (or the merge's,
/// if fewer): a level's sample keys are fewer than its merge records, and its naming holds none
/// of the deeper levels' texts and ranks (measured at eight ranges: naming in four peaks 2.2
/// bytes/char below the merges on English, 1.8 on chrX).
pub(crate) fn name_ranges(merge_rounds: usize, n: usize, top: usize) -> usize {
    let merge = merge_ranges(merge_rounds, n, top, false);
    if top == 0 || n >= top {
        return merge;
    }
    merge.div_ceil(2).max(merge.min(4))
}

#[cfg(test)]
mod range_tests {
    use super::*;

    /// The ranges of the levels of a DC3 build (each level two thirds of the one above) for the
    /// lean plan's eight, and the edge cases.
    #[test]
    fn ranges_per_level() {
        let top = 9_000_000;
        let levels = [top, top * 2 / 3, top * 4 / 9, top * 8 / 27, top * 16 / 81];
        let merge: Vec<usize> = levels
            .iter()
            .map(|&n| merge_ranges(8, n, top, true))
            .collect();
        assert_eq!(merge, [6, 8, 6, 4, 3]);
        let dc7: Vec<usize> = levels
            .iter()
            .map(|&n| merge_ranges(8, n, top, false))
            .collect();
        assert_eq!(dc7, [8, 8, 6, 4, 3]);
        let name: Vec<usize> = levels.iter().map(|&n| name_ranges(8, n, top)).collect();
        assert_eq!(name, [8, 4, 4, 4, 3]);
        assert_eq!(name_ranges(16, top * 2 / 3, top), 8);
        for r in [0, 1, 2, 3] {
            assert_eq!(merge_ranges(r, top, top, true), r.max(1), "few ranges stay");
            assert_eq!(
                name_ranges(r, top / 2, top),
                merge_ranges(r, top / 2, top, false)
            );
        }
        assert_eq!(
            merge_ranges(1000, top, top, true),
            192,
            "at most MAX_RANGES, then 3/4"
        );
        assert_eq!(
            merge_ranges(8, 5, 0, true),
            6,
            "no build started: a top level"
        );
    }
}
