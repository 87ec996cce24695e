//! `psa --token-width 2|4` end to end under mpirun at p ∈ {1, 2, 3, 4, 7}: the SA (with
//! `--check`), the BWT (tokens of the same width, little-endian) and the LCP array (in tokens)
//! of token files against the oracle on the tokens, one input and several concatenated, 32-bit
//! and forced 40-bit records (`--index-bits 40`: the >2^32-token path); and the refusals, before
//! any byte is read: a size that is not a multiple of the width, a FASTA input, `--algo css`.

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
    let case = format!("{w}-byte {name} at p = {p} in {parts} files (wide: {wide})");
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
    // No index files beside a token SA: `psa query` reads bytes.
    if dir.join("out.sa.meta").exists() {
        return Some(format!("{case}: an index file was written"));
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
            [
                "--token-width",
                "2",
                "--algo",
                "css",
                "-o",
                "out.sa",
                "ok.bin",
            ],
            dir.path(),
        );
        r.assert_error(2, "--algo css takes bytes only for now", "css");
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
