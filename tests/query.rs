//! `psa query` against a naive scan on the hard inputs, many patterns at a time (so the search's
//! top level is built and the searches run interleaved): DNA and random texts, aⁿ with
//! patterns aᵏ, a text of one character and an empty one, patterns longer than the text,
//! absent, all equal, holding `$`, of both cases; plain, gzip and FASTQ patterns files; counts,
//! `--locate` with and without `--max-hits`, `--json`; `--keep-case` and `--revcomp` indexes;
//! token indexes of widths 1, 2 and 4. And a patterns file far larger than the memory the query
//! is seen to use.

mod common;
mod seq_common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{run_psa, Rng, TempDir, PSA};
use seq_common::{gzip, naive_find, reference, Kind, Rec};

/// `psa query ARGS` in `dir`: its standard output, or a failed test naming its error.
fn query(dir: &Path, args: &[&str]) -> Vec<u8> {
    let o = Command::new(PSA)
        .arg("query")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("psa query starts");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "psa query {args:?}: {err}");
    o.stdout
}

/// A pattern as a TSV answer shows it: backslash, tab, line breaks escaped, other bytes as
/// they are.
fn shown(p: &[u8]) -> Vec<u8> {
    let mut s = Vec::new();
    for &b in p {
        match b {
            b'\\' => s.extend_from_slice(b"\\\\"),
            b'\t' => s.extend_from_slice(b"\\t"),
            b'\n' => s.extend_from_slice(b"\\n"),
            b'\r' => s.extend_from_slice(b"\\r"),
            b => s.push(b),
        }
    }
    s
}

/// Builds `out` from `input` in `dir` at p = 1 with `flags`.
fn build(dir: &Path, input: &str, out: &str, flags: &[&str]) {
    let mut args = vec!["-o", out];
    args.extend_from_slice(flags);
    args.push(input);
    let r = run_psa(1, &args, dir);
    assert!(r.success(), "{}", r.describe());
}

/// A text as the index holds it: T, its records, and how patterns become its keys.
struct Indexed {
    t: Vec<u8>,
    recs: Vec<Rec>,
    /// Sequence input without `--keep-case`: patterns are upper-cased.
    fold: bool,
}

impl Indexed {
    /// The answers `psa query --locate` gives for `pats` (`max`: `--max-hits`), by a naive
    /// scan: the first `max` occurrences in suffix order, listed in text order.
    fn answers(&self, pats: &[Vec<u8>], locate: bool, max: usize) -> Vec<u8> {
        let mut s = Vec::new();
        for p in pats {
            let shown = shown(p);
            let key = match self.fold {
                true => p.to_ascii_uppercase(),
                false => p.clone(),
            };
            let mut hits = naive_find(&self.t, &key);
            s.extend([&shown[..], format!("\t{}\n", hits.len()).as_bytes()].concat());
            if !locate {
                continue;
            }
            hits.sort_by(|&a, &b| self.t[a as usize..].cmp(&self.t[b as usize..]));
            hits.truncate(max);
            hits.sort_unstable();
            for h in hits {
                let r = self.recs.partition_point(|r| r.1 <= h) - 1;
                let (name, start) = (&self.recs[r].0, self.recs[r].1);
                let line = format!("\t{name}\t{}\n", h - start);
                s.extend([&shown[..], line.as_bytes()].concat());
            }
        }
        s
    }

    /// Checks `out`'s answers for `pats`, read from a plain and a gzip file: counts, all
    /// hits, at most 3 hits, and JSON counts; with `fastq`, the counts of those that are reads
    /// (letters only) from a gzip FASTQ file too.
    fn check(&self, dir: &Path, out: &str, pats: &[Vec<u8>], fastq: bool) {
        let lines: Vec<u8> = pats.iter().flat_map(|p| [&p[..], b"\n"].concat()).collect();
        std::fs::write(dir.join("p.txt"), &lines).unwrap();
        std::fs::write(dir.join("p.txt.gz"), gzip(&lines, 2)).unwrap();
        for f in ["p.txt", "p.txt.gz"] {
            let counts = query(dir, &[out, "--patterns", f]);
            assert!(
                counts == self.answers(pats, false, 0),
                "{out} {f}: counts differ from a naive scan"
            );
        }
        if fastq {
            let reads: Vec<Vec<u8>> = (pats.iter())
                .filter(|p| p.iter().all(u8::is_ascii_alphabetic))
                .cloned()
                .collect();
            let fq: Vec<u8> = (reads.iter().enumerate())
                .flat_map(|(i, p)| {
                    [
                        format!("@r{i}\n").as_bytes(),
                        p,
                        b"\n+\n",
                        &vec![b'I'; p.len()],
                        b"\n",
                    ]
                    .concat()
                })
                .collect();
            std::fs::write(dir.join("p.fq.gz"), gzip(&fq, 1)).unwrap();
            let counts = query(dir, &[out, "--patterns", "p.fq.gz"]);
            assert!(
                counts == self.answers(&reads, false, 0),
                "{out}: FASTQ counts differ"
            );
        }
        let all = query(dir, &[out, "--patterns", "p.txt", "--locate"]);
        assert!(
            all == self.answers(pats, true, usize::MAX),
            "{out}: --locate differs"
        );
        let some = query(
            dir,
            &[out, "--patterns", "p.txt.gz", "--locate", "--max-hits", "3"],
        );
        assert!(
            some == self.answers(pats, true, 3),
            "{out}: --max-hits 3 differs"
        );
        let json = query(dir, &[out, "--patterns", "p.txt", "--json"]);
        let counts: Vec<usize> = (String::from_utf8_lossy(&json).lines())
            .map(|l| {
                l.rsplit_once("\"count\": ")
                    .unwrap()
                    .1
                    .trim_end_matches('}')
                    .parse()
                    .unwrap()
            })
            .collect();
        let want: Vec<usize> = pats.iter().map(|p| self.count(p)).collect();
        assert_eq!(counts, want, "{out}: --json counts");
    }

    fn count(&self, p: &[u8]) -> usize {
        match self.fold {
            true => naive_find(&self.t, &p.to_ascii_uppercase()).len(),
            false => naive_find(&self.t, p).len(),
        }
    }
}

/// Patterns for `t`: pieces of it (some across a `$`, some lower-cased, some running past its
/// end), absent ones, one repeated many times, and ones longer than `t`.
fn patterns(t: &[u8], rng: &mut Rng, absent: &[u8]) -> Vec<Vec<u8>> {
    let mut pats = Vec::new();
    for _ in 0..400 {
        if t.is_empty() {
            break;
        }
        let i = rng.range(0, t.len() - 1);
        let len = match rng.chance(20) {
            true => rng.range(20, 130),
            false => rng.range(1, 12),
        };
        let mut p = t[i..(i + len).min(t.len())].to_vec();
        if rng.chance(20) {
            p.make_ascii_lowercase();
        }
        pats.push(p);
    }
    pats.extend((0..30).map(|k| [absent, &t[..k.min(t.len())]].concat()));
    pats.extend(std::iter::repeat_n(t[..t.len().min(7)].to_vec(), 50));
    pats.push([t, t].concat());
    pats.push([t, b"A"].concat());
    // Patterns a line can hold: no line breaks, none empty once whitespace is dropped.
    pats.retain(|p| !p.contains(&b'\n') && !p.contains(&b'\r') && !p.trim_ascii().is_empty());
    pats.iter_mut().for_each(|p| *p = p.trim_ascii().to_vec());
    pats
}

/// DNA and random sequence texts (FASTA, plain), indexes upper-cased, with `--keep-case` and
/// with `--revcomp`: every answer as a naive scan's.
#[test]
fn sequence_indexes_answer_as_a_naive_scan() {
    let dir = TempDir::new("query-seq");
    let mut rng = Rng::new(66);
    let dna = common::gen::dna(5, 6000);
    let mut fa = Vec::new();
    for (k, chunk) in dna.chunks(1500).enumerate() {
        fa.extend_from_slice(format!(">r{k}\n").as_bytes());
        let seq: Vec<u8> = (chunk.iter().enumerate())
            .map(|(i, &b)| {
                if i % 7 == 0 {
                    b.to_ascii_lowercase()
                } else {
                    b
                }
            })
            .collect();
        for line in seq.chunks(70) {
            fa.extend_from_slice(line);
            fa.push(b'\n');
        }
    }
    std::fs::write(dir.path().join("g.fa"), &fa).unwrap();
    for (out, flags, keep_case, revcomp) in [
        ("g.sa", &[][..], false, false),
        ("k.sa", &["--keep-case"][..], true, false),
        ("r.sa", &["--revcomp"][..], false, true),
    ] {
        build(dir.path(), "g.fa", out, flags);
        let (t, recs) = reference(
            &[(fa.clone(), Kind::Fasta)],
            &["g.fa".into()],
            keep_case,
            revcomp,
        );
        let indexed = Indexed {
            t,
            recs,
            fold: !keep_case,
        };
        let mut pats = patterns(&indexed.t, &mut rng, b"ACGU");
        pats.extend([
            b"$".to_vec(),
            b"T$".to_vec(),
            b"$$".to_vec(),
            b"n".to_vec(),
            b"acgt".to_vec(),
        ]);
        indexed.check(dir.path(), out, &pats, true);
    }
}

/// Raw texts: aⁿ with patterns aᵏ (k up to n + 1), random bytes with 0 and 255, one
/// character, none at all.
#[test]
fn raw_indexes_answer_as_a_naive_scan() {
    let dir = TempDir::new("query-raw");
    let mut rng = Rng::new(67);
    let texts: Vec<(&str, Vec<u8>)> = vec![
        ("an.txt", common::gen::a_n(700)),
        ("bytes.txt", common::gen::random(3, 5000, 256, 0)),
        ("four.txt", common::gen::random(4, 4000, 4, b'a')),
        ("fib.txt", common::gen::fibonacci(3000)),
        ("one.txt", b"x".to_vec()),
        ("empty.txt", Vec::new()),
    ];
    for (name, t) in texts {
        std::fs::write(dir.path().join(name), &t).unwrap();
        let out = format!("{name}.sa");
        build(dir.path(), name, &out, &[]);
        let indexed = Indexed {
            recs: vec![(name.to_string(), 0, t.len() as u64)],
            t: t.clone(),
            fold: false,
        };
        let mut pats = match name {
            "an.txt" => (1..=701).map(|k| vec![b'a'; k]).collect(),
            _ => patterns(&t, &mut rng, b"\xfe\x01"),
        };
        pats.extend([b"x".to_vec(), b"xx".to_vec(), b"Z".to_vec(), b"a$".to_vec()]);
        pats.retain(|p| !p.contains(&b'\n') && !p.contains(&b'\r') && !p.is_empty());
        indexed.check(dir.path(), &out, &pats, false);
    }
}

/// Token indexes of 1, 2 and 4 bytes: n-grams of token ids counted and placed as a naive scan
/// over the tokens' values does (the largest token included).
#[test]
fn token_indexes_answer_as_a_naive_scan() {
    let dir = TempDir::new("query-tokens");
    let mut rng = Rng::new(68);
    for width in [1usize, 2, 4] {
        let max = if width == 4 {
            u32::MAX as u64
        } else {
            (1u64 << (8 * width)) - 1
        };
        let values = [0, 1, 2, 300 % (max + 1), max];
        let tokens: Vec<u64> = (0..3000).map(|_| values[rng.below(5) as usize]).collect();
        let bytes: Vec<u8> = (tokens.iter())
            .flat_map(|v| v.to_le_bytes()[..width].to_vec())
            .collect();
        let name = format!("t{width}.bin");
        std::fs::write(dir.path().join(&name), &bytes).unwrap();
        let out = format!("{name}.sa");
        build(
            dir.path(),
            &name,
            &out,
            &["--token-width", &width.to_string()],
        );
        let mut pats: Vec<Vec<u64>> = (0..300)
            .map(|_| {
                let i = rng.range(0, tokens.len() - 1);
                tokens[i..(i + rng.range(1, 9)).min(tokens.len())].to_vec()
            })
            .collect();
        pats.extend([
            vec![max, max, max, max],
            vec![3],
            tokens.clone(),
            vec![max; 50],
        ]);
        let lines: String = (pats.iter())
            .map(|p| {
                p.iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
                    + "\n"
            })
            .collect();
        std::fs::write(dir.path().join("ids.txt"), &lines).unwrap();
        let want: String = (pats.iter().zip(lines.lines()))
            .map(|(p, shown)| {
                let hits = (0..tokens.len())
                    .filter(|&i| tokens[i..].starts_with(p))
                    .count();
                format!("{shown}\t{hits}\n")
            })
            .collect();
        let got = query(dir.path(), &[&out, "--patterns", "ids.txt"]);
        assert!(
            got == want.as_bytes(),
            "width {width}: counts differ from a naive scan"
        );
    }
}

/// A patterns file of 300 MB of lines (plain, so the file itself is that large) is answered
/// with a peak resident size of under 150 MB: the reader holds a batch or two, never the file.
#[test]
fn a_patterns_file_larger_than_the_memory_used_is_streamed() {
    let dir = TempDir::new("query-stream");
    std::fs::write(dir.path().join("g.fa"), b">a\nACGTACGTTT\n>b\nGGACGT\n").unwrap();
    build(dir.path(), "g.fa", "g.sa", &[]);
    let line = format!("{}\n", "ACGT".repeat(250));
    let file = std::fs::File::create(dir.path().join("big.txt")).unwrap();
    let mut w = std::io::BufWriter::new(file);
    for _ in 0..(300 << 20) / line.len() {
        std::io::Write::write_all(&mut w, line.as_bytes()).unwrap();
    }
    drop(w);
    let child = Command::new(PSA)
        .args(["query", "--threads", "2", "g.sa", "--patterns", "big.txt"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("psa query starts");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing one status and one rusage.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status}"
    );
    let peak = usage.ru_maxrss as u64 * 1024;
    assert!(
        peak < 150 << 20,
        "peak resident size {peak} bytes for 300 MB of patterns"
    );
}

/// The first query with many patterns keeps the search's top level in `OUT.top`, and later
/// ones map it; after the index is built again from another text, or the file is cut short,
/// the answers are still a naive scan's.
#[test]
fn the_kept_top_level_answers_as_a_naive_scan_and_follows_its_index() {
    let dir = TempDir::new("query-top");
    let mut rng = Rng::new(69);
    let top = dir.path().join("t.sa.top");
    for (round, seed) in [(0, 5), (1, 6), (2, 6)] {
        let t = common::gen::random(seed, 6000, 4, b'a');
        std::fs::write(dir.path().join("t.txt"), &t).unwrap();
        if round < 2 {
            build(dir.path(), "t.txt", "t.sa", &["--force"]);
        } else {
            let bytes = std::fs::read(&top).unwrap();
            std::fs::write(&top, &bytes[..bytes.len() / 2]).unwrap();
        }
        let indexed = Indexed {
            recs: vec![("t.txt".to_string(), 0, t.len() as u64)],
            t: t.clone(),
            fold: false,
        };
        let pats = patterns(&t, &mut rng, b"z");
        for _ in 0..2 {
            let lines: Vec<u8> = pats.iter().flat_map(|p| [&p[..], b"\n"].concat()).collect();
            std::fs::write(dir.path().join("p.txt"), &lines).unwrap();
            let got = query(dir.path(), &["t.sa", "--patterns", "p.txt"]);
            assert!(
                got == indexed.answers(&pats, false, 0),
                "round {round}: counts differ from a naive scan"
            );
            assert!(top.exists(), "round {round}: no t.sa.top");
        }
    }
}

/// A patterns file that holds one pattern many times (present, and absent): every answer the
/// naive scan's, counts and `--locate --max-hits`.
#[test]
fn all_patterns_equal_answer_as_a_naive_scan() {
    let dir = TempDir::new("query-equal");
    let t = common::gen::dna(7, 5000);
    std::fs::write(dir.path().join("e.txt"), &t).unwrap();
    build(dir.path(), "e.txt", "e.sa", &[]);
    let indexed = Indexed {
        recs: vec![("e.txt".to_string(), 0, t.len() as u64)],
        t: t.clone(),
        fold: false,
    };
    for pat in [
        t[100..103].to_vec(),
        t[200..260].to_vec(),
        b"ACGTZ".to_vec(),
    ] {
        let pats = vec![pat; 5000];
        let lines: Vec<u8> = pats.iter().flat_map(|p| [&p[..], b"\n"].concat()).collect();
        std::fs::write(dir.path().join("p.txt"), &lines).unwrap();
        let counts = query(dir.path(), &["e.sa", "--patterns", "p.txt"]);
        assert!(counts == indexed.answers(&pats, false, 0), "counts differ");
        let some = query(
            dir.path(),
            &["e.sa", "--patterns", "p.txt", "--locate", "--max-hits", "2"],
        );
        assert!(
            some == indexed.answers(&pats, true, 2),
            "--max-hits 2 differs"
        );
    }
}
