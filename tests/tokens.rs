//! `psa --token-width 2|4` end to end under mpirun at p ∈ {1, 2, 3, 4, 7}: the SA (with
//! `--check`), the BWT (tokens of the same width, little-endian) and the LCP array (in tokens)
//! of token files against the oracle on the tokens, one input and several concatenated, 32-bit
//! and forced 40-bit records (`--index-bits 40`: the >2^32-token path); the refusals, before
//! any byte is read: a size that is not a multiple of the width, a FASTA input, `--algo css`;
//! and the token index: `--doc-sep`'s document table and `psa query`'s n-gram counts and
//! places (document, offset) against a naive scan.

mod common;

use std::fs;

use common::*;
use psa::internals::{naive_bwt, naive_lcp, naive_sa};

/// Process counts of the runs.
const PES: &[usize] = &[1, 2, 3, 4, 7];

/// Little-endian bytes of `tokens` (values below 2^(8w)) in `w` bytes each.
fn le(tokens: &[u64], w: usize) -> Vec<u8> {
    tokens
        .iter()
        .flat_map(|t| t.to_le_bytes()[..w].to_vec())
        .collect()
}

/// Seeded token texts of width `w`: random over the whole range (maximal values included),
/// Fibonacci over {max, 0}, and one token fewer than p for p = 7.
fn inputs(w: usize) -> Vec<(&'static str, Vec<u64>)> {
    let max = (1u64 << (8 * w)) - 1;
    let mut rng = Rng::new(w as u64 + 5);
    let random: Vec<u64> = (0..2500)
        .map(|i| match i % 97 {
            0 => max,
            _ => rng.below(max + 1),
        })
        .collect();
    let (mut a, mut b) = (vec![max], vec![max, 0]);
    while b.len() < 1500 {
        let c = [b.clone(), a].concat();
        (a, b) = (b, c);
    }
    let few = vec![max, 0, max, 3, max, 0];
    vec![("random", random), ("fibonacci", b), ("few", few)]
}

/// SA, BWT and LCP of `psa --token-width w` on `tokens` (split over `parts` files) at p, with
/// the forced 40-bit records where `wide`, against the oracle. Returns a failure or None.
fn run_one(
    w: usize,
    name: &str,
    tokens: &[u64],
    p: usize,
    parts: usize,
    wide: bool,
) -> Option<String> {
    let dir = TempDir::new(&format!("tokens-{w}-{name}-{p}"));
    let cut = |k: usize| tokens.len() * k / parts;
    let files: Vec<String> = (0..parts)
        .map(|k| {
            let f = format!("in{k}.bin");
            dir.write(&f, &le(&tokens[cut(k)..cut(k + 1)], w));
            f
        })
        .collect();
    let mut args: Vec<String> = vec![
        "--token-width".into(),
        w.to_string(),
        "-o".into(),
        "out.sa".into(),
        "--check".into(),
        "--bwt".into(),
        "out.bwt".into(),
        "--lcp".into(),
        "out.lcp".into(),
        "--width".into(),
        "5".into(),
    ];
    if wide {
        args.extend(["--index-bits".into(), "40".into()]);
    }
    // pCSS for 16- and 32-bit tokens at every other p, pDC3 at the rest.
    let algo = if w > 1 && p % 2 == 1 { "css" } else { "dc3" };
    args.extend(["--algo".into(), algo.into()]);
    args.extend(files);
    let r = run_psa(p, &args, dir.path());
    if !r.success() {
        return Some(r.brief());
    }
    let sa = naive_sa(tokens);
    let (bwt, primary) = naive_bwt(tokens, &sa);
    let lcp = naive_lcp(tokens, &sa);
    let got_sa = read_sa(&dir.join("out.sa"), 5);
    let got_bwt = read_sa(&dir.join("out.bwt"), w);
    let got_lcp = read_sa(&dir.join("out.lcp"), 5);
    let got_primary = fs::read_to_string(dir.join("out.bwt.primary")).unwrap_or_default();
    let case = format!("{w}-byte {name} at p = {p} in {parts} files (wide: {wide}, {algo})");
    if got_sa != sa {
        return Some(format!("{case}: SA {}", first_diff(&got_sa, &sa)));
    }
    if got_bwt != bwt || got_primary.trim() != primary.to_string() {
        return Some(format!(
            "{case}: BWT {} (primary {got_primary:?} vs {primary})",
            first_diff(&got_bwt, &bwt)
        ));
    }
    if got_lcp != lcp {
        return Some(format!("{case}: LCP {}", first_diff(&got_lcp, &lcp)));
    }
    // The index files beside a token SA: `psa query` takes token ids.
    if !dir.join("out.sa.meta").exists() {
        return Some(format!("{case}: no index file was written"));
    }
    None
}

/// The table: widths 2 and 4, every input, every p, one file or three, 32- or 40-bit records.
#[test]
fn token_files_match_the_oracle() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for w in [2, 4] {
        for (k, (name, tokens)) in inputs(w).into_iter().enumerate() {
            for (j, &p) in PES.iter().enumerate() {
                let parts = if (j + k) % 2 == 0 { 1 } else { 3 };
                let wide = (j + k + w) % 3 == 0;
                runs += 1;
                failures.extend(run_one(w, name, &tokens, p, parts, wide));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failure_report(&failures, runs));
}

/// An input whose size is not a multiple of the width is refused before any reading (exit 3,
/// naming the file and its size), and nothing is left behind; so are a FASTA input (exit 2) and
/// `--algo css` (exit 2). An empty token file gives an empty SA.
#[test]
fn token_inputs_refused_clearly() {
    for &p in &[1, 3] {
        let dir = TempDir::new(&format!("tokens-refused-{p}"));
        dir.write("odd.bin", &[1, 2, 3, 4, 5]);
        dir.write("ok.bin", &[1, 2, 3, 4]);
        let r = run_psa(
            p,
            ["--token-width", "2", "-o", "out.sa", "ok.bin", "odd.bin"],
            dir.path(),
        );
        r.assert_error(
            3,
            "'odd.bin' has 5 bytes, not a multiple of the token width 2",
            "odd size",
        );
        let r = run_psa(
            p,
            ["--token-width", "4", "-o", "out.sa", "ok.bin", "odd.bin"],
            dir.path(),
        );
        r.assert_error(
            3,
            "'odd.bin' has 5 bytes, not a multiple of the token width 4",
            "odd size",
        );
        assert!(!dir.join("out.sa").exists(), "an output was left");
        dir.write("x.fa", b">a\nACGT\n");
        let r = run_psa(
            p,
            ["--token-width", "2", "-o", "out.sa", "x.fa"],
            dir.path(),
        );
        r.assert_error(
            2,
            "--token-width 2 reads raw files of tokens, but 'x.fa' is FASTA",
            "fasta",
        );
        let r = run_psa(
            p,
            ["--token-width", "3", "-o", "out.sa", "ok.bin"],
            dir.path(),
        );
        r.assert_error(2, "token width must be 1, 2 or 4", "width 3");
        dir.write("empty.bin", b"");
        let r = run_psa(
            p,
            ["--token-width", "4", "-o", "out.sa", "--check", "empty.bin"],
            dir.path(),
        );
        assert!(r.success(), "{}", r.describe());
        assert_eq!(
            fs::metadata(dir.join("out.sa")).map(|m| m.len()).ok(),
            Some(0)
        );
    }
}

// ------------------------------------------------------------------------------------------------
// The token index: n-gram counts and places with `psa query`

/// Where each document's tokens begin (the naive table): 0 where T does not begin with `sep`,
/// then one past each separator that is not T's last token.
fn naive_docs(tokens: &[u64], sep: u64) -> Vec<u64> {
    let mut docs = Vec::new();
    if tokens.first().is_some_and(|&t| t != sep) {
        docs.push(0);
    }
    let n = tokens.len() as u64;
    docs.extend(
        (0..n)
            .filter(|&i| tokens[i as usize] == sep && i + 1 < n)
            .map(|i| i + 1),
    );
    docs
}

/// The naive answer to `pat` on `tokens` with documents `docs`: the count, and each occurrence
/// as (document, offset), in text order (a separator's position counts to the document before
/// it, or the first).
fn naive_hits(tokens: &[u64], docs: &[u64], pat: &[u64]) -> (usize, Vec<(usize, u64)>) {
    let at: Vec<u64> = (0..tokens.len())
        .filter(|&i| tokens[i..].starts_with(pat))
        .map(|i| i as u64)
        .collect();
    let place = |p: u64| {
        let d = docs.partition_point(|&s| s <= p).saturating_sub(1);
        (d, docs.get(d).map_or(p, |&s| p - s.min(p)))
    };
    (at.len(), at.into_iter().map(place).collect())
}

/// Token texts with documents (separator `sep`, the largest token where `max`): separators at
/// every pe's boundary for p = 1..7, a leading document without one, a final document with none,
/// runs of separators, all-equal, periodic, Fibonacci and random over 2 and over the width's
/// range.
fn doc_inputs(w: usize, sep: u64, n: usize) -> Vec<(&'static str, Vec<u64>)> {
    let max = (1u64 << (8 * w)) - 1;
    let mut rng = Rng::new(w as u64 * 31 + 7);
    let mut bounded: Vec<u64> = (0..n).map(|_| rng.below(2) + 1).collect();
    for p in 1..=7 {
        for k in 1..p {
            bounded[n * k / p] = sep;
        }
    }
    bounded[n / 2 + 1] = sep;
    bounded[n / 2 + 2] = sep;
    let wide: Vec<u64> = (0..n)
        .map(|i| match i % 13 {
            0 => sep,
            5 => max,
            _ => rng.below(max + 1),
        })
        .collect();
    let periodic: Vec<u64> = (0..n).map(|i| [sep, 1, 2, 1][i % 4]).collect();
    let (mut a, mut b) = (vec![1], vec![1, sep]);
    while b.len() < n {
        let c = [b.clone(), a].concat();
        (a, b) = (b, c);
    }
    vec![
        ("bounded", bounded),
        ("wide", wide),
        ("periodic", periodic),
        ("fibonacci", b),
        ("equal", vec![sep; 40]),
        ("one", vec![7]),
        ("tiny", vec![1, sep, 2]),
    ]
}

/// Patterns of `tokens`: n-grams at seeded places (lengths 1 to 6, across separators too),
/// absent ones, and one longer than the text.
fn doc_patterns(tokens: &[u64], w: usize) -> Vec<Vec<u64>> {
    let max = (1u64 << (8 * w)) - 1;
    let mut rng = Rng::new(tokens.len() as u64);
    let mut pats: Vec<Vec<u64>> = (0..40)
        .map(|_| {
            let len = rng.range(1, 6).min(tokens.len());
            let at = rng.range(0, tokens.len() - len);
            tokens[at..at + len].to_vec()
        })
        .collect();
    pats.push(vec![max - 1, max - 1, max]);
    pats.push([tokens, &[0]].concat());
    pats
}

/// `psa query --locate --json`'s answer lines for a token index, read back: (count, hits).
fn parse_answers(stdout: &str) -> Vec<(usize, Vec<(usize, u64)>)> {
    let number = |s: &str, key: &str| -> Vec<u64> {
        s.match_indices(key)
            .map(|(i, _)| {
                let rest = &s[i + key.len()..];
                let end = rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
                rest[..end].parse().unwrap_or(u64::MAX)
            })
            .collect()
    };
    stdout
        .lines()
        .map(|l| {
            let count = number(l, "\"count\": ")
                .first()
                .copied()
                .unwrap_or(u64::MAX);
            let docs = number(l, "\"document\": ");
            let offsets = number(l, "\"offset\": ");
            let hits = docs.into_iter().map(|d| d as usize).zip(offsets).collect();
            (count as usize, hits)
        })
        .collect()
}

/// A token index built with `--doc-sep` at p answers `psa query --locate --json` as the naive
/// scan does, and its document table is the naive one. Returns a failure or None.
fn doc_index_one(w: usize, name: &str, tokens: &[u64], sep: u64, p: usize) -> Option<String> {
    let dir = TempDir::new(&format!("docs-{w}-{name}-{p}"));
    dir.write("in.bin", &le(tokens, w));
    let (ws, seps) = (w.to_string(), sep.to_string());
    let args = [
        "--token-width",
        &ws,
        "--doc-sep",
        &seps,
        "-o",
        "out.sa",
        "in.bin",
    ];
    let r = run_psa(p, args, dir.path());
    let case = format!("{w}-byte {name} at p = {p}");
    if !r.success() {
        return Some(format!("{case}: {}", r.brief()));
    }
    let docs = naive_docs(tokens, sep);
    let width = fs::metadata(dir.join("out.sa")).map_or(0, |m| m.len() as usize) / tokens.len();
    let got_docs = read_sa(&dir.join("out.sa.docs"), width.max(4));
    if got_docs != docs {
        return Some(format!(
            "{case}: document table {}",
            first_diff(&got_docs, &docs)
        ));
    }
    let pats = doc_patterns(tokens, w);
    let shown: Vec<String> = (pats.iter())
        .map(|p| {
            p.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    dir.write("patterns.txt", (shown.join("\n") + "\n").as_bytes());
    let out = std::process::Command::new(PSA)
        .args([
            "query",
            "--locate",
            "--json",
            "--patterns",
            "patterns.txt",
            "out.sa",
        ])
        .current_dir(dir.path())
        .output();
    let Ok(out) = out else {
        return Some(format!("{case}: psa query did not start"));
    };
    let got = parse_answers(&String::from_utf8_lossy(&out.stdout));
    let want: Vec<_> = pats.iter().map(|p| naive_hits(tokens, &docs, p)).collect();
    match got == want && out.status.success() {
        true => None,
        false => {
            let k = (0..want.len())
                .find(|&k| got.get(k) != Some(&want[k]))
                .unwrap_or(0);
            Some(format!(
                "{case}: pattern '{}' answered {:?}, the naive scan {:?} (stderr: {})",
                shown[k],
                got.get(k),
                want[k],
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

/// The table: token widths 1, 2 and 4 (the largest token as the separator for 2 and 4, as
/// infini-gram's), every input, every p.
#[test]
fn token_indexes_count_and_place_ngrams() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for (w, sep) in [(1, 0u64), (2, 0xffff), (4, 0xffff_ffff)] {
        for (name, tokens) in doc_inputs(w, sep, 700) {
            for &p in PES {
                runs += 1;
                failures.extend(doc_index_one(w, name, &tokens, sep, p));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failure_report(&failures, runs));
}

/// A token index's patterns are token ids: one that is not (a word, a value past the width) is
/// refused naming it; TSV answers give the document and the offset; a separator that is no
/// token of the width, and one with FASTA input, are refused before the build.
#[test]
fn token_patterns_and_separators_are_checked() {
    let dir = TempDir::new("docs-refused");
    dir.write("in.bin", &le(&[5, 0xffff, 6, 7, 0xffff, 6, 7], 2));
    let r = run_psa(
        1,
        ["--token-width", "2", "--doc-sep", "0xFFFF", "in.bin"],
        dir.path(),
    );
    assert!(r.success(), "{}", r.describe());
    let query = |args: &[&str]| {
        std::process::Command::new(PSA)
            .arg("query")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("psa query starts")
    };
    let out = query(&["--locate", "in.bin.sa", "6 7", " 5 "]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "6 7\t2\n6 7\t1\t0\n6 7\t2\t0\n5\t1\n5\t0\t0\n"
    );
    for (bad, why) in [
        ("6 x", "'x' is not a token id"),
        ("65536", "'65536' is not a token id"),
    ] {
        let out = query(&["in.bin.sa", bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{bad}: {err}");
    }
    let r = run_psa(
        1,
        ["--token-width", "2", "--doc-sep", "70000", "in.bin"],
        dir.path(),
    );
    r.assert_error(
        2,
        "--doc-sep 70000 is not a token of 2 byte(s)",
        "large separator",
    );
    dir.write("x.fa", b">a\nACGT\n");
    let r = run_psa(2, ["--doc-sep", "10", "x.fa"], dir.path());
    r.assert_error(
        2,
        "--doc-sep marks documents in raw input or tokens",
        "fasta",
    );
}
