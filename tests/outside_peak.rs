//! psa's peak memory as outside tools see it: the `ru_maxrss` that `wait4` gives for the process
//! (what `/usr/bin/time -v` and batch systems report; under mpirun its children's peak rolls up
//! through it) agrees with the peak per pe that psa itself reports in `--stats`, at p = 1 (psa
//! started alone) and p = 2 (under mpirun).

mod common;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Characters of the input: a few tens of MB, so that a pe's peak is far above what the process
/// holds at its start and end.
const N: usize = 24_000_000;

/// Runs `cmd` in `dir` to its end (killed after `timeout`), reaping it with `wait4`: its outcome
/// and the largest resident size of it and of the children it waited for, in bytes.
fn run_reaped(mut cmd: Command, dir: &Path, timeout: Duration) -> (Outcome, u64) {
    let cmdline = format!("{cmd:?}");
    let (out, err) = (dir.join(".stdout"), dir.join(".stderr"));
    cmd.current_dir(dir)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).expect("stdout file"))
        .stderr(fs::File::create(&err).expect("stderr file"));
    let t0 = Instant::now();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmdline}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut timed_out = false;
    loop {
        // SAFETY: waits for our own child, writing one status and one rusage.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break;
        }
        if t0.elapsed() > timeout && !timed_out {
            timed_out = true;
            signal(child.id(), "KILL");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = ExitStatus::from_raw(status);
    let read = |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
    let outcome = Outcome {
        code: status.code(),
        status,
        stdout: read(&out),
        stderr: read(&err),
        timed_out,
        secs: t0.elapsed().as_secs_f64(),
        cmdline,
    };
    (outcome, usage.ru_maxrss as u64 * 1024)
}

/// The numbers of `"key": [a, b, …]` in a JSON text.
fn json_list(json: &str, key: &str) -> Vec<u64> {
    let at = json
        .find(&format!("\"{key}\": ["))
        .unwrap_or_else(|| panic!("no \"{key}\" in {json}"));
    let list = &json[at + key.len() + 5..];
    list[..list.find(']').expect("a closed list")]
        .split(',')
        .map(|v| v.trim().parse().expect("a number"))
        .collect()
}

/// Asserts that psa's largest peak per pe in `stats` and the outside peak are within 10 %.
fn assert_agree(stats: &str, outside: u64, what: &str) {
    let reported = json_list(stats, "peak_rss_bytes_per_pe");
    let most = reported.iter().copied().max().unwrap_or(0);
    let (lo, hi) = (most.min(outside) as f64, most.max(outside) as f64);
    eprintln!("{what}: psa reports {reported:?} per pe, outside {outside}");
    assert!(
        most > (64 << 20) && hi <= lo * 1.1,
        "{what}: psa reports a peak of {most} bytes on its largest pe, outside tools see {outside}"
    );
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "slow in a debug build; run with cargo test --profile ci"
)]
fn the_peak_psa_reports_is_the_one_outside_tools_see() {
    let dir = TempDir::new("outside_peak");
    dir.write("dna.txt", &gen::dna(63, N));
    let timeout = Duration::from_secs(300);
    let args = [
        "--threads",
        "2",
        "--stats",
        "s.json",
        "--force",
        "-o",
        "dna.sa",
        "dna.txt",
    ];
    // p = 1: psa alone (an MPI singleton), reaped here.
    let mut alone = Command::new(PSA);
    alone
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("RUST_LOG");
    let (o, outside) = run_reaped(alone, dir.path(), timeout);
    assert!(o.success(), "{}", o.describe());
    let stats = fs::read_to_string(dir.join("s.json")).expect("stats");
    assert_agree(&stats, outside, "p = 1");
    // p = 2 under mpirun: the pes' peaks roll up through mpirun's rusage of its children.
    let mut under = mpirun(2, PSA);
    under.args(args);
    let (o, outside) = run_reaped(under, dir.path(), timeout);
    assert!(o.success(), "{}", o.describe());
    let stats = fs::read_to_string(dir.join("s.json")).expect("stats");
    assert_agree(&stats, outside, "p = 2 under mpirun");
}
