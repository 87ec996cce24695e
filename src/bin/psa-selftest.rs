//! `psa-selftest`: assertions on the distributed primitives, run under `mpirun -n P`.
//!
//! ```text
//! mpirun -n 4 psa-selftest                 # primitives (comm, dist, checker); exit 1 on any failure
//! mpirun -n 4 psa-selftest random-sa --count 100 --max-len 3000 --seed 7
//!                                           # random texts through psa::suffix_array, both algorithms
//! mpirun -n 4 psa-selftest -v --skip chunked   # -v: a line per check; --skip: leave out checks
//!                                           # whose name contains the text
//! ```
//!
//! Every check runs on every pe; a check fails when it fails on any pe (the failing pe prints why,
//! pe 0 prints the verdict). Panics inside a check are caught and count as failures (a panic that
//! happens on only some pes could leave the others waiting in a collective, so a panic ends the
//! whole job with MPI_Abort, exit status non-zero). The last line, from pe 0, is
//! `selftest: N passed, M failed`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mpi::topology::SimpleCommunicator;
use psa::algo::{
    check::check,
    seq::{sa_bytes, sa_ints},
};
use psa::comm::Comm;
use psa::dist::{
    exchange_by, last_of_left, name_sorted, rebalance, right_halo, sample_sort, Layout,
    OwnerCursor, SortKey,
};
use psa::local::cpu::CpuSort;
use psa::local::{Alphabet, DeviceSuffixArray, LocalSort, PooledSa};
use psa::stats::PhaseLog;
use psa::{Algo, Backend, Config, Ctx, Error};

type CheckResult = Result<(), String>;

/// Fails the current check with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {{
        let ok: bool = $cond;
        if !ok {
            return Err(format!($($msg)+));
        }
    }};
}

/// SplitMix64, the same sequence on every pe for the same seed.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6a09_e667_f3bc_c909)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }
}

/// Runs checks and agrees on their verdicts over all pes.
struct Runner {
    ctl: Comm,
    /// Checks whose name contains one of these are skipped (`--skip TEXT`, repeatable; for
    /// investigating failures).
    skip: Vec<String>,
    passed: usize,
    failed: Vec<String>,
    verbose: bool,
}

impl Runner {
    fn check(&mut self, name: &str, f: impl FnOnce() -> CheckResult) {
        if self.skip.iter().any(|s| name.contains(s.as_str())) {
            if self.ctl.rank() == 0 {
                println!("selftest: SKIPPED {name}");
            }
            return;
        }
        let r = match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r,
            Err(e) => {
                // The other pes may be waiting in a collective of this check: end the job rather
                // than hang (the panic message is already on stderr).
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "non-string panic".into());
                eprintln!(
                    "selftest: FAIL [pe {}] {name}: panicked: {msg} (aborting the job)",
                    self.ctl.rank()
                );
                println!(
                    "selftest: FAIL {name}: panicked on pe {}: {msg}",
                    self.ctl.rank()
                );
                self.ctl.abort(3);
            }
        };
        if let Err(msg) = &r {
            eprintln!("selftest: FAIL [pe {}] {name}: {msg}", self.ctl.rank());
        }
        let bad_pes = self.ctl.all_reduce_sum(r.is_err() as u64);
        if bad_pes == 0 {
            self.passed += 1;
            if self.verbose && self.ctl.rank() == 0 {
                println!("selftest: ok   {name}");
            }
        } else {
            self.failed.push(name.to_string());
            if self.ctl.rank() == 0 {
                println!("selftest: FAIL {name} (on {bad_pes} pe(s); see stderr)");
            }
        }
    }
}

/// A context on the world communicator for `algo` and `base_case` with one thread and the CPU
/// backend, `edit` applied to its other settings. Collective.
fn ctx_with(algo: Algo, base_case: usize, edit: impl FnOnce(&mut Config)) -> Ctx {
    let mut config = Config {
        algo,
        base_case,
        threads: 1,
        ..Config::default()
    };
    edit(&mut config);
    Ctx::new(SimpleCommunicator::world(), config)
}

/// Per-pe length patterns for distributed sequences, with empty pes in many places.
fn length_patterns(p: usize) -> Vec<(String, Vec<usize>)> {
    let mut v: Vec<(String, Vec<usize>)> = vec![
        ("all empty".into(), vec![0; p]),
        ("one each".into(), vec![1; p]),
        (
            "all on pe 0".into(),
            (0..p).map(|r| if r == 0 { 50 } else { 0 }).collect(),
        ),
        (
            "all on the last pe".into(),
            (0..p).map(|r| if r == p - 1 { 50 } else { 0 }).collect(),
        ),
        (
            "every other pe empty".into(),
            (0..p).map(|r| if r % 2 == 1 { 0 } else { 3 }).collect(),
        ),
        (
            "only odd pes".into(),
            (0..p).map(|r| if r % 2 == 1 { 2 } else { 0 }).collect(),
        ),
        ("growing".into(), (0..p).map(|r| r * 7).collect()),
        (
            "single element on a middle pe".into(),
            (0..p).map(|r| usize::from(r == p / 2)).collect(),
        ),
    ];
    let mut rng = Rng::new(p as u64 * 77);
    for k in 0..4 {
        v.push((
            format!("random #{k}"),
            (0..p)
                .map(|_| {
                    if rng.below(3) == 0 {
                        0
                    } else {
                        rng.range(1, 40)
                    }
                })
                .collect(),
        ));
    }
    v
}

fn offsets(lens: &[usize]) -> Vec<usize> {
    let mut o = vec![0];
    for &l in lens {
        o.push(o.last().unwrap() + l);
    }
    o
}

/// Cut points of n characters over the pes in the proportions of a length pattern (empty pes stay
/// empty where possible; an all-empty pattern puts everything on the last pe).
fn scaled_cuts(lens: &[usize], n: usize) -> Vec<usize> {
    let p = lens.len();
    let total: usize = lens.iter().sum();
    if total == 0 {
        (0..=p).map(|r| if r == p { n } else { 0 }).collect()
    } else {
        offsets(lens).iter().map(|&o| o * n / total).collect()
    }
}

// ------------------------------------------------------------------------------------------------
// Layout

fn check_layout_block() -> CheckResult {
    for n in [0usize, 1, 2, 3, 5, 7, 100, 1001] {
        for p in 1..=9 {
            let l = Layout::block(n, p);
            ensure!(
                l.len() == n && l.pes() == p,
                "block({n}, {p}): len {} pes {}",
                l.len(),
                l.pes()
            );
            ensure!(l.is_empty() == (n == 0), "block({n}, {p}).is_empty()");
            ensure!(
                l.offsets().len() == p + 1 && l.offsets()[0] == 0,
                "block({n}, {p}) offsets {:?}",
                l.offsets()
            );
            for r in 0..p {
                ensure!(
                    l.start(r) <= l.end(r),
                    "block({n}, {p}) pe {r} range reversed"
                );
                ensure!(
                    l.local_len(r) == l.end(r) - l.start(r),
                    "block({n}, {p}) local_len({r})"
                );
                let lo = n / p;
                ensure!(
                    l.local_len(r) == lo || l.local_len(r) == lo + 1,
                    "block({n}, {p}) pe {r} holds {} (not balanced)",
                    l.local_len(r)
                );
                if r + 1 < p {
                    ensure!(
                        l.end(r) == l.start(r + 1),
                        "block({n}, {p}) ranges not contiguous at {r}"
                    );
                }
            }
            let mut cur = OwnerCursor::new(&l);
            for i in 0..n {
                let o = l.owner(i);
                ensure!(
                    l.start(o) <= i && i < l.end(o),
                    "block({n}, {p}).owner({i}) = {o}"
                );
                ensure!(
                    cur.owner(i) == o,
                    "OwnerCursor disagrees with owner at {i} in block({n}, {p})"
                );
            }
        }
    }
    Ok(())
}

fn check_layout_from_local_len(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    for (name, lens) in length_patterns(p) {
        let l = Layout::from_local_len(comm, lens[me]);
        let o = offsets(&lens);
        ensure!(
            l.offsets() == &o[..],
            "{name}: offsets {:?}, want {o:?}",
            l.offsets()
        );
        ensure!(l.len() == o[p], "{name}: len");
        for i in 0..l.len() {
            let ow = l.owner(i);
            ensure!(
                l.start(ow) <= i && i < l.end(ow),
                "{name}: owner({i}) = {ow} with offsets {o:?}"
            );
        }
        let mut cur = OwnerCursor::new(&l);
        for i in 0..l.len() {
            ensure!(
                cur.owner(i) == l.owner(i),
                "{name}: OwnerCursor({i}) with empty pes, offsets {o:?}"
            );
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Comm: reductions, scans, gathers

fn check_reductions(comm: &Comm) -> CheckResult {
    let p = comm.size() as u64;
    let r = comm.rank() as u64;
    ensure!(
        comm.all_reduce_sum(r + 1) == p * (p + 1) / 2,
        "all_reduce_sum"
    );
    ensure!(comm.all_reduce_max(r * 3) == (p - 1) * 3, "all_reduce_max");
    ensure!(comm.all_reduce_min(r + 10) == 10, "all_reduce_min");
    ensure!(comm.any(r == p - 1), "any(true on last pe)");
    ensure!(!comm.any(false), "any(false)");
    let big = 1u64 << 40;
    ensure!(
        comm.all_reduce_sum(big) == big * p,
        "all_reduce_sum of values above 2^32"
    );
    let (mx, sum) = comm.all_reduce_f64(&[r as f64, 1.0]);
    ensure!(
        mx == vec![(p - 1) as f64, 1.0] && sum == vec![(p * (p - 1) / 2) as f64, p as f64],
        "all_reduce_f64"
    );
    let (mx, sum) = comm.all_reduce_f64(&[]);
    ensure!(mx.is_empty() && sum.is_empty(), "all_reduce_f64 of nothing");
    Ok(())
}

fn check_exscan(comm: &Comm) -> CheckResult {
    let r = comm.rank() as u64;
    let got = comm.exscan_sum(r + 1);
    ensure!(
        got == r * (r + 1) / 2,
        "exscan_sum(rank+1) on pe {r} = {got}, want {}",
        r * (r + 1) / 2
    );
    let got = comm.exscan_sum(0);
    ensure!(got == 0, "exscan_sum(0) = {got}");
    // Zeros in between, values above 2^32.
    let x = if r.is_multiple_of(2) { 5u64 << 33 } else { 0 };
    let want: u64 = (0..r).filter(|q| q.is_multiple_of(2)).count() as u64 * (5u64 << 33);
    let got = comm.exscan_sum(x);
    ensure!(
        got == want,
        "exscan_sum with zeros: pe {r} got {got}, want {want}"
    );
    Ok(())
}

fn check_gathers(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    let g = comm.all_gather(me as u64 * 10 + 1);
    ensure!(
        g == (0..p).map(|r| r as u64 * 10 + 1).collect::<Vec<_>>(),
        "all_gather(u64) = {g:?}"
    );
    let g = comm.all_gather([me as u8, 0xff, 7]);
    ensure!(
        g == (0..p).map(|r| [r as u8, 0xff, 7]).collect::<Vec<_>>(),
        "all_gather([u8; 3]) = {g:?}"
    );
    for (name, lens) in length_patterns(p) {
        let o = offsets(&lens);
        let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64 * 3).collect();
        let got = comm.all_gather_v(&local);
        let want: Vec<u64> = (0..o[p]).map(|i| i as u64 * 3).collect();
        ensure!(got == want, "all_gather_v(u64), {name}: got {got:?}");
        let local: Vec<u8> = (o[me]..o[me + 1]).map(|i| i as u8 ^ 0x5a).collect();
        let got = comm.all_gather_v(&local);
        let want: Vec<u8> = (0..o[p]).map(|i| i as u8 ^ 0x5a).collect();
        ensure!(got == want, "all_gather_v(u8), {name}: got {got:?}");
    }
    for root in [0, p - 1, p / 2] {
        let mut x: u64 = if me == root {
            0xdead_beef_0000 + root as u64
        } else {
            me as u64
        };
        comm.broadcast(&mut x, root);
        ensure!(
            x == 0xdead_beef_0000 + root as u64,
            "broadcast from {root}: got {x:#x}"
        );
    }
    Ok(())
}

fn check_agree(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    let ok: psa::Result<u32> = Ok(5);
    ensure!(
        matches!(comm.agree(ok), Ok(5)),
        "agree(Ok) on every pe must stay Ok"
    );
    // Errors on the last pe and on pe p/2: the lowest failing pe keeps its error, the others get
    // Remote naming it.
    let failing = [p - 1, p / 2];
    let lowest = *failing.iter().min().unwrap();
    let mine: psa::Result<u32> = if failing.contains(&me) {
        Err(Error::Invalid(format!("boom on {me}")))
    } else {
        Ok(1)
    };
    match comm.agree(mine) {
        Err(Error::Invalid(m)) if me == lowest => {
            ensure!(m == format!("boom on {me}"), "own error changed: {m}")
        }
        Err(Error::Remote { pe, .. }) if me != lowest => {
            ensure!(pe == lowest, "Remote names pe {pe}, want {lowest}")
        }
        other => {
            return Err(format!(
                "agree with errors on {failing:?}: pe {me} got {other:?}"
            ))
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// all-to-all

/// How many records pe `s` sends to pe `d` in pattern `pat`.
fn a2a_count(pat: usize, s: usize, d: usize, p: usize) -> usize {
    match pat {
        0 => 0,                       // nothing at all
        1 => (s * 7 + d * 3) % 5,     // dense, some zeros
        2 => usize::from(s == d) * 4, // only to itself
        3 => {
            if s == 0 {
                20 + d
            } else {
                0
            }
        } // only pe 0 sends
        4 => {
            if d == p - 1 {
                9 + s
            } else {
                0
            }
        } // only the last pe receives
        5 => {
            if (s + d).is_multiple_of(2) {
                0
            } else {
                13
            }
        } // a checkerboard of empty parts
        _ => (s * 31 + d * 17 + pat) % 23, // larger, uneven
    }
}

fn a2a_value(s: usize, d: usize, k: usize) -> u64 {
    ((s as u64) << 40) | ((d as u64) << 20) | k as u64
}

/// Sends pattern `pat` as records of type T (built by `mk` from the u64 value) and checks the
/// receive side: grouped by source pe, in order within each source. Also checks bytes_sent.
fn a2a_pattern<T, F>(comm: &Comm, pat: usize, mk: F) -> CheckResult
where
    T: bytemuck::Pod + PartialEq + std::fmt::Debug,
    F: Fn(u64) -> T,
{
    let p = comm.size();
    let me = comm.rank();
    let counts: Vec<usize> = (0..p).map(|d| a2a_count(pat, me, d, p)).collect();
    let mut send = Vec::new();
    for (d, &c) in counts.iter().enumerate() {
        for k in 0..c {
            send.push(mk(a2a_value(me, d, k)));
        }
    }
    let mut want = Vec::new();
    for s in 0..p {
        for k in 0..a2a_count(pat, s, me, p) {
            want.push(mk(a2a_value(s, me, k)));
        }
    }
    let before = comm.bytes_sent();
    let got = comm.all_to_all_v(&send, &counts);
    let sent = comm.bytes_sent() - before;
    let want_sent = ((send.len() - counts[me]) * std::mem::size_of::<T>()) as u64;
    ensure!(
        got.len() == want.len(),
        "pattern {pat}: received {} records, want {}",
        got.len(),
        want.len()
    );
    if let Some(j) = got.iter().zip(&want).position(|(a, b)| a != b) {
        return Err(format!(
            "pattern {pat}: record {j} is {:?}, want {:?}",
            got[j], want[j]
        ));
    }
    ensure!(
        sent == want_sent,
        "pattern {pat}: bytes_sent grew by {sent}, want {want_sent}"
    );
    Ok(())
}

fn check_all_to_all(comm: &Comm) -> CheckResult {
    for pat in 0..8 {
        a2a_pattern(comm, pat, |v| v)?;
        a2a_pattern(comm, pat, |v| [(v >> 40) as u8, (v >> 20) as u8, v as u8])?;
        a2a_pattern(comm, pat, |v| {
            (v as u8) ^ ((v >> 20) as u8) ^ ((v >> 40) as u8).rotate_left(3)
        })?;
        a2a_pattern(comm, pat, |v| (v as u128) << 64 | (v as u128 ^ 0xffff))?;
    }
    Ok(())
}

/// Ends a step of a check on every pe together: an error on any pe is an error on all (so no pe
/// leaves for the next collective while another still waits in this one).
fn agreed(comm: &Comm, r: CheckResult) -> CheckResult {
    if comm.any(r.is_err()) {
        Err(r.err().unwrap_or_else(|| "failed on another pe".into()))
    } else {
        Ok(())
    }
}

/// stream_to_root and stream_from_root: every record arrives once, in pe order and in pieces of
/// the given size, for every root, for empty pes and pieces of 1 record up to whole slices; with
/// the root's own buffer, a buffer given by the caller, and a given buffer too short to use.
fn check_streams(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    for (shape, lens) in length_patterns(p) {
        let offs = offsets(&lens);
        let value = |i: usize| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xff;
        let mine: Vec<u64> = (offs[me]..offs[me + 1]).map(value).collect();
        for root in [0, p - 1, p / 2] {
            for (piece, given) in [
                (1usize, None),
                (3, Some(3)),
                (64, None),
                (64, Some(64)),
                (64, Some(2)),
            ] {
                let mut stage = given.map(|g| vec![0u64; g]);
                let mut got: Vec<(usize, u64)> = Vec::new();
                let mut longest = 0;
                comm.stream_to_root(&mine, root, piece, stage.as_deref_mut(), |src, c| {
                    longest = longest.max(c.len());
                    got.extend(c.iter().map(|&v| (src, v)));
                });
                let to_root = (|| {
                    if me == root {
                        let want: Vec<(usize, u64)> = (0..p)
                            .flat_map(|r| (offs[r]..offs[r + 1]).map(move |i| (r, value(i))))
                            .collect();
                        ensure!(
                            got == want,
                            "{shape}: stream_to_root (root {root}, piece {piece}, stage {given:?}) delivered {} records, {} expected, or out of order",
                            got.len(),
                            want.len()
                        );
                        ensure!(longest <= piece, "{shape}: a piece of {longest} > {piece}");
                    } else {
                        ensure!(got.is_empty(), "{shape}: a non-root pe was handed records");
                    }
                    Ok(())
                })();
                agreed(comm, to_root)?;
                let mut back = vec![u64::MAX; lens[me]];
                comm.stream_from_root(
                    &mut back,
                    root,
                    piece,
                    stage.as_deref_mut(),
                    |dst, off, out| {
                        for (j, o) in out.iter_mut().enumerate() {
                            *o = value(offs[dst] + off + j) ^ 1;
                        }
                    },
                );
                let want: Vec<u64> = mine.iter().map(|v| v ^ 1).collect();
                agreed(
                    comm,
                    (|| {
                        ensure!(
                            back == want,
                            "{shape}: stream_from_root (root {root}, piece {piece}, stage {given:?}) gave pe {me} the wrong records"
                        );
                        Ok(())
                    })(),
                )?;
            }
        }
    }
    Ok(())
}

/// An all-to-all of bytes in which this pe sends or receives nothing (an empty `Vec<u8>`).
fn check_all_to_all_empty_bytes(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    // Every pe sends its bytes to pe 0 (pes other than 0 then receive nothing) — the shape of
    // gathering a byte text for a sequential base case.
    let send: Vec<u8> = vec![me as u8; me % 3];
    let mut counts = vec![0usize; p];
    counts[0] = send.len();
    let got = comm.all_to_all_v(&send, &counts);
    let want: Vec<u8> = if me == 0 {
        (0..p).flat_map(|s| vec![s as u8; s % 3]).collect()
    } else {
        Vec::new()
    };
    ensure!(
        got == want,
        "gather bytes on pe 0: got {got:?}, want {want:?}"
    );
    // And nothing at all.
    let got = comm.all_to_all_v::<u8>(&[], &vec![0; p]);
    ensure!(got.is_empty(), "empty byte exchange returned {got:?}");
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// exchange_by, rebalance

fn check_exchange_by(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    let dest = |x: &u64| ((x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize) % p;
    for (name, lens) in length_patterns(p) {
        let o = offsets(&lens);
        let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64).collect();
        let got = exchange_by(comm, &local, dest);
        let want: Vec<u64> = (0..o[p] as u64).filter(|x| dest(x) == me).collect();
        // Ids ascend with the source pe and within it, so "by source, then original order" is
        // simply ascending here.
        ensure!(
            got == want,
            "{name}: exchange_by got {got:?}, want {want:?}"
        );
    }
    Ok(())
}

fn check_rebalance(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    let pats = length_patterns(p);
    for (name, lens) in &pats {
        let o = offsets(lens);
        let n = o[p];
        // Into the block layout, and into every other pattern of the same total.
        let mut targets = vec![("block".to_string(), Layout::block(n, p))];
        for (tn, tl) in &pats {
            if offsets(tl)[p] == n && tn != name {
                targets.push((tn.clone(), layout_of(comm, tl[me])));
            }
        }
        for (tname, target) in targets {
            let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64 + 1000).collect();
            let got = rebalance(comm, local, &target);
            let want: Vec<u64> = (target.start(me)..target.end(me))
                .map(|i| i as u64 + 1000)
                .collect();
            ensure!(
                got == want,
                "rebalance from '{name}' to '{tname}': got {got:?}, want {want:?}"
            );
        }
    }
    Ok(())
}

fn layout_of(comm: &Comm, local_len: usize) -> Layout {
    Layout::from_local_len(comm, local_len)
}

// ------------------------------------------------------------------------------------------------
// shift: right_halo, last_of_left

fn check_right_halo(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    for (name, lens) in length_patterns(p) {
        let o = offsets(&lens);
        let n = o[p];
        for k in [0usize, 1, 2, 3, 5, 60] {
            let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64 * 2 + 1).collect();
            let got = right_halo(comm, &local, k);
            let want: Vec<u64> = (o[me + 1]..(o[me + 1] + k).min(n))
                .map(|i| i as u64 * 2 + 1)
                .collect();
            ensure!(
                got == want,
                "right_halo(k = {k}) u64, {name} {lens:?}: got {got:?}, want {want:?}"
            );
            let local: Vec<u8> = (o[me]..o[me + 1]).map(|i| (i * 5 + 1) as u8).collect();
            let got = right_halo(comm, &local, k);
            let want: Vec<u8> = (o[me + 1]..(o[me + 1] + k).min(n))
                .map(|i| (i * 5 + 1) as u8)
                .collect();
            ensure!(
                got == want,
                "right_halo(k = {k}) u8, {name} {lens:?}: got {got:?}, want {want:?}"
            );
        }
    }
    Ok(())
}

fn check_last_of_left(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    for (name, lens) in length_patterns(p) {
        let o = offsets(&lens);
        let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64 + 7).collect();
        let got = last_of_left(comm, &local);
        let want = if o[me] == 0 {
            None
        } else {
            Some(o[me] as u64 - 1 + 7)
        };
        ensure!(
            got == want,
            "last_of_left u64, {name} {lens:?}: got {got:?}, want {want:?}"
        );
        let local: Vec<u8> = (o[me]..o[me + 1]).map(|i| i as u8 ^ 0xa5).collect();
        let got = last_of_left(comm, &local);
        let want = if o[me] == 0 {
            None
        } else {
            Some((o[me] - 1) as u8 ^ 0xa5)
        };
        ensure!(
            got == want,
            "last_of_left u8, {name} {lens:?}: got {got:?}, want {want:?}"
        );
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// naming

fn check_name_sorted(comm: &Comm) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    let mut pats = length_patterns(p);
    pats.push(("long".into(), (0..p).map(|r| 100 + r * 13).collect()));
    for (name, lens) in pats {
        let o = offsets(&lens);
        let n = o[p];
        for run in [1usize, 2, 3, 7, 1000] {
            // A sorted global sequence with runs of equal keys (runs crossing pe boundaries and
            // empty pes); keys are not consecutive numbers.
            let key = |i: usize| (i / run) as u64 * 10 + 3;
            let local: Vec<u64> = (o[me]..o[me + 1]).map(key).collect();
            let (names, distinct) = name_sorted(comm, &local, |a, b| a == b);
            let want: Vec<u64> = (o[me]..o[me + 1]).map(|i| (i / run) as u64 + 1).collect();
            let want_distinct = n.div_ceil(run) as u64;
            ensure!(
                names == want,
                "name_sorted {name} {lens:?}, runs of {run}: names {names:?}, want {want:?}"
            );
            ensure!(
                distinct == want_distinct,
                "name_sorted {name}, runs of {run}: {distinct} distinct, want {want_distinct}"
            );
        }
        // "same" may look at part of a record only.
        let local: Vec<[u64; 2]> = (o[me]..o[me + 1])
            .map(|i| [(i / 4) as u64, i as u64])
            .collect();
        let (names, _) = name_sorted(comm, &local, |a, b| a[0] == b[0]);
        let want: Vec<u64> = (o[me]..o[me + 1]).map(|i| (i / 4) as u64 + 1).collect();
        ensure!(
            names == want,
            "name_sorted on a record field, {name}: {names:?}, want {want:?}"
        );
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// sample sort

/// Checks a sample-sort result: each pe's run is sorted, runs are in pe order, every input record
/// is there exactly once (records carry their global index in the low 32 bits), and the fullest
/// pe holds at most 1.5·n/p + 64 records.
fn verify_sorted<T: SortKey + std::fmt::Debug>(
    comm: &Comm,
    what: &str,
    out: &[T],
    n: usize,
    index_of: impl Fn(&T) -> u64,
    check_balance: bool,
) -> CheckResult {
    let p = comm.size();
    let me = comm.rank();
    if let Some(j) = out.windows(2).position(|w| w[0] >= w[1]) {
        return Err(format!(
            "{what}: pe {me} is not sorted at {j}: {:?} >= {:?}",
            out[j],
            out[j + 1]
        ));
    }
    let prev = last_of_left(comm, out);
    if let (Some(prev), Some(first)) = (prev, out.first()) {
        ensure!(prev < *first, "{what}: pe {me}'s first record {first:?} is not above its left neighbour's last {prev:?}");
    }
    let total = comm.all_reduce_sum(out.len() as u64) as usize;
    ensure!(
        total == n,
        "{what}: {total} records after the sort, {n} before"
    );
    // Every index exactly once: send each to the owner of its index in a block layout.
    let l = Layout::block(n, p);
    let idx: Vec<u64> = out.iter().map(&index_of).collect();
    ensure!(
        idx.iter().all(|&i| (i as usize) < n),
        "{what}: an index is out of range"
    );
    let got = exchange_by(comm, &idx, |&i| l.owner(i as usize));
    let mut seen = vec![false; l.local_len(me)];
    for i in got {
        let s = &mut seen[i as usize - l.start(me)];
        ensure!(!*s, "{what}: record with index {i} appears twice");
        *s = true;
    }
    ensure!(seen.iter().all(|&s| s), "{what}: some record went missing");
    if check_balance {
        let max = comm.all_reduce_max(out.len() as u64) as f64;
        let bound = 1.5 * n as f64 / p as f64 + 64.0;
        ensure!(
            max <= bound,
            "{what}: the fullest pe holds {max} records of {n} (bound {bound:.0} = 1.5·n/p + 64)"
        );
    }
    Ok(())
}

fn check_sample_sort(ctx: &Ctx, label: &str) -> CheckResult {
    let comm = &ctx.comm;
    let p = comm.size();
    let me = comm.rank();
    let mut rng = Rng::new(42 + me as u64);
    // Distributions of the input over the pes.
    type Shape = Box<dyn Fn(usize) -> Vec<usize>>;
    let shapes: Vec<(&str, Shape)> = vec![
        (
            "block",
            Box::new(move |n| (0..p).map(|r| Layout::block(n, p).local_len(r)).collect()),
        ),
        (
            "all on pe 0",
            Box::new(move |n| (0..p).map(|r| if r == 0 { n } else { 0 }).collect()),
        ),
        (
            "all on the last pe",
            Box::new(move |n| (0..p).map(|r| if r == p - 1 { n } else { 0 }).collect()),
        ),
    ];
    for n in [0usize, 1, 3, 1000, 60_000] {
        for (shape, lens_of) in &shapes {
            let lens = lens_of(n);
            let o = offsets(&lens);
            let big = n >= 1000;
            // All keys equal: (7 << 32) | global index.
            let data: Vec<u64> = (o[me]..o[me + 1])
                .map(|i| (7u64 << 32) | i as u64)
                .collect();
            let out = sample_sort(ctx, data);
            verify_sorted(
                comm,
                &format!("{label} equal u64 keys, n = {n}, {shape}"),
                &out,
                n,
                |x| x & 0xffff_ffff,
                big,
            )?;
            // Few distinct keys in random order.
            let data: Vec<u64> = (o[me]..o[me + 1])
                .map(|i| (rng.below(3) << 32) | i as u64)
                .collect();
            let out = sample_sort(ctx, data);
            verify_sorted(
                comm,
                &format!("{label} 3 distinct u64 keys, n = {n}, {shape}"),
                &out,
                n,
                |x| x & 0xffff_ffff,
                big,
            )?;
            // Random 128-bit keys, index in the low bits.
            let data: Vec<u128> = (o[me]..o[me + 1])
                .map(|i| {
                    ((rng.next_u64() as u128) << 64) | (rng.below(2) as u128) << 32 | i as u128
                })
                .collect();
            let out = sample_sort(ctx, data);
            verify_sorted(
                comm,
                &format!("{label} random u128 keys, n = {n}, {shape}"),
                &out,
                n,
                |x| (*x as u64) & 0xffff_ffff,
                big,
            )?;
            // All u128 keys equal.
            let data: Vec<u128> = (o[me]..o[me + 1])
                .map(|i| (u128::MAX << 32) | i as u128)
                .collect();
            let out = sample_sort(ctx, data);
            verify_sorted(
                comm,
                &format!("{label} equal u128 keys, n = {n}, {shape}"),
                &out,
                n,
                |x| (*x as u64) & 0xffff_ffff,
                big,
            )?;
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// The distributed checker

fn check_checker(ctx: &Ctx) -> CheckResult {
    let comm = &ctx.comm;
    let p = comm.size();
    let me = comm.rank();
    for (tname, text) in [
        (
            "random",
            (0..5000u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 % 4)
                .collect::<Vec<u8>>(),
        ),
        ("a^n", vec![b'a'; 777]),
        ("3 bytes", b"cab".to_vec()),
    ] {
        let n = text.len();
        let sa = sa_bytes(&text, 1);
        let l = Layout::block(n, p);
        let (lo, hi) = (l.start(me), l.end(me));
        let t = &text[lo..hi];
        let r = check(ctx, t, &sa[lo..hi], &l);
        ensure!(
            r.is_ok(),
            "{tname}: check rejects the correct suffix array: {:?}",
            r.err()
        );
        // Two neighbouring entries swapped (somewhere in the middle): wrong order.
        let mut bad = sa.clone();
        bad.swap(n / 2, n / 2 - 1);
        let r = check(ctx, t, &bad[lo..hi], &l);
        ensure!(
            r.is_err(),
            "{tname}: check accepts a suffix array with SA[{}] and SA[{}] swapped",
            n / 2 - 1,
            n / 2
        );
        // A duplicate entry.
        let mut bad = sa.clone();
        bad[n - 1] = bad[0];
        let r = check(ctx, t, &bad[lo..hi], &l);
        ensure!(
            r.is_err(),
            "{tname}: check accepts a suffix array with a duplicate entry"
        );
        // An entry out of range.
        let mut bad = sa.clone();
        bad[n / 3] = n as u64;
        let r = check(ctx, t, &bad[lo..hi], &l);
        ensure!(r.is_err(), "{tname}: check accepts an entry equal to n");
        // The whole text reversed in order: the SA of a different text.
        let rev: Vec<u64> = sa.iter().rev().copied().collect();
        let r = check(ctx, t, &rev[lo..hi], &l);
        ensure!(
            r.is_err(),
            "{tname}: check accepts the reversed suffix array"
        );
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// The library's threads

/// A context whose thread count is that of the calling thread's pool (1 here: `main` sizes the
/// global pool so, as `psa` does) runs the library on the calling thread; one with another count
/// runs it on a pool of its own of that size (calling MPI from there: this binary asks for
/// `Threading::Serialized`). Both give the right suffix array.
fn check_ctx_threads(world: &Comm) -> CheckResult {
    let me = world.rank();
    let text: Vec<u8> = b"abracadabra\0cadabra".repeat(23);
    let want = sa_bytes(&text, 1);
    let cuts = Layout::block(text.len(), world.size()).offsets().to_vec();
    let caller = std::thread::current().id();
    for threads in [1usize, 3] {
        for algo in [Algo::Dc3, Algo::Css] {
            let ctx = ctx_with(algo, 16, |c| c.threads = threads);
            let (pool, on) =
                ctx.install(|_| (rayon::current_num_threads(), std::thread::current().id()));
            ensure!(
                pool == threads,
                "threads = {threads}: the library ran on a pool of {pool} threads"
            );
            ensure!(
                (on == caller) == (threads == 1),
                "threads = {threads}: ran on the calling thread: {}",
                on == caller
            );
            let got = psa::suffix_array(&ctx, &text[cuts[me]..cuts[me + 1]])
                .map_err(|e| format!("{e}"))?;
            ensure!(
                got == want[cuts[me]..cuts[me + 1]],
                "threads = {threads}, {algo:?}: pe {me} got {got:?}, want {:?}",
                &want[cuts[me]..cuts[me + 1]]
            );
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// suffix_array through the library on uneven distributions (small, fixed cases)

fn check_suffix_array_uneven(world: &Comm) -> CheckResult {
    let p = world.size();
    let me = world.rank();
    let text: Vec<u8> = b"mississippi\0\xff\0\xffmississippi$banana".to_vec();
    let want = sa_bytes(&text, 1);
    let n = text.len();
    for (name, lens) in length_patterns(p) {
        let cuts = scaled_cuts(&lens, n);
        for algo in [Algo::Dc3, Algo::Css] {
            for base in [4usize, 5, 1 << 20] {
                let ctx = ctx_with(algo, base, |_| {});
                let got = psa::suffix_array(&ctx, &text[cuts[me]..cuts[me + 1]])
                    .map_err(|e| format!("{e}"))?;
                ensure!(
                    got == want[cuts[me]..cuts[me + 1]],
                    "suffix_array {algo:?} base {base}, split {name} {cuts:?}: pe {me} got {got:?}, want {:?}",
                    &want[cuts[me]..cuts[me + 1]]
                );
            }
        }
    }
    // base_case below 4 is an error on every pe, not a hang.
    let ctx = ctx_with(Algo::Dc3, 3, |_| {});
    ensure!(
        psa::suffix_array(&ctx, b"abc").is_err(),
        "base_case = 3 must be rejected"
    );
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// The relay of a whole text to one pe's device (psa::algo::pooled), with the device played by the
// CPU: the GPU's own part is tested on the GPU host (tests/gpu.rs, scripts/gpu-pool-test.sh); this
// tests the streaming, the alphabet, the widening and every failure's fall-back on any machine.

/// Which step of the stand-in device fails.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PoolFail {
    Never,
    Start,
    Upload,
    Build,
    Download,
}

/// A backend whose pooled suffix array collects the pieces and runs libsais (a test may hold the
/// whole text on one pe; psa itself never does).
struct CpuPool {
    cpu: CpuSort,
    fail: PoolFail,
    /// false: take integer texts only (a DC3 recursion level), not the byte text.
    bytes_too: bool,
    /// Set when the failure was injected (a text too short for the failing step has none).
    injected: Arc<AtomicBool>,
}

struct CpuPoolSa {
    n: usize,
    alphabet: Alphabet,
    text: Vec<u64>,
    sa: Vec<u64>,
    fail: PoolFail,
    injected: Arc<AtomicBool>,
}

impl LocalSort for CpuPool {
    fn name(&self) -> &'static str {
        "cpu-pool"
    }
    fn sort_u64(&self, v: &mut [u64]) {
        self.cpu.sort_u64(v)
    }
    fn sort_u128(&self, v: &mut [u128]) {
        self.cpu.sort_u128(v)
    }
    fn device_suffix_array(&self) -> Option<&dyn DeviceSuffixArray> {
        Some(self)
    }
}

impl DeviceSuffixArray for CpuPool {
    fn suffix_array_max_len(&self) -> usize {
        1 << 40
    }
    fn pooled_sa(&self, n: usize, alphabet: &Alphabet) -> Option<Box<dyn PooledSa + '_>> {
        if matches!(alphabet, Alphabet::Bytes(_)) && !self.bytes_too {
            return None;
        }
        if self.fail == PoolFail::Start {
            self.injected.store(true, Ordering::Relaxed);
        }
        (self.fail != PoolFail::Start).then(|| {
            Box::new(CpuPoolSa {
                n,
                alphabet: *alphabet,
                text: Vec::new(),
                sa: Vec::new(),
                fail: self.fail,
                injected: self.injected.clone(),
            }) as Box<dyn PooledSa>
        })
    }
}

impl PooledSa for CpuPoolSa {
    fn upload(&mut self, piece: &[u8]) -> Result<(), String> {
        if self.fail == PoolFail::Upload {
            self.injected.store(true, Ordering::Relaxed);
            return Err("injected upload failure".into());
        }
        match self.alphabet {
            Alphabet::Bytes(used) => {
                if let Some(&b) = piece.iter().find(|&&b| !used[b as usize]) {
                    return Err(format!("byte {b} is missing from the alphabet"));
                }
                self.text.extend(piece.iter().map(|&b| b as u64));
            }
            Alphabet::Ints(max) => {
                for w in piece.chunks(4) {
                    let v = u32::from_le_bytes(w.try_into().map_err(|_| "a partial u32")?) as u64;
                    if v > max {
                        return Err(format!("{v} is above the alphabet's largest value {max}"));
                    }
                    self.text.push(v);
                }
            }
        }
        Ok(())
    }
    fn build(&mut self) -> Result<(), String> {
        if self.text.len() != self.n {
            return Err(format!(
                "{} of {} characters arrived",
                self.text.len(),
                self.n
            ));
        }
        if self.fail == PoolFail::Build {
            self.injected.store(true, Ordering::Relaxed);
            return Err("injected build failure".into());
        }
        self.sa = match self.alphabet {
            Alphabet::Bytes(_) => {
                sa_bytes(&self.text.iter().map(|&b| b as u8).collect::<Vec<u8>>(), 1)
            }
            Alphabet::Ints(_) => sa_ints(&self.text, 1),
        };
        Ok(())
    }
    fn download(&mut self, offset: usize, out: &mut [u32]) -> Result<(), String> {
        if self.fail == PoolFail::Download {
            self.injected.store(true, Ordering::Relaxed);
            return Err("injected download failure".into());
        }
        let len = out.len();
        for (o, &v) in out.iter_mut().zip(&self.sa[offset..offset + len]) {
            *o = v as u32;
        }
        Ok(())
    }
}

fn check_pooled(world: &Comm) -> CheckResult {
    let p = world.size();
    let me = world.rank();
    let mut texts: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("1 byte", b"x".to_vec()),
        ("0x00/0xff", b"\0\xff\0\xff\xff\0\0\0\xff\0".repeat(7)),
        ("a^n", vec![b'a'; 301]),
        ("periodic", b"abcab".repeat(61)),
        ("mississippi", b"mississippi$banana\0".repeat(9)),
    ];
    let mut rng = Rng::new(99);
    texts.push(("random", (0..500).map(|_| rng.below(256) as u8).collect()));
    // Level 0: the byte text (css); level 1: DC3's first recursion level (names), with the
    // stand-in refusing the byte text and a base case of 4. Pieces of 3 records: many messages
    // per pe (the default sends one here). One context per (level, piece), made once (making one
    // is collective) and given a fresh phase log and stand-in device for every case.
    let mut ctxs: Vec<Ctx> = [(0, None), (0, Some(3)), (1, None), (1, Some(3))]
        .into_iter()
        .map(|(level, piece): (usize, Option<usize>)| {
            let (algo, base) = if level == 0 {
                (Algo::Css, 1 << 20)
            } else {
                (Algo::Dc3, 4)
            };
            ctx_with(algo, base, |c| {
                c.backend = Backend::Gpu;
                if let Some(k) = piece {
                    c.tune.pool_piece = k;
                }
            })
        })
        .collect();
    for (tname, text) in &texts {
        let want = sa_bytes(text, 1);
        let n = text.len();
        for (lname, lens) in length_patterns(p) {
            let cuts = scaled_cuts(&lens, n);
            for (level, fail, piece) in [0usize, 1].into_iter().flat_map(|l| {
                [
                    PoolFail::Never,
                    PoolFail::Start,
                    PoolFail::Upload,
                    PoolFail::Build,
                    PoolFail::Download,
                ]
                .into_iter()
                .flat_map(move |f| [(l, f, None), (l, f, Some(3usize))])
            }) {
                let ctx = &mut ctxs[2 * level + usize::from(piece.is_some())];
                ctx.log = PhaseLog::default();
                let injected = Arc::new(AtomicBool::new(false));
                ctx.sorter = Box::new(CpuPool {
                    cpu: CpuSort::new(1),
                    fail,
                    bytes_too: level == 0,
                    injected: injected.clone(),
                });
                let ctx = &*ctx;
                // (An error from suffix_array is agreed by every pe, so `?` leaves on all.)
                let got = psa::suffix_array(ctx, &text[cuts[me]..cuts[me + 1]])
                    .map_err(|e| format!("{e}"))?;
                let mut f = injected.load(Ordering::Relaxed) as u64;
                world.broadcast(&mut f, 0);
                let injected = f == 1;
                let case = format!(
                    "{tname}, split {lname} {cuts:?}, level {level}, failing {fail:?}, piece {piece:?}"
                );
                agreed(
                    world,
                    (|| {
                        ensure!(
                            got == want[cuts[me]..cuts[me + 1]],
                            "{case}: pe {me} got {got:?}, want {:?}",
                            &want[cuts[me]..cuts[me + 1]]
                        );
                        // Without a failure (p > 1), the stand-in device built it all.
                        let phases = ctx.log.phases.borrow();
                        let at = |l: usize| -> Vec<&str> {
                            phases
                                .iter()
                                .filter(|r| r.level == l)
                                .map(|r| r.name.as_str())
                                .collect()
                        };
                        let (top, next, deeper) = (at(level), at(level + 1), at(level + 2));
                        if level == 1 && (*tname == "a^n" || *tname == "periodic") {
                            ensure!(
                                !top.is_empty(),
                                "{case}: DC3 did not recurse (level 0: {:?})",
                                at(0)
                            );
                        }
                        if top.is_empty() || (level == 1 && top == ["base case"]) {
                            // Solved before reaching this level.
                        } else if p > 1 && fail == PoolFail::Never {
                            ensure!(
                        top == ["device suffix array"] && next.is_empty(),
                        "{case}: not built by the pooled device: phases {top:?}, then {next:?}"
                    );
                        } else if p > 1 && injected {
                            ensure!(
                                top.len() > 1
                                    && (level == 0 || !next.is_empty() || !deeper.is_empty()),
                                "{case}: no fall-back ran: phases {top:?}, then {next:?}"
                            );
                        }
                        Ok(())
                    })(),
                )?;
                if level == 0 {
                    check_pooled_file(
                        world,
                        ctx,
                        &text[cuts[me]..cuts[me + 1]],
                        &want,
                        &case,
                        fail,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// The file job's path (`suffix_array_or_write`): with the stand-in device at p > 1 pe 0 writes
/// the whole SA to the file itself; on a failure every pe writes its part. The file must hold
/// `want` at widths 4 and 8. Collective.
fn check_pooled_file(
    world: &Comm,
    ctx: &psa::Ctx,
    mine: &[u8],
    want: &[u64],
    case: &str,
    fail: PoolFail,
) -> CheckResult {
    let mut tag = std::process::id() as u64;
    world.broadcast(&mut tag, 0);
    let path = std::env::temp_dir().join(format!("psa-selftest-pooled-{tag}.sa"));
    for width in [4usize, 8] {
        let out = psa::io::OutputFile::create(world, &path, &[], false, want.len(), width)
            .map_err(|e| format!("{case}: {e}"))?;
        let sa = psa::suffix_array_or_write(ctx, mine, &out).map_err(|e| format!("{case}: {e}"))?;
        let by_device = sa.is_none();
        if let Some(sa) = &sa {
            let first = world.exscan_sum(mine.len() as u64) as usize;
            out.write(world, first, sa)
                .map_err(|e| format!("{case}: {e}"))?;
        }
        out.commit(world).map_err(|e| format!("{case}: {e}"))?;
        let r = (|| {
            let bytes = std::fs::read(&path).map_err(|e| format!("{case}: read back: {e}"))?;
            let got: Vec<u64> = bytes
                .chunks(width)
                .map(|c| c.iter().rev().fold(0u64, |a, &b| a << 8 | b as u64))
                .collect();
            ensure!(
                got == want,
                "{case}, width {width}: the file holds {got:?}, want {want:?}"
            );
            if world.size() > 1 && fail == PoolFail::Never && !want.is_empty() {
                ensure!(
                    by_device,
                    "{case}, width {width}: pe 0 did not write the device's SA"
                );
            }
            Ok(())
        })();
        agreed(world, r)?;
        world.barrier();
        if world.rank() == 0 {
            std::fs::remove_file(&path).ok();
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// random-sa mode

fn random_sa(world: &Comm, count: usize, max_len: usize, seed: u64) -> usize {
    let p = world.size();
    let me = world.rank();
    let mut rng = Rng::new(seed);
    let mut failed = 0;
    for k in 0..count {
        let n = if rng.below(10) == 0 {
            rng.range(0, 12)
        } else {
            rng.range(0, max_len)
        };
        let sigma = rng.range(1, 256);
        let first = rng.below(256) as u8;
        let text: Vec<u8> = (0..n)
            .map(|_| first.wrapping_add(rng.below(sigma as u64) as u8))
            .collect();
        // Cuts: block, or random (with empty pes).
        let cuts: Vec<usize> = if rng.below(3) == 0 {
            Layout::block(n, p).offsets().to_vec()
        } else {
            let mut c: Vec<usize> = (0..p - 1).map(|_| rng.range(0, n)).collect();
            c.sort_unstable();
            let mut v = vec![0];
            v.extend(c);
            v.push(n);
            v
        };
        let want = sa_bytes(&text, 1);
        for algo in [Algo::Dc3, Algo::Css] {
            let base = match rng.below(3) {
                0 => 4,
                1 => rng.range(5, 64),
                _ => 1 << 20,
            };
            let ctx = ctx_with(algo, base, |_| {});
            let slice = &text[cuts[me]..cuts[me + 1]];
            let r = catch_unwind(AssertUnwindSafe(|| psa::suffix_array(&ctx, slice)));
            let local_ok = match r {
                Ok(Ok(got)) if got == want[cuts[me]..cuts[me + 1]] => true,
                Ok(Ok(got)) => {
                    let j = got
                        .iter()
                        .zip(&want[cuts[me]..])
                        .position(|(a, b)| a != b)
                        .unwrap_or(got.len());
                    eprintln!(
                        "random-sa: FAIL [pe {me}] case {k} (n = {n}, sigma = {sigma}, first {first}, cuts {cuts:?}) {algo:?} base {base}: wrong entry at global rank {}",
                        cuts[me] + j
                    );
                    false
                }
                Ok(Err(e)) => {
                    eprintln!("random-sa: FAIL [pe {me}] case {k} (n = {n}) {algo:?} base {base}: error {e}");
                    false
                }
                Err(_) => {
                    eprintln!("random-sa: FAIL [pe {me}] case {k} (n = {n}, cuts {cuts:?}) {algo:?} base {base}: panicked");
                    false
                }
            };
            if world.any(!local_ok) {
                failed += 1;
            }
        }
    }
    if me == 0 {
        println!(
            "random-sa: {} runs ({count} texts × 2 algorithms) on {p} pes, {failed} failed",
            2 * count
        );
    }
    failed
}

fn arg_value(args: &[String], flag: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == flag)
        .and_then(|k| args.get(k + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{flag} needs a number, got {v}"))
        })
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // Serialized: the library calls MPI from its pool's thread (one thread at a time) when the
    // context's thread count differs from that of the calling thread's pool (psa::Ctx).
    let (universe, _) =
        mpi::initialize_with_threading(mpi::Threading::Serialized).expect("MPI initialises");
    // As psa does: the global pool has the contexts' thread count (1), so the library runs on
    // this thread (check_ctx_threads also runs it on a pool of its own).
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .expect("the global thread pool starts");
    let ctl = Comm::new(universe.world());
    let me = ctl.rank();
    let p = ctl.size();

    if args.get(1).map(String::as_str) == Some("random-sa") {
        let failed = random_sa(
            &ctl,
            arg_value(&args, "--count", 100) as usize,
            arg_value(&args, "--max-len", 3000) as usize,
            arg_value(&args, "--seed", 1),
        );
        drop(ctl);
        drop(universe); // MPI_Finalize before exiting
        std::process::exit(if failed == 0 { 0 } else { 1 });
    }

    let verbose = args.iter().any(|a| a == "-v");
    let skip: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--skip")
        .map(|w| w[1].clone())
        .collect();
    let mut t = Runner {
        ctl,
        skip,
        passed: 0,
        failed: Vec::new(),
        verbose,
    };
    let world = Comm::new(universe.world());

    t.check("layout: block", check_layout_block);
    t.check("layout: from_local_len with empty pes", || {
        check_layout_from_local_len(&world)
    });
    t.check("comm: reductions", || check_reductions(&world));
    t.check("comm: exscan_sum", || check_exscan(&world));
    t.check("comm: all_gather, all_gather_v, broadcast", || {
        check_gathers(&world)
    });
    t.check("comm: agree", || check_agree(&world));
    t.check("comm: stream_to_root, stream_from_root", || {
        check_streams(&world)
    });
    t.check(
        "pooled: whole text through pe 0 to a (CPU stand-in) device, and every failure's fall-back",
        || check_pooled(&world),
    );
    t.check(
        "comm: all_to_all_v (empty parts, u8/[u8;3]/u64/u128)",
        || check_all_to_all(&world),
    );
    t.check(
        "comm: all_to_all_v of bytes to one pe (empty Vec<u8> buffers)",
        || check_all_to_all_empty_bytes(&world),
    );
    for m in [1usize, 3, 7] {
        let small = Comm::with_max_count(universe.world(), m);
        t.check(
            &format!("comm: all_to_all_v chunked, max count {m}"),
            || check_all_to_all(&small),
        );
        t.check(&format!("dist: exchange_by, max count {m}"), || {
            check_exchange_by(&small)
        });
        t.check(&format!("dist: rebalance, max count {m}"), || {
            check_rebalance(&small)
        });
    }
    t.check("dist: exchange_by", || check_exchange_by(&world));
    t.check("dist: rebalance between uneven layouts", || {
        check_rebalance(&world)
    });
    t.check("dist: right_halo across empty pes", || {
        check_right_halo(&world)
    });
    t.check("dist: last_of_left across empty pes", || {
        check_last_of_left(&world)
    });
    t.check("dist: name_sorted", || check_name_sorted(&world));
    let ctx = ctx_with(Algo::Dc3, 1 << 20, |_| {});
    t.check(
        "dist: sample_sort (equal keys balanced, uneven input, n < p)",
        || check_sample_sort(&ctx, "sample_sort"),
    );
    let ctx2 = ctx_with(Algo::Dc3, 1 << 20, |c| c.mpi_max_count = 7);
    t.check("dist: sample_sort with max count 7", || {
        check_sample_sort(&ctx2, "sample_sort (max count 7)")
    });
    t.check(
        "algo: distributed checker accepts right and rejects wrong",
        || check_checker(&ctx),
    );
    t.check("algo: suffix_array on uneven splits with empty pes", || {
        check_suffix_array_uneven(&world)
    });
    t.check(
        "ctx: the library on the calling thread or on a pool of its own",
        || check_ctx_threads(&world),
    );

    let failed = t.failed.len();
    if me == 0 {
        if failed > 0 {
            println!("selftest: failed checks: {}", t.failed.join("; "));
        }
        println!("selftest: {} passed, {failed} failed (p = {p})", t.passed);
    }
    drop(ctx);
    drop(ctx2);
    drop(world);
    drop(t);
    drop(universe); // MPI_Finalize before exiting
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
