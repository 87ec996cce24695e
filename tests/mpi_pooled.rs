//! The relay of a whole text to one pe's device (`psa::algo::offload::relay`), with the device played by
//! the CPU: the GPU's own part is tested on the GPU host (tests/gpu.rs, scripts/gpu-pool-test.sh);
//! these test the streaming, the alphabet, the widening and the fall-back after a failure at each
//! step, on every pe at p = 1, 2, 3, 4, 7 (see `common::harness`): hard texts split unevenly
//! (empty pes included), the byte text (pCSS, level 0) and a pDC3 recursion level (integer names,
//! level 1), pieces of the default size and of 3 records, and at level 0 the file job's path
//! (`suffix_array_or_write`) at widths 4 and 8. One test per failing step.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::harness::{ctx_with, length_patterns, mpi_test, scaled_cuts};
use common::Rng;
use psa::comm::Comm;
use psa::internals::{sa_bytes, sa_ints};
use psa::local::cpu::CpuSort;
use psa::local::{Alphabet, DeviceSuffixArray, LocalSort, PooledSa};
use psa::stats::PhaseLog;
use psa::{Algo, Backend, Ctx};

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

/// The stand-in device's suffix array of one text.
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
    /// A gathered base case of names (32-bit, as the device takes them).
    fn suffix_array_ints(&self, text: &[u32]) -> Option<Vec<u64>> {
        Some(sa_ints(text, 1))
    }
    fn suffix_array_max_len(&self) -> usize {
        1 << 40
    }
    fn pooled_sa(&self, n: usize, alphabet: &Alphabet) -> Option<Box<dyn PooledSa + '_>> {
        if matches!(alphabet, Alphabet::Bytes(_)) && !self.bytes_too {
            return None;
        }
        if self.fail == PoolFail::Start {
            self.injected.store(true, Ordering::Relaxed);
            return None;
        }
        Some(Box::new(CpuPoolSa {
            n,
            alphabet: *alphabet,
            text: Vec::new(),
            sa: Vec::new(),
            fail: self.fail,
            injected: self.injected.clone(),
        }))
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

/// The hard texts of these tests.
fn texts() -> Vec<(&'static str, Vec<u8>)> {
    let mut rng = Rng::new(99);
    vec![
        ("empty", Vec::new()),
        ("1 byte", b"x".to_vec()),
        ("0x00/0xff", b"\0\xff\0\xff\xff\0\0\0\xff\0".repeat(7)),
        ("a^n", vec![b'a'; 301]),
        ("periodic", b"abcab".repeat(61)),
        ("mississippi", b"mississippi$banana\0".repeat(9)),
        ("random", (0..500).map(|_| rng.below(256) as u8).collect()),
    ]
}

/// Every text, split by every length pattern, through the pooled path with the stand-in device
/// failing at `fail`: at level 0 (the byte text, css) and at level 1 (DC3's first recursion
/// level: the stand-in refuses the byte text, base case 4), each with pieces of the default size
/// (one message per pe here) and of 3 records (many messages per pe; at level 1 in 40-bit
/// indices, so the recursion texts are 5-byte names). After a failure at level 1 the recursion
/// goes on to base cases of names, which the stand-in builds too. The suffix array must be
/// right; without a failure (p > 1) the device must have built the level, after an injected one a
/// fall-back must have run. At level 0 also the file job's path. Collective.
fn check_pooled(world: &Comm, fail: PoolFail) {
    let p = world.size();
    let me = world.rank();
    // One context per (level, piece), made once (making one is collective) and given a fresh
    // phase log and stand-in device for every case.
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
                    c.gpu.pool_piece = k;
                    if level == 1 {
                        c.index_width = Some(psa::IndexWidth::W40);
                    }
                }
            })
        })
        .collect();
    for (tname, text) in &texts() {
        let want = sa_bytes(text, 1);
        let n = text.len();
        for (lname, lens) in length_patterns(p) {
            let cuts = scaled_cuts(&lens, n);
            let mine = &text[cuts[me]..cuts[me + 1]];
            let want_mine = &want[cuts[me]..cuts[me + 1]];
            for level in [0usize, 1] {
                for piece in [None, Some(3usize)] {
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
                    let case = format!(
                        "{tname}, split {lname} {cuts:?}, level {level}, failing {fail:?}, piece {piece:?}"
                    );
                    let got = psa::suffix_array(ctx, mine)
                        .unwrap_or_else(|e| panic!("{case}: suffix_array failed: {e}"));
                    // The stand-in device is opened on pe 0 only.
                    let mut f = u64::from(injected.load(Ordering::Relaxed));
                    world.broadcast(&mut f, 0);
                    let injected = f == 1;
                    assert!(
                        got == want_mine,
                        "{case}: pe {me} got {got:?}, want {want_mine:?}"
                    );
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
                        assert!(
                            !top.is_empty(),
                            "{case}: DC3 did not recurse (level 0: {:?})",
                            at(0)
                        );
                    }
                    if top.is_empty() || (level == 1 && top == ["base case"]) {
                        // Solved before reaching this level.
                    } else if p > 1 && fail == PoolFail::Never {
                        assert!(
                            top == ["device suffix array"] && next.is_empty(),
                            "{case}: not built by the pooled device: phases {top:?}, then {next:?}"
                        );
                    } else if p > 1 && injected {
                        assert!(
                            top.len() > 1 && (level == 0 || !next.is_empty() || !deeper.is_empty()),
                            "{case}: no fall-back ran: phases {top:?}, then {next:?}"
                        );
                    }
                    drop(phases);
                    if level == 0 {
                        check_pooled_file(world, ctx, mine, &want, &case, fail);
                    }
                }
            }
        }
    }
}

/// The file job's path (`suffix_array_or_write`): with the stand-in device at p > 1 pe 0 writes
/// the whole SA to the file itself; on a failure every pe writes its part. The file (in the job's
/// directory) must hold `want` at widths 4 and 8. Collective.
fn check_pooled_file(
    world: &Comm,
    ctx: &Ctx,
    mine: &[u8],
    want: &[u64],
    case: &str,
    fail: PoolFail,
) {
    let path = std::path::Path::new("pooled.sa");
    for width in [4usize, 8] {
        let case = format!("{case}, file of width {width}");
        let out = psa::io::OutputFile::create(world, path, &[], false, want.len(), width)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let sa =
            psa::suffix_array_or_write(ctx, mine, &out).unwrap_or_else(|e| panic!("{case}: {e}"));
        let by_device = sa.is_none();
        if let Some(sa) = &sa {
            let first = world.exscan_sum(mine.len() as u64) as usize;
            out.write(world, first, sa)
                .unwrap_or_else(|e| panic!("{case}: write: {e}"));
        }
        out.commit(world)
            .unwrap_or_else(|e| panic!("{case}: commit: {e}"));
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{case}: read back: {e}"));
        let got: Vec<u64> = bytes
            .chunks(width)
            .map(|c| c.iter().rev().fold(0u64, |a, &b| a << 8 | b as u64))
            .collect();
        assert!(got == want, "{case}: the file holds {got:?}, want {want:?}");
        if world.size() > 1 && fail == PoolFail::Never && !want.is_empty() {
            assert!(by_device, "{case}: pe 0 did not write the device's SA");
        }
        world.barrier();
        if world.rank() == 0 {
            std::fs::remove_file(path).unwrap_or_else(|e| panic!("{case}: remove: {e}"));
        }
    }
}

/// The stand-in device builds every level it is given.
#[test]
fn pooled_device_builds() {
    mpi_test(|comm| check_pooled(comm, PoolFail::Never));
}

/// The device cannot start: the distributed algorithms run instead.
#[test]
fn pooled_fails_to_start() {
    mpi_test(|comm| check_pooled(comm, PoolFail::Start));
}

/// The upload fails: every pe falls back.
#[test]
fn pooled_fails_in_upload() {
    mpi_test(|comm| check_pooled(comm, PoolFail::Upload));
}

/// The build on the device fails: every pe falls back.
#[test]
fn pooled_fails_in_build() {
    mpi_test(|comm| check_pooled(comm, PoolFail::Build));
}

/// The download fails: every pe falls back.
#[test]
fn pooled_fails_in_download() {
    mpi_test(|comm| check_pooled(comm, PoolFail::Download));
}
