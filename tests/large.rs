//! A larger run: 24 MB of DNA-like text (biased ACGT, N gaps, mutated copies of earlier stretches,
//! tandem repeats) on 4 pes with `--check`, for both algorithms, compared in full with libsais.
//!
//! Optimized builds only (`cargo test --profile ci`, as CI runs it): in a debug build this takes
//! minutes, so it is ignored there (`cargo test -- --ignored` runs it anyway).

mod common;

use std::time::{Duration, Instant};

use common::*;

const N: usize = 24_000_000;

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "slow in a debug build; run with cargo test --profile ci"
)]
fn dna_24mb_p4_checked_both_algorithms() {
    let t0 = Instant::now();
    let text = gen::dna(24, N);
    let dir = TempDir::new("large");
    dir.write("genome.txt", &text);
    let want = psa::internals::sa_bytes(&text, 2);
    assert_eq!(want.len(), N);
    eprintln!(
        "large: generated {N} bytes and the libsais SA in {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    drop(text);
    for algo in ALGOS {
        let out = format!("genome-{algo}.sa");
        let o = run_psa_env(
            4,
            [
                "--algo",
                algo,
                "--check",
                "--threads",
                "1",
                "--stats",
                "stats.json",
                "-o",
                &out,
                "genome.txt",
            ],
            &[],
            dir.path(),
            Duration::from_secs(400),
        );
        assert!(
            o.success(),
            "24 MB DNA, p = 4, algo = {algo}: {}",
            o.describe()
        );
        assert!(
            o.stderr.contains("check passed"),
            "the checker's verdict is missing from the log: {}",
            o.describe()
        );
        let got = read_sa(&dir.join(&out), 4);
        assert!(
            got == want,
            "24 MB DNA, p = 4, algo = {algo}: {}",
            first_diff(&got, &want)
        );
        let stats = std::fs::read_to_string(dir.join("stats.json")).unwrap_or_default();
        let imbalance = stats
            .lines()
            .find(|l| l.contains("max_imbalance"))
            .unwrap_or("")
            .trim()
            .to_string();
        eprintln!(
            "large: {algo} on 4 pes: {:.1}s wall, output identical to libsais; {imbalance}",
            o.secs
        );
        let _ = std::fs::remove_file(dir.join(&out));
    }
}
