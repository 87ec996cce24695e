//! The cluster scripts without a cluster: `slurm/psa.sbatch` and `slurm/bench.sbatch` (their
//! `#SBATCH` defaults fit one node with 2 CPUs; psa.sbatch passes every psa option through, in any
//! position, and names srun's pmix plugin for Open MPI), and `scripts/setup.sh` (installs nothing
//! when everything is there, never asks sudo for a password, tells a user who is not root what to
//! install).
//!
//! psa.sbatch runs under bash with the environment sbatch gives a job of the script's defaults and a
//! stand-in `srun` first on PATH: it records its arguments, answers `srun --mpi=list`, and runs the
//! command it is given (under `mpirun -n NTASKS` for more than one task). setup.sh runs with
//! stand-ins for `apt-get` and `sudo` that record every call.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;

const TIMEOUT: Duration = Duration::from_secs(60);

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Writes an executable script.
fn write_exe(path: &Path, text: &str) {
    fs::write(path, text).expect("write stand-in");
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod stand-in");
}

/// The `#SBATCH --name=value` lines of a batch script (flags without a value map to "").
fn sbatch_directives(script: &Path) -> BTreeMap<String, String> {
    let text = fs::read_to_string(script).expect("read batch script");
    text.lines()
        .filter_map(|l| l.strip_prefix("#SBATCH "))
        .map(|d| {
            let d = d.trim();
            match d.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (d.to_string(), String::new()),
            }
        })
        .collect()
}

#[test]
fn sbatch_defaults_fit_one_node_with_two_cpus() {
    for script in ["slurm/psa.sbatch", "slurm/bench.sbatch"] {
        let d = sbatch_directives(&repo_file(script));
        let num = |k: &str| -> usize {
            d.get(k)
                .unwrap_or_else(|| panic!("{script}: no #SBATCH {k}: {d:?}"))
                .parse()
                .unwrap_or_else(|e| panic!("{script}: #SBATCH {k}: {e}"))
        };
        assert_eq!(num("--nodes"), 1, "{script}: default node count");
        let cpus = num("--ntasks-per-node") * num("--cpus-per-task");
        assert!(
            (1..=2).contains(&cpus),
            "{script}: the defaults ask for {cpus} CPUs per node; a node with 2 never runs it"
        );
        assert!(
            !d.contains_key("--exclusive"),
            "{script}: --exclusive by default: waits for a whole idle node"
        );
        assert!(
            !d.contains_key("--mem") || d["--mem"] != "0",
            "{script}: --mem=0 by default: all of a node's memory"
        );
    }
}

// ------------------------------------------------------------------------------------------------
// psa.sbatch with a stand-in srun

/// Stand-in for srun: one line per call in $FAKE_SRUN_LOG (arguments separated by \x1f).
const FAKE_SRUN: &str = r#"#!/bin/bash
printf '%s\x1f' "$@" >>"${FAKE_SRUN_LOG:?}"; echo >>"$FAKE_SRUN_LOG"
if [[ $1 == --mpi=list ]]; then
  echo "MPI plugin types are..."
  printf '\t%s\n' none pmi2 ${FAKE_SRUN_PLUGINS:-pmix}
  exit 0
fi
n=${SLURM_NTASKS:-1}
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    --ntasks=*) n=${1#--ntasks=} ;;
    --*=*|--overlap) ;;
    *) echo "fake srun: option '$1' not understood (it takes --name=value only)" >&2; exit 99 ;;
  esac
  shift
done
# mpirun must not see the job: it would start its processes through srun.
for v in $(compgen -e); do [[ $v != SLURM_* ]] || unset "$v"; done
(( n == 1 )) && exec "$@"
exec mpirun -n "$n" --bind-to none "$@"
"#;

struct Job {
    dir: TempDir,
    log: PathBuf,
    bin: PathBuf,
}

impl Job {
    fn new(tag: &str) -> Job {
        let dir = TempDir::new(tag);
        let bin = dir.join("bin");
        fs::create_dir(&bin).unwrap();
        write_exe(&bin.join("srun"), FAKE_SRUN);
        let log = dir.join("srun.log");
        Job { dir, log, bin }
    }

    /// `bash slurm/psa.sbatch ARGS` in the job's directory, with what sbatch sets for a job of the
    /// script's defaults on one node with 2 CPUs and 1 GiB per CPU.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Outcome {
        let script = repo_file("slurm/psa.sbatch");
        let d = sbatch_directives(&script);
        let nodes: usize = d["--nodes"].parse().unwrap();
        let per_node: usize = d["--ntasks-per-node"].parse().unwrap();
        let _ = fs::remove_file(&self.log);
        let session = self.dir.join("ompi");
        fs::create_dir_all(&session).unwrap();
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = Command::new("bash");
        c.arg(&script)
            .args(args)
            .current_dir(self.dir.path())
            .env("PATH", path)
            .env("PSA", PSA)
            .env("FAKE_SRUN_LOG", &self.log)
            .env("SLURM_JOB_ID", "4242")
            .env("SLURM_JOB_NAME", "psa")
            .env("SLURM_SUBMIT_DIR", self.dir.path())
            .env("SLURM_JOB_NUM_NODES", nodes.to_string())
            .env("SLURM_NNODES", nodes.to_string())
            .env("SLURM_NTASKS", (nodes * per_node).to_string())
            .env("SLURM_NPROCS", (nodes * per_node).to_string())
            .env("SLURM_NTASKS_PER_NODE", per_node.to_string())
            .env("SLURM_CPUS_PER_TASK", &d["--cpus-per-task"])
            .env("SLURM_MEM_PER_CPU", "1024")
            .env("SLURM_JOB_NODELIST", "node1")
            .env("OMPI_MCA_orte_tmpdir_base", &session)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
            .env_remove("PSA_SRUN_MPI")
            .env_remove("SLURM_MPI_TYPE")
            .env_remove("RUST_LOG");
        for (k, v) in env {
            c.env(k, v);
        }
        run_with_timeout(c, self.dir.path(), TIMEOUT)
    }

    /// Every srun call: its arguments.
    fn calls(&self) -> Vec<Vec<String>> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                l.split('\x1f')
                    .filter(|a| !a.is_empty())
                    .map(String::from)
                    .collect()
            })
            .collect()
    }

    /// The srun call that started psa: (srun's options, psa's arguments after the binary).
    fn psa_call(&self) -> Option<(Vec<String>, Vec<String>)> {
        self.calls().into_iter().find_map(|c| {
            let k = c.iter().position(|a| a == PSA)?;
            Some((c[..k].to_vec(), c[k + 1..].to_vec()))
        })
    }
}

/// Whether the psa binary links Open MPI (then psa.sbatch asks srun for pmix).
fn psa_uses_open_mpi() -> bool {
    let o = Command::new("ldd").arg(PSA).output().expect("run ldd");
    let s = String::from_utf8_lossy(&o.stdout);
    s.contains("libopen-pal") || s.contains("libopen-rte") || s.contains("openmpi")
}

fn text() -> Vec<u8> {
    gen::dna(15, 3000)
}

#[test]
fn psa_sbatch_passes_options_after_the_input_through() {
    let job = Job::new("sbatch_after_input");
    let t = text();
    job.dir.write("in.txt", &t);
    let o = job.run(&["in.txt", "--check", "-vv"], &[]);
    assert!(o.success(), "{}", o.describe());
    let (srun, args) = job.psa_call().unwrap_or_else(|| {
        panic!(
            "psa was not started through srun: {:?}\n{}",
            job.calls(),
            o.describe()
        )
    });
    assert_eq!(
        args,
        ["--threads", "1", "in.txt", "--check", "-vv"],
        "psa's arguments (srun {srun:?})"
    );
    let pmix = srun.iter().any(|a| a == "--mpi=pmix");
    assert_eq!(
        pmix,
        psa_uses_open_mpi(),
        "srun --mpi=pmix (Open MPI: {}): srun {srun:?}",
        psa_uses_open_mpi()
    );
    assert!(
        srun.iter().any(|a| a == "--cpus-per-task=1"),
        "srun {srun:?}"
    );
    let got = read_sa(&job.dir.join("in.txt.sa"), 4);
    let want = oracle(&t);
    assert!(got == want, "in.txt.sa: {}", first_diff(&got, &want));
    assert!(
        !job.dir.join("--check").exists(),
        "an option was taken as the output"
    );
    assert!(
        o.stderr.contains("debug"),
        "-vv did not reach psa: {}",
        o.describe()
    );
}

/// `PSA=psa` names a binary on PATH; without srun (not in a Slurm job) the script stops with a
/// hint before starting anything.
#[test]
fn psa_sbatch_finds_psa_by_name_and_needs_srun() {
    let job = Job::new("sbatch_by_name");
    job.dir.write("in.txt", &text());
    std::os::unix::fs::symlink(PSA, job.bin.join("psa")).unwrap();
    let o = job.run(&["in.txt"], &[("PSA", "psa")]);
    assert!(o.success(), "{}", o.describe());
    let by_name = job.bin.join("psa").display().to_string();
    assert!(
        job.calls().iter().any(|c| c.contains(&by_name)),
        "srun did not start {by_name}: {:?}",
        job.calls()
    );
    assert!(job.dir.join("in.txt.sa").exists(), "{}", o.describe());

    fs::remove_file(job.bin.join("srun")).unwrap();
    fs::remove_file(job.dir.join("in.txt.sa")).unwrap();
    if Command::new("sh")
        .args(["-c", "command -v srun"])
        .status()
        .is_ok_and(|s| s.success())
    {
        return; // a real srun on this machine's PATH: the rest needs a machine without one
    }
    let o = job.run(&["in.txt"], &[]);
    o.assert_error(1, "srun not found: submit this script with sbatch", "");
    assert!(!job.dir.join("in.txt.sa").exists(), "{}", o.describe());
}

#[test]
fn psa_sbatch_honours_output_threads_and_option_values() {
    let job = Job::new("sbatch_values");
    let t = text();
    job.dir.write("in.txt", &t);
    let o = job.run(
        &[
            "--algo=dc3",
            "-o",
            "out.sa",
            "--width",
            "8",
            "in.txt",
            "--threads",
            "2",
        ],
        &[],
    );
    assert!(o.success(), "{}", o.describe());
    let (_, args) = job.psa_call().expect("psa started through srun");
    assert_eq!(
        args,
        [
            "--algo=dc3",
            "-o",
            "out.sa",
            "--width",
            "8",
            "in.txt",
            "--threads",
            "2"
        ],
        "psa's arguments: given --threads, the script adds none"
    );
    let got = read_sa(&job.dir.join("out.sa"), 8);
    let want = oracle(&t);
    assert!(got == want, "out.sa: {}", first_diff(&got, &want));
    assert!(!job.dir.join("in.txt.sa").exists(), "-o was not honoured");
}

#[test]
fn psa_sbatch_srun_mpi_plugin() {
    let job = Job::new("sbatch_mpi");
    job.dir.write("in.txt", &text());
    let open_mpi = psa_uses_open_mpi();
    for (env, want) in [
        (vec![], open_mpi.then_some("--mpi=pmix")),
        (vec![("FAKE_SRUN_PLUGINS", "pmi2")], None),
        (vec![("PSA_SRUN_MPI", "")], None),
        (vec![("PSA_SRUN_MPI", "pmi2")], Some("--mpi=pmi2")),
        (vec![("SLURM_MPI_TYPE", "pmix")], None),
    ] {
        let o = job.run(&["in.txt"], &env);
        assert!(o.success(), "{env:?}: {}", o.describe());
        let (srun, _) = job.psa_call().expect("psa started through srun");
        let mpi: Vec<&String> = srun.iter().filter(|a| a.starts_with("--mpi")).collect();
        assert_eq!(
            mpi.first().map(|s| s.as_str()),
            want,
            "{env:?}: srun {srun:?}"
        );
        assert!(mpi.len() <= 1, "{env:?}: srun {srun:?}");
    }
}

#[test]
fn psa_sbatch_leaves_memory_and_errors_to_psa() {
    let job = Job::new("sbatch_memory");
    job.dir.write("in.txt", &text());
    // Too small a budget: psa refuses before reading the input (exit 4, passed on by the
    // script) and writes nothing. (Its default from Slurm's grant: `budget`'s tests; this stand-in
    // srun hides the job from mpirun, and so from psa.)
    let o = job.run(&["--mem-per-pe", "1M", "in.txt"], &[]);
    o.assert_error(4, "memory budget too small", "");
    assert!(job.psa_call().is_some(), "psa did not run");
    assert!(!job.dir.join("in.txt.sa").exists(), "an output was written");
    // A missing input: psa says what is wrong.
    let o = job.run(&["--check", "missing.txt", "-q"], &[]);
    o.assert_error(5, "missing.txt", "");
    assert!(job.psa_call().is_some(), "psa did not run");
    // An option the script does not know is psa's to judge (here: a usage error, status 2).
    let o = job.run(&["--no-such-option", "in.txt"], &[]);
    o.assert_error(2, "--no-such-option", "");
    // --help: once, from the script, not once per pe.
    let o = job.run(&["--help"], &[]);
    assert_eq!(o.code, Some(0), "{}", o.describe());
    assert!(
        o.stdout.contains("psa.sbatch") && o.stdout.contains("--output"),
        "{}",
        o.describe()
    );
    assert!(job.psa_call().is_none(), "psa --help went through srun");
}

// ------------------------------------------------------------------------------------------------
// scripts/setup.sh with stand-ins for apt-get and sudo

/// Records every call in $FAKE_LOG; fails unless $FAKE_APT_OK = 1.
const FAKE_APT: &str = r#"#!/bin/bash
echo "apt-get $*" >>"${FAKE_LOG:?}"
[[ ${FAKE_APT_OK:-0} == 1 ]] && exit 0
echo "fake apt-get: must not be called here" >&2
exit 97
"#;

/// Records every call; runs the command (after -n) when $FAKE_SUDO_OK = 1, else wants a password.
const FAKE_SUDO: &str = r#"#!/bin/bash
echo "sudo $*" >>"${FAKE_LOG:?}"
if [[ ${FAKE_SUDO_OK:-0} == 1 ]]; then
  [[ $1 == -n ]] && shift
  exec "$@"
fi
echo "sudo: a password is required" >&2
exit 1
"#;

const FAKE_CARGO: &str = "#!/bin/sh\necho 'cargo 0.0.0 (stand-in)'\n";

/// What setup.sh runs with: a copy of the script and stand-ins, readable by any user.
struct Setup {
    dir: TempDir,
    /// stand-ins only (put before the real PATH)
    shims: PathBuf,
    /// stand-ins plus links to every command on PATH except mpirun (a machine without Open MPI)
    no_mpi: PathBuf,
    log: PathBuf,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        let dir = TempDir::new(tag);
        let open = |p: &Path, mode| fs::set_permissions(p, fs::Permissions::from_mode(mode));
        open(dir.path(), 0o755).unwrap();
        let shims = dir.join("shims");
        let no_mpi = dir.join("no-mpi");
        for d in [&shims, &no_mpi] {
            fs::create_dir(d).unwrap();
            open(d, 0o755).unwrap();
            write_exe(&d.join("apt-get"), FAKE_APT);
            write_exe(&d.join("sudo"), FAKE_SUDO);
            write_exe(&d.join("cargo"), FAKE_CARGO);
        }
        let path = std::env::var("PATH").unwrap_or_default();
        for d in path.split(':').filter(|d| !d.is_empty()) {
            let Ok(rd) = fs::read_dir(d) else { continue };
            for e in rd.flatten() {
                let name = e.file_name();
                let link = no_mpi.join(&name);
                if name.to_string_lossy().starts_with("mpirun") || link.exists() {
                    continue;
                }
                let _ = std::os::unix::fs::symlink(e.path(), link);
            }
        }
        fs::copy(repo_file("scripts/setup.sh"), dir.join("setup.sh")).unwrap();
        let log = dir.join("calls.log");
        fs::write(&log, "").unwrap();
        open(&log, 0o666).unwrap();
        Setup {
            dir,
            shims,
            no_mpi,
            log,
        }
    }

    /// Runs setup.sh, as `nobody` when `as_nobody` (and this process is root), with PATH = `bin`
    /// (then the real PATH when `real_path`).
    fn run(&self, as_nobody: bool, bin: &Path, real_path: bool, env: &[(&str, &str)]) -> Outcome {
        fs::write(&self.log, "").unwrap();
        let path = if real_path {
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            )
        } else {
            bin.display().to_string()
        };
        let mut c = if as_nobody && euid() == 0 {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                "bash",
            ]);
            c
        } else {
            Command::new("bash")
        };
        c.arg(self.dir.join("setup.sh"))
            .current_dir(self.dir.path())
            .env("PATH", path)
            .env("HOME", self.dir.path())
            .env("FAKE_LOG", &self.log)
            .env_remove("LIBCLANG_PATH");
        for (k, v) in env {
            c.env(k, v);
        }
        run_with_timeout(c, self.dir.path(), TIMEOUT)
    }

    /// Whether setup.sh can run as a user who is not root: this process is not root, or `nobody`
    /// reaches the copy of setup.sh (not when TMPDIR is under a private home).
    fn can_run_as_non_root(&self) -> bool {
        if euid() != 0 {
            return true;
        }
        let ok = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg("test")
            .arg("-r")
            .arg(self.dir.join("setup.sh"))
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!(
                "setup.sh tests: SKIPPED the runs as a user who is not root: user nobody cannot read {} (or there is no setpriv)",
                self.dir.path().display()
            );
        }
        ok
    }

    fn calls(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

#[test]
fn setup_installs_nothing_when_everything_is_there() {
    let s = Setup::new("setup_all_there");
    // This machine built psa: Open MPI and libclang are here. Root, then a user who is not.
    for as_nobody in [false, true] {
        if as_nobody && !s.can_run_as_non_root() {
            continue;
        }
        let o = s.run(as_nobody, &s.shims, true, &[]);
        let who = if as_nobody && euid() == 0 {
            "as nobody"
        } else {
            "as this user"
        };
        assert!(
            s.calls().is_empty(),
            "{who}: setup.sh called apt-get or sudo with everything installed:\n{}\n{}",
            s.calls(),
            o.describe()
        );
        assert!(o.success(), "{who}: {}", o.describe());
        assert!(o.stdout.contains("setup.sh: ready"), "{}", o.describe());
    }
}

#[test]
fn setup_without_root_names_what_to_install() {
    let s = Setup::new("setup_not_root");
    let non_root = s.can_run_as_non_root();
    if non_root {
        non_root_cases(&s);
    }
    // No apt-get (another distribution, modules): what is missing is named, nothing is run.
    let no_apt = s.dir.join("no-apt");
    fs::create_dir(&no_apt).unwrap();
    for e in fs::read_dir(&s.no_mpi).unwrap().flatten() {
        if e.file_name() != "apt-get" {
            std::os::unix::fs::symlink(e.path(), no_apt.join(e.file_name())).unwrap();
        }
    }
    let o = s.run(false, &no_apt, false, &[]);
    assert_eq!(o.code, Some(1), "{}", o.describe());
    assert!(
        o.stderr.contains("openmpi-bin") && o.stderr.contains("there is no apt-get"),
        "{}",
        o.describe()
    );
    assert!(s.calls().is_empty(), "calls: {}", s.calls());
    // Root: apt-get directly, no sudo.
    if euid() == 0 {
        let o = s.run(false, &s.no_mpi, false, &[("FAKE_APT_OK", "1")]);
        assert_eq!(o.code, Some(1), "{}", o.describe());
        let calls = s.calls();
        assert!(
            calls.contains("apt-get update")
                && calls.contains("apt-get install -y openmpi-bin")
                && !calls.contains("sudo"),
            "calls: {calls}"
        );
    }
}

/// A user who is not root, Open MPI's mpirun missing, sudo wanting a password: no install, the
/// packages named, status 1, sudo asked only non-interactively.
fn non_root_cases(s: &Setup) {
    let o = s.run(true, &s.no_mpi, false, &[]);
    assert_eq!(o.code, Some(1), "{}", o.describe());
    assert!(
        o.stderr.contains("openmpi-bin") && o.stderr.contains("apt-get install"),
        "{}",
        o.describe()
    );
    assert!(
        !s.calls().contains("apt-get") && s.calls().lines().all(|l| l.starts_with("sudo -n ")),
        "calls: {}",
        s.calls()
    );
    // Password-less sudo: it installs through sudo -n (the stand-in installs nothing, so the
    // re-check still misses mpirun and says so).
    let o = s.run(
        true,
        &s.no_mpi,
        false,
        &[("FAKE_SUDO_OK", "1"), ("FAKE_APT_OK", "1")],
    );
    o.assert_error(1, "still missing", "");
    let calls = s.calls();
    assert!(
        calls.contains("sudo -n apt-get update")
            && calls.contains("apt-get install -y openmpi-bin"),
        "calls: {calls}"
    );
}
