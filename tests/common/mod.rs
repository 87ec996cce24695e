//! Shared helpers for the integration tests: running `psa` under `mpirun` with a timeout,
//! temporary directories, decoding the output, seeded input generators and the two oracles; and
//! [`harness`], the harness of the MPI tests (`tests/mpi_*.rs`), whose bodies run on every pe.
//!
//! Every integration test file includes this module (`mod common;`); not every file uses every
//! helper, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod harness;

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The `psa` binary cargo built for these tests.
pub const PSA: &str = env!("CARGO_BIN_EXE_psa");

/// Every way `--algo` builds: the two distributed algorithms and the relay to libsais on pe 0
/// (`node`); every algorithm test runs for each of them.
pub const ALGOS: &[&str] = &["dc3", "css", "node"];

/// Default limit for one mpirun; a run that takes longer is killed and counts as a hang.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

// ------------------------------------------------------------------------------------------------
// Temporary directories

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system temp dir, removed on drop (kept when `PSA_KEEP_TMP` is set,
/// for debugging).
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let k = COUNTER.fetch_add(1, Ordering::SeqCst);
        let clean: String = tag
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let path =
            std::env::temp_dir().join(format!("psa-test-{}-{k}-{clean}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `data` to a file `name` in this directory and returns its path.
    pub fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.join(name);
        fs::write(&p, data).expect("write test input");
        p
    }

    /// Names of the entries in this directory (sorted), for "nothing else was left behind" checks.
    pub fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.path)
            .expect("read temp dir")
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("PSA_KEEP_TMP").is_none() {
            // Undo any chmod a test did so that removal works for non-root users too.
            let _ = Command::new("chmod")
                .arg("-R")
                .arg("u+rwx")
                .arg(&self.path)
                .status();
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Running under mpirun

/// What a finished (or killed) run left behind.
#[derive(Debug)]
pub struct Outcome {
    /// None when the process was killed (timeout or signal).
    pub code: Option<i32>,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub secs: f64,
    /// The command line, for messages.
    pub cmdline: String,
}

impl Outcome {
    pub fn success(&self) -> bool {
        !self.timed_out && self.status.success()
    }

    /// One paragraph for lists of many failures: the command, the exit and the end of stderr.
    pub fn brief(&self) -> String {
        format!(
            "`{}` -> exit {:?}{} after {:.1}s; stderr ends: {}",
            self.cmdline,
            self.code,
            if self.timed_out {
                " (TIMED OUT, killed)"
            } else {
                ""
            },
            self.secs,
            tail(&self.stderr, 600).trim()
        )
    }

    /// Asserts that the run exited with `code` and said `message` on stderr; `what` (may be
    /// empty) names the case in a failure, before the run's description.
    #[track_caller]
    pub fn assert_error(&self, code: i32, message: &str, what: &str) {
        let what = if what.is_empty() {
            String::new()
        } else {
            format!("{what}: ")
        };
        assert_eq!(self.code, Some(code), "{what}{}", self.describe());
        assert!(
            self.stderr.contains(message),
            "{what}stderr lacks {message:?}: {}",
            self.describe()
        );
    }

    /// A full description for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "`{}` -> exit {:?}{} after {:.1}s\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.cmdline,
            self.code,
            if self.timed_out {
                " (TIMED OUT, killed)"
            } else {
                ""
            },
            self.secs,
            tail(&self.stdout, 3000),
            tail(&self.stderr, 3000)
        )
    }
}

fn tail(s: &str, n: usize) -> &str {
    if s.len() <= n {
        s
    } else {
        let mut k = s.len() - n;
        while !s.is_char_boundary(k) {
            k += 1;
        }
        &s[k..]
    }
}

/// A command under `mpirun -n p --bind-to none` with the environment Open MPI needs here (root,
/// oversubscription of 2 cores by up to 7 pes).
///
/// Each call gets its own Open MPI session directory base: the tests start many jobs at once, and
/// with one shared tree a job ending can remove a directory another is creating ("orte_init failed
/// … orte_session_dir failed", seen once in CI before psa even started).
pub fn mpirun(p: usize, exe: &str) -> Command {
    mpirun_exporting(p, &[], OsStr::new(exe))
}

/// [`mpirun`] that also hands the processes the variables `export` names (`-x NAME`: set them
/// on the command; launches on other nodes do not inherit mpirun's environment).
pub fn mpirun_exporting(p: usize, export: &[&str], exe: &OsStr) -> Command {
    let session = session_base().join(COUNTER.fetch_add(1, Ordering::SeqCst).to_string());
    fs::create_dir_all(&session).expect("create an Open MPI session directory base");
    let mut c = Command::new("mpirun");
    c.env("OMPI_MCA_orte_tmpdir_base", &session)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        // Quiet Open MPI's "help message aggregation" chatter and keep runs short on a busy box.
        .env("OMPI_MCA_orte_base_help_aggregate", "0")
        // Shared memory through ob1 at once: letting Open MPI probe UCX first doubles the start
        // of every small job, and the tests start thousands.
        .env("OMPI_MCA_pml", "ob1")
        .env_remove("RUST_LOG")
        .arg("-n")
        .arg(p.to_string())
        .arg("--bind-to")
        .arg("none");
    for name in export {
        c.arg("-x").arg(name);
    }
    c.arg(exe);
    c
}

/// The folder under which this test process's mpirun calls keep their session directories,
/// removed with everything in it when the process exits (Open MPI empties each session directory
/// but leaves the base it was given).
fn session_base() -> PathBuf {
    fn base() -> PathBuf {
        std::env::temp_dir().join(format!("psa-tests-ompi-{}", std::process::id()))
    }
    extern "C" fn remove_base() {
        let _ = fs::remove_dir_all(base());
    }
    static REGISTER: std::sync::Once = std::sync::Once::new();
    REGISTER.call_once(|| {
        // SAFETY: registers a function that takes no arguments and does not unwind (every
        // error of the removal is ignored).
        unsafe { libc::atexit(remove_base) };
    });
    base()
}

/// Runs `cmd` with stdout and stderr captured to files in `dir` and a wall-clock limit. On timeout
/// the process gets SIGTERM, then SIGKILL two seconds later; the outcome says `timed_out`.
pub fn run_with_timeout(mut cmd: Command, dir: &Path, timeout: Duration) -> Outcome {
    let k = COUNTER.fetch_add(1, Ordering::SeqCst);
    let out_path = dir.join(format!(".stdout-{k}"));
    let err_path = dir.join(format!(".stderr-{k}"));
    let cmdline = format!(
        "{} {}",
        cmd.get_program().to_string_lossy(),
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    );
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).expect("stdout file"))
        .stderr(fs::File::create(&err_path).expect("stderr file"));
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{cmdline}`: {e}"));
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for child") {
            break s;
        }
        if t0.elapsed() > timeout {
            timed_out = true;
            signal(child.id(), "TERM");
            let t1 = Instant::now();
            while child.try_wait().expect("wait for child").is_none() {
                if t1.elapsed() > Duration::from_secs(2) {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            break child.wait().expect("wait for killed child");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let secs = t0.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&fs::read(&out_path).unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&fs::read(&err_path).unwrap_or_default()).into_owned();
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    Outcome {
        code: status.code(),
        status,
        stdout,
        stderr,
        timed_out,
        secs,
        cmdline,
    }
}

/// Sends a signal (by name, e.g. "TERM") to a process id with the `kill` utility.
pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// Runs `psa ARGS` under `mpirun -n p` in `dir` (output files land where ARGS say).
pub fn run_psa<I, S>(p: usize, args: I, dir: &Path) -> Outcome
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_psa_env(p, args, &[], dir, DEFAULT_TIMEOUT)
}

/// Like [`run_psa`] with extra environment variables and a timeout.
pub fn run_psa_env<I, S>(
    p: usize,
    args: I,
    env: &[(&str, &str)],
    dir: &Path,
    timeout: Duration,
) -> Outcome
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = mpirun(p, PSA);
    c.args(args).current_dir(dir);
    for (k, v) in env {
        c.env(k, v);
    }
    run_with_timeout(c, dir, timeout)
}

/// Effective user id of this process (from /proc; 0 = root, who can read and write anything).
pub fn euid() -> u32 {
    let s = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    s.lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|x| x.parse().ok())
        .expect("Uid line in /proc/self/status")
}

// ------------------------------------------------------------------------------------------------
// Output decoding

/// Decodes a suffix array file of little-endian unsigned integers of `width` bytes.
pub fn decode(bytes: &[u8], width: usize) -> Vec<u64> {
    assert!((1..=8).contains(&width));
    assert_eq!(
        bytes.len() % width,
        0,
        "output length {} is not a multiple of width {width}",
        bytes.len()
    );
    bytes
        .chunks_exact(width)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..width].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect()
}

/// Reads and decodes an output file.
pub fn read_sa(path: &Path, width: usize) -> Vec<u64> {
    let bytes =
        fs::read(path).unwrap_or_else(|e| panic!("cannot read output {}: {e}", path.display()));
    decode(&bytes, width)
}

/// Where the first difference between two suffix arrays is, for messages (never prints all of a
/// large array).
pub fn first_diff(got: &[u64], want: &[u64]) -> String {
    if got.len() != want.len() {
        return format!("length {} instead of {}", got.len(), want.len());
    }
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(j) => {
            let lo = j.saturating_sub(2);
            let hi = (j + 3).min(got.len());
            format!(
                "first difference at SA[{j}]: got {:?} want {:?} (entries {lo}..{hi})",
                &got[lo..hi],
                &want[lo..hi]
            )
        }
        None => "identical".into(),
    }
}

// ------------------------------------------------------------------------------------------------
// Oracles

/// Texts up to this length are checked against the naive oracle (all suffix comparisons); longer
/// ones against libsais. The naive oracle is O(n² log n) on aⁿ, so this stays small.
pub const NAIVE_MAX: usize = 4000;

/// The suffix array by an independent sequential method: the naive oracle for small texts,
/// libsais for larger ones.
pub fn oracle(text: &[u8]) -> Vec<u64> {
    if text.len() <= NAIVE_MAX {
        psa::internals::naive_sa(text)
    } else {
        psa::internals::sa_bytes(text, 2)
    }
}

// ------------------------------------------------------------------------------------------------
// Seeded generators

/// SplitMix64: small, seeded, the same everywhere.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6a09_e667_f3bc_c909)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub mod gen {
    //! Named hard inputs. Every generator is deterministic (seeded).
    use super::Rng;

    /// `n` copies of byte `c`.
    pub fn run(c: u8, n: usize) -> Vec<u8> {
        vec![c; n]
    }

    /// aⁿ.
    pub fn a_n(n: usize) -> Vec<u8> {
        run(b'a', n)
    }

    /// (ab)ⁿa: length 2n+1.
    pub fn ab_n_a(n: usize) -> Vec<u8> {
        let mut v = b"ab".repeat(n);
        v.push(b'a');
        v
    }

    /// (abc)ⁿ: length 3n.
    pub fn abc_n(n: usize) -> Vec<u8> {
        b"abc".repeat(n)
    }

    /// The Fibonacci word truncated to `n` characters (s₁ = b, s₂ = a, sₖ = sₖ₋₁ sₖ₋₂).
    pub fn fibonacci(n: usize) -> Vec<u8> {
        let (mut a, mut b) = (b"b".to_vec(), b"a".to_vec());
        while b.len() < n {
            let c = [b.as_slice(), a.as_slice()].concat();
            a = b;
            b = c;
        }
        b.truncate(n);
        b
    }

    /// Uniform random text of length `n` over the first `sigma` byte values starting at `base`
    /// (wrapping), so sigma = 256 covers every byte including 0x00 and 0xFF.
    pub fn random(seed: u64, n: usize, sigma: usize, base: u8) -> Vec<u8> {
        assert!((1..=256).contains(&sigma));
        let mut r = Rng::new(seed);
        (0..n)
            .map(|_| base.wrapping_add(r.below(sigma as u64) as u8))
            .collect()
    }

    /// Random 0x00/0xFF mix of length `n`.
    pub fn zero_ff(seed: u64, n: usize) -> Vec<u8> {
        let mut r = Rng::new(seed);
        (0..n)
            .map(|_| if r.chance(50) { 0x00 } else { 0xFF })
            .collect()
    }

    /// A random block of `block` bytes (over `sigma` letters) repeated until the text has `n`
    /// characters: long repeats that are not periodic in a small period.
    pub fn repeated_block(seed: u64, block: usize, n: usize, sigma: usize) -> Vec<u8> {
        let b = random(seed, block, sigma, b'a');
        b.iter().copied().cycle().take(n).collect()
    }

    /// DNA-like text: ACGT with a bias, runs of N, copies of earlier stretches (some mutated) and
    /// a few long tandem repeats — the structure of an assembled genome.
    pub fn dna(seed: u64, n: usize) -> Vec<u8> {
        let mut r = Rng::new(seed);
        let mut v: Vec<u8> = Vec::with_capacity(n);
        const ACGT: &[u8; 4] = b"ACGT";
        while v.len() < n {
            let left = n - v.len();
            match r.below(100) {
                // N run (gaps in an assembly)
                0..=2 => {
                    let len = r.range(1, 2000).min(left);
                    v.extend(std::iter::repeat_n(b'N', len));
                }
                // copy of an earlier stretch, with a few point mutations
                3..=11 if v.len() > 1000 => {
                    let len = r.range(50, 20_000).min(left).min(v.len());
                    let from = r.range(0, v.len() - len);
                    for k in 0..len {
                        let c = v[from + k];
                        v.push(if r.chance(1) {
                            ACGT[r.below(4) as usize]
                        } else {
                            c
                        });
                    }
                }
                // tandem repeat of a short unit
                12..=15 => {
                    let unit: Vec<u8> = (0..r.range(1, 12))
                        .map(|_| ACGT[r.below(4) as usize])
                        .collect();
                    let len = r.range(20, 5000).min(left);
                    v.extend(unit.iter().copied().cycle().take(len));
                }
                // fresh sequence, GC-poor like most genomes
                _ => {
                    let len = r.range(100, 5000).min(left);
                    for _ in 0..len {
                        let x = r.below(100);
                        v.push(if x < 30 {
                            b'A'
                        } else if x < 50 {
                            b'C'
                        } else if x < 70 {
                            b'G'
                        } else {
                            b'T'
                        });
                    }
                }
            }
        }
        v.truncate(n);
        // At least one gap, whatever the dice said.
        if n >= 100 {
            let len = (n / 50).min(3000);
            v[n / 2..n / 2 + len].fill(b'N');
        }
        v
    }
}

/// Formats a list of failures for an assertion message: the first few in full, then a count.
pub fn failure_report(failures: &[String], runs: usize) -> String {
    const SHOWN: usize = 8;
    let mut s = format!("{} of {runs} runs failed:\n\n", failures.len());
    s.push_str(
        &failures
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n"),
    );
    if failures.len() > SHOWN {
        s.push_str(&format!(
            "\n\n… and {} more (first lines only):\n",
            failures.len() - SHOWN
        ));
        for f in &failures[SHOWN..] {
            s.push_str(f.lines().next().unwrap_or(""));
            s.push('\n');
        }
    }
    s
}

/// The value of `"key": …` in a JSON text (up to the next comma or brace).
pub fn json_value<'a>(json: &'a str, key: &str) -> &'a str {
    let at = json
        .find(&format!("\"{key}\": "))
        .unwrap_or_else(|| panic!("no \"{key}\" in {json}"));
    let v = &json[at + key.len() + 4..];
    v[..v.find([',', '}', '\n']).unwrap_or(v.len())].trim()
}

/// The plan's shape of a build of n bytes at p pes with 4-byte entries and index files, planned
/// with [`psa::plan::BASE_BYTES`] (what `--plan-base` gives the runs of the tests that use it).
pub fn plan_shape(n: usize, p: usize) -> psa::plan::Shape {
    psa::plan::Shape {
        n,
        pes: p,
        base: psa::plan::BASE_BYTES,
        index_at_least: None,
        token_width: psa::TokenWidth::W1,
        width: 4,
        check: false,
        bwt: false,
        lcp: false,
        spans: false,
        held: 0,
        index: true,
        one_node: true,
        node_cpus: 2,
    }
}
