//! Building from sequence files and several inputs, and `psa query`, through the binary: the
//! files beside the SA (T, the records table), the SA of T against the oracle, query counts and
//! locations against a naive scan of T (sequence and raw input), and bad input ending the job
//! with one message that names the file and line, leaving nothing behind.

mod common;
mod seq_common;

use std::path::Path;
use std::process::Command;

use common::{oracle, read_sa, run_psa, Rng, TempDir, PSA};
use seq_common::{bgzf, fasta, fastq, gzip, naive_find, reference, Kind, Rec};

/// Reads `OUT.records.tsv`.
fn records_tsv(out: &Path) -> Vec<Rec> {
    let s = std::fs::read_to_string(format!("{}.records.tsv", out.display())).unwrap();
    let mut lines = s.lines();
    assert_eq!(lines.next(), Some("name\tstart\tlength"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

/// `psa query ARGS` run directly (no mpirun).
fn query(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(PSA)
        .arg("query")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `psa query ARGS` with `input` on its standard input.
fn query_stdin(dir: &Path, args: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = Command::new(PSA)
        .arg("query")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Written by a thread of its own: psa answers while it reads, and its answers must be read
    // meanwhile.
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &input));
    let o = child.wait_with_output().unwrap();
    // (A refusal may come before psa reads it all: a broken pipe then.)
    let _ = writer.join();
    o
}

/// Patterns of T: substrings (some lower-cased, some across a `$`), and absent ones.
fn patterns(t: &[u8], seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut v = vec![
        "ACG".to_string(),
        "nN".into(),
        "TTTTTTTTTTTTTTTTTTTTTTTTT".into(),
    ];
    for _ in 0..30 {
        if t.is_empty() {
            break;
        }
        let i = rng.range(0, t.len());
        let len = rng.range(1, 12).min(t.len() - i);
        let mut p = String::from_utf8_lossy(&t[i..i + len]).into_owned();
        if rng.chance(30) {
            p = p.to_lowercase();
        }
        if !p.contains(['*', '\n']) && !p.starts_with('-') && !p.is_empty() {
            v.push(p);
        }
    }
    v
}

/// Checks `psa query --locate` on `out` against a naive scan of `t` (patterns folded when
/// `fold`), hits named by `recs`.
fn check_queries(dir: &Path, out: &str, t: &[u8], recs: &[Rec], fold: bool, seed: u64) {
    let pats = patterns(t, seed);
    let mut args = vec![out, "--locate"];
    args.extend(pats.iter().map(|s| s.as_str()));
    let (ok, stdout, stderr) = query(dir, &args);
    assert!(ok, "query failed: {stderr}");
    let mut want = String::new();
    for p in &pats {
        let key = if fold { p.to_uppercase() } else { p.clone() };
        let hits = naive_find(t, key.as_bytes());
        want.push_str(&format!("{p}\t{}\n", hits.len()));
        for h in hits {
            let r = recs.partition_point(|r| r.1 <= h) - 1;
            want.push_str(&format!("{p}\t{}\t{}\n", recs[r].0, h - recs[r].1));
        }
    }
    assert_eq!(stdout, want, "query answers differ from a naive scan");
    // Counts alone, JSON, --max-hits and a patterns file agree with that.
    let listed = dir.join("patterns.txt");
    std::fs::write(&listed, pats.join("\r\n")).unwrap();
    let (ok, counts, _) = query(dir, &[out, "--patterns", "patterns.txt"]);
    assert!(ok);
    let want_counts: String = want
        .lines()
        .filter(|l| l.split('\t').count() == 2)
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(counts, want_counts, "--patterns");
    let (ok, json, _) = query(
        dir,
        &[out, "--json", "--locate", "--max-hits", "1", &pats[0]],
    );
    assert!(ok);
    assert!(
        json.starts_with(&format!("{{\"pattern\": \"{}\", \"count\": ", pats[0])),
        "{json}"
    );
    assert!(json.matches("\"record\"").count() <= 1, "{json}");
}

/// FASTA (CRLF, lower case, empty records, odd lines), its gzip and BGZF, and FASTQ at p = 1, 2, 3, 4, 7:
/// T on disk, the records table, the SA against the oracle, queries against a naive scan.
#[test]
fn sequence_input_builds_and_answers() {
    let dir = TempDir::new("seq-build");
    for (k, p) in [1usize, 2, 3, 4, 7].into_iter().enumerate() {
        let seed = 40 + k as u64;
        let fa = fasta(seed, 5, 400);
        let fq = fastq(seed, 6, 60);
        for (name, bytes, kind, extra) in [
            ("g.fa", fa.clone(), Kind::Fasta, None),
            ("g.fa.gz", fa.clone(), Kind::Fasta, Some("--read-piece=13")),
            ("g.bgzf.fa.gz", fa.clone(), Kind::Fasta, None),
            ("r.fq", fq.clone(), Kind::Fastq, None),
            ("g2.fa", fa.clone(), Kind::Fasta, Some("--revcomp")),
        ] {
            let on_disk = match (name.contains("bgzf"), name.ends_with(".gz")) {
                (true, _) => bgzf(&bytes, &[61, 7], 1),
                (false, true) => gzip(&bytes, 2),
                (false, false) => bytes.clone(),
            };
            std::fs::write(dir.join(name), on_disk).unwrap();
            let out = format!("{name}.p{p}.sa");
            let mut args = vec![name, "-o", &out, "-q", "--check"];
            args.extend(extra);
            let o = run_psa(p, &args, dir.path());
            assert!(o.success(), "{}", o.describe());
            let revcomp = extra == Some("--revcomp");
            let (t, recs) = reference(&[(bytes, kind)], &[name.into()], false, revcomp);
            let outp = dir.join(&out);
            let text = std::fs::read(format!("{}.text", outp.display())).unwrap();
            assert!(text == t, "{name} p={p}: OUT.text is not T");
            assert_eq!(records_tsv(&outp), recs, "{name} p={p}: records table");
            let width = 4;
            assert_eq!(read_sa(&outp, width), oracle(&t), "{name} p={p}: SA of T");
            check_queries(dir.path(), &out, &t, &recs, true, seed);
        }
    }
}

/// --keep-case keeps T's case and the patterns'; --format reads a file of any name.
#[test]
fn keep_case_and_format() {
    let dir = TempDir::new("seq-case");
    let fa = fasta(7, 4, 200);
    std::fs::write(dir.join("reads.txt"), &fa).unwrap();
    let o = run_psa(
        3,
        [
            "reads.txt",
            "--format",
            "fasta",
            "--keep-case",
            "-o",
            "k.sa",
            "-q",
        ],
        dir.path(),
    );
    assert!(o.success(), "{}", o.describe());
    let (t, recs) = reference(&[(fa, Kind::Fasta)], &["reads.txt".into()], true, false);
    assert!(std::fs::read(dir.join("k.sa.text")).unwrap() == t);
    assert_eq!(read_sa(&dir.join("k.sa"), 4), oracle(&t));
    check_queries(dir.path(), "k.sa", &t, &recs, false, 7);
}

/// Several raw files: one SA over their concatenation, each file a record; queries name the file
/// and read T from the inputs themselves (no OUT.text).
#[test]
fn raw_inputs_build_and_answer() {
    let dir = TempDir::new("seq-raw");
    let mut rng = Rng::new(3);
    let a: Vec<u8> = (0..300)
        .map(|_| b"abcab\n"[rng.below(6) as usize])
        .collect();
    let b: Vec<u8> = (0..1).map(|_| b'a').collect();
    let c: Vec<u8> = (0..500).map(|_| b"abc"[rng.below(3) as usize]).collect();
    for (n, d) in [("a.txt", &a), ("b.txt", &b), ("c.txt", &c)] {
        std::fs::write(dir.join(n), d).unwrap();
    }
    for p in [1, 3, 4] {
        let out = format!("abc{p}.sa");
        let o = run_psa(p, ["a.txt", "b.txt", "c.txt", "-o", &out, "-q"], dir.path());
        assert!(o.success(), "{}", o.describe());
        let t: Vec<u8> = [a.clone(), b.clone(), c.clone()].concat();
        assert_eq!(read_sa(&dir.join(&out), 4), oracle(&t), "p={p}");
        assert!(
            !dir.join(&format!("{out}.text")).exists(),
            "raw input got a text copy"
        );
        let recs: Vec<Rec> = vec![
            ("a.txt".into(), 0, 300),
            ("b.txt".into(), 300, 1),
            ("c.txt".into(), 301, 500),
        ];
        assert_eq!(records_tsv(&dir.join(&out)), recs);
        check_queries(dir.path(), &out, &t, &recs, false, p as u64);
    }
    // --keep-case means nothing to raw input: one warning (not one a pe), the same SA.
    let o = run_psa(
        3,
        ["a.txt", "c.txt", "--keep-case", "-o", "kept.sa"],
        dir.path(),
    );
    assert!(o.success(), "{}", o.describe());
    assert_eq!(
        o.stderr.matches("--keep-case has no effect").count(),
        1,
        "{}",
        o.describe()
    );
    assert_eq!(
        read_sa(&dir.join("kept.sa"), 4),
        oracle(&[a.clone(), c.clone()].concat())
    );
    // One raw file: offsets are text offsets; the index survives a move of the working directory.
    let o = run_psa(2, ["c.txt", "-q"], dir.path());
    assert!(o.success(), "{}", o.describe());
    let (ok, out, _) = query(
        Path::new("/"),
        &[dir.join("c.txt.sa").to_str().unwrap(), "abc"],
    );
    assert!(ok);
    assert_eq!(out, format!("abc\t{}\n", naive_find(&c, b"abc").len()));
}

/// Bad input: exit 3, one message naming the file and line, no output file left; at p = 1, 3, 7
/// (at 7 the long FASTQ record's lines lie on several pes).
#[test]
fn bad_input_names_file_and_line() {
    let dir = TempDir::new("seq-bad");
    let good = fasta(1, 3, 100);
    let mut truncated = gzip(&good, 1);
    truncated.truncate(truncated.len() / 2);
    let mut binary = b">x\nACGT\n".to_vec();
    binary.extend((0..64).map(|i| (i * 37) as u8));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "q.fq",
            b"@a\nACGT\n+\nIIII\n@b\nACG\n+\nII\n".to_vec(),
            "q.fq: line 8: the quality line has 2 characters but the sequence has 3",
        ),
        (
            "q2.fq",
            b"@a\nACGT\n+\nIIII\n@b\nAC".to_vec(),
            "q2.fq: line 6: the file ends inside the FASTQ record that starts at line 5",
        ),
        (
            "s.fa",
            b"ACGT\n>a\nAC\n".to_vec(),
            "s.fa: line 1: sequence before the first header",
        ),
        ("bin.fa", binary, "bin.fa: line 3: "),
        ("t.fa.gz", truncated, "t.fa.gz: line "),
        (
            "cr.fa",
            b">a one\rACGT\rAC\r>b\rGG\r".to_vec(),
            "cr.fa: line 1: a carriage return alone ends a line",
        ),
        (
            "h.fq",
            b"ACGT\n".to_vec(),
            "h.fq: line 1: a FASTQ record starts with '@'",
        ),
        (
            "long.fq",
            format!(
                "@a\nAC\n+\nII\n@b\n{}\n+\n{}\n",
                "A".repeat(300),
                "I".repeat(299)
            )
            .into_bytes(),
            "long.fq: line 8: the quality line has 299 characters but the sequence has 300",
        ),
        (
            "blank.fq",
            b"@a\nACGT\n+\nIIII\n\n@b\nA\n+\nI\n".to_vec(),
            "blank.fq: line 5: blank line or whitespace where a FASTQ record ('@') should start",
        ),
        (
            // The blank lines fill pes' ranges at p = 7; the record after them lies on the last.
            "blanks.fq",
            format!("@a\nAC\n+\nII\n{}@b\nA\n+\nI\n", "\n".repeat(200)).into_bytes(),
            "blanks.fq: line 5: blank line or whitespace where a FASTQ record ('@') should start",
        ),
    ];
    for (name, bytes, msg) in &cases {
        std::fs::write(dir.join(name), bytes).unwrap();
        for p in [1, 3, 7] {
            let o = run_psa(p, [*name, "-o", "bad.sa"], dir.path());
            assert_eq!(o.code, Some(3), "{name} p={p}: {}", o.describe());
            assert!(
                o.stderr.contains(msg),
                "{name} p={p}: wanted '{msg}' in:\n{}",
                o.stderr
            );
            assert_eq!(
                o.stderr.matches("error").count(),
                1,
                "{name} p={p}: one message:\n{}",
                o.stderr
            );
            let left: Vec<String> = dir
                .entries()
                .into_iter()
                .filter(|e| e.contains("bad.sa"))
                .collect();
            assert!(left.is_empty(), "{name} p={p}: left behind {left:?}");
        }
    }
    let (ok, _, err) = query(dir.path(), &["missing.sa", "ACGT"]);
    assert!(!ok && err.contains("missing.sa.meta"), "{err}");
    let o = run_psa(1, ["s.fa", "--format", "raw", "--revcomp"], dir.path());
    assert_eq!(o.code, Some(2), "{}", o.describe());
    assert!(
        o.stderr.contains("--revcomp needs sequence input"),
        "{}",
        o.stderr
    );
}

/// Record names are bytes (T4): a header that is not UTF-8, long enough to be cut by pe
/// boundaries, keeps its bytes in the records table and in `psa query --locate`'s answers (a raw
/// input's path too); JSON shows U+FFFD for them. Lines that end in a carriage return alone are
/// refused at every p, also where a pe's range ends just after one.
#[test]
fn names_are_kept_byte_for_byte() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("seq-names-bytes");
    let long: Vec<u8> = (0..300u32).map(|i| 0x80 + (i % 120) as u8).collect();
    let names: [&[u8]; 3] = [b"r\xff\xfe1", &long, b"plain"];
    let mut fa = Vec::new();
    for (k, name) in names.iter().enumerate() {
        fa.extend_from_slice(b">");
        fa.extend_from_slice(name);
        fa.extend_from_slice(b" desc \xe9\n");
        fa.extend_from_slice(format!("ACGT{}\n", "G".repeat(k)).as_bytes());
    }
    std::fs::write(dir.join("n.fa"), &fa).unwrap();
    let raw = std::ffi::OsStr::from_bytes(b"raw\xe9.txt");
    std::fs::write(dir.path().join(raw), b"ACGTACGT").unwrap();
    let table = |names: &[&[u8]], starts: &[(u64, u64)]| {
        let mut want = b"name\tstart\tlength\n".to_vec();
        for (name, (s, l)) in names.iter().zip(starts) {
            want.extend_from_slice(name);
            want.extend_from_slice(format!("\t{s}\t{l}\n").as_bytes());
        }
        want
    };
    for p in [1, 2, 3, 5] {
        let o = run_psa(p, ["-o", "n.sa", "n.fa"], dir.path());
        assert!(o.success(), "p={p}: {}", o.describe());
        let got = std::fs::read(dir.join("n.sa.records.tsv")).unwrap();
        assert_eq!(
            got,
            table(&names, &[(0, 4), (5, 5), (11, 6)]),
            "p={p}: {}",
            String::from_utf8_lossy(&got)
        );
        let o = Command::new(PSA)
            .args(["query", "--locate", "n.sa", "ACGTGG"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        assert_eq!(o.stdout, [&b"ACGTGG\t1\nACGTGG\tplain\t0\n"[..]].concat());
        let o = Command::new(PSA)
            .args(["query", "--locate", "n.sa", "ACGTG"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let want = [
            &b"ACGTG\t2\n"[..],
            b"ACGTG\t",
            &long,
            b"\t0\nACGTG\tplain\t0\n",
        ]
        .concat();
        let mut got: Vec<&[u8]> = o.stdout.split_inclusive(|&b| b == b'\n').collect();
        got[1..].sort();
        let mut want: Vec<&[u8]> = want.split_inclusive(|&b| b == b'\n').collect();
        want[1..].sort();
        assert_eq!(got, want, "p={p}: {}", String::from_utf8_lossy(&o.stdout));
        let o = Command::new(PSA)
            .args(["query", "--locate", "--json", "n.sa", "ACGT"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let out = String::from_utf8(o.stdout).expect("JSON is UTF-8");
        assert!(out.contains("\"record\": \"r\u{fffd}\u{fffd}1\""), "{out}");
        // A raw input's path as its name.
        let mut c = common::mpirun(p, PSA);
        c.args(["-q", "-o", "r.sa"])
            .arg(raw)
            .current_dir(dir.path());
        assert!(c.output().unwrap().status.success());
        let got = std::fs::read(dir.join("r.sa.records.tsv")).unwrap();
        assert_eq!(got, table(&[b"raw\xe9.txt"], &[(0, 8)]));
        let o = Command::new(PSA)
            .args(["query", "--locate", "r.sa", "GTAC"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(o.stdout, b"GTAC\t1\nGTAC\traw\xe9.txt\t2\n");
    }
    // Carriage returns alone: refused wherever the pes' ranges fall.
    for (k, cr) in [&b">a one\rACGT"[..], b">a\rACGTACGT\r", b"@r\rAC\r+\rII\r"]
        .iter()
        .enumerate()
    {
        let name = format!("cr{k}.{}", if cr[0] == b'@' { "fq" } else { "fa" });
        std::fs::write(dir.join(&name), cr).unwrap();
        for p in 1..=6 {
            let o = run_psa(p, ["-o", "cr.sa", &name], dir.path());
            o.assert_error(
                3,
                "a carriage return alone ends a line",
                &format!("{name} p={p}"),
            );
        }
    }
}

/// A raw input whose name is not UTF-8 is found again by `psa query`; a damaged index (an SA
/// entry not below n) is reported as damaged, with exit status 3 (bad input), not as an internal error.
#[test]
fn query_reopens_any_name_and_reports_damage() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("query_damage");
    let t = b"abracadabra-abracadabra".to_vec();
    let name = std::ffi::OsStr::from_bytes(b"t\xff.txt");
    std::fs::write(dir.path().join(name), &t).unwrap();
    let mut c = common::mpirun(1, PSA);
    c.args(["-o", "t.sa"]).arg(name).current_dir(dir.path());
    let built = c.output().unwrap();
    assert!(built.status.success(), "{built:?}");
    let (ok, out, err) = query(dir.path(), &["t.sa", "abra"]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        format!("abra\t{}\n", naive_find(&t, b"abra").len()),
        "{err}"
    );

    // Every entry n (not below n): the search reads one at once. (Its modification time put
    // back: else the index would refuse the SA as not its build's before reading an entry.)
    let sa = dir.join("t.sa");
    let width = std::fs::metadata(&sa).unwrap().len() as usize / t.len();
    let n = (t.len() as u64).to_le_bytes();
    let damaged: Vec<u8> = (0..t.len()).flat_map(|_| n[..width].to_vec()).collect();
    let built = mtime(&sa);
    std::fs::write(&sa, damaged).unwrap();
    set_mtime(&sa, built);
    let o = Command::new(PSA)
        .args(["query", "t.sa", "abra"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("damaged") && !err.contains("internal"),
        "{err}"
    );

    // The metadata itself damaged: a byte changed (n no longer the inputs' sizes, the SA grown
    // to match), cut short, or followed by more: "damaged", exit 3, never a panic.
    let build = |extra: &[&str]| {
        let mut c = common::mpirun(1, PSA);
        c.args(["-q", "-o", "a.sa", "a.txt"])
            .args(extra)
            .current_dir(dir.path());
        let built = c.output().unwrap();
        assert!(built.status.success(), "{built:?}");
        String::from_utf8_lossy(&built.stderr).into_owned()
    };
    std::fs::write(dir.join("a.txt"), b"abc").unwrap();
    let meta = dir.join("a.sa.meta");
    let good = {
        build(&[]);
        std::fs::read(&meta).unwrap()
    };
    let mut grown = good.clone();
    grown[9] = 4; // n, just after the magic and the version
    let damage: [(&str, Vec<u8>); 3] = [
        ("n changed", grown),
        ("cut short", good[..good.len() - 3].to_vec()),
        ("more after it", [&good[..], b"x"].concat()),
    ];
    for (what, bytes) in damage {
        std::fs::write(&meta, &bytes).unwrap();
        if what == "n changed" {
            let mut sa = std::fs::read(dir.join("a.sa")).unwrap();
            sa.extend(3u32.to_le_bytes());
            std::fs::write(dir.join("a.sa"), sa).unwrap();
        }
        let (ok, _, err) = query(dir.path(), &["a.sa", "zz"]);
        assert!(
            !ok && err.contains("is damaged") && !err.contains("panicked"),
            "{what}: {err}"
        );
        build(&[]);
    }

    // A raw input edited in place to the same size: answered, with a warning that it changed.
    let (ok, _, err) = query(dir.path(), &["a.sa", "b"]);
    assert!(ok && !err.contains("warning"), "{err}");
    std::fs::write(dir.join("a.txt"), b"xyz").unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(dir.join("a.txt"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    let (ok, _, err) = query(dir.path(), &["a.sa", "b"]);
    assert!(
        ok && err.contains("was modified after the index was built"),
        "{err}"
    );
}

/// Patterns that are empty match nowhere useful: an empty one on the command line is refused
/// (exit 2), empty reads of a patterns file and blank lines before its first record are skipped,
/// and on a sequence index spaces and tabs around a pattern are no part of it.
#[test]
fn query_skips_empty_and_padded_patterns() {
    let dir = TempDir::new("query_empty");
    dir.write("g.fa", b">a\nACGTACGTTT\n>b\nGGACGT\n");
    let mut c = common::mpirun(1, PSA);
    c.args(["-o", "g.sa", "g.fa"]).current_dir(dir.path());
    let built = c.output().unwrap();
    assert!(built.status.success(), "{built:?}");

    let o = Command::new(PSA)
        .args(["query", "g.sa", ""])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("empty pattern"), "{err}");

    // Two blank lines, an empty read, a read: only the read is answered.
    dir.write("r.fq", b"\n\n@e\n\n+\n\n@r\nACGT\n+\nIIII\n");
    let (ok, out, err) = query(dir.path(), &["g.sa", "--patterns", "r.fq"]);
    assert!(ok, "{err}");
    assert_eq!(out, "ACGT\t3\n", "{err}");

    dir.write("p.txt", b"ACGT \n\tGGA\n \n");
    let (ok, out, err) = query(dir.path(), &["g.sa", "--patterns", "p.txt"]);
    assert!(ok, "{err}");
    assert_eq!(out, "ACGT\t3\nGGA\t1\n", "{err}");

    // Only whitespace on the command line is as empty as "" on a sequence index.
    let (ok, _, err) = query(dir.path(), &["g.sa", "ACGT", " \t"]);
    assert!(!ok && err.contains("empty pattern"), "{err}");

    // A file's format is its name's (as the build's inputs), or --patterns-format's: a file
    // named as lines that starts with '>' is refused on a sequence index unless it says how to
    // read it; '-' reads standard input.
    dir.write("gt.txt", b">b\nGGA\n");
    let (ok, _, err) = query(dir.path(), &["g.sa", "--patterns", "gt.txt"]);
    assert!(!ok && err.contains("--patterns-format"), "{err}");
    let (ok, out, err) = query(
        dir.path(),
        &["g.sa", "--patterns", "gt.txt", "--patterns-format", "lines"],
    );
    assert!(ok, "{err}");
    assert_eq!(out, ">b\t0\nGGA\t1\n", "{err}");
    let (ok, out, err) = query(
        dir.path(),
        &["g.sa", "--patterns", "gt.txt", "--patterns-format", "fasta"],
    );
    assert!(ok, "{err}");
    assert_eq!(out, "GGA\t1\n", "{err}");
    let o = query_stdin(dir.path(), &["g.sa", "--patterns", "-"], b"GGA\nACGT\n");
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "GGA\t1\nACGT\t3\n");

    // Reads on standard input without --patterns-format: refused (read as lines they would
    // all miss), and a file of lines named as FASTA is told how to be read as lines.
    let o = query_stdin(
        dir.path(),
        &["g.sa", "--patterns", "-"],
        b"@r\nGGA\n+\nIII\n",
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--patterns-format"),
        "{o:?}"
    );
    dir.write("lines.fa", b"GGA\nACGT\n");
    let (ok, _, err) = query(dir.path(), &["g.sa", "--patterns", "lines.fa"]);
    assert!(!ok && err.contains("--patterns-format lines"), "{err}");

    // --max-hits means nothing without --locate: refused.
    let o = Command::new(PSA)
        .args(["query", "g.sa", "ACGT", "--max-hits", "1"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("give --locate"));

    // A reader that leaves early (| head -1) ends the answers quietly.
    dir.write("many.txt", &b"ACGT\n".repeat(200_000));
    let o = Command::new("bash")
        .args([
            "-c",
            &format!("set -o pipefail; '{PSA}' query g.sa --patterns many.txt | head -1"),
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ACGT\t3\n");
    assert_eq!(String::from_utf8_lossy(&o.stderr), "", "{o:?}");

    // Records that share a name: the build warns once.
    dir.write("d.fa", b">a\nACGT\n>b\nG\n>a\nGG\n>a\nT\n");
    let mut c = common::mpirun(3, PSA);
    c.args(["-o", "d.sa", "d.fa"]).current_dir(dir.path());
    let built = c.output().unwrap();
    let err = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{err}");
    assert_eq!(
        err.matches("have the name of an earlier one").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("2 record(s)") && err.contains("'a', record 3"),
        "{err}"
    );

    // A raw input whose name holds a tab, a pattern holding a backslash: the TSV escapes both
    // (here and in the records table), each line keeps its fields.
    dir.write("a\tb.txt", b"x\\y x\\y");
    let mut c = common::mpirun(2, PSA);
    c.args(["-o", "t.sa", "a\tb.txt"]).current_dir(dir.path());
    let built = c.output().unwrap();
    assert!(built.status.success(), "{built:?}");
    let (ok, out, err) = query(dir.path(), &["t.sa", "--locate", "x\\y"]);
    assert!(ok, "{err}");
    assert_eq!(
        out, "x\\\\y\t2\nx\\\\y\ta\\tb.txt\t0\nx\\\\y\ta\\tb.txt\t4\n",
        "{err}"
    );
    let table = std::fs::read_to_string(dir.join("t.sa.records.tsv")).unwrap();
    assert_eq!(table, "name\tstart\tlength\na\\tb.txt\t0\t7\n");

    // A raw index built over a sequence index says once that the old text is no longer used,
    // and leaves it; not when that text is the new index's input (it is used), nor beside a
    // raw index (not psa's text).
    let text = std::fs::read(dir.join("g.sa.text")).unwrap();
    let unused = "the text of the sequence index this raw one replaced, is not used";
    dir.write("raw.txt", b"GGACGT");
    let o = run_psa(2, ["-o", "g.sa", "raw.txt"], dir.path());
    assert!(o.success(), "{}", o.describe());
    assert_eq!(o.stderr.matches(unused).count(), 1, "{}", o.describe());
    assert_eq!(std::fs::read(dir.join("g.sa.text")).unwrap(), text);
    let (ok, out, err) = query(dir.path(), &["g.sa", "GGA"]);
    assert!(ok && out == "GGA\t1\n", "{out} {err}");
    let o = run_psa(2, ["-o", "g.sa", "raw.txt"], dir.path());
    assert!(
        o.success() && !o.stderr.contains(unused),
        "{}",
        o.describe()
    );
    let mut c = common::mpirun(1, PSA);
    c.args(["-o", "h.sa", "g.fa"]).current_dir(dir.path());
    assert!(c.output().unwrap().status.success());
    let o = run_psa(2, ["-o", "h.sa", "h.sa.text"], dir.path());
    assert!(
        o.success() && !o.stderr.contains(unused),
        "{}",
        o.describe()
    );
    let (ok, out, err) = query(dir.path(), &["h.sa", "GGA"]);
    assert!(ok && out == "GGA\t1\n", "{out} {err}");
}

// ------------------------------------------------------------------------------------------------
// The index's files as one build's, forged metadata, streamed patterns, capped threads

/// `psa query ARGS` in `dir` within `secs` seconds (a run that takes longer is killed and
/// counts as a hang).
fn query_within(dir: &Path, args: &[&str], secs: u64) -> common::Outcome {
    let mut c = Command::new(PSA);
    c.arg("query").args(args).current_dir(dir);
    common::run_with_timeout(c, dir, std::time::Duration::from_secs(secs))
}

/// Builds `out` from `input` on p pes (quietly), asserting that it worked.
fn build(dir: &Path, p: usize, input: &str, out: &str) {
    let o = run_psa(p, ["-q", "-o", out, input], dir);
    assert!(o.success(), "{}", o.describe());
}

/// Sets `path`'s modification time.
fn set_mtime(path: &Path, t: std::time::SystemTime) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(t).unwrap();
}

/// `path`'s modification time.
fn mtime(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// Overwrites the bytes at `offset` of `path` in place (same size, new modification time).
fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

/// `fa` with every sequence letter complemented: the same records and n, other letters.
fn complemented(fa: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in fa.split_inclusive(|&b| b == b'\n') {
        match line.first() {
            Some(b'>') => out.extend_from_slice(line),
            _ => out.extend(line.iter().map(|&b| seq_common::complement(b))),
        }
    }
    out
}

/// What `psa query` answers for `pats` (TSV counts) by a naive scan of `t`, patterns folded.
fn naive_counts(t: &[u8], pats: &[&str]) -> String {
    (pats.iter())
        .map(|p| {
            format!(
                "{p}\t{}\n",
                naive_find(t, p.to_uppercase().as_bytes()).len()
            )
        })
        .collect()
}

/// The index's files must be of one build (T1): metadata, SA or text of another build of the
/// same n (SA copied with its own modification time kept, as `cp -p` does), the text edited in
/// place, SA entries swapped in place: each refused (exit 1) naming the file that does not
/// belong; the index itself answers as a naive scan does. At p = 1 and 3.
#[test]
fn query_refuses_the_files_of_another_build() {
    let dir = TempDir::new("mixed_builds");
    let fa = fasta(21, 4, 300);
    dir.write("a.fa", &fa);
    dir.write("b.fa", &complemented(&fa));
    let (t, _) = reference(&[(fa.clone(), Kind::Fasta)], &["a.fa".into()], false, false);
    let pats = ["ACG", "TTA", "GATT", "C", "AC$"];
    let want = naive_counts(&t, &pats);
    let mut args = vec!["x.sa"];
    args.extend(pats);
    let refused = |what: &str, file: &str| {
        let o = query_within(dir.path(), &args, 60);
        assert_eq!(o.code, Some(3), "{what}: {}", o.describe());
        let named = format!("'{file}' does not belong to the index 'x.sa.meta'");
        assert!(o.stderr.contains(&named), "{what}: {}", o.describe());
        assert!(o.stdout.is_empty(), "{what}: answered: {}", o.describe());
    };
    // A fresh index each time (a build over a side file changed so would refuse it unforced).
    let fresh = |p: usize| {
        for f in ["x.sa", "x.sa.text", "x.sa.records.tsv", "x.sa.meta"] {
            let _ = std::fs::remove_file(dir.join(f));
        }
        build(dir.path(), p, "a.fa", "x.sa");
    };
    for p in [1, 3] {
        build(dir.path(), p, "b.fa", "b.sa");
        for (theirs, ours, named) in [
            ("b.sa.meta", "x.sa.meta", "x.sa"),
            ("b.sa", "x.sa", "x.sa"),
            ("b.sa.text", "x.sa.text", "x.sa.text"),
        ] {
            fresh(p);
            let o = query_within(dir.path(), &args, 60);
            assert!(o.success() && o.stdout == want, "p = {p}: {}", o.describe());
            std::fs::copy(dir.join(theirs), dir.join(ours)).unwrap();
            set_mtime(&dir.join(ours), mtime(&dir.join(theirs)));
            refused(&format!("p = {p}: {ours} from another build"), named);
        }
        fresh(p);
        let flip = if t[5] == b'A' { b"C" } else { b"A" };
        write_at(&dir.join("x.sa.text"), 5, flip);
        refused(&format!("p = {p}: OUT.text edited"), "x.sa.text");
        fresh(p);
        let sa = dir.join("x.sa");
        let (before, bytes) = (mtime(&sa), std::fs::read(&sa).unwrap());
        write_at(&sa, 0, &[&bytes[4..8], &bytes[..4]].concat());
        set_mtime(&sa, before + std::time::Duration::from_secs(1));
        refused(&format!("p = {p}: SA entries swapped"), "x.sa");
    }
}

/// Rebuilds alternating two inputs of the same length race queries of the index (the build
/// renames its files one by one): every query answers as one of the two indexes does, or
/// refuses (exit 1) saying the files are not of one build; never a mix of both.
#[test]
fn queries_during_rebuilds_answer_one_build_or_refuse() {
    let dir = TempDir::new("rebuild_race");
    let fa = fasta(33, 3, 2000);
    let fb = complemented(&fa);
    dir.write("a.fa", &fa);
    dir.write("b.fa", &fb);
    let text = |f: &[u8]| reference(&[(f.to_vec(), Kind::Fasta)], &["x".into()], false, false).0;
    let pats = ["ACGT", "TTG", "GA", "CCA", "TACG", "G", "AAT"];
    let answers = [
        naive_counts(&text(&fa), &pats),
        naive_counts(&text(&fb), &pats),
    ];
    assert_ne!(answers[0], answers[1]);
    build(dir.path(), 1, "a.fa", "x.sa");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut refusals, mut answered) = (0, 0);
    std::thread::scope(|s| {
        let builder = s.spawn(|| {
            for k in 0..16 {
                build(dir.path(), 1, ["b.fa", "a.fa"][k % 2], "x.sa");
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let mut args = vec!["x.sa"];
        args.extend(pats);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let o = query_within(dir.path(), &args, 60);
            match o.code {
                Some(0) => {
                    assert!(
                        answers.contains(&o.stdout),
                        "a mixed answer: {}",
                        o.describe()
                    );
                    answered += 1;
                }
                _ => {
                    let clear = o.stderr.contains("does not belong to the index")
                        || o.stderr.contains("was replaced while the index was opened");
                    assert!(o.code == Some(3) && clear, "{}", o.describe());
                    refusals += 1;
                }
            }
        }
        builder.join().unwrap();
    });
    eprintln!("{answered} queries answered, {refusals} refused during the rebuilds");
    assert!(answered > 0, "no query answered");
}

/// Forged and damaged metadata (T9, T13): the magic and a version followed by lengths of
/// terabytes, random bytes, every cut of a true file, every byte of it changed: exit 1 with a
/// clear message (damaged, not a psa index file, a newer psa only for a sane beginning, or a
/// file that does not belong), or, where a change left a valid index (a record's name), an
/// answer; never a panic, an abort or a hang.
#[test]
fn forged_metadata_is_a_clear_error() {
    let dir = TempDir::new("forged_meta");
    dir.write("g.fa", b">a\nACGTACGTTT\n>b\nGGACGT\n");
    build(dir.path(), 1, "g.fa", "g.sa");
    let meta = dir.join("g.sa.meta");
    let good = std::fs::read(&meta).unwrap();
    let huge = |version: u8| {
        // version, n = 18, width 4, three flags, then a vector of 2^56 inputs: 30 bytes in all.
        let mut v = b"PSAINDEX".to_vec();
        v.extend([version, 18, 4, 1, 0, 0, 0xfd]);
        v.extend(&(1u64 << 56).to_le_bytes());
        v.extend([0u8; 7]);
        v
    };
    let mut rng = Rng::new(5);
    let mut cases: Vec<(String, Vec<u8>)> = vec![];
    for version in 1..=3 {
        cases.push((format!("version {version}, huge lengths"), huge(version)));
    }
    cases.push(("empty".into(), vec![]));
    cases.push(("another magic".into(), b"PSAINDEY\x03\x12\x04".to_vec()));
    for len in [0, 1, 5, 22, 64, 300] {
        let mut v = b"PSAINDEX".to_vec();
        v.extend((0..len).map(|_| rng.below(256) as u8));
        cases.push((format!("{len} random bytes"), v));
    }
    for cut in 0..good.len() {
        cases.push((format!("cut at {cut}"), good[..cut].to_vec()));
    }
    for at in 8..good.len() {
        let mut v = good.clone();
        v[at] ^= 1 << rng.below(8);
        cases.push((format!("byte {at} changed"), v));
    }
    let clear = [
        "is damaged",
        "is not a psa index file",
        "does not belong to the index",
        "newer psa",
    ];
    for (what, bytes) in &cases {
        std::fs::write(&meta, bytes).unwrap();
        let o = query_within(dir.path(), &["g.sa", "ACGT"], 30);
        assert!(
            !o.timed_out && !o.stderr.contains("panicked"),
            "{what}: {}",
            o.describe()
        );
        match o.code {
            Some(0) => assert!(what.contains("changed"), "{what}: {}", o.describe()),
            Some(3) => assert!(
                clear.iter().any(|c| o.stderr.contains(c)),
                "{what}: {}",
                o.describe()
            ),
            _ => panic!("{what}: {}", o.describe()),
        }
        if o.stderr.contains("newer psa") {
            assert!(
                what.contains("changed"),
                "{what}: named newer: {}",
                o.describe()
            );
        }
    }
}

/// `--threads` above the cores this process may run on is capped, with a warning (T6): a
/// query with 20000 asked answers at once.
#[test]
fn query_threads_are_capped() {
    let dir = TempDir::new("query_threads");
    dir.write("g.fa", b">a\nACGTACGTTT\n>b\nGGACGT\n");
    build(dir.path(), 1, "g.fa", "g.sa");
    let o = query_within(dir.path(), &["g.sa", "--threads", "20000", "ACGT"], 30);
    assert!(o.success(), "{}", o.describe());
    assert_eq!(o.stdout, "ACGT\t3\n");
    assert!(
        o.stderr.contains("--threads 20000 is more than the"),
        "{}",
        o.describe()
    );
}

/// A patterns file of many batches (T12), as lines, gzip lines, gzip FASTQ and standard input:
/// the same answers, in order, as a naive scan; several files' worth of patterns in one go.
#[test]
fn patterns_files_are_answered_in_batches() {
    let dir = TempDir::new("pattern_batches");
    let fa = fasta(8, 6, 3000);
    dir.write("g.fa", &fa);
    build(dir.path(), 2, "g.fa", "g.sa");
    let (t, _) = reference(&[(fa, Kind::Fasta)], &["g.fa".into()], false, false);
    // 600 distinct patterns (some long), 70000 drawn from them: more than four batches of
    // patterns and more than one read of the file.
    let mut rng = Rng::new(9);
    let distinct: Vec<String> = (0..600)
        .map(|_| {
            let len = if rng.chance(10) {
                rng.range(40, 200)
            } else {
                rng.range(1, 9)
            };
            let i = rng.range(0, t.len() - len);
            String::from_utf8_lossy(&t[i..i + len]).replace(['$', '*', '-'], "A")
        })
        .collect();
    let counts: Vec<usize> = (distinct.iter())
        .map(|p| naive_find(&t, p.as_bytes()).len())
        .collect();
    let drawn: Vec<usize> = (0..70_000).map(|_| rng.below(600) as usize).collect();
    let want: String = (drawn.iter())
        .map(|&k| format!("{}\t{}\n", distinct[k], counts[k]))
        .collect();
    let lines: String = drawn
        .iter()
        .map(|&k| format!("{}\n", distinct[k]))
        .collect();
    assert!(lines.len() > 1 << 20, "{} bytes of patterns", lines.len());
    let fq: String = (drawn.iter().enumerate())
        .map(|(i, &k)| {
            let p = &distinct[k];
            format!("@r{i}\n{p}\n+\n{}\n", "I".repeat(p.len()))
        })
        .collect();
    dir.write("p.txt", lines.as_bytes());
    dir.write("p.txt.gz", &gzip(lines.as_bytes(), 3));
    dir.write("p.fq.gz", &gzip(fq.as_bytes(), 1));
    for file in ["p.txt", "p.txt.gz", "p.fq.gz"] {
        let o = query_within(dir.path(), &["g.sa", "--patterns", file], 120);
        assert!(o.success(), "{file}: {}", o.describe());
        assert!(o.stdout == want, "{file}: answers differ from a naive scan");
    }
    let o = query_stdin(dir.path(), &["g.sa", "--patterns", "-"], lines.as_bytes());
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout) == want, "standard input");
}

/// A patterns file far larger than memory allows is read a batch at a time (T12): 512 MiB of
/// patterns (a gzip of half a MiB) answered under a 1 GiB address-space limit; and a query out
/// of memory (one pattern larger than the limit) says so as a query's error, exit 1, without
/// pes, phases or nodes.
#[test]
fn patterns_are_read_in_bounded_memory() {
    let dir = TempDir::new("pattern_memory");
    dir.write("g.fa", b">a\nACGTACGTTT\n>b\nGGACGT\n");
    build(dir.path(), 1, "g.fa", "g.sa");
    let line = format!("{}\n", "ACGT".repeat(1024));
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    for _ in 0..(512 << 20) / line.len() {
        std::io::Write::write_all(&mut z, line.as_bytes()).unwrap();
    }
    dir.write("big.txt.gz", &z.finish().unwrap());
    let limited = |args: &[&str]| {
        let mut c = Command::new("prlimit");
        c.arg(format!("--as={}", 1u64 << 30))
            .args([PSA, "query", "--threads", "2", "g.sa"])
            .args(args)
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null());
        common::run_with_timeout(c, dir.path(), std::time::Duration::from_secs(180))
    };
    let o = limited(&["--patterns", "big.txt.gz"]);
    assert!(o.success(), "{}", o.describe());
    // One line of 1.5 GiB: held whole, it cannot fit.
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    for _ in 0..(1536 << 20) / 4096 {
        std::io::Write::write_all(&mut z, "ACGT".repeat(1024).as_bytes()).unwrap();
    }
    dir.write("long.txt.gz", &z.finish().unwrap());
    let o = limited(&["--patterns", "long.txt.gz"]);
    assert_eq!(o.code, Some(4), "{}", o.describe());
    assert!(
        o.stderr.contains("psa query: error") && o.stderr.contains("out of memory"),
        "{}",
        o.describe()
    );
    for wrong in ["phase", "pes", "nodes", "memory allocation of"] {
        assert!(
            !o.stderr.contains(wrong),
            "says '{wrong}': {}",
            o.describe()
        );
    }
}

/// An index of format version 2 (no stamps; here the current one's without them) is still
/// read, with a warning that its files cannot be checked to be of one build; a build over it
/// recognises its text and records table by their sizes and replaces them.
#[test]
fn an_older_index_is_read_with_a_warning() {
    let dir = TempDir::new("older_index");
    dir.write("g.fa", b">a\nACGTACGTTT\n>b\nGGACGT\n");
    build(dir.path(), 1, "g.fa", "g.sa");
    let meta_path = dir.join("g.sa.meta");
    let mut meta = psa::io::index::IndexMeta::read(&meta_path).unwrap();
    assert!(meta.stamps.is_some());
    meta.version = 2;
    meta.stamps = None;
    let mut bytes = meta.encode();
    // Version 2's layout is version 4's without the stamps (None), the token width (0) and the
    // separator (None).
    let end = bytes.split_off(bytes.len() - 3);
    assert_eq!(end, [0, 0, 0], "None, 0 and None end version 4's encoding");
    std::fs::write(&meta_path, &bytes).unwrap();
    let (ok, out, err) = query(dir.path(), &["g.sa", "ACGT"]);
    assert!(ok && out == "ACGT\t3\n", "{out} {err}");
    assert!(
        err.contains("format version 2, which keeps no stamps"),
        "{err}"
    );
    let o = run_psa(3, ["-o", "g.sa", "g.fa"], dir.path());
    assert!(o.success(), "{}", o.describe());
    let (ok, out, err) = query(dir.path(), &["g.sa", "ACGT"]);
    assert!(ok && out == "ACGT\t3\n" && err.is_empty(), "{out} {err}");
}
