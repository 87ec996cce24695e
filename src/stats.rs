//! Named phases with timers and byte counts; summaries over pes; peak memory.
//!
//! Peak memory: psa leaves the kernel's high-water mark of the process (VmHWM) as it is, so what
//! outside tools report (`getrusage`'s `ru_maxrss`, `/usr/bin/time -v`, a batch system's
//! accounting) is the process's true peak, and the run's peak ([`PhaseLog::run_peak_rss`]) is
//! that mark. A phase's peak ([`PhaseStart`]) is exact where the mark rose during the phase (the
//! phase set the process's peak so far: the mark at its end); elsewhere it is the most of the
//! resident sizes at the phase's start and end and those a background thread samples every
//! [`SAMPLE_EVERY`] while a build runs ([`Sampler`]), so a spike shorter than that may be missed
//! (never one that sets the run's peak).

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::comm::Comm;

/// One finished phase on this pe.
#[derive(Clone, Debug)]
pub struct PhaseRecord {
    /// Recursion level (0 = the input text).
    pub level: usize,
    /// The phase's name (names starting with "·" are sub-phases of the enclosing one).
    pub name: String,
    /// Wall time, seconds.
    pub secs: f64,
    /// Bytes this pe sent to others during the phase.
    pub bytes: u64,
    /// Seconds of the phase spent in all-to-all exchanges (waiting for other pes included).
    pub a2a_secs: f64,
    /// Peak resident memory of this pe during the phase, bytes (0 when unknown): exact where the
    /// phase raised the process's high-water mark, else sampled (see the module's comment).
    pub peak_rss: u64,
}

/// The phases of a run on this pe, in order. Every pe records the same sequence of phases.
#[derive(Default)]
pub struct PhaseLog {
    /// The phases that ended, in the order they ended (a phase after the phases inside it).
    pub phases: RefCell<Vec<PhaseRecord>>,
    /// The recursion level of the phases running now, for their records (see
    /// [`crate::Ctx::deeper`]; the algorithms pass their level down as a value).
    pub(crate) level: std::cell::Cell<usize>,
    /// Every sort's size (records over all pes) and this pe's share of it over the mean (1.0:
    /// perfectly balanced); see [`PhaseLog::max_imbalance`].
    pub(crate) sorts: RefCell<Vec<(u64, f64)>>,
    /// For each phase running now, outermost first: the highest peak of the phases it contains
    /// that have ended, and the sampled resident sizes seen while it ran beside them (see
    /// [`PhaseStart`]).
    pub(crate) peak_stack: RefCell<Vec<u64>>,
    /// The resident-size sampler while one is held ([`PhaseLog::hold_sampler`]), and how many
    /// holds are open.
    sampler: RefCell<Option<Sampler>>,
    /// See [`Self::sampler`].
    sampler_holds: std::cell::Cell<usize>,
}

impl PhaseLog {
    /// Peak resident memory of this pe over the whole run so far, bytes: the kernel's
    /// high-water mark of the process (VmHWM, exact; what `getrusage`'s `ru_maxrss`, `time -v`
    /// and batch systems report), which psa never resets. In a process that ran other work
    /// before, that work's peak counts too.
    pub fn run_peak_rss(&self) -> u64 {
        peak_rss_bytes()
    }

    /// Starts the resident-size sampler for this log's phases if it is not running, or counts
    /// one more hold on it. Every hold is ended by [`Self::release_sampler`]; the sampler stops
    /// (its thread ends) when the last one is, or when the log is dropped.
    pub(crate) fn hold_sampler(&self) {
        let holds = self.sampler_holds.get();
        self.sampler_holds.set(holds + 1);
        if holds == 0 {
            *self.sampler.borrow_mut() = Sampler::start();
        }
    }

    /// Ends one hold of [`Self::hold_sampler`]; the last stops the sampler.
    pub(crate) fn release_sampler(&self) {
        let holds = self.sampler_holds.get().saturating_sub(1);
        self.sampler_holds.set(holds);
        if holds == 0 {
            // Dropped outside the borrow: dropping joins the sampler's thread.
            let sampler = self.sampler.borrow_mut().take();
            drop(sampler);
        }
    }

    /// Starts measuring a phase's peak: notes where memory stands, gives what was sampled so far
    /// to the enclosing phase, and opens the new phase's entry on the peak stack. The outermost
    /// phase holds the sampler until it ends ([`Self::end_peak`]).
    pub(crate) fn start_peak(&self) -> PhaseStart {
        if self.peak_stack.borrow().is_empty() {
            self.hold_sampler();
        }
        let (start, before) = PhaseStart::now(self);
        let mut st = self.peak_stack.borrow_mut();
        if let Some(top) = st.last_mut() {
            *top = (*top).max(before);
        }
        st.push(0);
        start
    }

    /// Ends measuring the innermost running phase's peak ([`Self::start_peak`]): its peak, which
    /// the enclosing phase keeps.
    pub(crate) fn end_peak(&self, start: PhaseStart) -> u64 {
        let (peak, outermost) = {
            let mut st = self.peak_stack.borrow_mut();
            let inner = st.pop().unwrap_or(0);
            let peak = start.peak(self, inner);
            if let Some(top) = st.last_mut() {
                *top = (*top).max(peak);
            }
            (peak, st.is_empty())
        };
        if outermost {
            self.release_sampler();
        }
        peak
    }

    /// The highest resident size sampled since the last call (0 when no sampler runs), after
    /// which the sampler's maximum starts again from `from`.
    pub(crate) fn take_sampled(&self, from: u64) -> u64 {
        self.sampler.borrow().as_ref().map_or(0, |s| s.take(from))
    }

    /// This pe's largest share after a sort, over the mean, among the sorts of at least 1/64 of
    /// the largest sort's records (a sort of a few records in one of many key ranges or doubling
    /// rounds reads as badly balanced without costing anything); 1.0 when nothing was sorted.
    pub fn max_imbalance(&self) -> f64 {
        let sorts = self.sorts.borrow();
        let largest = sorts.iter().map(|s| s.0).max().unwrap_or(0);
        sorts
            .iter()
            .filter(|s| s.0.saturating_mul(64) >= largest)
            .map(|s| s.1)
            .fold(1.0, f64::max)
    }
}

/// A phase summarised over all pes.
#[derive(Clone, Debug)]
pub struct PhaseSummary {
    /// Recursion level (0 = the input text).
    pub level: usize,
    /// The phase's name.
    pub name: String,
    /// Wall time of the slowest pe, seconds.
    pub max_secs: f64,
    /// Mean wall time over pes, seconds.
    pub mean_secs: f64,
    /// Mean over pes of the seconds spent in all-to-all exchanges.
    pub mean_a2a_secs: f64,
    /// Bytes sent during the phase: by the pe that sent most, and by all pes together.
    pub max_bytes: f64,
    /// See [`Self::max_bytes`].
    pub total_bytes: f64,
    /// Peak resident memory during the phase: the largest over pes, and the sum over pes.
    pub max_peak_rss: f64,
    /// See [`Self::max_peak_rss`].
    pub sum_peak_rss: f64,
}

/// Summarises the phase log over all pes (element-wise max and mean). Collective; every pe must
/// have recorded the same phases.
pub fn summarise(comm: &Comm, log: &PhaseLog) -> Vec<PhaseSummary> {
    let phases = log.phases.borrow();
    let secs: Vec<f64> = phases.iter().map(|ph| ph.secs).collect();
    let bytes: Vec<f64> = phases.iter().map(|ph| ph.bytes as f64).collect();
    let (smax, ssum) = comm.all_reduce_f64(&secs);
    let (bmax, bsum) = comm.all_reduce_f64(&bytes);
    let a2a: Vec<f64> = phases.iter().map(|ph| ph.a2a_secs).collect();
    let (_, asum) = comm.all_reduce_f64(&a2a);
    let peaks: Vec<f64> = phases.iter().map(|ph| ph.peak_rss as f64).collect();
    let (pmax, psum) = comm.all_reduce_f64(&peaks);
    let p = comm.size() as f64;
    phases
        .iter()
        .enumerate()
        .map(|(k, ph)| PhaseSummary {
            level: ph.level,
            name: ph.name.clone(),
            max_secs: smax[k],
            mean_secs: ssum[k] / p,
            mean_a2a_secs: asum[k] / p,
            max_bytes: bmax[k],
            total_bytes: bsum[k],
            max_peak_rss: pmax[k],
            sum_peak_rss: psum[k],
        })
        .collect()
}

/// What a phase notes as it starts, to find its peak resident memory when it ends.
pub(crate) struct PhaseStart {
    /// The kernel's high-water mark of the process at the start, bytes (0 if unknown).
    hwm: u64,
    /// The resident size at the start, bytes (0 if unknown).
    rss: u64,
}

impl PhaseStart {
    /// Notes the high-water mark and the resident size now. Also returns the most resident
    /// memory sampled since `log`'s last look (0 without a sampler): it was seen in the
    /// enclosing phase, if any, which keeps it (see [`PhaseLog::peak_stack`]).
    pub(crate) fn now(log: &PhaseLog) -> (PhaseStart, u64) {
        let (rss, hwm) = rss_and_hwm();
        let sampled = log.take_sampled(rss);
        (PhaseStart { hwm, rss }, sampled)
    }

    /// The phase's peak resident memory as it ends, given `inner`, the highest peak of the phases
    /// inside it (see [`phase_peak`]).
    pub(crate) fn peak(&self, log: &PhaseLog, inner: u64) -> u64 {
        let (rss, hwm) = rss_and_hwm();
        let sampled = log.take_sampled(rss);
        phase_peak([self.hwm, hwm], [self.rss, rss], sampled.max(inner))
    }
}

/// A phase's peak resident memory from the kernel's high-water mark at its start and end
/// (`hwm`), the resident sizes then (`rss`) and the most seen in between otherwise (`seen`:
/// samples and the phases inside it). Where the mark rose, the phase reached it and nothing
/// higher: the mark at the end, exact. Else the most seen (sampled: at most the mark).
pub(crate) fn phase_peak(hwm: [u64; 2], rss: [u64; 2], seen: u64) -> u64 {
    if hwm[1] > hwm[0] {
        return hwm[1];
    }
    let seen = seen.max(rss[0]).max(rss[1]);
    match hwm[1] {
        0 => seen,
        mark => seen.min(mark),
    }
}

/// How often the sampler reads the resident size.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// A hold on the process's resident-size sampler: one background thread (per process, whatever
/// the number of holds) reads the resident size from /proc/self/statm every [`SAMPLE_EVERY`]
/// into the maximum of every hold. It starts with the first hold and ends, joined, with the last.
pub(crate) struct Sampler {
    /// The most resident memory sampled since the last [`Sampler::take`], bytes.
    max: Arc<AtomicU64>,
}

/// The sampler's thread (with its stop flag) and the maxima it updates, one per hold.
struct Registry {
    /// One per [`Sampler`] alive.
    maxima: Vec<Arc<AtomicU64>>,
    /// The thread, while one runs.
    thread: Option<(JoinHandle<()>, Arc<AtomicBool>)>,
}

/// The process's one sampler.
static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    maxima: Vec::new(),
    thread: None,
});

/// The registry, locked (a panic while it was held leaves nothing half done).
fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sampler {
    /// A hold on the sampler, its thread started if none runs; None when the thread cannot
    /// start (phases then see only their start and end sizes besides the high-water mark).
    pub(crate) fn start() -> Option<Sampler> {
        let max = Arc::new(AtomicU64::new(rss_bytes()));
        let mut reg = registry();
        if reg.thread.is_none() {
            let stop = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&stop);
            let spawned = thread::Builder::new()
                .name("psa-rss".into())
                .stack_size(64 << 10)
                .spawn(move || sample(&flag));
            match spawned {
                Ok(handle) => reg.thread = Some((handle, stop)),
                Err(e) => {
                    log::debug!("no resident-size sampler (cannot start its thread: {e})");
                    return None;
                }
            }
        }
        reg.maxima.push(Arc::clone(&max));
        Some(Sampler { max })
    }

    /// The most resident memory sampled since the last call (or the start), bytes; the maximum
    /// then starts again from `from`.
    pub(crate) fn take(&self, from: u64) -> u64 {
        self.max.swap(from, Ordering::Relaxed)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        let last = {
            let mut reg = registry();
            reg.maxima.retain(|m| !Arc::ptr_eq(m, &self.max));
            match reg.maxima.is_empty() {
                true => reg.thread.take(),
                false => None,
            }
        };
        if let Some((handle, stop)) = last {
            stop.store(true, Ordering::Release);
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

/// Whether the sampler's thread runs (for the tests).
#[cfg(test)]
fn sampler_running() -> bool {
    registry().thread.is_some()
}

/// The sampler's thread: samples until `stop` is set (without allocating).
fn sample(stop: &AtomicBool) {
    let Ok(statm) = File::open("/proc/self/statm") else {
        return;
    };
    while !stop.load(Ordering::Acquire) {
        if let Some(now) = statm_resident(&statm) {
            for m in &registry().maxima {
                m.fetch_max(now, Ordering::Relaxed);
            }
        }
        thread::park_timeout(SAMPLE_EVERY);
    }
}

/// The resident size from an open /proc/self/statm (its second field, in pages), bytes.
fn statm_resident(statm: &File) -> Option<u64> {
    let mut buf = [0u8; 128];
    let len = statm.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..len]).ok()?;
    let pages: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a system setting.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// Resident memory of this process now in bytes (VmRSS from /proc/self/status), 0 if unknown.
pub fn rss_bytes() -> u64 {
    status_bytes("VmRSS:")
}

/// The resident size and the high-water mark now (VmRSS and VmHWM, one read of
/// /proc/self/status), bytes; 0 for what is unknown.
fn rss_and_hwm() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (
        status_field(&status, "VmRSS:"),
        status_field(&status, "VmHWM:"),
    )
}

/// Peak resident memory of this process in bytes (VmHWM from /proc/self/status), 0 if unknown.
pub fn peak_rss_bytes() -> u64 {
    status_bytes("VmHWM:")
}

/// A size in kB of /proc/self/status (its line starting with `field`), in bytes; 0 if unknown.
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status").map_or(0, |s| status_field(&s, field))
}

/// A size in kB of a /proc/self/status text (its line starting with `field`), in bytes; 0 if
/// it has none.
fn status_field(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// This process's address space now in bytes (VmSize from /proc/self/status: what it has mapped,
/// resident or not), 0 if unknown.
pub fn address_space_bytes() -> u64 {
    status_bytes("VmSize:")
}

/// This process's address-space limit (RLIMIT_AS) in bytes, None when unlimited.
pub fn address_space_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the high-water mark rose the phase's peak is the mark, whatever was seen; else the
    /// most seen, at most the mark; without a mark, the most seen.
    #[test]
    fn a_phase_peak_is_the_mark_where_it_rose_else_the_most_seen() {
        assert_eq!(phase_peak([100, 150], [90, 95], 120), 150, "exact");
        assert_eq!(
            phase_peak([100, 150], [90, 95], 0),
            150,
            "exact, no samples"
        );
        assert_eq!(phase_peak([200, 200], [90, 95], 120), 120, "sampled");
        assert_eq!(
            phase_peak([200, 200], [90, 130], 120),
            130,
            "the end's size"
        );
        assert_eq!(
            phase_peak([200, 200], [140, 95], 0),
            140,
            "the start's size"
        );
        assert_eq!(
            phase_peak([200, 200], [90, 95], 250),
            200,
            "at most the mark"
        );
        assert_eq!(phase_peak([0, 0], [90, 95], 250), 250, "no mark known");
    }

    /// Touches `mib` MiB of fresh memory, holds it for `ms` milliseconds and frees it.
    fn spike(mib: usize, ms: u64) {
        let block = std::hint::black_box(vec![1u8; mib << 20]);
        thread::sleep(Duration::from_millis(ms));
        drop(block);
    }

    /// A spike below the process's high-water mark is seen by the sampler (the mark and the
    /// phase's start and end sizes miss it), counts for the phase around the one it happened in,
    /// and the sampler's thread ends with the last phase. (One test: the sampler is per process.)
    #[test]
    fn the_sampler_sees_a_spike_below_the_mark_and_stops_with_the_last_phase() {
        // The mark well above what the spike will reach.
        spike(192, 0);
        let log = PhaseLog::default();
        let outer = log.start_peak();
        assert!(sampler_running(), "the outermost phase starts the sampler");
        let base = rss_bytes();
        let hwm = peak_rss_bytes();
        let inner = log.start_peak();
        spike(64, 30);
        let inner_peak = log.end_peak(inner);
        let outer_peak = log.end_peak(outer);
        assert!(
            inner_peak >= base + (32 << 20),
            "the spike: base {base}, inner peak {inner_peak}"
        );
        assert!(inner_peak <= hwm.max(peak_rss_bytes()), "at most the mark");
        assert!(outer_peak >= inner_peak, "{outer_peak} < {inner_peak}");
        assert!(log.peak_stack.borrow().is_empty());
        assert!(!sampler_running(), "the sampler stops with the last phase");
        // A hold around several phases keeps one sampler running between them.
        log.hold_sampler();
        for _ in 0..2 {
            let p = log.start_peak();
            log.end_peak(p);
            assert!(sampler_running());
        }
        log.release_sampler();
        assert!(!sampler_running());
    }
}
