//! `psa --infini-gram --token-width W DIR` end to end under mpirun at p ∈ {1, 2, 3, 4, 7}:
//! infini-gram's `table.N` of every `tokenized.N` (u8, u16, u32 tokens) byte for byte against a
//! naive table (the byte offsets of the token starts sorted by the file's bytes from there, a
//! proper prefix first, in ceil(log2(size) / 8)-byte entries) on named hard shards (empty, one
//! token, n < p, all equal, all maximal, periodic, Fibonacci, random over 2, 2^16 and 2^32 − 1
//! symbols, tokens whose byte order differs from their value order, separators 0xFF…FF at the pes'
//! block boundaries), with `--check` and a fixed `--width` at some p; and the directory's rules:
//! tables that are there are left alone (`--force` rebuilds them), nothing but `table.N` is
//! written, a bad shard fails the run clearly and leaves no table, a missing directory, one
//! without `tokenized.N` and conflicting options are refused. infini-gram's own engine and
//! indexer on psa's tables: `scripts/infini-gram-check.sh`.

mod common;

use std::fs;
use std::path::Path;

use common::*;

/// Process counts of the runs.
const PES: &[usize] = &[1, 2, 3, 4, 7];

/// The naive table of a token file of `w`-byte tokens: the byte offsets of the token starts,
/// sorted by the file's bytes from there (a proper prefix first).
fn naive_table(bytes: &[u8], w: usize) -> Vec<u64> {
    let mut offsets: Vec<usize> = (0..bytes.len()).step_by(w).collect();
    offsets.sort_by(|&a, &b| bytes[a..].cmp(&bytes[b..]));
    offsets.into_iter().map(|o| o as u64).collect()
}

/// infini-gram's entry width for a file of `size` bytes, as its indexer computes it
/// (ceil(log2(size) / 8) in floating point), at least 1.
fn infini_gram_width(size: usize) -> usize {
    match size {
        0 | 1 => 1,
        s => ((s as f64).log2() / 8.0).ceil() as usize,
    }
}

/// `values`' little-endian bytes, `w` each.
fn le(values: &[u64], w: usize) -> Vec<u8> {
    values
        .iter()
        .flat_map(|t| t.to_le_bytes()[..w].to_vec())
        .collect()
}

/// The named shards of `w`-byte tokens, as token values.
fn shards(w: usize) -> Vec<(&'static str, Vec<u64>)> {
    let max = u64::MAX >> (64 - 8 * w);
    let mut rng = Rng::new(w as u64 * 31 + 7);
    let mut random = |n: usize, sigma: u64| (0..n).map(|_| rng.below(sigma)).collect::<Vec<u64>>();
    let (mut a, mut b) = (vec![max], vec![max, 0]);
    while b.len() < 900 {
        let c = [b.clone(), a].concat();
        (a, b) = (b, c);
    }
    // Values whose little-endian bytes sort otherwise than the values do.
    let swapped: [u64; 5] = match w {
        1 => [0x01, 0x10, 0x80, 0xFE, 0xFF],
        2 => [0x0100, 0x00FF, 0x0001, 0xFF00, 0x0101],
        _ => [
            0x0000_0100,
            0x00FF_FFFF,
            0x0100_0000,
            0xFF00_0000,
            0x0001_0000,
        ],
    };
    let order: Vec<u64> = random(800, 5)
        .iter()
        .map(|&i| swapped[i as usize])
        .collect();
    let mut v = vec![
        ("empty", vec![]),
        ("one", vec![max]),
        ("n < p", vec![max, 0, max]),
        ("all equal", vec![7; 500]),
        ("all maximal", vec![max; 333]),
        ("periodic", (0..600).map(|i| [max, 0, 1][i % 3]).collect()),
        ("fibonacci", b),
        ("random over 2", random(1500, 2)),
        ("random over 2^16", random(1200, (1 << 16).min(max + 1))),
        ("byte order", order),
        (
            "separators at pe boundaries",
            separated(random(1000, 4), max),
        ),
    ];
    if w == 4 {
        v.push(("random over 2^32 - 1", random(1200, 0xFFFF_FFFF)));
        let edges = [0xFFFF, 0x10000, max, 0xFFFF_FFFE];
        v.push(("edges", (0..700).map(|i| edges[i * 7 % 4]).collect()));
    }
    v
}

/// `tokens` with the separator `sep` (infini-gram's document separator, 0xFF…FF) at every block
/// boundary of p = 2 … 7 pes and beside it: documents that end and start where pes meet.
fn separated(mut tokens: Vec<u64>, sep: u64) -> Vec<u64> {
    let n = tokens.len();
    for p in 2..=7 {
        for r in 1..p {
            let at = r * n / p;
            for x in [at.saturating_sub(1), at, at + 1] {
                tokens[x.min(n - 1)] = sep;
            }
        }
    }
    tokens
}

/// One run of `psa --infini-gram` at p on a directory of every shard of `w`-byte tokens, with
/// `extra` arguments and entries of `width` bytes (None: infini-gram's); returns the failures.
fn run_dir(w: usize, p: usize, extra: &[&str], width: Option<usize>) -> Vec<String> {
    let dir = TempDir::new(&format!("infini-gram-{w}-{p}"));
    let shards = shards(w);
    for (k, (_, tokens)) in shards.iter().enumerate() {
        dir.write(&format!("tokenized.{k}"), &le(tokens, w));
        dir.write(&format!("offset.{k}"), &0u64.to_le_bytes());
    }
    let mut args = vec!["--infini-gram", "--token-width"];
    let ws = w.to_string();
    args.push(&ws);
    args.extend_from_slice(extra);
    args.push(".");
    let r = run_psa(p, &args, dir.path());
    if !r.success() {
        return vec![r.brief()];
    }
    let mut failures = Vec::new();
    for (k, (name, tokens)) in shards.iter().enumerate() {
        let bytes = le(tokens, w);
        let want = naive_table(&bytes, w);
        let ew = width.unwrap_or_else(|| infini_gram_width(bytes.len()));
        let case = format!("{w}-byte tokens, {name} (n = {}), p = {p}", tokens.len());
        let got = fs::read(dir.join(&format!("table.{k}"))).unwrap_or_default();
        if got != le(&want, ew) {
            let shown = if got.len().is_multiple_of(ew) {
                first_diff(&decode(&got, ew), &want)
            } else {
                format!("{} bytes, not {} entries of {ew}", got.len(), want.len())
            };
            failures.push(format!("{case}: {shown}"));
        }
    }
    // Nothing but the tables beside the shards: no index files, no partial files.
    let stray: Vec<String> = dir
        .entries()
        .into_iter()
        .filter(|e| {
            !["tokenized.", "offset.", "table."]
                .iter()
                .any(|s| e.starts_with(s))
        })
        .filter(|e| !e.starts_with("passed-pe-"))
        .collect();
    if !stray.is_empty() {
        failures.push(format!("{w}-byte tokens, p = {p}: also written: {stray:?}"));
    }
    failures
}

/// Every shard of every width at every p: infini-gram's width, with `--check` at two counts
/// and `--width 5` at one.
#[test]
fn tables_match_the_naive_table() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for w in [1, 2, 4] {
        for (j, &p) in PES.iter().enumerate() {
            let (extra, width): (&[&str], _) = match (j + w) % 4 {
                0 => (&["--check"], None),
                1 => (&["--width", "5"], Some(5)),
                _ => (&[], None),
            };
            runs += 1;
            failures.extend(run_dir(w, p, extra, width));
        }
    }
    assert!(failures.is_empty(), "{}", failure_report(&failures, runs));
}

/// `psa --infini-gram --token-width 2 .` (and `args`) at p in `dir`.
fn ig(p: usize, dir: &Path, args: &[&str]) -> Outcome {
    let all = [&["--infini-gram", "--token-width", "2"], args, &["."]].concat();
    run_psa(p, &all, dir)
}

/// The directory's rules at p = 1 and 3: a table that is there is left alone, the others are
/// built; all there: nothing to do (exit 0); `--force` rebuilds; a shard without `offset.N` is
/// warned about; a shard of an odd size fails the run (exit 3) and leaves no table of its own.
#[test]
fn tables_there_are_kept_and_bad_shards_fail() {
    for &p in &[1, 3] {
        let dir = TempDir::new(&format!("infini-gram-dir-{p}"));
        let tokens = le(
            &(0..300).map(|i| (i * 7919) % 65536).collect::<Vec<u64>>(),
            2,
        );
        let want = le(&naive_table(&tokens, 2), 2);
        for k in 0..3 {
            dir.write(&format!("tokenized.{k}"), &tokens);
        }
        dir.write("offset.1", &[0; 8]);
        dir.write("offset.2", &[0; 8]);
        dir.write("table.1", b"not ours");
        let r = ig(p, dir.path(), &[]);
        assert!(r.success(), "{}", r.describe());
        assert_eq!(fs::read(dir.join("table.0")).ok(), Some(want.clone()));
        assert_eq!(fs::read(dir.join("table.2")).ok(), Some(want.clone()));
        assert_eq!(
            fs::read(dir.join("table.1")).ok(),
            Some(b"not ours".to_vec())
        );
        assert!(
            r.stderr.contains("table.N is there for N = 1"),
            "{}",
            r.describe()
        );
        assert!(
            r.stderr.contains("offset.0' is missing"),
            "{}",
            r.describe()
        );
        let r = ig(p, dir.path(), &[]);
        assert!(r.success(), "{}", r.describe());
        assert!(r.stderr.contains("nothing to build"), "{}", r.describe());
        assert_eq!(
            fs::read(dir.join("table.1")).ok(),
            Some(b"not ours".to_vec())
        );
        let r = ig(p, dir.path(), &["--force"]);
        assert!(r.success(), "{}", r.describe());
        assert_eq!(fs::read(dir.join("table.1")).ok(), Some(want.clone()));
        // Shard 10 sorts after 2 (by N), and its odd size fails the run before it is read.
        dir.write("tokenized.10", &[1, 2, 3]);
        dir.write("tokenized.9", &tokens[..100]);
        let r = ig(p, dir.path(), &[]);
        r.assert_error(
            3,
            "tokenized.10' has 3 bytes, not a multiple of the token width 2",
            "odd size",
        );
        assert_eq!(
            fs::read(dir.join("table.9")).ok(),
            Some(le(&naive_table(&tokens[..100], 2), 1))
        );
        let mut left = dir.entries();
        left.retain(|e| !e.starts_with("passed-pe-"));
        let tables: Vec<&String> = left.iter().filter(|e| e.contains("table")).collect();
        assert_eq!(
            tables,
            ["table.0", "table.1", "table.2", "table.9"],
            "{left:?}"
        );
    }
}

/// Refused clearly: a missing directory (exit 5), a file for a directory and one without
/// `tokenized.N` (exit 2), two inputs, `--infini-gram` without `--token-width` or with `-o` or
/// `--bwt` (exit 2).
#[test]
fn bad_directories_and_options_are_refused() {
    let dir = TempDir::new("infini-gram-refused");
    dir.write("tokenized.x", &[0, 0]);
    dir.write("file", &[0, 0]);
    for &p in &[1, 3] {
        let r = run_psa(
            p,
            ["--infini-gram", "--token-width", "2", "missing"],
            dir.path(),
        );
        r.assert_error(5, "read the index directory", "missing directory");
        let r = run_psa(
            p,
            ["--infini-gram", "--token-width", "2", "file"],
            dir.path(),
        );
        r.assert_error(2, "'file' is not a directory", "a file");
        let r = run_psa(p, ["--infini-gram", "--token-width", "2", "."], dir.path());
        r.assert_error(2, "holds no tokenized.N file", "no shards");
        let r = run_psa(
            p,
            ["--infini-gram", "--token-width", "2", ".", "."],
            dir.path(),
        );
        r.assert_error(2, "takes one directory", "two inputs");
    }
    let r = run_psa(1, ["--infini-gram", "."], dir.path());
    r.assert_error(2, "--token-width", "no token width");
    let r = run_psa(
        1,
        ["--infini-gram", "--token-width", "2", "-o", "x", "."],
        dir.path(),
    );
    r.assert_error(2, "cannot be used with", "-o");
    let r = run_psa(
        1,
        ["--infini-gram", "--token-width", "2", "--bwt", "x", "."],
        dir.path(),
    );
    r.assert_error(2, "cannot be used with", "--bwt");
    let mut left = dir.entries();
    left.retain(|e| !e.starts_with("passed-pe-"));
    assert_eq!(left, ["file", "tokenized.x"]);
}
