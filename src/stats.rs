//! Named phases with timers and byte counts; summaries over pes; peak memory.

use std::cell::RefCell;

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
    /// Peak resident memory of this pe during the phase, bytes (0 when unknown).
    pub peak_rss: u64,
}

/// The phases of a run on this pe, in order. Every pe records the same sequence of phases.
#[derive(Default)]
pub struct PhaseLog {
    /// The phases that ended, in the order they ended (a phase after the phases inside it).
    pub phases: RefCell<Vec<PhaseRecord>>,
    /// The recursion level of the phases running now (see [`crate::Ctx::deeper`]).
    pub(crate) level: std::cell::Cell<usize>,
    /// Every sort's size (records over all pes) and this pe's share of it over the mean (1.0:
    /// perfectly balanced); see [`PhaseLog::max_imbalance`].
    pub(crate) sorts: RefCell<Vec<(u64, f64)>>,
    /// Prefix-doubling rounds pCSS needed (0 for DC3).
    pub refine_rounds: std::cell::Cell<usize>,
    /// For each phase running now, outermost first: the highest peak of the phases it contains
    /// that have ended (each phase resets the kernel's peak when it starts).
    pub(crate) peak_stack: RefCell<Vec<u64>>,
    /// The highest peak resident memory seen so far in this run (the kernel's own mark is reset
    /// by every phase): see [`PhaseLog::run_peak_rss`].
    pub(crate) run_peak: std::cell::Cell<u64>,
}

impl PhaseLog {
    /// Peak resident memory of this pe over the whole run so far, bytes.
    pub fn run_peak_rss(&self) -> u64 {
        self.run_peak.get().max(peak_rss_bytes())
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

    /// Notes a peak seen (by a phase, or before one reset the kernel's mark).
    pub(crate) fn note_peak(&self, bytes: u64) {
        self.run_peak.set(self.run_peak.get().max(bytes));
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

/// Starts measuring a phase's peak resident memory: resets the kernel's high-water mark to the
/// current resident size (`/proc/self/clear_refs` ← 5, which touches no pages). Returns the
/// peak so far, which the enclosing phase keeps (see [`PhaseLog::peak_stack`]).
pub(crate) fn reset_peak_rss() -> u64 {
    let before = peak_rss_bytes();
    let _ = std::fs::write("/proc/self/clear_refs", b"5");
    before
}

/// Resident memory of this process now in bytes (VmRSS from /proc/self/status), 0 if unknown.
pub fn rss_bytes() -> u64 {
    status_bytes("VmRSS:")
}

/// Peak resident memory of this process in bytes (VmHWM from /proc/self/status), 0 if unknown.
pub fn peak_rss_bytes() -> u64 {
    status_bytes("VmHWM:")
}

/// A size in kB of /proc/self/status (its line starting with `field`), in bytes; 0 if unknown.
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
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
