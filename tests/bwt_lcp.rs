//! `--bwt`, `--lcp` and `--no-sa`: the BWT, its primary index and the LCP array compared in full
//! with libsais' (`libsais_bwt`, `libsais_plcp` + `libsais_lcp`) on the hard inputs of the
//! algorithm table at p ∈ {1, 2, 3, 4, 7}, with both algorithms, widths 4, 5 and 8, with and
//! without the SA (and `--check` still checking it), and with the LCP's fingerprint search and
//! request rounds forced on every pair (`--lcp-prefix 0|1`, `--request-piece 7`) and its levels
//! forced by tiny sample steps (`--lcp-sample 1..4`), its 8-byte words by `--index-bits 40|64`. Then the
//! output safety of the new files, as `tests/errors.rs` checks the SA's.

mod common;

use std::fs;
use std::path::Path;

use common::*;

/// Process counts of the table.
const PES: &[usize] = &[1, 2, 3, 4, 7];

/// libsais' answers for `text`: SA, BWT, primary index, LCP.
struct Want {
    sa: Vec<u64>,
    bwt: Vec<u8>,
    primary: usize,
    lcp: Vec<u64>,
}

/// The oracle: libsais.
fn libsais_outputs(text: &[u8]) -> Want {
    if text.is_empty() {
        return Want {
            sa: vec![],
            bwt: vec![],
            primary: 0,
            lcp: vec![],
        };
    }
    let b = libsais::BwtConstruction::for_text(text)
        .with_owned_temporary_array_buffer32()
        .single_threaded()
        .run()
        .expect("libsais bwt");
    let sa = libsais::SuffixArrayConstruction::for_text(text)
        .in_owned_buffer32()
        .single_threaded()
        .run()
        .expect("libsais sa")
        .plcp_construction()
        .single_threaded()
        .run()
        .expect("libsais plcp")
        .lcp_construction()
        .single_threaded()
        .run()
        .expect("libsais lcp");
    let (sa, lcp, _, _) = sa.into_parts();
    Want {
        sa: sa.iter().map(|&x| x as u64).collect(),
        bwt: b.bwt().to_vec(),
        primary: b.primary_index(),
        lcp: lcp.iter().map(|&x| x as u64).collect(),
    }
}

/// One way of running psa on a row: the settings cycle over the rows and process counts, so
/// every combination appears on several inputs without running all of them on each.
#[derive(Clone, Copy, Debug)]
struct Setting {
    width: usize,
    no_sa: bool,
    check: bool,
    /// `--lcp-prefix` (None: the default 16).
    prefix: Option<usize>,
    /// `--request-piece`: the request rounds in many pieces (7 queries on inputs below 2000
    /// characters, else 500: thousands of rounds per request would only cost time).
    small_pieces: bool,
    /// `--lcp-sample` (None: the default): tiny steps run every level of the search on small
    /// inputs.
    sample: Option<usize>,
    /// `--index-bits` (None: chosen from n): 40 or 64 bits force the LCP's 8-byte words, which
    /// only texts of 2^32 − 1 characters or more need.
    index_bits: Option<u32>,
}

const SETTINGS: &[Setting] = &[
    Setting {
        width: 4,
        no_sa: false,
        check: false,
        prefix: None,
        small_pieces: false,
        sample: Some(2),
        index_bits: None,
    },
    Setting {
        width: 5,
        no_sa: true,
        check: false,
        prefix: Some(1),
        small_pieces: true,
        sample: Some(1),
        index_bits: Some(40),
    },
    Setting {
        width: 8,
        no_sa: false,
        check: true,
        prefix: Some(0),
        small_pieces: false,
        sample: None,
        index_bits: Some(64),
    },
    Setting {
        width: 4,
        no_sa: true,
        check: false,
        prefix: None,
        small_pieces: true,
        sample: Some(4),
        index_bits: None,
    },
    Setting {
        width: 5,
        no_sa: false,
        check: true,
        prefix: Some(1),
        small_pieces: false,
        sample: Some(3),
        index_bits: None,
    },
];

/// Runs psa with `setting` and `algo` at p and compares every file with `want`.
fn run_one(
    dir: &Path,
    want: &Want,
    p: usize,
    algo: &str,
    s: Setting,
    tag: &str,
) -> Result<(), String> {
    let (sa, bwt, lcp) = (
        format!("{tag}.sa"),
        format!("{tag}.bwt"),
        format!("{tag}.lcp"),
    );
    let mut args: Vec<String> = vec!["-q", "--algo", algo, "--width"]
        .into_iter()
        .map(String::from)
        .collect();
    args.push(s.width.to_string());
    args.extend(["--bwt".into(), bwt.clone(), "--lcp".into(), lcp.clone()]);
    match s.no_sa {
        true => args.push("--no-sa".into()),
        false => args.extend(["-o".into(), sa.clone()]),
    }
    if s.check {
        args.extend(["--check".into(), "--base-case".into(), "4".into()]);
    }
    if let Some(k) = s.prefix {
        args.extend(["--lcp-prefix".into(), k.to_string()]);
    }
    if let Some(step) = s.sample {
        args.extend(["--lcp-sample".into(), step.to_string()]);
    }
    if let Some(bits) = s.index_bits {
        args.extend(["--index-bits".into(), bits.to_string()]);
    }
    if s.small_pieces {
        let piece = if want.sa.len() < 2000 { 7 } else { 500 };
        args.extend(["--request-piece".into(), piece.to_string()]);
    }
    args.push("input".into());
    let o = run_psa_env(p, &args, &[], dir, DEFAULT_TIMEOUT);
    let files = [&sa, &bwt, &lcp, &format!("{bwt}.primary")];
    let result = (|| {
        if !o.success() {
            return Err(format!("run failed: {}", o.brief()));
        }
        match s.no_sa {
            true if dir.join(&sa).exists() => return Err("--no-sa wrote an SA".into()),
            true => {}
            false => {
                let got = read_sa(&dir.join(&sa), s.width);
                if got != want.sa {
                    return Err(format!("wrong SA: {}", first_diff(&got, &want.sa)));
                }
            }
        }
        let got = fs::read(dir.join(&bwt)).map_err(|e| format!("no BWT: {e}"))?;
        if got != want.bwt {
            let at = got.iter().zip(&want.bwt).position(|(a, b)| a != b);
            return Err(format!(
                "wrong BWT: length {} (want {}), first difference at {at:?}",
                got.len(),
                want.bwt.len()
            ));
        }
        let primary = fs::read_to_string(dir.join(format!("{bwt}.primary")))
            .map_err(|e| format!("no primary index file: {e}"))?;
        if primary != format!("{}\n", want.primary) {
            return Err(format!("primary index {primary:?}, want {}", want.primary));
        }
        let got = read_sa(&dir.join(&lcp), s.width);
        if got != want.lcp {
            return Err(format!("wrong LCP: {}", first_diff(&got, &want.lcp)));
        }
        Ok(())
    })();
    for f in files {
        let _ = fs::remove_file(dir.join(f));
    }
    result
}

/// Runs one row: every p, the algorithm alternating over p and rows, the settings cycling (CI
/// time: the table's combinations appear over the rows); all failures at once.
fn run_row(row: usize, name: &str, text: &[u8]) {
    let want = libsais_outputs(text);
    let dir = TempDir::new(&format!("bwt_lcp_{name}"));
    dir.write("input", text);
    let mut failures = Vec::new();
    let mut runs = 0;
    for (i, &p) in PES.iter().enumerate() {
        let algo = ALGOS[(row + i) % ALGOS.len()];
        let s = SETTINGS[(row + 2 * i) % SETTINGS.len()];
        runs += 1;
        let tag = format!("out-{p}-{algo}");
        if let Err(msg) = run_one(dir.path(), &want, p, algo, s, &tag) {
            failures.push(format!(
                "input {name} (n = {}), p = {p}, algo = {algo}, {s:?}: {msg}",
                text.len()
            ));
        }
    }
    eprintln!(
        "{name}: n = {}, {runs} runs, {} failed",
        text.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failure_report(&failures, runs));
}

macro_rules! table {
    ($($row:literal $name:ident: $gen:expr;)*) => {
        mod row {
            use super::*;
            $(
                #[test]
                fn $name() {
                    let gen: fn() -> Vec<u8> = $gen;
                    super::run_row($row, stringify!($name), &gen());
                }
            )*
        }
    };
}

table! {
    0 len0_empty: Vec::new;
    1 len1_one_byte: || b"x".to_vec();
    2 len3_n_lt_p: || b"aab".to_vec();
    3 len6_banana: || b"banana".to_vec();
    4 zero_ff_mix_2000: || gen::zero_ff(1, 2000);
    5 zeros_1000: || gen::run(0x00, 1000);
    6 ff_1001: || gen::run(0xff, 1001);
    7 a_n_3001: || gen::a_n(3001);
    8 abc_n_3000: || gen::abc_n(1000);
    9 fibonacci_4181: || gen::fibonacci(4181);
    10 repeated_block_37x135: || gen::repeated_block(3, 37, 37 * 135, 26);
    11 repeated_block_1000x20_binary: || gen::repeated_block(4, 1000, 20_000, 2);
    12 dna_20000: || gen::dna(9, 20_000);
    13 random_sigma256_5000: || gen::random(7, 5000, 256, 0);
    14 random_sigma4_4999: || gen::random(6, 4999, 4, b'a');
}

/// Sequence input: T is the text psa defines (written beside the SA as OUT.text), and the BWT
/// and LCP are those of T.
#[test]
fn fasta_input_uses_its_text() {
    let dir = TempDir::new("bwt_lcp_fasta");
    let mut fa = Vec::new();
    for (k, seed) in [(1, 21), (2, 22), (3, 23)] {
        fa.extend_from_slice(format!(">r{k}\n").as_bytes());
        for line in gen::dna(seed, 700 * k).chunks(60) {
            fa.extend_from_slice(&line.to_ascii_lowercase());
            fa.push(b'\n');
        }
    }
    dir.write("in.fa", &fa);
    for p in [1, 3] {
        let o = run_psa(
            p,
            [
                "-q", "-o", "o.sa", "--bwt", "o.bwt", "--lcp", "o.lcp", "in.fa",
            ],
            dir.path(),
        );
        assert!(o.success(), "p = {p}: {}", o.describe());
        let text = fs::read(dir.join("o.sa.text")).unwrap();
        let want = libsais_outputs(&text);
        assert_eq!(read_sa(&dir.join("o.sa"), 4), want.sa, "p = {p}: SA");
        assert_eq!(
            fs::read(dir.join("o.bwt")).unwrap(),
            want.bwt,
            "p = {p}: BWT"
        );
        assert_eq!(
            fs::read_to_string(dir.join("o.bwt.primary")).unwrap(),
            format!("{}\n", want.primary)
        );
        assert_eq!(read_sa(&dir.join("o.lcp"), 4), want.lcp, "p = {p}: LCP");
        // Only the BWT: no SA, no index files beside it.
        let o = run_psa(p, ["-q", "--no-sa", "--bwt", "n.bwt", "in.fa"], dir.path());
        assert!(o.success(), "p = {p}: {}", o.describe());
        assert_eq!(fs::read(dir.join("n.bwt")).unwrap(), want.bwt);
        for f in [
            "in.fa.sa",
            "in.fa.sa.text",
            "in.fa.sa.meta",
            "in.fa.sa.records.tsv",
        ] {
            assert!(
                !dir.join(f).exists(),
                "--no-sa created {f}: {:?}",
                dir.entries()
            );
        }
    }
}

/// `--stats` reports the primary index and the new phases.
#[test]
fn stats_show_the_primary_index_and_phases() {
    let dir = TempDir::new("bwt_lcp_stats");
    let text = gen::dna(3, 5000);
    dir.write("in.txt", &text);
    let want = libsais_outputs(&text);
    let o = run_psa(
        2,
        [
            "-q", "--stats", "s.json", "--bwt", "o.bwt", "--lcp", "o.lcp", "in.txt",
        ],
        dir.path(),
    );
    assert!(o.success(), "{}", o.describe());
    let s = fs::read_to_string(dir.join("s.json")).unwrap();
    assert!(
        s.contains(&format!("\"bwt_primary\": {},", want.primary)),
        "{s}"
    );
    for phase in [
        "\"bwt\"",
        "\"lcp prefixes\"",
        "\"lcp hashes\"",
        "\"lcp search\"",
    ] {
        assert!(s.contains(phase), "no phase {phase} in {s}");
    }
    assert!(s.contains("\"lcp_prefix\": 16"), "{s}");
}

// ------------------------------------------------------------------------------------------------
// Output safety of the new files.

fn partial_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("psa-partial"))
                .collect()
        })
        .unwrap_or_default()
}

/// The run failed before reading the input ("read done" is pe 0's log line after reading).
fn failed_before_reading(o: &Outcome) -> bool {
    !o.success() && !o.stderr.contains("read done")
}

#[test]
fn argument_errors() {
    let dir = TempDir::new("bwt_lcp_args");
    dir.write("in.txt", b"banana");
    for (args, needle) in [
        (&["--no-sa", "in.txt"][..], "--bwt"),
        (
            &["--no-sa", "-o", "x.sa", "--bwt", "x.bwt", "in.txt"],
            "cannot be used",
        ),
        (
            &["--lcp-prefix", "17", "--lcp", "x", "in.txt"],
            "at most 16",
        ),
    ] {
        let o = run_psa(2, args, dir.path());
        o.assert_error(2, needle, &format!("{args:?}"));
        assert!(failed_before_reading(&o), "{args:?}: {}", o.describe());
    }
    // Two outputs at one file.
    for args in [
        &["--bwt", "x", "--lcp", "x", "in.txt"][..],
        &["-o", "x", "--lcp", "./x", "in.txt"],
        &["--stats", "x", "--bwt", "x", "in.txt"],
        &["--bwt", "x", "--lcp", "x.primary", "in.txt"],
    ] {
        let o = run_psa(2, args, dir.path());
        o.assert_error(2, "same file", &format!("{args:?}"));
        assert!(failed_before_reading(&o), "{args:?}: {}", o.describe());
    }
    assert_eq!(dir.entries(), vec!["in.txt".to_string()]);
}

#[test]
fn input_as_bwt_or_lcp_output_is_refused() {
    let dir = TempDir::new("bwt_lcp_in_out");
    let text = gen::dna(5, 20_000);
    let input = dir.write("in.txt", &text);
    std::os::unix::fs::symlink("in.txt", dir.join("link")).unwrap();
    for p in [1, 3] {
        for args in [
            &["--bwt", "in.txt", "in.txt"][..],
            &["--no-sa", "--lcp", "link", "in.txt"],
            &["--lcp", "o.lcp", "--bwt", "./in.txt", "in.txt"],
        ] {
            let o = run_psa(p, args, dir.path());
            let ctx = format!("{args:?}, p = {p}");
            o.assert_error(2, "is the input", &ctx.to_string());
            assert!(failed_before_reading(&o), "{ctx}: {}", o.describe());
            assert_eq!(fs::read(&input).unwrap(), text, "{ctx}: the input changed");
            let mut left = dir.entries();
            left.sort();
            assert_eq!(left, vec!["in.txt", "link"], "{ctx}: files left behind");
        }
    }
}

const SENTINEL: &[u8] = b"previous output, must survive a failed run\n";

#[test]
fn read_only_and_failed_runs_leave_everything_as_it_was() {
    let dir = TempDir::new("bwt_lcp_safe");
    let text = gen::dna(6, 30_000);
    dir.write("in.txt", &text);
    let want = libsais_outputs(&text);
    let ro = dir.join("ro.lcp");
    for p in [1, 3] {
        // A read-only LCP or BWT target is kept (exit 2) unless --force.
        fs::write(&ro, SENTINEL).unwrap();
        let mut perm = fs::metadata(&ro).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o444);
        fs::set_permissions(&ro, perm).unwrap();
        for args in [
            &["--bwt", "o.bwt", "--lcp", "ro.lcp", "in.txt"][..],
            &["--no-sa", "--bwt", "ro.lcp", "in.txt"],
        ] {
            let o = run_psa(p, args, dir.path());
            o.assert_error(2, "read-only", &format!("p = {p} {args:?}"));
            assert!(failed_before_reading(&o), "{}", o.describe());
            assert_eq!(fs::read(&ro).unwrap(), SENTINEL);
            // Nothing else was left: not the SA, the BWT, its primary file or partial files.
            let mut left = dir.entries();
            left.sort();
            assert_eq!(left, vec!["in.txt", "ro.lcp"], "p = {p} {args:?}");
        }
        let o = run_psa(
            p,
            ["-q", "--force", "--no-sa", "--lcp", "ro.lcp", "in.txt"],
            dir.path(),
        );
        assert!(o.success(), "{}", o.describe());
        assert_eq!(
            read_sa(&ro, 4),
            want.lcp,
            "p = {p}: --force did not write the LCP"
        );
        fs::remove_file(&ro).unwrap();
        // An LCP file that cannot be created after the SA's and the BWT's were: all removed,
        // earlier outputs kept as they were.
        fs::write(dir.join("o.sa"), SENTINEL).unwrap();
        fs::write(dir.join("o.bwt"), SENTINEL).unwrap();
        let o = run_psa(
            p,
            [
                "-o",
                "o.sa",
                "--bwt",
                "o.bwt",
                "--lcp",
                "missing/o.lcp",
                "in.txt",
            ],
            dir.path(),
        );
        o.assert_error(5, "LCP output", &format!("p = {p}"));
        assert!(failed_before_reading(&o), "{}", o.describe());
        assert_eq!(fs::read(dir.join("o.sa")).unwrap(), SENTINEL);
        assert_eq!(fs::read(dir.join("o.bwt")).unwrap(), SENTINEL);
        let mut left = dir.entries();
        left.sort();
        assert_eq!(left, vec!["in.txt", "o.bwt", "o.sa"], "p = {p}");
        assert!(partial_files(dir.path()).is_empty());
        fs::remove_file(dir.join("o.sa")).unwrap();
        fs::remove_file(dir.join("o.bwt")).unwrap();
    }
}

/// A character device is written through (and gets no primary index file beside it).
#[test]
fn devices_are_written_through() {
    let dir = TempDir::new("bwt_lcp_dev");
    dir.write("in.txt", &gen::dna(7, 10_000));
    for p in [1, 3] {
        let o = run_psa(
            p,
            [
                "--no-sa",
                "--bwt",
                "/dev/null",
                "--lcp",
                "/dev/null",
                "in.txt",
            ],
            dir.path(),
        );
        // Both at the null device: each discarded, as either would be alone.
        assert!(o.success(), "p = {p}: {}", o.describe());
        assert!(o.stderr.contains("BWT primary index"), "{}", o.describe());
        // Both at another device: they would follow one another in one stream, refused.
        let o = run_psa(
            p,
            [
                "--no-sa",
                "--bwt",
                "/dev/zero",
                "--lcp",
                "/dev/zero",
                "in.txt",
            ],
            dir.path(),
        );
        o.assert_error(2, "same file", &format!("p = {p}"));
        let o = run_psa(
            p,
            ["--no-sa", "--bwt", "/dev/null", "--lcp", "o.lcp", "in.txt"],
            dir.path(),
        );
        assert!(o.success(), "p = {p}: {}", o.describe());
        assert!(o.stderr.contains("BWT primary index"), "{}", o.describe());
        assert!(!Path::new("/dev/null.primary").exists());
        let m = fs::metadata("/dev/null").unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_char_device(
            &m.file_type()
        ));
        fs::remove_file(dir.join("o.lcp")).unwrap();
    }
}
