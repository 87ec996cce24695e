//! The default of `--mem-per-pe`, from the environment (the library reads none): Slurm's grant
//! when the job has one, else the node's available memory shared by its pes.

use std::path::Path;

/// A memory budget per pe and where it came from (for messages and `--stats`).
pub type Budget = (u64, String);

/// The default budget per pe, for `local_pes` pes on this node; `var` reads an environment
/// variable, `root` is where `/proc` and `/sys` are (tests point it elsewhere). Slurm's grant when
/// present: `SLURM_MEM_PER_CPU` × `SLURM_CPUS_PER_TASK` (default 1), else `SLURM_MEM_PER_NODE` /
/// `local_pes` (megabytes; 0 means the whole node: not a grant), but no more than
/// [`node_memory_per_pe`]: a grant is per Slurm task, and `mpirun -n 4` inside a job of one task
/// starts four pes in that task's cgroup. Without Slurm [`node_memory_per_pe`]. None when nothing
/// is known. With `warn`, a variable whose value cannot be used is reported ([`env_value`]).
pub fn default_budget(
    var: &dyn Fn(&str) -> Option<String>,
    root: &Path,
    local_pes: usize,
    warn: bool,
) -> Option<Budget> {
    let node = node_memory_per_pe(root, local_pes);
    let mut warnings = Vec::new();
    let slurm = slurm_grant(var, local_pes, &mut warnings);
    for w in warnings.iter().filter(|_| warn) {
        log::warn!("{w}");
    }
    match (slurm, node) {
        (Some(s), Some(n)) if n.0 < s.0 => Some((
            n.0,
            format!("{}, below {}'s {}", n.1, s.1, psa::plan::size_text(s.0)),
        )),
        (s, n) => s.or(n),
    }
}

/// The one rule for the environment variables psa reads (Slurm's, the launchers' ranks): unset
/// or blank, None; a value `parse` cannot use, None and a warning pushed to `warnings` naming the
/// variable, its value, what it must be (`what`) and what psa does instead (`instead`): it is
/// ignored, never an error and never ignored silently.
pub fn env_value<T>(
    var: &dyn Fn(&str) -> Option<String>,
    name: &str,
    (what, instead): (&str, &str),
    parse: impl Fn(&str) -> Option<T>,
    warnings: &mut Vec<String>,
) -> Option<T> {
    let v = var(name)?;
    let v = v.trim();
    if v.is_empty() {
        return None;
    }
    let got = parse(v);
    if got.is_none() {
        warnings.push(format!("{name}='{v}' is not {what}: ignored ({instead})"));
    }
    got
}

/// Megabytes as Slurm writes them, or a size with its unit ("4G"); None for anything else,
/// a number of megabytes past 2^64 bytes included.
fn megabytes(v: &str) -> Option<u64> {
    match v.bytes().all(|b| b.is_ascii_digit()) {
        true => v.parse::<u64>().ok()?.checked_mul(1 << 20),
        false => psa::plan::parse_size(v).ok(),
    }
}

/// Slurm's grant per pe (see [`default_budget`]); what cannot be used is pushed to `warnings`.
/// None without one.
fn slurm_grant(
    var: &dyn Fn(&str) -> Option<String>,
    local_pes: usize,
    warnings: &mut Vec<String>,
) -> Option<Budget> {
    let size = ("a memory size", "for the default --mem-per-pe");
    let per_cpu = env_value(var, "SLURM_MEM_PER_CPU", size, megabytes, warnings);
    if let Some(per_cpu) = per_cpu.filter(|&b| b > 0) {
        let count = ("a positive whole number", "1 CPU per task");
        let positive = |c: &str| c.parse::<u64>().ok().filter(|&c| c > 0);
        let cpus = env_value(var, "SLURM_CPUS_PER_TASK", count, positive, warnings);
        return Some(match cpus {
            Some(c) => (
                per_cpu.saturating_mul(c),
                format!("SLURM_MEM_PER_CPU × SLURM_CPUS_PER_TASK = {c}"),
            ),
            None => (per_cpu, "SLURM_MEM_PER_CPU".into()),
        });
    }
    let node = env_value(var, "SLURM_MEM_PER_NODE", size, megabytes, warnings)?;
    let pes = local_pes.max(1);
    Some((
        node / pes as u64,
        format!("SLURM_MEM_PER_NODE / {pes} pe(s) on the node"),
    ))
    .filter(|_| node > 0)
}

/// Memory a pe of this node may count on: the node's available memory (MemAvailable) or its
/// cgroup's limit, whichever is smaller, shared by the `local_pes` pes on the node, and at most
/// what this process's address-space limit (`ulimit -v`) leaves it: the limit less the address
/// space it holds without using it (thread stacks, the C library's arenas; a budget counts
/// resident memory). `root` is where `/proc` and `/sys` are (tests point it elsewhere). None when
/// unknown.
pub fn node_memory_per_pe(root: &Path, local_pes: usize) -> Option<Budget> {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).ok();
    let available = read("proc/meminfo").and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(|kb| (kb * 1024, "MemAvailable"))
    });
    let cgroup = cgroup_limit(root).map(|b| (b, "the cgroup's memory limit"));
    let (node, what) = match (available, cgroup) {
        (Some(a), Some(c)) => Some(if c.0 < a.0 { c } else { a }),
        (a, c) => a.or(c),
    }?;
    let pes = local_pes.max(1);
    let per_pe = (
        node / pes as u64,
        format!("{what} / {pes} pe(s) on the node"),
    );
    let reserved = psa::stats::address_space_bytes().saturating_sub(psa::stats::rss_bytes());
    Some(match psa::stats::address_space_limit() {
        Some(l) if l.saturating_sub(reserved) < per_pe.0 => (
            l.saturating_sub(reserved),
            format!(
                "ulimit -v less {} of address space held but not resident",
                psa::plan::size_text(reserved)
            ),
        ),
        _ => per_pe,
    })
}

/// What the kernel enforces per pe by ending it: the cgroup's memory limit shared by the
/// `local_pes` pes on the node, with its source; None when no cgroup limits this process. A
/// budget above it is not a budget: the kernel kills a pe (exit 137, no word from psa) before the
/// plan's limit is reached. (`ulimit -v` is not counted here: past it an allocation fails, which
/// psa reports.) `root` as in [`node_memory_per_pe`].
pub fn hard_limit_per_pe(root: &Path, local_pes: usize) -> Option<Budget> {
    let pes = local_pes.max(1) as u64;
    cgroup_limit(root).map(|b| {
        (
            b / pes,
            format!("the cgroup's memory limit / {pes} pe(s) on the node"),
        )
    })
}

/// The smallest memory limit over this process's cgroups (`proc/self/cgroup` under `root`): its
/// own group's and every group's above it up to the hierarchy's root, in cgroup v2
/// (`memory.max`) and v1 (`memory.limit_in_bytes` of the memory controller); without that file
/// the roots' own. "max" or an absurd number means no limit. None when no group has one.
fn cgroup_limit(root: &Path) -> Option<u64> {
    let own = std::fs::read_to_string(root.join("proc/self/cgroup")).unwrap_or_default();
    let mut files = vec![
        root.join("sys/fs/cgroup/memory.max"),
        root.join("sys/fs/cgroup/memory/memory.limit_in_bytes"),
    ];
    for line in own.lines() {
        // "hierarchy-ID:controllers:path"; v2's controllers are empty.
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let (base, file) = match controllers {
            "" => (root.join("sys/fs/cgroup"), "memory.max"),
            c if c.split(',').any(|c| c == "memory") => {
                (root.join("sys/fs/cgroup/memory"), "memory.limit_in_bytes")
            }
            _ => continue,
        };
        let mut dir = base.join(path.trim_start_matches('/'));
        while dir.starts_with(&base) && dir != base {
            files.push(dir.join(file));
            if !dir.pop() {
                break;
            }
        }
    }
    files
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|s| s.trim().parse::<u64>().ok())
        .filter(|&b| b < 1 << 60)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What these tests return: a missing budget or a failed setup fails them.
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    /// A root without `/proc` or `/sys`: nothing known of the node.
    fn nowhere() -> std::path::PathBuf {
        std::env::temp_dir().join("psa-budget-nowhere")
    }

    /// A grant per Slurm task shared by more pes than tasks (`mpirun -n 3` in a job of one task)
    /// is bounded by the node: the cgroup's limit over the pes on it.
    #[test]
    fn slurm_grant_no_more_than_the_node() -> TestResult {
        let root = std::env::temp_dir().join(format!("psa-budget-slurm-{}", std::process::id()));
        std::fs::create_dir_all(root.join("proc"))?;
        std::fs::create_dir_all(root.join("sys/fs/cgroup"))?;
        std::fs::write(root.join("proc/meminfo"), "MemAvailable:    8000000 kB\n")?;
        std::fs::write(root.join("sys/fs/cgroup/memory.max"), "3000000000\n")?;
        let grant = env(&[("SLURM_MEM_PER_CPU", "2000")]);
        let b = default_budget(&grant, &root, 3, false).ok_or("no budget")?;
        let small = default_budget(&grant, &root, 100, false).ok_or("no budget")?;
        std::fs::remove_dir_all(&root)?;
        if psa::stats::address_space_limit().is_none() {
            assert_eq!(b.0, 1_000_000_000);
            assert!(
                b.1.starts_with(
                    "the cgroup's memory limit / 3 pe(s) on the node, below SLURM_MEM_PER_CPU's"
                ),
                "{}",
                b.1
            );
            assert_eq!(small.0, 30_000_000);
        }
        // One pe in the task: the grant (below the cgroup's 3 GB) stands.
        std::fs::create_dir_all(root.join("proc"))?;
        std::fs::write(root.join("proc/meminfo"), "MemAvailable:    8000000 kB\n")?;
        let one = default_budget(&grant, &root, 1, false).ok_or("no budget")?;
        std::fs::remove_dir_all(&root)?;
        if psa::stats::address_space_limit().is_none() {
            assert_eq!(one, (2000 << 20, "SLURM_MEM_PER_CPU".into()));
        }
        Ok(())
    }

    #[test]
    fn slurm_per_cpu_times_cpus_per_task() -> TestResult {
        let b = default_budget(
            &env(&[
                ("SLURM_MEM_PER_CPU", "2000"),
                ("SLURM_CPUS_PER_TASK", "4"),
                ("SLURM_MEM_PER_NODE", "1"),
            ]),
            &nowhere(),
            3,
            false,
        )
        .ok_or("no budget")?;
        assert_eq!(b.0, 8000 << 20);
        assert!(b.1.contains("SLURM_MEM_PER_CPU"), "{}", b.1);
        let b = default_budget(&env(&[("SLURM_MEM_PER_CPU", "2000")]), &nowhere(), 3, false)
            .ok_or("no budget")?;
        assert_eq!(b.0, 2000 << 20);
        Ok(())
    }

    /// Every Slurm variable psa reads follows one rule: a value it cannot use is ignored with
    /// a warning naming the variable and the value, and the next source is taken.
    #[test]
    fn slurm_garbage_is_named_and_ignored() {
        let grant = |vars: &[(&str, &str)]| {
            let mut warnings = Vec::new();
            let b = slurm_grant(&env(vars), 2, &mut warnings);
            (b.map(|b| b.0), warnings)
        };
        // The variables set, the budget wanted, the warning's beginning.
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<u64>, &'a str);
        let cases: &[Case] = &[
            (&[("SLURM_MEM_PER_CPU", "lots")], None, "SLURM_MEM_PER_CPU='lots' is not a memory size"),
            (&[("SLURM_MEM_PER_NODE", "-5")], None, "SLURM_MEM_PER_NODE='-5' is not a memory size"),
            (
                &[("SLURM_MEM_PER_NODE", "99999999999999999")],
                None,
                "SLURM_MEM_PER_NODE='99999999999999999' is not a memory size",
            ),
            (
                &[("SLURM_MEM_PER_CPU", "x"), ("SLURM_MEM_PER_NODE", "1000")],
                Some(500 << 20),
                "SLURM_MEM_PER_CPU='x' is not a memory size",
            ),
            (
                &[("SLURM_MEM_PER_CPU", "100"), ("SLURM_CPUS_PER_TASK", "two")],
                Some(100 << 20),
                "SLURM_CPUS_PER_TASK='two' is not a positive whole number: ignored (1 CPU per task)",
            ),
            (
                &[("SLURM_MEM_PER_CPU", "100"), ("SLURM_CPUS_PER_TASK", "0")],
                Some(100 << 20),
                "SLURM_CPUS_PER_TASK='0' is not a positive whole number",
            ),
        ];
        for (vars, want, warning) in cases {
            let (got, warnings) = grant(vars);
            assert_eq!(got, *want, "{vars:?}");
            assert_eq!(warnings.len(), 1, "{vars:?}: {warnings:?}");
            assert!(warnings[0].starts_with(warning), "{vars:?}: {warnings:?}");
        }
        // Usable values, 0 (the whole node) and blank ones warn of nothing.
        for vars in [
            &[("SLURM_MEM_PER_CPU", "4G"), ("SLURM_CPUS_PER_TASK", " 2 ")][..],
            &[("SLURM_MEM_PER_NODE", "0")],
            &[("SLURM_MEM_PER_CPU", " "), ("SLURM_MEM_PER_NODE", "")],
        ] {
            assert!(grant(vars).1.is_empty(), "{vars:?}");
        }
    }

    #[test]
    fn slurm_per_node_over_the_pes_on_it() -> TestResult {
        let b = default_budget(
            &env(&[("SLURM_MEM_PER_NODE", "12000")]),
            &nowhere(),
            3,
            false,
        )
        .ok_or("no budget")?;
        assert_eq!(
            b,
            (
                4000 << 20,
                "SLURM_MEM_PER_NODE / 3 pe(s) on the node".into()
            )
        );
        Ok(())
    }

    #[test]
    fn the_node_without_slurm_or_with_the_whole_node() -> TestResult {
        let root = std::env::temp_dir().join(format!("psa-budget-{}", std::process::id()));
        std::fs::create_dir_all(root.join("proc"))?;
        std::fs::create_dir_all(root.join("sys/fs/cgroup"))?;
        std::fs::write(
            root.join("proc/meminfo"),
            "MemTotal: 99999 kB\nMemAvailable:    8000000 kB\n",
        )?;
        std::fs::write(root.join("sys/fs/cgroup/memory.max"), "max\n")?;
        let no_limit = node_memory_per_pe(&root, 4).ok_or("no budget")?;
        std::fs::write(root.join("sys/fs/cgroup/memory.max"), "4000000000\n")?;
        let limited = node_memory_per_pe(&root, 4).ok_or("no budget")?;
        if psa::stats::address_space_limit().is_none() {
            assert_eq!(no_limit.0, 8_192_000_000 / 4);
            assert!(no_limit.1.starts_with("MemAvailable / 4"), "{}", no_limit.1);
            assert_eq!(limited.0, 1_000_000_000);
            assert!(limited.1.contains("cgroup"), "{}", limited.1);
        }
        std::fs::remove_dir_all(&root)?;
        assert!(node_memory_per_pe(&root, 4).is_none());
        Ok(())
    }

    /// The hard limit per pe is the cgroup's shared by the node's pes (MemAvailable, a soft
    /// figure, does not count).
    #[test]
    fn the_hard_limit_is_the_cgroups_per_pe() -> TestResult {
        let root = std::env::temp_dir().join(format!("psa-hard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("proc"))?;
        std::fs::create_dir_all(root.join("sys/fs/cgroup"))?;
        std::fs::write(root.join("proc/meminfo"), "MemAvailable: 100 kB\n")?;
        std::fs::write(root.join("sys/fs/cgroup/memory.max"), "120000000\n")?;
        let (bytes, from) = hard_limit_per_pe(&root, 4).ok_or("no hard limit found")?;
        assert_eq!(bytes, 30_000_000);
        assert!(from.contains("cgroup") && from.contains("4 pe"), "{from}");
        std::fs::write(root.join("sys/fs/cgroup/memory.max"), "max\n")?;
        assert_eq!(hard_limit_per_pe(&root, 4), None);
        std::fs::remove_dir_all(&root)?;
        Ok(())
    }

    /// The process's own cgroup and those above it count (a job's step inside a job's group),
    /// in v2 and v1; the smallest limit binds, "max" is none.
    #[test]
    fn the_process_own_cgroups_limit_it() -> TestResult {
        let root = std::env::temp_dir().join(format!("psa-cgroup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("proc/self"))?;
        std::fs::create_dir_all(root.join("sys/fs/cgroup/job/step"))?;
        std::fs::write(root.join("proc/self/cgroup"), "0::/job/step\n")?;
        std::fs::write(root.join("sys/fs/cgroup/job/step/memory.max"), "max\n")?;
        std::fs::write(root.join("sys/fs/cgroup/job/memory.max"), "3000000000\n")?;
        assert_eq!(cgroup_limit(&root), Some(3_000_000_000));
        std::fs::write(
            root.join("sys/fs/cgroup/job/step/memory.max"),
            "2000000000\n",
        )?;
        assert_eq!(cgroup_limit(&root), Some(2_000_000_000));
        // v1: the memory controller's hierarchy; other controllers' lines are not memory's.
        std::fs::create_dir_all(root.join("sys/fs/cgroup/memory/slurm/uid_0"))?;
        std::fs::write(
            root.join("proc/self/cgroup"),
            "5:cpu,cpuacct:/other\n4:memory:/slurm/uid_0\n",
        )?;
        std::fs::write(
            root.join("sys/fs/cgroup/memory/slurm/memory.limit_in_bytes"),
            "9223372036854771712\n",
        )?;
        std::fs::write(
            root.join("sys/fs/cgroup/memory/slurm/uid_0/memory.limit_in_bytes"),
            "1500000000\n",
        )?;
        assert_eq!(cgroup_limit(&root), Some(1_500_000_000));
        std::fs::remove_dir_all(&root)?;
        assert_eq!(cgroup_limit(&root), None);
        Ok(())
    }
}
