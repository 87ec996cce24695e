//! `psa repeats` end to end under mpirun at p ∈ {1, 2, 3, 4, 7}: the spans of every case against
//! a naive oracle (every window of K tokens, counted in a hash map), on named hard texts, with
//! separators (at pe boundaries too), tokens of 2 and 4 bytes (the largest token included) and
//! `--across` with two and three inputs; and the refusals.

mod common;

use std::collections::{HashMap, HashSet};
use std::fs;

use common::*;
use psa::plan::{choose, Shape};
use psa::Config;

/// Process counts of the runs.
const PES: &[usize] = &[1, 2, 3, 4, 7];

/// One case: the inputs (tokens), K, the separator, `--across`, the token width.
struct Case {
    name: String,
    inputs: Vec<Vec<u64>>,
    k: usize,
    sep: Option<u64>,
    across: bool,
    width: usize,
    /// More flags (the hidden switches that cut exchanges into rounds, say).
    extra: Vec<String>,
}

impl Case {
    fn bytes(name: &str, text: &[u8], k: usize) -> Case {
        Case {
            name: name.into(),
            inputs: vec![text.iter().map(|&b| b as u64).collect()],
            k,
            sep: None,
            across: false,
            width: 1,
            extra: Vec::new(),
        }
    }

    fn with_sep(mut self, sep: u64) -> Case {
        self.sep = Some(sep);
        self
    }

    fn with(mut self, flags: &[&str]) -> Case {
        self.extra.extend(flags.iter().map(|f| f.to_string()));
        self
    }
}

/// The naive spans: every window of K tokens that holds no separator and occurs again (with
/// `across`: a window of the last input that occurs within one of the others), its tokens
/// marked, and the marked runs as `[b, e)` (from the last input's start with `across`).
fn naive_spans(c: &Case) -> Vec<(u64, u64)> {
    let text: Vec<u64> = c.inputs.concat();
    let (n, k) = (text.len(), c.k);
    let clean = |p: usize| p + k <= n && !text[p..p + k].iter().any(|&t| Some(t) == c.sep);
    let mut covered = vec![false; n];
    let target = match c.across {
        true => n - c.inputs.last().map_or(0, |l| l.len()),
        false => 0,
    };
    let mut mark = |p: usize| covered[p..p + k].iter_mut().for_each(|x| *x = true);
    if c.across {
        let mut seen: HashSet<&[u64]> = HashSet::new();
        let mut start = 0;
        for input in &c.inputs[..c.inputs.len() - 1] {
            for p in start..(start + input.len()).saturating_sub(k - 1) {
                if clean(p) {
                    seen.insert(&text[p..p + k]);
                }
            }
            start += input.len();
        }
        (target..n)
            .filter(|&p| clean(p) && seen.contains(&text[p..p + k]))
            .for_each(&mut mark);
    } else {
        let mut count: HashMap<&[u64], usize> = HashMap::new();
        (0..n)
            .filter(|&p| clean(p))
            .for_each(|p| *count.entry(&text[p..p + k]).or_default() += 1);
        (0..n)
            .filter(|&p| clean(p) && count[&text[p..p + k]] > 1)
            .for_each(&mut mark);
    }
    let mut spans = Vec::new();
    let mut p = 0;
    while p < n {
        if covered[p] {
            let b = p;
            while p < n && covered[p] {
                p += 1;
            }
            spans.push(((b - target) as u64, (p - target) as u64));
        } else {
            p += 1;
        }
    }
    spans
}

/// Parses `b<TAB>e` lines; None for a malformed line.
fn parse_spans(tsv: &str) -> Option<Vec<(u64, u64)>> {
    tsv.lines()
        .map(|l| {
            let (b, e) = l.split_once('\t')?;
            Some((b.parse().ok()?, e.parse().ok()?))
        })
        .collect()
}

/// Little-endian bytes of `tokens` in `w` bytes each.
fn le(tokens: &[u64], w: usize) -> Vec<u8> {
    tokens
        .iter()
        .flat_map(|t| t.to_le_bytes()[..w].to_vec())
        .collect()
}

/// `psa repeats` on the case at p against the oracle. Returns a failure or None.
fn run_case(c: &Case, p: usize) -> Option<String> {
    let dir = TempDir::new(&format!("repeats-{}-{p}", c.name));
    let mut args: Vec<String> = vec![
        "repeats".into(),
        "--min-len".into(),
        c.k.to_string(),
        "--token-width".into(),
        c.width.to_string(),
        "-o".into(),
        "spans.tsv".into(),
    ];
    if let Some(s) = c.sep {
        args.extend(["--doc-sep".into(), s.to_string()]);
    }
    if c.across {
        args.push("--across".into());
    }
    if c.width > 1 {
        args.extend(["--algo".into(), "dc3".into()]);
    }
    args.extend(c.extra.iter().cloned());
    for (i, input) in c.inputs.iter().enumerate() {
        let f = format!("in{i}.bin");
        dir.write(&f, &le(input, c.width));
        args.push(f);
    }
    let r = run_psa(p, &args, dir.path());
    let case = format!("{} (K = {}) at p = {p}", c.name, c.k);
    if !r.success() {
        return Some(format!("{case}: {}", r.brief()));
    }
    let tsv = fs::read_to_string(dir.join("spans.tsv")).unwrap_or_default();
    let Some(got) = parse_spans(&tsv) else {
        return Some(format!("{case}: malformed output {tsv:?}"));
    };
    let want = naive_spans(c);
    if got != want {
        // From the first span that differs.
        let at = got.iter().zip(&want).take_while(|(g, w)| g == w).count();
        let shown = |v: &[(u64, u64)]| format!("{:?}", &v[at.min(v.len())..v.len().min(at + 6)]);
        return Some(format!(
            "{case}: {} spans, want {}; from span {at}: got {} want {}",
            got.len(),
            want.len(),
            shown(&got),
            shown(&want)
        ));
    }
    if dir.entries().iter().any(|e| e.contains("psa-partial")) {
        return Some(format!("{case}: a partial file was left behind"));
    }
    None
}

/// Runs every case at every p; asserts that all matched the oracle and that the table held
/// spans at all (a table of empty answers would test little).
fn run_table(cases: &[Case]) {
    let mut failures = Vec::new();
    let mut runs = 0;
    for c in cases {
        for &p in PES {
            runs += 1;
            failures.extend(run_case(c, p));
        }
    }
    assert!(failures.is_empty(), "{}", failure_report(&failures, runs));
    let nonempty = cases.iter().filter(|c| !naive_spans(c).is_empty()).count();
    assert!(nonempty * 2 > cases.len(), "most cases should have spans");
}

/// Random text with planted copies: blocks copied from earlier (some overlapping their
/// source, some nested in other copies).
fn planted(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng::new(seed);
    let mut v = gen::random(seed, n, 26, b'a');
    for _ in 0..12 {
        let len = r.range(5, 60);
        let from = r.range(0, n - len);
        // Overlapping copies land near their source.
        let to = match r.chance(30) {
            true => (from + r.range(1, len)).min(n - len),
            false => r.range(0, n - len),
        };
        let block = v[from..from + len].to_vec();
        v[to..to + len].copy_from_slice(&block);
    }
    v
}

/// Bytes: the named hard texts and corner cases.
#[test]
fn byte_texts_match_the_oracle() {
    let mut rng = Rng::new(7);
    let mut nested = gen::random(3, 400, 20, b'a');
    // "xyzxyz…" nested inside a longer copied block, and a copy of the block.
    nested[50..62].copy_from_slice(b"xyzxyzxyzxyz");
    let block = nested[40..90].to_vec();
    nested[200..250].copy_from_slice(&block);
    nested[300..306].copy_from_slice(b"xyzxyz");
    let cases = vec![
        Case::bytes("empty", b"", 1),
        Case::bytes("one", b"a", 1),
        Case::bytes("fewer than p", b"aab", 1),
        Case::bytes("a^n", &gen::a_n(300), 5),
        Case::bytes("(abc)^n", &gen::abc_n(150), 4),
        Case::bytes("fibonacci", &gen::fibonacci(1000), 6),
        Case::bytes("random 2", &gen::random(11, 2000, 2, b'a'), 12),
        Case::bytes("random bytes", &gen::random(12, 3000, 256, 0), 2),
        Case::bytes("repeated block", &gen::repeated_block(13, 97, 1500, 4), 40),
        Case::bytes("planted", &planted(rng.next_u64(), 2500), 5),
        Case::bytes("planted, small rounds", &planted(rng.next_u64(), 2500), 4).with(&[
            "--exchange-round-bytes",
            "256",
            "--request-piece",
            "3",
        ]),
        Case::bytes("planted, 40-bit records", &planted(rng.next_u64(), 2500), 5)
            .with(&["--index-bits", "40"]),
        Case::bytes("fibonacci, 64-bit records", &gen::fibonacci(1000), 6)
            .with(&["--index-bits", "64"]),
        Case::bytes("nested", &nested, 6),
        Case::bytes("K above every repeat", &gen::random(14, 1500, 256, 0), 40),
        Case::bytes("K = n", b"abcabc", 6),
    ];
    run_table(&cases);
}

/// Documents over a small alphabet, with repeats inside documents and across them; a separator
/// at every pe boundary of p ∈ {2, 3, 4, 7} (n = 420) or just beside them, and a final document
/// without a separator.
#[test]
fn separators_cut_repeats() {
    let doc_text = |seed: u64, at: &dyn Fn(usize) -> bool| -> Vec<u8> {
        let mut v = gen::repeated_block(seed, 23, 420, 3);
        let noise = gen::random(seed + 1, 420, 3, b'a');
        for (i, c) in v.iter_mut().enumerate() {
            if i % 50 > 40 {
                *c = noise[i];
            }
            if at(i) {
                *c = b'#';
            }
        }
        v
    };
    let on = |i: usize| i > 0 && [60, 105, 140].iter().any(|&m| i.is_multiple_of(m));
    let beside = |i: usize| on(i + 1) || on(i.max(1) - 1) && i > 1;
    let cases = vec![
        Case::bytes("seps on boundaries", &doc_text(21, &on), 5).with_sep(b'#' as u64),
        Case::bytes("seps beside boundaries", &doc_text(22, &beside), 4).with_sep(b'#' as u64),
        Case::bytes("seps, 40-bit records", &doc_text(24, &on), 5)
            .with_sep(b'#' as u64)
            .with(&["--index-bits", "40"]),
        Case::bytes("only seps", b"########", 1).with_sep(b'#' as u64),
        Case::bytes("seps, no repeats", b"ab#ab#ab", 3).with_sep(b'#' as u64),
        Case::bytes("seps, repeats", b"abc#abc#xabcx", 3).with_sep(b'#' as u64),
        Case::bytes("sep 0xFF", &gen::zero_ff(23, 800), 6).with_sep(0xFF),
    ];
    run_table(&cases);
}

/// Tokens of 2 and 4 bytes: random over a few values with the largest token as separator and
/// as a token, Fibonacci over {max, 0}.
#[test]
fn token_texts_match_the_oracle() {
    let mut cases = Vec::new();
    for w in [2usize, 4] {
        let max = (1u64 << (8 * w)) - 1;
        let mut rng = Rng::new(w as u64);
        let values = [0, 1, max - 1, max, 1 << (8 * w - 1)];
        let random: Vec<u64> = (0..1200).map(|_| values[rng.below(4) as usize]).collect();
        let (mut a, mut b) = (vec![max], vec![max, 0]);
        while b.len() < 800 {
            let c = [b.clone(), a].concat();
            (a, b) = (b, c);
        }
        let tok = |name: &str, inputs: Vec<Vec<u64>>, k, sep| Case {
            name: format!("{w}-byte {name}"),
            inputs,
            k,
            sep,
            across: false,
            width: w,
            extra: Vec::new(),
        };
        cases.push(tok("random", vec![random.clone()], 7, None));
        cases.push(tok("random, sep max", vec![random], 3, Some(max)));
        cases.push(tok(
            "fibonacci",
            vec![b[..400].to_vec(), b[400..].to_vec()],
            9,
            None,
        ));
        cases.push(tok(
            "sep max-1",
            vec![vec![max, max - 1, max, max, 0]],
            1,
            Some(max - 1),
        ));
    }
    run_table(&cases);
}

/// `--across`: two and three inputs, with copies between the last input and the others,
/// repeats inside the last input alone (not reported), a repeat that only exists across the
/// boundary of two inputs (not counted), and separators.
#[test]
fn across_reports_the_last_input_against_the_others() {
    let train = gen::random(31, 900, 4, b'a');
    let other = gen::random(32, 500, 4, b'a');
    let mut test = gen::random(33, 700, 4, b'a');
    test[10..60].copy_from_slice(&train[100..150]);
    test.copy_within(300..330, 100);
    test[400..440].copy_from_slice(&other[200..240]);
    // Crosses train | other in the concatenation.
    let crossing = [&train[880..], &other[..20]].concat();
    test[500..540].copy_from_slice(&crossing);
    let mut with_seps = test.clone();
    for i in (0..700).step_by(37) {
        with_seps[i] = b'#';
    }
    let bytes = |t: &[u8]| t.iter().map(|&b| b as u64).collect::<Vec<u64>>();
    let across = |name: &str, inputs: Vec<&[u8]>, k, sep| Case {
        name: name.into(),
        inputs: inputs.into_iter().map(bytes).collect(),
        k,
        sep,
        across: true,
        width: 1,
        extra: Vec::new(),
    };
    let cases = vec![
        across("two inputs", vec![&train, &test], 12, None),
        across("three inputs", vec![&train, &other, &test], 12, None),
        across("three, short K", vec![&train, &other, &test], 7, None),
        across(
            "three, seps",
            vec![&train, &other, &with_seps],
            6,
            Some(b'#' as u64),
        ),
        across("empty last", vec![&train, b""], 3, None),
        across("tiny", vec![b"abcd", b"xabcdabcd"], 2, None),
    ];
    run_table(&cases);
}

/// Refusals, each before anything is read and leaving nothing behind: `--across` with one
/// input, a separator wider than the token, an input that is not a multiple of the width.
#[test]
fn repeats_refusals_are_clear() {
    for &p in &[1, 3] {
        let dir = TempDir::new(&format!("repeats-refused-{p}"));
        dir.write("a.txt", b"abcabc");
        dir.write("odd.bin", b"abc");
        let run = |args: &[&str]| run_psa(p, args, dir.path());
        run(&[
            "repeats",
            "--min-len",
            "2",
            "--across",
            "-o",
            "s.tsv",
            "a.txt",
        ])
        .assert_error(
            2,
            "--across compares the last input with the others",
            "one input",
        );
        run(&[
            "repeats",
            "--min-len",
            "2",
            "--doc-sep",
            "256",
            "-o",
            "s.tsv",
            "a.txt",
        ])
        .assert_error(
            2,
            "--doc-sep 256 is not a token of 1 byte(s)",
            "wide separator",
        );
        run(&[
            "repeats",
            "--min-len",
            "2",
            "--token-width",
            "2",
            "-o",
            "s.tsv",
            "odd.bin",
        ])
        .assert_error(3, "not a multiple of the token width", "odd size");
        run(&["repeats", "--min-len", "0", "-o", "s.tsv", "a.txt"]).assert_error(
            2,
            "--min-len",
            "K = 0",
        );
        assert_eq!(
            dir.entries(),
            vec!["a.txt", "odd.bin"],
            "p = {p}: files left behind"
        );
    }
}

/// The smallest budget `psa repeats` takes for n bytes at p pes (its leanest plan: a build that
/// also makes the LCP array, then the span phases), with the base of [`psa::plan::BASE_BYTES`].
fn leanest(n: usize, p: usize) -> u64 {
    let shape = Shape {
        lcp: true,
        spans: true,
        index: false,
        ..plan_shape(n, p)
    };
    choose(&Config::default(), &shape, "")
        .expect("no budget")
        .leanest
}

/// The memory plan holds the span phases: at the leanest budget, on aⁿ (every suffix gives a
/// record, the most the phases hold), the measured peak stays within the plan and the plan
/// within the budget. (The plan once charged only the LCP array's phases, and aⁿ of 4 MiB took
/// a third more than it planned.)
#[test]
fn the_leanest_budget_holds_the_span_phases() {
    let n = 4 << 20;
    let dir = TempDir::new("repeats-budget");
    dir.write("an.txt", &gen::a_n(n));
    for p in [2, 3] {
        let budget = leanest(n, p).to_string();
        let r = run_psa(
            p,
            [
                "repeats",
                "--min-len",
                "20",
                "--plan-base",
                &psa::plan::BASE_BYTES.to_string(),
                "--mem-per-pe",
                &budget,
                "--stats",
                "st.json",
                "-o",
                "spans.tsv",
                "an.txt",
            ],
            dir.path(),
        );
        assert!(r.success(), "{}", r.describe());
        let tsv = fs::read_to_string(dir.join("spans.tsv")).unwrap();
        assert_eq!(tsv, format!("0\t{n}\n"), "p = {p}");
        let st = fs::read_to_string(dir.join("st.json")).unwrap();
        let planned: u64 = json_value(&st, "planned_peak_bytes").parse().unwrap();
        let measured: u64 = json_value(&st, "measured_max_peak_bytes").parse().unwrap();
        assert!(planned <= budget.parse().unwrap(), "p = {p}: {st}");
        assert!(
            measured > 0 && measured <= planned,
            "p = {p}: the plan holds the span phases: {st}"
        );
        assert_eq!(json_value(&st, "spans"), "1", "{st}");
        assert!(st.contains("\"name\": \"repeats place\""), "{st}");
    }
}
