//! `--mem-per-pe`: the memory plan through the `psa` binary. A budget too small is refused before
//! the input is read (one message, exit 4, nothing written); the leanest budget runs every
//! exchange in rounds and stays exact; the default comes from Slurm's variables; `--stats` and
//! `-v` show the plan. (The hard-input table under the leanest budget is in tests/algorithms.rs.)

mod common;

use std::fs;
use std::time::Duration;

use common::*;
use psa::plan::choose;
use psa::{Algo, Config};

/// The base the runs below plan with (`--plan-base`): [`psa::plan::BASE_BYTES`], as
/// [`leanest`] does, so that the budgets computed here are the runs' own.
const PLAN_BASE: &str = "33554432";

/// The smallest budget at which `algo` runs on `n` characters at `p` pes (its leanest plan).
fn leanest(n: usize, p: usize, algo: Algo, sort_rounds: usize) -> u64 {
    let mut config = Config {
        algo,
        plan_algo: false,
        ..Config::default()
    };
    config.css.sort_rounds = sort_rounds;
    let shape = plan_shape(n, p);
    choose(&config, &shape, "").expect("no budget").leanest
}

#[test]
fn a_budget_too_small_is_refused_before_the_input_is_read() {
    let dir = TempDir::new("budget_refused");
    // A sparse file of 1 TiB: reading it (or making its output) would take far longer than the
    // timeout.
    let big = fs::File::create(dir.join("huge.bin")).unwrap();
    big.set_len(1 << 40).expect("a sparse file of 1 TiB");
    drop(big);
    for p in [1, 3] {
        let o = run_psa_env(
            p,
            ["--mem-per-pe", "1G", "-o", "out.sa", "huge.bin"],
            &[],
            dir.path(),
            Duration::from_secs(30),
        );
        assert_eq!(o.code, Some(4), "p = {p}: {}", o.describe());
        for needle in [
            "memory budget too small",
            "a text of 1099511627776 characters",
            &match p {
                1 => "on 1 pe (".to_string(),
                _ => format!("on {p} pes ("),
            },
            "the budget is 1073741824 bytes (1.0 GiB) per pe (--mem-per-pe)",
            "use more pes (about ",
            "--mem-per-pe ",
        ] {
            assert!(
                o.stderr.contains(needle),
                "p = {p}: no '{needle}': {}",
                o.describe()
            );
        }
        assert_eq!(
            o.stderr.matches("memory budget too small").count(),
            1,
            "p = {p}: one message: {}",
            o.describe()
        );
        assert_eq!(
            dir.entries(),
            ["huge.bin"],
            "p = {p}: something was written"
        );
    }
    // Below what a pe needs before it holds any text.
    dir.write("small.txt", b"banana");
    let o = run_psa(2, ["--mem-per-pe", "20M", "small.txt"], dir.path());
    o.assert_error(4, "before it holds any text: raise --mem-per-pe", "");
}

/// pe 0 holds the table of a sequence input's records (names and places) through the build: a
/// budget that the text alone would fit but not with the table is refused (after the scan that
/// finds the records, before the build), naming the table; at the need that the message names
/// the run fits, and its measured peak stays within the plan. Short names, and long ones with
/// their reverse complements' twins (`--revcomp`).
#[test]
fn pe_0s_records_table_counts_in_the_plan() {
    let dir = TempDir::new("budget_records");
    const READS: usize = 100_000;
    for (name_len, revcomp) in [(6, false), (99, true)] {
        let mut rng = Rng::new(5);
        let mut fq = Vec::new();
        for k in 0..READS {
            let read: String = (0..8)
                .map(|_| ['A', 'C', 'G', 'T'][rng.below(4) as usize])
                .collect();
            let name = format!("{k:0name_len$}");
            fq.extend_from_slice(format!("@{name}\n{read}\n+\nIIIIIIII\n").as_bytes());
        }
        dir.write("reads.fq", &fq);
        let n = READS * 9 * if revcomp { 2 } else { 1 };
        let p = 3;
        let text_alone = leanest(n, p, Algo::Dc3, 0);
        let what = format!("names of {name_len} bytes, revcomp {revcomp}");
        let run_to = |out: &str, budget: u64| {
            let budget = budget.to_string();
            let mut args = vec![
                "--algo",
                "dc3",
                "--plan-base",
                PLAN_BASE,
                "--mem-per-pe",
                &budget,
                "--stats",
                "s.json",
            ];
            if revcomp {
                args.push("--revcomp");
            }
            args.extend(["-o", out, "reads.fq"]);
            run_psa(p, &args, dir.path())
        };
        let run = |budget: u64| run_to("out.sa", budget);
        // The need a refusal names.
        let need_of = |o: &Outcome| -> u64 {
            o.stderr
                .split("needs at least ")
                .nth(1)
                .and_then(|s| s.split(' ').next())
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{what}: no need in {}", o.describe()))
        };
        let o = run(text_alone + (1 << 20));
        o.assert_error(4, "pe 0 also holds the table of the input's records", &what);
        assert!(!o.stderr.contains("build"), "{what}: {}", o.describe());
        let need = need_of(&o);
        // Written through to a device no index files are made: the table is held, not written.
        let o = run_to("/dev/null", text_alone + (1 << 20));
        o.assert_error(4, "pe 0 also holds the table of the input's records", &what);
        let unwritten = need_of(&o);
        assert!(
            unwritten < need,
            "{what}: {unwritten} needed without index files, {need} with"
        );
        // A run at `budget` succeeds, its measured peak within its plan within the budget;
        // returns its stats.
        let fits = |o: Outcome, budget: u64, to: &str| -> String {
            assert!(o.success(), "{what}, to {to} at {budget}: {}", o.describe());
            let stats = fs::read_to_string(dir.join("s.json")).expect("stats");
            let value = |key| -> u64 { json_value(&stats, key).parse().expect(key) };
            let (planned, measured) = (
                value("planned_peak_bytes"),
                value("measured_max_peak_bytes"),
            );
            assert!(
                measured <= planned && planned <= budget,
                "{what}, to {to}: measured {measured}, planned {planned}, budget {budget}"
            );
            stats
        };
        fits(run_to("/dev/null", unwritten), unwritten, "/dev/null");
        // Some 60 bytes a record besides its name, three times at the end (where the index
        // files are written from it, after the build has freed the text's share).
        let records = READS as u64 * if revcomp { 2 } else { 1 };
        let no_text = leanest(0, p, Algo::Dc3, 0);
        assert!(
            need > no_text + 3 * (60 + name_len as u64) * records,
            "{what}: need {need}, without any text {no_text}"
        );
        let stats = fits(run(need), need, "out.sa");
        let value = |key| -> u64 { json_value(&stats, key).parse().expect(key) };
        let planned = value("planned_peak_bytes");
        // The plan names the table's part of its peak: at least each record and its name.
        let table = value("records_table_bytes");
        assert!(
            table >= (40 + name_len as u64) * records && table < planned,
            "{what}: the records table planned at {table} of {planned}"
        );
    }
}

#[test]
fn the_leanest_budget_runs_exchanges_in_rounds_and_stats_show_the_plan() {
    let dir = TempDir::new("budget_leanest");
    let text = gen::dna(21, 30_000);
    dir.write("in.txt", &text);
    let want = psa::internals::sa_bytes(&text, 1);
    for (p, algo, name) in [(2, Algo::Css, "css"), (3, Algo::Dc3, "dc3")] {
        let budget = leanest(text.len(), p, algo, 0).to_string();
        let o = run_psa(
            p,
            [
                "-v",
                "--algo",
                name,
                "--plan-base",
                PLAN_BASE,
                "--base-case",
                "64",
                "--mem-per-pe",
                &budget,
                "--stats",
                "st.json",
                "-o",
                "out.sa",
                "in.txt",
            ],
            dir.path(),
        );
        assert!(o.success(), "{}", o.describe());
        assert_eq!(read_sa(&dir.join("out.sa"), 4), want, "p = {p}, {name}");
        // pCSS bounds its records by sorting in many key ranges, pDC3 by merging in many; both
        // exchange in small rounds besides.
        let shown = match name {
            "css" => "plan: css sorting in 64 and merging in 64 key ranges, exchanges in rounds of 4.0 KiB per pe",
            _ => "plan: dc3 merging in 64 key ranges, exchanges in rounds of 4.0 KiB per pe",
        };
        assert!(
            o.stderr.contains(shown),
            "-v shows the plan: {}",
            o.describe()
        );
        assert!(
            o.stderr.contains("memory: measured peak "),
            "{}",
            o.describe()
        );
        let st = fs::read_to_string(dir.join("st.json")).unwrap();
        let plan = &st[st.find("\"plan\": {").expect("a plan") + 9..];
        assert_eq!(json_value(plan, "algo"), format!("\"{name}\""), "{st}");
        let rounds: usize = json_value(plan, "exchange_rounds").parse().unwrap();
        match name {
            "css" => assert_eq!(json_value(plan, "sort_rounds"), "64", "{st}"),
            _ => {
                assert_eq!(json_value(plan, "merge_rounds"), "64", "{st}");
                assert_eq!(json_value(plan, "exchange_round_bytes"), "4096", "{st}");
                assert!(rounds >= 10, "{st}");
            }
        }
        assert!(rounds >= 1, "{st}");
        assert_eq!(json_value(plan, "mem_per_pe"), budget, "{st}");
        assert_eq!(json_value(&st, "mem_per_pe"), budget, "{st}");
        assert_eq!(
            json_value(&st, "mem_per_pe_from"),
            "\"--mem-per-pe\"",
            "{st}"
        );
        assert_eq!(
            json_value(&st, "exchange_round_bytes"),
            "4096",
            "config: {st}"
        );
        let planned: u64 = json_value(&st, "planned_peak_bytes").parse().unwrap();
        let measured: u64 = json_value(&st, "measured_max_peak_bytes").parse().unwrap();
        assert!(planned <= budget.parse().unwrap(), "{st}");
        assert!(
            measured > 0 && measured <= planned,
            "the model is an upper bound: {st}"
        );
    }
}

#[test]
fn without_algo_the_plan_may_take_the_leaner_algorithm() {
    let dir = TempDir::new("budget_algo");
    let text = gen::random(22, 1 << 20, 256, 0);
    dir.write("in.txt", &text);
    // pCSS in one key range (`--sort-rounds 1`) is the hungrier in the model.
    let (css, dc3) = (
        leanest(text.len(), 1, Algo::Css, 1),
        leanest(text.len(), 1, Algo::Dc3, 1),
    );
    assert!(dc3 < css, "dc3 is the leaner in the model");
    let budget = ((css + dc3) / 2).to_string();
    let args = [
        "--plan-base",
        PLAN_BASE,
        "--mem-per-pe",
        &budget,
        "--sort-rounds",
        "1",
        "--stats",
        "st.json",
        "in.txt",
    ];
    let o = run_psa(1, args, dir.path());
    assert!(o.success(), "{}", o.describe());
    let st = fs::read_to_string(dir.join("st.json")).unwrap();
    assert_eq!(json_value(&st, "algo"), "\"dc3\"", "{st}");
    assert!(
        o.stderr.contains("plan: dc3"),
        "a changed plan is logged: {}",
        o.describe()
    );
    assert_eq!(
        read_sa(&dir.join("in.txt.sa"), 4),
        psa::internals::sa_bytes(&text, 1)
    );
    let o = run_psa(1, [&["--algo", "css"][..], &args].concat(), dir.path());
    o.assert_error(4, "(css with exchanges", "--algo css is kept");
}

#[test]
fn the_default_budget_comes_from_slurm() {
    let dir = TempDir::new("budget_slurm");
    dir.write("in.txt", &gen::dna(23, 1 << 20));
    let run = |p: usize, env: &[(&str, &str)]| {
        run_psa_env(
            p,
            [
                "--plan-base",
                PLAN_BASE,
                "--stats",
                "st.json",
                "--force",
                "in.txt",
            ],
            env,
            dir.path(),
            DEFAULT_TIMEOUT,
        )
    };
    // 40 MiB per CPU × 1: too little for 1 MiB on one pe; refused, naming the variables.
    let o = run(
        1,
        &[("SLURM_MEM_PER_CPU", "40"), ("SLURM_CPUS_PER_TASK", "1")],
    );
    assert_eq!(o.code, Some(4), "{}", o.describe());
    assert!(
        o.stderr.contains(
            "the budget is 41943040 bytes (40.0 MiB) per pe (SLURM_MEM_PER_CPU × SLURM_CPUS_PER_TASK = 1)"
        ) && o.stderr.contains("or ask Slurm for more: sbatch --mem-per-cpu or --mem"),
        "{}",
        o.describe()
    );
    // 30 MiB per CPU × 10 CPUs per task: enough.
    let o = run(
        1,
        &[("SLURM_MEM_PER_CPU", "30"), ("SLURM_CPUS_PER_TASK", "10")],
    );
    assert!(o.success(), "{}", o.describe());
    let st = fs::read_to_string(dir.join("st.json")).unwrap();
    assert_eq!(
        json_value(&st, "mem_per_pe"),
        (300u64 << 20).to_string(),
        "{st}"
    );
    // The node's grant over the pes on it.
    let o = run(2, &[("SLURM_MEM_PER_NODE", "1000")]);
    assert!(o.success(), "{}", o.describe());
    let st = fs::read_to_string(dir.join("st.json")).unwrap();
    assert_eq!(
        json_value(&st, "mem_per_pe"),
        (500u64 << 20).to_string(),
        "{st}"
    );
    assert_eq!(
        json_value(&st, "mem_per_pe_from"),
        "\"SLURM_MEM_PER_NODE / 2 pe(s) on the node\"",
        "{st}"
    );
    // A value that is not a size is ignored, with one warning (pe 0's), for the node's memory.
    let o = run(2, &[("SLURM_MEM_PER_NODE", "abc")]);
    assert!(o.success(), "{}", o.describe());
    let warning = "SLURM_MEM_PER_NODE='abc' is not a memory size";
    assert_eq!(o.stderr.matches(warning).count(), 1, "{}", o.describe());
    let st = fs::read_to_string(dir.join("st.json")).unwrap();
    assert!(
        !json_value(&st, "mem_per_pe_from").contains("SLURM"),
        "{st}"
    );
    // --mem-per-pe overrides Slurm; 0 (the whole node) falls back to the node's memory.
    let o = run(1, &[("SLURM_MEM_PER_NODE", "0")]);
    assert!(o.success(), "{}", o.describe());
    let st = fs::read_to_string(dir.join("st.json")).unwrap();
    assert!(
        !json_value(&st, "mem_per_pe_from").contains("SLURM"),
        "{st}"
    );
    let o = run_psa_env(
        1,
        [
            "--mem-per-pe",
            "2G",
            "--stats",
            "st.json",
            "--force",
            "in.txt",
        ],
        &[("SLURM_MEM_PER_CPU", "40")],
        dir.path(),
        DEFAULT_TIMEOUT,
    );
    assert!(o.success(), "{}", o.describe());
    let st = fs::read_to_string(dir.join("st.json")).unwrap();
    assert_eq!(
        json_value(&st, "mem_per_pe"),
        (2u64 << 30).to_string(),
        "{st}"
    );
}

#[test]
fn bad_sizes_are_usage_errors() {
    let dir = TempDir::new("budget_usage");
    dir.write("in.txt", b"banana");
    for bad in ["3X", "-1G", "lots", "100K"] {
        let o = run_psa(1, [&format!("--mem-per-pe={bad}"), "in.txt"], dir.path());
        o.assert_error(2, "--mem-per-pe", bad);
    }
    assert_eq!(dir.entries(), ["in.txt"]);
}
