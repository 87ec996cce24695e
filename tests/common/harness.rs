//! MPI tests: a `#[test]` whose body runs on every pe of an MPI job, once for each of several
//! process counts.
//!
//! ```ignore
//! /// What it checks.
//! #[test]
//! fn exscan() {
//!     mpi_test(|comm| {
//!         assert_eq!(comm.exscan_sum(1), comm.rank() as u64);
//!     });
//! }
//!
//! #[test]
//! fn odd_counts() {
//!     mpi_test_at(&[3, 5], |comm| { /* … */ });
//! }
//! ```
//!
//! Run by the test harness as usual (the *parent*), the test starts its own executable under
//! `mpirun -n P --bind-to none` for each P (default [`PROCS`]: 1, 2, 3, 4, 7), asking it for this
//! one test (`NAME --exact --test-threads=1 --nocapture`) with [`CHILD_ENV`] set, and asserts that
//! every job exits 0 with the test passed on each of its P pes; a failure shows the job's stderr.
//! In those processes (the *children*) the same test initialises MPI (`Threading::Serialized`,
//! as a library user would), sizes rayon's global pool to one thread (as `psa --threads 1` does),
//! and runs the body on every pe with the world communicator. A failed assertion (any panic) on
//! any pe, on any thread, prints `[pe R] …` and ends the whole job with MPI_Abort (exit 1), so a
//! pe failing alone never leaves the others waiting in a collective. Each job runs in a fresh
//! temporary directory (its current directory), removed afterwards.
//!
//! The test's name is that of the thread libtest runs it on (libtest names it so); a run under
//! another harness fails with a message rather than testing nothing.

use std::path::Path;
use std::time::Duration;

use mpi::topology::SimpleCommunicator;
use psa::comm::Comm;
use psa::{Algo, Config, Ctx};

use super::{mpirun_exporting, run_with_timeout, Outcome, TempDir};

/// Set (to 1) in the environment of the MPI jobs the tests start; read only by this module.
pub const CHILD_ENV: &str = "PSA_MPI_TEST_CHILD";

/// The process counts an MPI test runs at unless it names its own: 1, the small ones, and an odd
/// count above 4 (oversubscribed on small machines).
pub const PROCS: [usize; 5] = [1, 2, 3, 4, 7];

/// Limit for one job (one process count of one test); a job that takes longer counts as a hang.
pub const TIMEOUT: Duration = Duration::from_secs(180);

/// The body of the calling `#[test]`, run on every pe of an MPI job at each process count of
/// [`PROCS`]; `body` gets the world communicator. See the module docs.
pub fn mpi_test(body: impl FnOnce(&Comm)) {
    mpi_test_at(&PROCS, body);
}

/// [`mpi_test`] at the process counts `procs`.
pub fn mpi_test_at(procs: &[usize], body: impl FnOnce(&Comm)) {
    let thread = std::thread::current();
    let name = match thread.name() {
        Some(name) if name != "main" => name,
        _ => panic!("mpi_test: call it from a #[test] run by libtest (its thread names the test)"),
    };
    if std::env::var_os(CHILD_ENV).is_some() {
        child(name, body);
    } else {
        parent(name, procs);
    }
}

/// Runs the test `name` of this executable under mpirun at each process count.
fn parent(name: &str, procs: &[usize]) {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut failures = Vec::new();
    for &p in procs {
        let dir = TempDir::new(&format!("{name}-p{p}"));
        let o = job(&exe, name, p, dir.path());
        // Each pe that finished the body leaves a file (its stdout lines may interleave with
        // the other pes' and cannot be counted reliably).
        let passed = std::fs::read_dir(dir.path())
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("passed-pe-"))
                    .count()
            })
            .unwrap_or(0);
        if !o.success() {
            failures.push(format!("p = {p}: {}", report(&o)));
            if o.timed_out {
                break; // a hang: the larger counts would most likely hang too
            }
        } else if passed != p {
            failures.push(format!(
                "p = {p}: the test passed on {passed} of {p} pes (is `{name}` its libtest name?): {}",
                report(&o)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "MPI test `{name}` failed:\n\n{}",
        failures.join("\n\n")
    );
}

/// One job: `mpirun -n p EXE NAME --exact …` in `dir` with the child marker set.
fn job(exe: &Path, name: &str, p: usize, dir: &Path) -> Outcome {
    let mut c = mpirun_exporting(p, &[CHILD_ENV], exe.as_os_str());
    c.args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD_ENV, "1")
        .current_dir(dir);
    run_with_timeout(c, dir, TIMEOUT)
}

/// A failed job for an assertion message: the command, the exit, and stderr from its beginning
/// (where the failing pe's message is, before Open MPI's words on the abort).
fn report(o: &Outcome) -> String {
    const HEAD: usize = 6000;
    let mut err = o.stderr.as_str();
    let mut cut = "";
    if err.len() > HEAD {
        let mut k = HEAD;
        while !err.is_char_boundary(k) {
            k -= 1;
        }
        err = &err[..k];
        cut = "\n[… cut]";
    }
    format!(
        "`{}` -> exit {:?}{} after {:.1}s\n--- stderr ---\n{err}{cut}",
        o.cmdline,
        o.code,
        if o.timed_out {
            " (TIMED OUT, killed)"
        } else {
            ""
        },
        o.secs,
    )
}

/// In the job: initialises MPI, runs `body` on this pe, finalises MPI.
fn child(name: &str, body: impl FnOnce(&Comm)) {
    // Serialized: the library calls MPI from its pool's thread when a context's thread count
    // differs from that of the calling thread's pool (psa::Ctx).
    let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized)
        .expect("MPI initialises (one MPI test per process: run the child with --exact NAME)");
    let test = name.to_string();
    std::panic::set_hook(Box::new(move |info| {
        use mpi::traits::Communicator;
        let pe = SimpleCommunicator::world().rank();
        let trace = std::backtrace::Backtrace::capture();
        if trace.status() == std::backtrace::BacktraceStatus::Captured {
            eprintln!("[pe {pe}] {test}: {info}\n{trace}");
        } else {
            eprintln!("[pe {pe}] {test}: {info}");
        }
        // No collective: the other pes may be anywhere.
        psa::comm::abort_world(1);
    }));
    // As `psa --threads 1`: the global pool has the contexts' thread count, so the library runs
    // on the calling thread (a test may ask for a pool of the context's own).
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .expect("the global thread pool starts");
    let comm = Comm::new(universe.world());
    body(&comm);
    comm.barrier();
    // In the job's directory (the parent's current_dir): this pe ran the body to its end.
    std::fs::write(format!("passed-pe-{}", comm.rank()), b"").expect("write the pass marker");
    drop(comm);
    drop(universe); // MPI_Finalize
}

// ------------------------------------------------------------------------------------------------
// Helpers for the bodies

/// A context on the world communicator for `algo` and `base_case` with one thread and the CPU
/// backend, `edit` applied to its other settings. Collective.
pub fn ctx_with(algo: Algo, base_case: usize, edit: impl FnOnce(&mut Config)) -> Ctx {
    let mut config = Config {
        algo,
        base_case,
        threads: 1,
        ..Config::default()
    };
    edit(&mut config);
    Ctx::new(SimpleCommunicator::world(), config)
}

/// Per-pe length patterns for distributed sequences over `p` pes, with empty pes in many places:
/// (name, the length on each pe).
pub fn length_patterns(p: usize) -> Vec<(String, Vec<usize>)> {
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
    let mut rng = super::Rng::new(p as u64 * 77);
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

/// Exclusive prefix sums of `lens` with the total at the end (p + 1 entries).
pub fn offsets(lens: &[usize]) -> Vec<usize> {
    let mut o = Vec::with_capacity(lens.len() + 1);
    o.push(0);
    for &l in lens {
        o.push(o[o.len() - 1] + l);
    }
    o
}

/// Cut points of n characters over the pes in the proportions of a length pattern (empty pes stay
/// empty where possible; an all-empty pattern puts everything on the last pe).
pub fn scaled_cuts(lens: &[usize], n: usize) -> Vec<usize> {
    let p = lens.len();
    let total: usize = lens.iter().sum();
    if total == 0 {
        (0..=p).map(|r| if r == p { n } else { 0 }).collect()
    } else {
        offsets(lens).iter().map(|&o| o * n / total).collect()
    }
}
