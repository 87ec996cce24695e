//! Named phases with timers and byte counts; summaries over pes; peak memory.

use std::cell::RefCell;
use std::time::Instant;

use crate::comm::Comm;

/// One finished phase on this pe.
#[derive(Clone, Debug)]
pub struct PhaseRecord {
    /// Recursion level (0 = the input text).
    pub level: usize,
    pub name: String,
    pub secs: f64,
    /// Bytes this pe sent to others during the phase.
    pub bytes: u64,
    /// Seconds of the phase spent in all-to-all exchanges (waiting for other pes included).
    pub a2a_secs: f64,
}

/// The phases of a run on this pe, in order. Every pe records the same sequence of phases.
#[derive(Default)]
pub struct PhaseLog {
    pub phases: RefCell<Vec<PhaseRecord>>,
    pub level: std::cell::Cell<usize>,
    pub max_imbalance: std::cell::Cell<f64>,
    /// Prefix-doubling rounds pCSS needed (0 for DC3).
    pub refine_rounds: std::cell::Cell<usize>,
}

/// A phase summarised over all pes.
#[derive(Clone, Debug)]
pub struct PhaseSummary {
    pub level: usize,
    pub name: String,
    pub max_secs: f64,
    pub mean_secs: f64,
    /// Mean over pes of the seconds spent in all-to-all exchanges.
    pub mean_a2a_secs: f64,
    pub max_bytes: f64,
    pub total_bytes: f64,
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
        })
        .collect()
}

/// A running timer for one phase; see [`crate::Ctx::phase`].
pub struct Timer {
    pub start: Instant,
    pub bytes0: u64,
}

/// Peak resident memory of this process in bytes (VmHWM from /proc/self/status), 0 if unknown.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// A JSON string literal for `s`.
pub fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}
