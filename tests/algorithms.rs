//! The algorithm table: every named input × p ∈ {1, 2, 3, 4, 7} × algo ∈ {dc3, css, node} through the
//! `psa` binary, compared in full with an independent oracle; random texts and output widths
//! through it too. One test function per input row (so rows run in parallel and fail
//! separately); each reports every failing (p, algo, base case) of its row at once.
//!
//! The switches' variants (exchanges and sorts in rounds, all-to-alls in chunks, the leanest
//! memory budget, wide records, pCSS' finishes, the suffix array written as it becomes final)
//! run the binary's job, `psa::driver::run` (read the input file, plan, build, write the output
//! file, check), on the same inputs in one MPI job per process count ([`jobs_in_process`]): the
//! launch of a process, not the build, is most of a small run's time. That each switch sets its
//! setting is `psa`'s unit test `cli::tests::every_switch_sets_its_field`; what `main` adds (the
//! default budget, the threads per pe, the exit) is tested through the binary above and in
//! tests/errors.rs and tests/budget.rs.

mod common;

use std::path::{Path, PathBuf};

use common::harness::mpi_test_at;
use common::*;
use mpi::topology::SimpleCommunicator;
use psa::driver::Job;
use psa::io::seq::SeqOptions;
use psa::io::Width;
use psa::{Algo, IndexWidth, Predicted};

/// Process counts of the table.
const PES: &[usize] = &[1, 2, 3, 4, 7];

/// A run's limit: long enough for p = 7 on a loaded 2-core machine (a run takes under a second
/// alone; the leanest budget's runs took over 60 s beside a build), short enough to catch a hang.
const RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(180);

/// How small subproblems must be before they are gathered on pe 0.
#[derive(Clone, Copy, Debug)]
enum Base {
    /// `--base-case N`: with a small N the distributed recursion runs down to tiny levels (with
    /// fewer characters than pes, empty pes, …). These runs also pass `--check`.
    Small(usize),
    /// The default (2^22): every input in this table is gathered and solved on pe 0 at once.
    Default,
}

impl Base {
    fn args(self) -> Vec<String> {
        match self {
            Base::Small(n) => vec!["--base-case".into(), n.to_string(), "--check".into()],
            Base::Default => vec![],
        }
    }

    fn label(self) -> String {
        match self {
            Base::Small(n) => format!("--base-case {n}"),
            Base::Default => "default base case".into(),
        }
    }
}

const DEEP: &[Base] = &[Base::Small(4)];
const DEEP_AND_DEFAULT: &[Base] = &[Base::Small(4), Base::Default];
const ALL_BASES: &[Base] = &[Base::Small(4), Base::Small(100), Base::Default];

/// One row of the table: a named input and the base-case settings it runs with.
struct Case {
    name: &'static str,
    gen: fn() -> Vec<u8>,
    bases: &'static [Base],
}

/// Builds the table and one `#[test]` per row.
macro_rules! table {
    ($($name:ident: $gen:expr, $bases:expr;)*) => {
        /// Every row of the table (also used to cross-check the oracles).
        const TABLE: &[Case] = &[$(Case { name: stringify!($name), gen: $gen, bases: $bases }),*];
        mod row {
            $(
                #[test]
                fn $name() {
                    super::run_row(stringify!($name));
                }
            )*
        }
    };
}

table! {
    // n = 0..5; n < p for most p (pes without any character).
    len0_empty: || Vec::new(), DEEP;
    len1_one_byte: || b"x".to_vec(), DEEP;
    len2: || b"ba".to_vec(), DEEP;
    len3_n_lt_p: || b"aab".to_vec(), DEEP;
    len4: || vec![0xff, 0x00, 0xff, 0x00], DEEP;
    len5: || b"abaab".to_vec(), DEEP_AND_DEFAULT;
    len5_zeros: || vec![0u8; 5], DEEP;
    len6_banana: || b"banana".to_vec(), DEEP;
    len7_mississippi_prefix: || b"mississ".to_vec(), DEEP;
    // Extreme byte values (0x00 must not be treated as a sentinel, 0xFF must not overflow).
    zeros_1000: || gen::run(0x00, 1000), DEEP_AND_DEFAULT;
    ff_1001: || gen::run(0xff, 1001), DEEP;
    zero_ff_mix_2000: || gen::zero_ff(1, 2000), DEEP_AND_DEFAULT;
    zero_ff_mix_2002: || gen::zero_ff(2, 2002), DEEP;
    // Periodic texts: all triples equal, maximal recursion depth.
    a_n_3001: || gen::a_n(3001), ALL_BASES;
    a_n_64: || gen::a_n(64), DEEP;
    ab_n_a_2001: || gen::ab_n_a(1000), DEEP;
    abc_n_3000: || gen::abc_n(1000), DEEP_AND_DEFAULT;
    abc_n_ab_2999: || { let mut v = gen::abc_n(999); v.extend_from_slice(b"ab"); v }, DEEP;
    fibonacci_4181: || gen::fibonacci(4181), DEEP;
    fibonacci_30000: || gen::fibonacci(30_000), DEEP;
    repeated_block_37x135: || gen::repeated_block(3, 37, 37 * 135, 26), DEEP;
    repeated_block_1000x20_binary: || gen::repeated_block(4, 1000, 20_000, 2), DEEP;
    // n mod 7 = 1 and 2: pCSS's DC7 needs a dummy sample to end class 1 or 2 (as DC3 does when
    // n mod 3 = 1); 20000 above is also 1 mod 7.
    repeated_block_64_n_1_mod_7: || gen::repeated_block(12, 64, 7 * 3000 + 1, 26), &[Base::Small(4), Base::Small(100)];
    repeated_block_64_n_2_mod_7: || gen::repeated_block(13, 64, 7 * 3000 + 2, 26), DEEP;
    // Random text over 2, 4 and 256 letters, lengths ≡ 0, 1, 2 (mod 3).
    random_sigma2_5001: || gen::random(5, 5001, 2, b'0'), DEEP;
    random_sigma4_4999: || gen::random(6, 4999, 4, b'a'), DEEP;
    random_sigma256_5000: || gen::random(7, 5000, 256, 0), ALL_BASES;
    random_sigma256_100k: || gen::random(8, 100_000, 256, 0), &[Base::Small(16)];
    // More than 16 letters: pCSS's first sort packs 128-bit keys (16–24 characters) — long runs
    // and Fibonacci's repeats inside such keys (periods: the repeated blocks of 26 letters).
    a_n_wide_3017: || { let mut v = gen::a_n(3000); v.extend(b'b'..=b'r'); v }, DEEP;
    fibonacci_wide_4198: || { let mut v = gen::fibonacci(4181); v.extend(b'c'..=b's'); v }, DEEP;
    // DNA-like text with N runs and copies.
    dna_20000: || gen::dna(9, 20_000), DEEP_AND_DEFAULT;
    dna_200k: || gen::dna(10, 200_000), &[Base::Small(1000)];
}

/// Runs one row: every p, algo and base case; collects all failures, then fails with all of them.
fn run_row(name: &str) {
    let case = TABLE
        .iter()
        .find(|c| c.name == name)
        .expect("row is in the table");
    let text = (case.gen)();
    let want = oracle(&text);
    let dir = TempDir::new(name);
    dir.write("input", &text);
    let mut failures = Vec::new();
    let mut runs = 0;
    for &p in PES {
        for &algo in ALGOS {
            for &base in case.bases {
                runs += 1;
                if let Err(msg) = run_one(dir.path(), &want, p, algo, base, &[]) {
                    failures.push(format!(
                        "input {name} (n = {}), p = {p}, algo = {algo}, {}: {msg}",
                        text.len(),
                        base.label()
                    ));
                }
            }
        }
    }
    eprintln!(
        "{name}: n = {}, {runs} runs, {} failed",
        text.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failure_report(&failures, runs));
}

/// One run of `psa` on `dir/input` with the switches `extra`; Ok when it exits 0 and its output
/// equals `want`.
fn run_one(
    dir: &Path,
    want: &[u64],
    p: usize,
    algo: &str,
    base: Base,
    extra: &[&str],
) -> Result<(), String> {
    let out = format!(
        "out-{p}-{algo}-{}.sa",
        base.label().replace(' ', "_").replace('-', "")
    );
    let mut args: Vec<String> = vec![
        "-q".into(),
        "--algo".into(),
        algo.into(),
        "-o".into(),
        out.clone(),
    ];
    args.extend(base.args());
    args.extend(extra.iter().map(|a| a.to_string()));
    args.push("input".into());
    let o = run_psa_env(p, &args, &[], dir, RUN_TIMEOUT);
    if !o.success() {
        return Err(format!("run failed: {}", o.brief()));
    }
    let path = dir.join(&out);
    let got = read_sa(&path, 4);
    let _ = std::fs::remove_file(&path);
    if got != want {
        return Err(format!("wrong suffix array: {}", first_diff(&got, want)));
    }
    Ok(())
}

/// The two oracles agree with each other on every (small) table input, so the table's verdicts
/// rest on an oracle that is itself checked.
#[test]
fn oracles_agree_on_table_inputs() {
    for case in TABLE {
        let text = (case.gen)();
        if text.len() <= NAIVE_MAX {
            let a = psa::internals::naive_sa(&text);
            let b = psa::internals::sa_bytes(&text, 1);
            assert_eq!(a, b, "naive oracle and libsais differ on {}", case.name);
        }
    }
    // And the generators are what their names say.
    assert_eq!(gen::fibonacci(8), b"abaababa");
    assert_eq!(gen::ab_n_a(2), b"ababa");
    assert_eq!(gen::abc_n(2), b"abcabc");
    assert!(gen::dna(9, 20_000).iter().all(|c| b"ACGTN".contains(c)));
    assert!(
        gen::dna(9, 20_000).windows(10).any(|w| w == b"NNNNNNNNNN"),
        "DNA has N runs"
    );
    assert_eq!(
        gen::random(7, 5000, 256, 0),
        gen::random(7, 5000, 256, 0),
        "generators are deterministic"
    );
    let mut seen = [false; 256];
    for &c in &gen::random(7, 5000, 256, 0) {
        seen[c as usize] = true;
    }
    assert!(
        seen.iter().all(|&s| s),
        "sigma = 256 covers every byte value"
    );
}

/// Random texts through the CLI: random length 0..3000, random alphabet size 1..=256, random
/// p ∈ 1..=5, random base case; both algorithms on each text.
#[test]
fn random_texts_cli() {
    let mut rng = Rng::new(0xC11);
    let dir = TempDir::new("random_cli");
    let mut failures = Vec::new();
    const TEXTS: usize = 20;
    for k in 0..TEXTS {
        let n = rng.range(0, 3000);
        let sigma = rng.range(1, 256);
        let base_byte = rng.below(256) as u8;
        let text = gen::random(rng.next_u64(), n, sigma, base_byte);
        let p = rng.range(1, 5);
        let base = match rng.below(3) {
            0 => Base::Small(4),
            1 => Base::Small(rng.range(5, 300)),
            _ => Base::Default,
        };
        dir.write("input", &text);
        let want = oracle(&text);
        for &algo in ALGOS {
            if let Err(msg) = run_one(dir.path(), &want, p, algo, base, &[]) {
                failures.push(format!(
                    "random text #{k} (n = {n}, sigma = {sigma}, first letter {base_byte}), p = {p}, algo = {algo}, {}: {msg}",
                    base.label()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}",
        failure_report(&failures, 2 * TEXTS)
    );
}

/// `--width 5`, `--width 8`, `--width 4` and auto all decode to the same suffix array, and the file
/// holds exactly n × width bytes.
#[test]
fn output_widths() {
    let text = gen::dna(11, 7001);
    let want = oracle(&text);
    let dir = TempDir::new("widths");
    dir.write("input", &text);
    let mut failures = Vec::new();
    for (p, algo) in [(1, "dc3"), (3, "dc3"), (3, "css"), (4, "css")] {
        for (flag, width) in [("auto", 4usize), ("4", 4), ("5", 5), ("8", 8)] {
            let out = format!("w{flag}-{p}-{algo}.sa");
            let o = run_psa(
                p,
                [
                    "-q",
                    "--algo",
                    algo,
                    "--base-case",
                    "16",
                    "--width",
                    flag,
                    "-o",
                    &out,
                    "input",
                ],
                dir.path(),
            );
            let label = format!("p = {p}, algo = {algo}, --width {flag}");
            if !o.success() {
                failures.push(format!("{label}: {}", o.describe()));
                continue;
            }
            let bytes = std::fs::read(dir.join(&out)).expect("output exists");
            if bytes.len() != text.len() * width {
                failures.push(format!(
                    "{label}: file has {} bytes, want {}",
                    bytes.len(),
                    text.len() * width
                ));
                continue;
            }
            let got = decode(&bytes, width);
            if got != want {
                failures.push(format!("{label}: {}", first_diff(&got, &want)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

// ------------------------------------------------------------------------------------------------
// The switches' variants: the binary's job in one MPI job per process count

/// One build of a variant: its label in a failure report, the library's settings (what the
/// switches set: `--algo` and the rest; threads as many as `psa` starts by default), the entry
/// width (`--width`) and `--check`.
struct Build {
    label: String,
    config: psa::Config,
    width: Width,
    check: bool,
}

impl Build {
    /// `--algo algo` with `edit` applied to the other settings; entries of the automatic width,
    /// no check.
    fn new(label: impl Into<String>, algo: Algo, edit: impl FnOnce(&mut psa::Config)) -> Build {
        let mut config = psa::Config {
            algo,
            plan_algo: false,
            ..psa::Config::default()
        };
        edit(&mut config);
        Build {
            label: label.into(),
            config,
            width: Width::Auto,
            check: false,
        }
    }

    /// `--base-case n --check`: the distributed recursion down to tiny levels, then the checker.
    fn deep(mut self, n: usize) -> Build {
        self.config.base_case = n;
        self.check = true;
        self
    }
}

/// Every input through every build `builds(input name, text, p)` gives, in one MPI job at each process
/// count of `procs` (the harness's `mpi_test_at`): pe 0 writes the input file; every pe runs the
/// binary's job on it (`psa::driver::run`: read, plan, build, write `out.sa`, check); pe 0 reads
/// the file back and compares it with the oracle. A failed build (an error, agreed by the pes)
/// or a wrong suffix array is recorded and the job goes on; at the end pe 0 fails with all of
/// them. Call it from the `#[test]` itself.
fn jobs_in_process(
    procs: &[usize],
    inputs: &[(&str, Vec<u8>)],
    builds: impl Fn(&str, &[u8], usize) -> Vec<Build>,
) {
    mpi_test_at(procs, |comm| {
        let (p, me) = (comm.size(), comm.rank());
        let output = Path::new("out.sa");
        let mut failures = Vec::new();
        let mut runs = 0;
        for (name, text) in inputs {
            let input = PathBuf::from(format!("{name}.txt"));
            let want = (me == 0).then(|| {
                std::fs::write(&input, text).expect("write the input");
                oracle(text)
            });
            comm.barrier();
            for build in builds(name, text, p) {
                runs += 1;
                let job = Job {
                    inputs: vec![input.clone()],
                    seq: SeqOptions::default(),
                    output: output.to_path_buf(),
                    write_sa: true,
                    bwt: None,
                    lcp: None,
                    token_width: psa::TokenWidth::W1,
                    token_ids: false,
                    doc_sep: None,
                    infini_gram: false,
                    width: build.width,
                    check: build.check,
                    stats: None,
                    force: false,
                    show_plan: false,
                };
                let ctx = psa::Ctx::new(SimpleCommunicator::world(), build.config);
                let result = psa::driver::run(&ctx, &job);
                drop(ctx);
                if let Some(want) = &want {
                    let label = format!(
                        "input {name} (n = {}), p = {p}, {}",
                        text.len(),
                        build.label
                    );
                    match result {
                        Err(e) => failures.push(format!("{label}: the build failed: {e}")),
                        Ok(report) => {
                            let width = match build.width {
                                Width::Fixed(w) => w,
                                Width::Auto => 4,
                            };
                            let bytes = std::fs::metadata(output).map_or(0, |m| m.len());
                            if (report.width, bytes) != (width, (text.len() * width) as u64) {
                                failures.push(format!(
                                    "{label}: {} bytes of {}-byte entries, want {width}-byte ones",
                                    bytes, report.width
                                ));
                            } else {
                                let got = read_sa(output, width);
                                if got != *want {
                                    failures.push(format!("{label}: {}", first_diff(&got, want)));
                                }
                            }
                            std::fs::remove_file(output).expect("remove the output");
                        }
                    }
                }
                // pe 0 has read and removed the output before the next build creates it.
                comm.barrier();
            }
        }
        if me == 0 {
            eprintln!("{} runs at p = {p}, {} failed", runs, failures.len());
            assert!(failures.is_empty(), "{}", failure_report(&failures, runs));
        }
    });
}

/// Every input of the table, generated.
fn table_inputs() -> Vec<(&'static str, Vec<u8>)> {
    TABLE.iter().map(|c| (c.name, (c.gen)())).collect()
}

/// `--mpi-max-count 7` makes every all-to-all run in rounds of at most 7 records per call
/// (src/comm.rs' chunked path); results must stay exact.
#[test]
fn chunked_all_to_all() {
    let inputs = [
        ("random_sigma4_3001", gen::random(12, 3001, 4, b'a')),
        ("a_n_500", gen::a_n(500)),
        ("zero_ff_mix_100", gen::zero_ff(13, 100)),
        ("len3", b"cab".to_vec()),
    ];
    jobs_in_process(&[1, 2, 3, 4], &inputs, |_, _, _| {
        let mut builds = Vec::new();
        for algo in [Algo::Dc3, Algo::Css] {
            let chunked = |c: &mut psa::Config| c.comm.mpi_max_count = 7;
            builds.push(
                Build::new(
                    format!("{algo:?}, --mpi-max-count 7 --base-case 4 --check"),
                    algo,
                    chunked,
                )
                .deep(4),
            );
            builds.push(Build::new(
                format!("{algo:?}, --mpi-max-count 7"),
                algo,
                chunked,
            ));
        }
        builds
    });
}

/// `--exchange-round-bytes 4096` runs every exchange in rounds of at most 4 KiB per pe (the
/// memory-lean path that a large input under a budget takes: the send buffer in round-major
/// order, consumed from its end), and sends records in steps of at most a round (up to 8 steps:
/// the ranks handed up from a recursion, pCSS' names), on every input of the table at every p,
/// down to tiny recursion levels; once also with `--mpi-max-count 7` inside the rounds. Results
/// must stay exact. One test per algorithm, so that both run side by side.
fn exchanges_in_rounds(algo: Algo) {
    jobs_in_process(PES, &table_inputs(), |name, _, _| {
        let chunked = name == "dna_20000";
        let label = if chunked {
            "--exchange-round-bytes 4096 --mpi-max-count 7"
        } else {
            "--exchange-round-bytes 4096"
        };
        let build = Build::new(format!("{algo:?}, {label}"), algo, |c| {
            c.comm.round_bytes = Some(4096);
            if chunked {
                c.comm.mpi_max_count = 7;
            }
        });
        vec![build.deep(4)]
    });
}

#[test]
fn exchanges_in_rounds_css() {
    exchanges_in_rounds(Algo::Css);
}

#[test]
fn exchanges_in_rounds_dc3() {
    exchanges_in_rounds(Algo::Dc3);
}

/// `--mem-per-pe` at the leanest budget of each run (its plan: every exchange in rounds of 4 KiB
/// per pe) on every input of the table at every p, down to tiny recursion levels, with the
/// checker; one algorithm per row, in turn (both at once cost twice the time for little more).
#[test]
fn leanest_memory_budget() {
    jobs_in_process(PES, &table_inputs(), |name, text, p| {
        let k = TABLE.iter().position(|c| c.name == name).expect("a row");
        let algo = [Algo::Css, Algo::Dc3][k % 2];
        let shape = psa::plan::Shape {
            check: true,
            ..plan_shape(text.len(), p)
        };
        let config = psa::Config {
            algo,
            plan_algo: false,
            ..psa::Config::default()
        };
        let budget = psa::plan::choose(&config, &shape, "")
            .expect("no budget")
            .leanest;
        let build = Build::new(format!("{algo:?}, --mem-per-pe {budget}"), algo, |c| {
            c.mem_per_pe = Some(budget);
            c.mem_per_pe_from = "--mem-per-pe".into();
            c.plan_base = Some(psa::plan::BASE_BYTES);
        });
        vec![build.deep(4)]
    });
}

/// `--sort-rounds N` makes pCSS sort in N key ranges one after the other (the first sort, its
/// names and every doubling round), as a memory budget makes it do: 2, 7 and 64 rounds
/// (more rounds than records on the small inputs: empty rounds, groups and runs of equal keys
/// across rounds and pes) on every input of the table at every p, down to tiny recursion levels
/// (`--check`). With 2 and 64 rounds also without the prediction and the hand-over
/// (`--no-css-predict --css-handover 2`), so the repetitive inputs reach the run step and many
/// doubling rounds in rounds too; with 3 rounds without the prediction only, so they hand over
/// on the sort's count of tied suffixes outside runs, before any list of them is made. Both ways
/// of making a range's keys run: filtered from all (keys of more characters than ranges: at 2, 3
/// and 7 ranges) and found by a byte per position (at 64).
/// Results must stay exact. (One range is the default, which every other pCSS test here runs.)
fn css_sorts_in_rounds(rounds: usize, predict: bool, handover: Option<f64>) {
    let mut label = format!("css, --sort-rounds {rounds}");
    if !predict {
        label.push_str(" --no-css-predict");
    }
    if let Some(h) = handover {
        label.push_str(&format!(" --css-handover {h}"));
    }
    jobs_in_process(PES, &table_inputs(), |_, _, _| {
        let build = Build::new(&label, Algo::Css, |c| {
            c.css.sort_rounds = rounds;
            c.css.predict = predict;
            if let Some(h) = handover {
                c.css.handover = h;
            }
        });
        vec![build.deep(4)]
    });
}

// One test per variant, so that the variants run side by side.
#[test]
fn css_sorts_in_2_rounds_to_the_end() {
    css_sorts_in_rounds(2, false, Some(2.0));
}

#[test]
fn css_sorts_in_7_rounds() {
    css_sorts_in_rounds(7, true, None);
}

#[test]
fn css_sorts_in_3_rounds_unpredicted() {
    css_sorts_in_rounds(3, false, None);
}

#[test]
fn css_sorts_in_64_rounds_to_the_end() {
    css_sorts_in_rounds(64, false, Some(2.0));
}

/// Into a regular file the build writes the suffix array itself as it becomes final (level 0's
/// merge rounds at their SA indices, pCSS' placed part, the base case) and the checker reads it
/// back in pieces: many merge and sort rounds, the checker's pieces and every exchange forced
/// tiny (`--merge-rounds 9 --sort-rounds 5 --exchange-round-bytes 256`), both of pCSS' finishes
/// (DC7 and `--css-finish dc3`), 5- and 8-byte entries and 40- and 64-bit records (the latter
/// with pDC3's samples named by their sort, `--name-by-sort`), at every p, compared with the
/// oracle.
#[test]
fn sa_written_as_it_becomes_final() {
    let inputs: Vec<(&str, Vec<u8>)> = table_inputs()
        .into_iter()
        .filter(|(name, _)| {
            [
                "a_n_3001",
                "fibonacci_4181",
                "random_sigma4_4999",
                "dna_20000",
            ]
            .contains(name)
        })
        .collect();
    jobs_in_process(PES, &inputs, |_, _, _| {
        let mut builds = Vec::new();
        for (algo, finish_dc3) in [(Algo::Dc3, false), (Algo::Css, false), (Algo::Css, true)] {
            for (width, bits) in [(5usize, IndexWidth::W40), (8, IndexWidth::W64)] {
                let wide = bits == IndexWidth::W64;
                let label = format!(
                    "{algo:?}{}, --width {width} --index-bits {} --base-case 64 --check \
                     --merge-rounds 9 --sort-rounds 5 --exchange-round-bytes 256 \
                     --no-css-predict --css-handover 0.2{}",
                    if finish_dc3 { " --css-finish dc3" } else { "" },
                    if wide { 64 } else { 40 },
                    if wide { " --name-by-sort" } else { "" },
                );
                let mut build = Build::new(label, algo, |c| {
                    c.comm.round_bytes = Some(256);
                    c.dcx.merge_rounds = 9;
                    c.css.sort_rounds = 5;
                    c.index_width = Some(bits);
                    c.css.predict = false;
                    c.css.handover = 0.2;
                    c.css.finish_dc3 = finish_dc3;
                    // pDC3's samples named by their sort on small alphabets too.
                    c.dcx.name_by_sort = wide;
                })
                .deep(64);
                build.width = Width::Fixed(width);
                builds.push(build);
            }
        }
        builds
    });
}

/// `--force-wide` sends both algorithms down their wide-record paths (normally only taken for
/// n ≥ 2^41 or huge names) on small inputs, and `--index-bits 40` the difference covers and
/// pCSS down their 40-bit records (n ≥ 2^32); results must stay exact. (Every width on the
/// whole table, through the library: tests/mpi_algo.rs, `index_widths_on_hard_inputs`.)
#[test]
fn wide_record_paths() {
    let inputs = [
        ("random_sigma256_3001", gen::random(14, 3001, 256, 0)),
        ("a_n_700", gen::a_n(700)),
        // Predicted repetitive: pCSS's DC7 finish with 64-bit records.
        (
            "repeated_block_29x61",
            gen::repeated_block(17, 29, 29 * 61, 26),
        ),
        ("dna_5000", gen::dna(15, 5000)),
        ("len5", b"abaab".to_vec()),
    ];
    jobs_in_process(&[1, 3, 4], &inputs, |_, _, _| {
        let mut builds = Vec::new();
        for algo in [Algo::Dc3, Algo::Css] {
            for (switch, bits, force_wide) in [
                ("--force-wide", None, true),
                ("--index-bits 40", Some(IndexWidth::W40), false),
            ] {
                let wide = |c: &mut psa::Config| {
                    c.index_width = bits;
                    c.force_wide = force_wide;
                };
                let deep = Build::new(
                    format!("{algo:?}, {switch} --base-case 4 --check"),
                    algo,
                    wide,
                );
                builds.push(deep.deep(4));
                builds.push(Build::new(format!("{algo:?}, {switch}"), algo, wide));
            }
        }
        builds
    });
}

/// pCSS's other ways to finish on repetitive texts, which the sample-based prediction (first sort,
/// then DC7) normally pre-empts: the hand-over to DC7 during doubling (`--no-css-predict`), the
/// same with DC3 (`--css-finish dc3`), plain prefix doubling to the end (`--css-handover 2`),
/// and DC3 from the start when predicted (`--css-predicted dc3`).
#[test]
fn css_finishes_without_prediction() {
    let inputs = [
        ("fibonacci_6000", gen::fibonacci(6000)),
        (
            "repeated_block_41x97",
            gen::repeated_block(11, 41, 41 * 97, 100),
        ),
        ("abc_n_ab_2999", {
            let mut v = gen::abc_n(999);
            v.extend_from_slice(b"ab");
            v
        }),
        ("dna_20000", gen::dna(16, 20_000)),
        ("a_n_1000", gen::a_n(1000)),
    ];
    type Edit = fn(&mut psa::CssOptions);
    let switches: [(&str, Edit); 4] = [
        ("--no-css-predict", |t| t.predict = false),
        ("--no-css-predict --css-finish dc3", |t| {
            t.predict = false;
            t.finish_dc3 = true;
        }),
        ("--no-css-predict --css-handover 2", |t| {
            t.predict = false;
            t.handover = 2.0;
        }),
        ("--css-predicted dc3", |t| t.predicted = Predicted::Dc3),
    ];
    jobs_in_process(PES, &inputs, |_, _, _| {
        let build = |(label, edit): (&str, Edit)| {
            Build::new(
                format!("css, {label} --base-case 4 --check"),
                Algo::Css,
                |c| edit(&mut c.css),
            )
            .deep(4)
        };
        switches.into_iter().map(build).collect()
    });
}
