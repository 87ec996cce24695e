//! The memory plan's unit tests: the model against measured peaks, the choice, the refusals.

/// Slurm is named where its grant, or a cgroup's limit below it, bound the budget.
#[test]
fn slurm_is_advised_only_where_its_grant_binds() {
    let below = "below SLURM_MEM_PER_CPU's 2.0 GiB";
    assert!(!slurm_hint("SLURM_MEM_PER_CPU").is_empty());
    assert!(!slurm_hint("SLURM_MEM_PER_NODE / 2 pe(s) on the node").is_empty());
    let cgroup = format!("the cgroup's memory limit / 3 pe(s) on the node, {below}");
    assert!(!slurm_hint(&cgroup).is_empty());
    let free = format!("MemAvailable / 3 pe(s) on the node, {below}");
    assert!(slurm_hint(&free).is_empty());
    assert!(slurm_hint("--mem-per-pe").is_empty());
}

use super::*;

/// What a test that plans returns: a refused plan fails it.
type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn shape(n: usize, pes: usize) -> Shape {
    Shape {
        n,
        pes,
        base: BASE_BYTES,
        width: 4,
        index_at_least: None,
        token_width: TokenWidth::W1,
        check: false,
        bwt: false,
        lcp: false,
        spans: false,
        held: 0,
        index: true,
        one_node: true,
        node_cpus: 2,
    }
}

fn config(budget: Option<u64>) -> Config {
    Config {
        mem_per_pe: budget,
        plan_algo: false,
        ..Config::default()
    }
}

#[test]
fn sizes_parse() {
    for (s, want) in [
        ("3G", 3u64 << 30),
        ("512M", 512 << 20),
        ("1.5G", 3 << 29),
        ("1024K", 1 << 20),
        ("1000000", 1_000_000),
        ("2GiB", 2 << 30),
        ("64mb", 64 << 20),
        ("1t", 1 << 40),
    ] {
        assert_eq!(parse_size(s), Ok(want), "{s}");
    }
    for s in ["", "G", "3X", "-1G", "1.5", "1e3M", "3 G G"] {
        assert!(
            parse_size(s).is_err_and(|e| e.contains("not a size")),
            "{s}"
        );
    }
    for s in ["99999999999T", "99999999999999999999", "16777216T", "1e30"] {
        let r = parse_size(s);
        let want = if s == "1e30" {
            "not a size"
        } else {
            "too large"
        };
        assert!(r.as_ref().is_err_and(|e| e.contains(want)), "{s}: {r:?}");
    }
}

#[test]
fn no_budget_keeps_the_configured_knobs() -> TestResult {
    let p = choose(&config(None), &shape(1 << 30, 4), "")?;
    assert_eq!(p.knobs.round_bytes, None);
    assert_eq!(p.knobs.algo, Algo::Css);
    assert!(p.peak > p.leanest);
    Ok(())
}

/// pe 0's table of a sequence input's records adds to the peak at any p: once through the
/// build, three times at its end (the records table and the metadata written from it), once
/// where no index files are written; a refusal names it, and what pe 0 needs without any text.
#[test]
fn pe_0s_records_table_counts_at_any_p() -> TestResult {
    const GIB: u64 = 1 << 30;
    for pes in [1, 16, 1024] {
        let text = shape(1 << 26, pes);
        let with = |held| Shape { held, ..text };
        let plain = choose(&config(None), &text, "")?;
        let small = choose(&config(None), &with(1 << 20), "")?;
        // Once through the build, where the build outweighs the end (not at p = 1024).
        assert!(small.peak >= plain.peak + (1 << 20), "p = {pes}");
        if pes <= 16 {
            assert_eq!(small.peak, plain.peak + (1 << 20), "p = {pes}");
            assert_eq!(small.leanest, plain.leanest + (1 << 20), "p = {pes}");
        }
        let empty = Shape { n: 0, ..with(GIB) };
        assert_eq!(
            choose(&config(None), &empty, "")?.peak,
            BASE_BYTES + per_peer(&empty) + 3 * GIB
        );
        // Without index files (--no-sa, an output that is a device or FIFO) the table is
        // held once, not written.
        let unwritten = Shape {
            index: false,
            ..empty
        };
        assert_eq!(
            choose(&config(None), &unwritten, "")?.peak,
            BASE_BYTES + per_peer(&unwritten) + GIB
        );
        let e = choose(&config(Some(GIB / 2)), &unwritten, "--mem-per-pe").unwrap_err();
        let e = e.to_string();
        let bare = |held| size_text(BASE_BYTES + per_peer(&unwritten) + held);
        let needle = format!(
            "pe 0 needs {} without any text (its records table)",
            bare(GIB)
        );
        assert!(e.contains(&needle), "p = {pes}: no '{needle}' in {e}");
        let e = choose(&config(Some(2 * GIB)), &with(GIB), "--mem-per-pe").unwrap_err();
        let e = e.to_string();
        for needle in [
            "pe 0 also holds the table of the input's records, 1.0 GiB, at any p".to_string(),
            format!(
                "pe 0 needs {} without any text (its records table, and the index files",
                bare(3 * GIB)
            ),
        ] {
            assert!(e.contains(&needle), "p = {pes}: no '{needle}' in {e}");
        }
    }
    Ok(())
}

#[test]
fn a_large_budget_needs_no_rounds() -> TestResult {
    let p = choose(&config(Some(1 << 40)), &shape(1 << 20, 2), "")?;
    assert_eq!((p.knobs.round_bytes, p.rounds), (None, 1));
    Ok(())
}

#[test]
fn tighter_budgets_give_smaller_rounds_down_to_the_leanest() -> TestResult {
    // pCSS in one key range: only the exchange rounds are left to choose.
    let config = |budget| {
        let mut c = config(budget);
        c.css.sort_rounds = 1;
        c
    };
    let s = shape(1 << 20, 2);
    let one = choose(&config(None), &s, "")?;
    let mut last = usize::MAX;
    for budget in [
        one.peak - 1,
        one.peak - (1 << 20),
        one.leanest + 8192,
        one.leanest,
    ] {
        let p = choose(&config(Some(budget)), &s, "")?;
        assert!(p.peak <= budget, "{p:?}");
        let r = p.knobs.round_bytes.ok_or("no rounds")?;
        assert!(r <= last && r.is_multiple_of(MIN_ROUND_BYTES), "{p:?}");
        last = r;
    }
    assert_eq!(last, MIN_ROUND_BYTES);
    let e = choose(&config(Some(one.leanest - 1)), &s, "the test").unwrap_err();
    assert_eq!(e.exit_code(), 4);
    let m = e.to_string();
    assert!(
        m.contains(&format!("at least {} bytes", one.leanest)),
        "{m}"
    );
    assert!(m.contains("(the test)") && m.contains("more pes"), "{m}");
    Ok(())
}

#[test]
fn the_other_algorithm_when_free_to_choose() -> TestResult {
    // The algorithm whose leanest plan needs more cannot fit a budget just below it; free to
    // choose, the plan takes the other one (in key ranges).
    let s = shape(1 << 24, 4);
    let leanest = |algo| {
        choose(
            &Config {
                algo,
                ..config(None)
            },
            &s,
            "",
        )
        .map(|p| p.leanest)
    };
    let (css, dc3) = (leanest(Algo::Css)?, leanest(Algo::Dc3)?);
    assert_ne!(css, dc3);
    let (fat, lean) = match css > dc3 {
        true => (Algo::Css, Algo::Dc3),
        false => (Algo::Dc3, Algo::Css),
    };
    let budget = css.max(dc3) - 1;
    let fixed = Config {
        algo: fat,
        ..config(Some(budget))
    };
    assert!(choose(&fixed, &s, "").is_err());
    let free = Config {
        plan_algo: true,
        ..fixed
    };
    let p = choose(&free, &s, "")?;
    assert_eq!(p.knobs.algo, lean);
    assert!(p.knobs.merge_rounds > 1 || p.knobs.sort_rounds > 1, "{p:?}");
    assert!(p.peak <= budget);
    Ok(())
}

#[test]
fn pcss_sorts_in_more_key_ranges_under_a_tight_budget() -> TestResult {
    let s = shape(1 << 26, 4);
    let free = choose(&config(None), &s, "")?;
    assert_eq!(free.knobs.sort_rounds, 0, "auto without a budget");
    let fixed = |rounds, budget| Config {
        css: crate::config::CssOptions {
            sort_rounds: rounds,
            ..Default::default()
        },
        ..config(budget)
    };
    // Below what 4 ranges need even with the smallest exchange rounds.
    let four = choose(&fixed(4, None), &s, "")?.leanest;
    let tight = choose(&config(Some(four - 1)), &s, "")?;
    assert!(tight.knobs.sort_rounds >= 8, "{tight:?}");
    assert!(tight.peak < four);
    // A configured number of ranges is kept.
    assert_eq!(choose(&fixed(2, None), &s, "")?.knobs.sort_rounds, 2);
    assert!(choose(&fixed(4, Some(four - 1)), &s, "").is_err());
    Ok(())
}

#[test]
fn pdc3_merges_in_key_ranges_under_a_tight_budget() -> TestResult {
    let s = shape(1 << 26, 4);
    let dc3 = |rounds, budget| Config {
        algo: Algo::Dc3,
        dcx: crate::config::DcxOptions {
            merge_rounds: rounds,
            ..Default::default()
        },
        ..config(budget)
    };
    let free = choose(&dc3(0, None), &s, "")?;
    assert_eq!(free.knobs.merge_rounds, 0, "one range without a budget");
    // Below one range's need: key ranges before any exchange rounds.
    let tight = choose(&dc3(0, Some(free.peak - 1)), &s, "")?;
    assert!(tight.knobs.merge_rounds >= 4, "{tight:?}");
    assert_eq!(tight.knobs.round_bytes, None, "{tight:?}");
    assert!(tight.summary().contains("merging in"), "{tight:?}");
    // The leanest plan merges in 64 ranges.
    let leanest = choose(&dc3(0, Some(free.leanest)), &s, "")?;
    assert_eq!(leanest.knobs.merge_rounds, 64, "{leanest:?}");
    // A configured number of ranges is kept.
    let fixed = choose(&dc3(2, None), &s, "")?;
    assert_eq!(fixed.knobs.merge_rounds, 2);
    assert!(fixed.peak < free.peak);
    Ok(())
}

/// The model against peaks measured on the fullest pe (`scripts/plan-calibration.sh`: 16 MiB
/// texts at p = 4, and 80 MiB ones and 40 MB of Rust source at p = 16 on the 16-core GPU
/// host): for every plan the input it fits closest and DNA. Never below a measured peak;
/// DNA's within 2.5 times (the worst text of each size sets the model: see [`CSS`]).
#[test]
fn the_model_covers_the_measured_peaks() {
    // (n, p, algo, key ranges, exchange rounds of 4 KiB, 40-bit records, --check, the
    // plan's base MiB, measured MiB)
    let measured = [
        (16777216, 2, Algo::Css, 1, false, false, false, 21.0, 443.0), // random
        (83886080, 16, Algo::Css, 1, false, false, false, 21.0, 219.0), // dna
        (83886080, 16, Algo::Css, 2, false, false, true, 21.0, 211.0), // an
        (83886080, 16, Algo::Css, 2, false, false, true, 21.0, 161.0), // dna
        (40080860, 16, Algo::Css, 4, false, false, true, 21.0, 94.0),  // source
        (83886080, 16, Algo::Css, 4, false, false, true, 21.0, 118.0), // dna
        (40080860, 16, Algo::Css, 8, false, false, true, 21.0, 77.0),  // source
        (83886080, 16, Algo::Css, 8, false, false, true, 21.0, 95.0),  // dna
        (40080860, 16, Algo::Css, 8, false, true, true, 21.0, 81.0),   // source
        (83886080, 16, Algo::Css, 8, false, true, true, 21.0, 100.0),  // dna
        (40080860, 16, Algo::Css, 16, false, false, true, 21.0, 77.0), // source
        (83886080, 16, Algo::Css, 16, false, false, true, 21.0, 89.0), // dna
        (83886080, 16, Algo::Css, 64, false, false, true, 21.0, 118.0), // fib
        (83886080, 16, Algo::Css, 64, false, false, true, 21.0, 90.0), // dna
        (16777216, 4, Algo::Css, 64, true, false, true, 24.0, 78.0),   // fib
        (83886080, 16, Algo::Css, 64, true, false, true, 21.0, 66.0),  // dna
        (40080860, 16, Algo::Dc3, 1, false, false, false, 21.0, 120.0), // source
        (83886080, 16, Algo::Dc3, 1, false, false, false, 21.0, 198.0), // dna
        (40080860, 16, Algo::Dc3, 4, false, false, true, 21.0, 94.0),  // source
        (83886080, 16, Algo::Dc3, 4, false, false, true, 21.0, 120.0), // dna
        (83886080, 16, Algo::Dc3, 8, false, false, true, 21.0, 132.0), // repblock
        (83886080, 16, Algo::Dc3, 8, false, false, true, 21.0, 95.0),  // dna
        (83886080, 16, Algo::Dc3, 64, false, false, true, 21.0, 134.0), // repblock
        (83886080, 16, Algo::Dc3, 64, false, false, true, 21.0, 86.0), // dna
        (83886080, 16, Algo::Dc3, 64, true, false, true, 21.0, 114.0), // repblock
        (83886080, 16, Algo::Dc3, 64, true, false, true, 21.0, 63.0),  // dna
    ];
    for (n, pes, algo, ranges, rounds, wide, check, base, mib) in measured {
        let s = Shape {
            check,
            base: (base * (1 << 20) as f64) as u64,
            index_at_least: wide.then_some(IndexWidth::W40),
            token_width: TokenWidth::W1,
            ..shape(n, pes)
        };
        let knobs = Knobs {
            algo,
            round_bytes: rounds.then_some(MIN_ROUND_BYTES),
            sort_rounds: ranges,
            merge_rounds: ranges,
            relay: false,
        };
        let ratio = peak_per_pe(&s, &knobs) as f64 / (mib * (1 << 20) as f64);
        assert!(
            (1.0..=2.5).contains(&ratio),
            "n {n}, p {pes}, {algo:?} in {ranges} ranges: {ratio:.2} × measured"
        );
    }
}

#[test]
fn a_budget_below_the_base_says_so() {
    let m = choose(&config(Some(1 << 20)), &shape(100, 1), "--mem-per-pe")
        .unwrap_err()
        .to_string();
    assert!(m.contains("before it holds any text"), "{m}");
}

/// Where the budget is the node's memory shared by the pes on it, more pes on that node only
/// shrink each share: the refusal asks for more nodes.
#[test]
fn a_node_shared_budget_asks_for_more_nodes() {
    let s = shape(1 << 30, 2);
    for (source, nodes) in [
        ("MemAvailable / 2 pe(s) on the node", true),
        ("the cgroup's memory limit / 2 pe(s) on the node", true),
        ("SLURM_MEM_PER_NODE / 2 pe(s) on the node", true),
        ("--mem-per-pe", false),
        ("SLURM_MEM_PER_CPU", false),
        (
            "ulimit -v less 1.0 MiB of address space held but not resident",
            false,
        ),
    ] {
        let m = choose(&config(Some(4 << 30)), &s, source)
            .unwrap_err()
            .to_string();
        assert_eq!(m.contains("use more nodes"), nodes, "{source}: {m}");
        assert_eq!(m.contains("use more pes"), !nodes, "{source}: {m}");
    }
}

#[test]
fn the_refusal_names_enough_pes() {
    let s = shape(1 << 30, 2);
    let budget = 4 << 30;
    let m = choose(&config(Some(budget)), &s, "x")
        .unwrap_err()
        .to_string();
    let pes: usize = m
        .split("about ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{m}"));
    assert!(choose(&config(Some(budget)), &shape(1 << 30, pes), "").is_ok());
    assert!(choose(&config(Some(budget)), &shape(1 << 30, pes / 2), "").is_err());
}

/// A text of 16- or 32-bit tokens takes pCSS in [`TOKEN_SORT_ROUNDS`] key ranges without a budget
/// (configured ranges kept), whether the algorithm is given or not.
#[test]
fn token_texts_get_their_algorithm() -> TestResult {
    let u16s = Shape {
        token_width: TokenWidth::W2,
        ..shape(1 << 24, 2)
    };
    let free = Config {
        plan_algo: true,
        ..config(None)
    };
    let k = choose(&free, &u16s, "test")?.knobs;
    assert_eq!((k.algo, k.sort_rounds), (Algo::Css, TOKEN_SORT_ROUNDS));
    let mut set = config(None);
    set.css.sort_rounds = 2;
    assert_eq!(choose(&set, &u16s, "test")?.knobs.sort_rounds, 2);
    let u32s = Shape {
        token_width: TokenWidth::W4,
        ..shape(1 << 24, 2)
    };
    for c in [&free, &config(None)] {
        let k = choose(c, &u32s, "test")?.knobs;
        assert_eq!((k.algo, k.sort_rounds), (Algo::Css, TOKEN_SORT_ROUNDS));
    }
    Ok(())
}

/// The LCP array's and the duplicate spans' charges against their phases' peaks, measured on the
/// fullest pe (`psa repeats --stats` on 8 MiB at p = 2, `--index-bits` 32, 40 and 64): never
/// below, and the spans' within 1.2 times on the texts that set them (aⁿ and Fibonacci: every
/// entry a record).
#[test]
fn the_lcp_and_span_phases_are_covered() {
    // (index bits, the plan's base MiB, the lcp phases' peak MiB, the repeats phases' peak MiB)
    let measured = [
        (32, 20.0, 113.9, 125.2), // an
        (32, 19.9, 113.7, 124.8), // fib
        (32, 20.0, 108.3, 92.5),  // dna
        (40, 20.1, 162.1, 133.5), // an
        (40, 20.1, 162.3, 133.6), // fib
        (40, 20.0, 157.2, 94.5),  // dna
        (64, 20.1, 162.1, 172.3), // an
        (64, 20.3, 163.0, 173.6), // fib
        (64, 20.0, 156.5, 92.4),  // dna
    ];
    let mib = |x: f64| x * (1 << 20) as f64;
    for (k, (bits, base, lcp, spans)) in measured.into_iter().enumerate() {
        let s = Shape {
            base: mib(base) as u64,
            index_at_least: Some(match bits {
                32 => IndexWidth::W32,
                40 => IndexWidth::W40,
                _ => IndexWidth::W64,
            }),
            ..shape(8 << 20, 2)
        };
        let above = |per_char: f64| (s.base + per_peer(&s)) as f64 + per_char * s.block() as f64;
        let (lcp_plan, spans_plan) = (
            above(lcp_bytes_per_char(&s)),
            above(spans_bytes_per_char(&s)),
        );
        assert!(
            lcp_plan >= mib(lcp),
            "row {k}: lcp {lcp} MiB, planned {}",
            lcp_plan / mib(1.0)
        );
        assert!(
            spans_plan >= mib(spans),
            "row {k}: spans {spans} MiB, planned {}",
            spans_plan / mib(1.0)
        );
        if k % 3 != 2 {
            assert!(
                spans_plan <= 1.2 * mib(spans),
                "row {k}: spans {spans} MiB, planned {}",
                spans_plan / mib(1.0)
            );
        }
    }
}

/// The relay to libsais on pe 0 (`--algo node`): planned without `--algo` on one node past
/// [`RELAY_MIN`] characters, never across nodes, for small texts, for tokens or with a device;
/// a budget that pe 0 cannot hold it in runs css; `--algo node` refuses what it cannot build.
#[test]
fn the_relay_is_planned_where_pe_0_holds_it() -> TestResult {
    let auto = Config {
        relay: Relay::Auto,
        plan_algo: true,
        ..config(None)
    };
    let big = shape(64 << 20, 4);
    let relayed = choose(&auto, &big, "")?;
    assert!(relayed.knobs.relay, "{relayed:?}");
    // pe 0 holds the text and its 32-bit suffix array (5 bytes a character) besides its block.
    assert!(relayed.peak >= BASE_BYTES + 5 * (64 << 20) + (16 << 20));
    assert!(
        relayed.summary().starts_with("plan: node "),
        "{}",
        relayed.summary()
    );
    assert!(relayed.to_json().contains("\"algo\": \"node\""));
    let not = |s: &Shape, c: &Config| choose(c, s, "").map(|p| !p.knobs.relay);
    assert!(not(
        &Shape {
            one_node: false,
            ..big
        },
        &auto
    )?);
    assert!(not(&shape(RELAY_MIN, 4), &auto)?);
    let tokens = Shape {
        token_width: TokenWidth::W2,
        ..big
    };
    assert!(not(&tokens, &auto)?);
    let gpu = Config {
        backend: Backend::Gpu,
        ..auto.clone()
    };
    assert!(not(&big, &gpu)?);
    // A budget just below pe 0's need: css.
    let tight = Config {
        mem_per_pe: Some(relayed.peak - 1),
        ..auto.clone()
    };
    let css = choose(&tight, &big, "--mem-per-pe")?;
    assert!(!css.knobs.relay && css.knobs.algo == Algo::Css, "{css:?}");

    let on = Config {
        relay: Relay::On,
        ..config(None)
    };
    assert!(choose(&on, &shape(100, 4), "")?.knobs.relay);
    let e = choose(&on, &tokens, "").unwrap_err();
    assert!(
        matches!(e, Error::Usage(_)) && e.to_string().contains("--algo node"),
        "{e}"
    );
    let on_tight = Config {
        mem_per_pe: Some(relayed.peak - 1),
        ..on
    };
    let e = choose(&on_tight, &big, "--mem-per-pe").unwrap_err();
    assert!(matches!(e, Error::Budget(_)), "{e}");
    assert!(
        e.to_string()
            .contains("holds the whole text and its suffix array on pe 0"),
        "{e}"
    );
    Ok(())
}
