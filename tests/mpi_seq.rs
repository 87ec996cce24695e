//! `psa::io::seq::load` against a plain reference (tests/seq_common): FASTA and FASTQ files,
//! plain, gzip (one member and many) and BGZF (read by every pe, or streamed where its blocks do
//! not chain), several inputs with raw files among them, reverse
//! complements, with pe boundaries falling inside headers, line breaks (CRLF) and records, on
//! every pe at p = 1, 2, 3, 4, 7 (see `common::harness`). Every pe compares its block of T with
//! the reference's; pe 0 compares the records.

mod common;
mod seq_common;

use std::path::{Path, PathBuf};

use common::harness::mpi_test;
use common::Rng;
use psa::comm::Comm;
use psa::io::seq::{load, Format, InputFile, SeqOptions};
use psa::Layout;
use seq_common::{bgzf, fasta, fastq, gzip, reference, Kind};

/// One case: files (name, bytes, kind), options, gzip piece size.
struct Case {
    files: Vec<(String, Vec<u8>, Kind)>,
    opts: SeqOptions,
    piece: usize,
}

/// Writes the case's files (pe 0), loads them on every pe and compares with the reference.
fn check(comm: &Comm, tag: &str, case: &Case) {
    let paths: Vec<PathBuf> = case
        .files
        .iter()
        .map(|(name, _, _)| PathBuf::from(format!("{tag}-{name}")))
        .collect();
    if comm.rank() == 0 {
        for (p, (name, bytes, _)) in paths.iter().zip(&case.files) {
            // Names with "bgzf" in BGZF of small blocks, many to a pe's range; with "bgzf-big" in
            // stored blocks of bgzip's size, each over whole pes' ranges and ending up to a
            // block's length past a range.
            let data = match (name.contains("bgzf"), name.ends_with(".gz")) {
                _ if name.contains("bgzf-big") => bgzf(bytes, &[65280], 0),
                (true, _) => bgzf(bytes, &[1 + bytes.len() % 37, 13, 2], 1),
                (false, true) => gzip(bytes, 1 + bytes.len() % 3),
                (false, false) => bytes.clone(),
            };
            std::fs::write(p, data).unwrap();
        }
    }
    comm.barrier();
    for (p, (name, bytes, _)) in paths.iter().zip(&case.files) {
        if name.contains("bgzf") {
            read_in_parallel(comm, p, bytes);
        }
    }
    verify(comm, tag, &paths, case);
}

/// The BGZF file at `path` is read by every pe (not streamed): the pes' parts, in order, are
/// `plain`, each with the byte before it.
fn read_in_parallel(comm: &Comm, path: &Path, plain: &[u8]) {
    let size = std::fs::metadata(path).unwrap().len();
    let part = psa::internals::bgzf_read_part(comm, path, size)
        .unwrap()
        .unwrap_or_else(|| panic!("{}: not read in parallel", path.display()));
    let at = part.offset as usize;
    assert!(
        plain.get(at..at + part.bytes.len()) == Some(&part.bytes[..]),
        "{}: pe {}'s part at {at}",
        path.display(),
        comm.rank()
    );
    assert_eq!(part.before, at.checked_sub(1).map(|k| plain[k]));
    assert_eq!(
        comm.all_reduce_sum(part.bytes.len() as u64),
        plain.len() as u64
    );
}

/// Loads the files at `paths` (written by pe 0) on every pe and compares with the reference of
/// the case's plain bytes.
fn verify(comm: &Comm, tag: &str, paths: &[PathBuf], case: &Case) {
    comm.barrier();
    let files = InputFile::open_all(comm, paths, &case.opts).unwrap();
    let got = load(comm, &files, &case.opts, case.piece)
        .unwrap_or_else(|e| panic!("{tag}: load failed: {e}"));
    let plain: Vec<(Vec<u8>, Kind)> = case.files.iter().map(|(_, b, k)| (b.clone(), *k)).collect();
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let (t, recs) = reference(&plain, &names, case.opts.keep_case, case.opts.revcomp);
    let me = comm.rank();
    assert_eq!(
        got.layout,
        Layout::block(t.len(), comm.size()),
        "{tag}: layout"
    );
    let want = &t[got.layout.start(me)..got.layout.end(me)];
    assert!(
        got.text == want,
        "{tag}: pe {me}'s block of T differs\n got: {:?}\nwant: {:?}",
        String::from_utf8_lossy(&got.text),
        String::from_utf8_lossy(want)
    );
    if me == 0 {
        let got_recs: Vec<_> = got
            .records
            .iter()
            .map(|r| {
                (
                    String::from_utf8_lossy(&r.name).into_owned(),
                    r.start,
                    r.len,
                )
            })
            .collect();
        assert_eq!(got_recs, recs, "{tag}: records");
    } else {
        assert!(got.records.is_empty());
    }
    comm.barrier();
}

fn kind_of(name: &str) -> Kind {
    match Format::from_name(std::path::Path::new(name)) {
        Format::Raw => Kind::Raw,
        Format::Fasta => Kind::Fasta,
        Format::Fastq => Kind::Fastq,
    }
}

fn one(name: &str, bytes: Vec<u8>, opts: SeqOptions, piece: usize) -> Case {
    Case {
        files: vec![(name.to_string(), bytes, kind_of(name))],
        opts,
        piece,
    }
}

/// Single FASTA and FASTQ files, plain, gzip and BGZF, small and a little larger, every seed
/// cutting them at other places; the gzip ones read a few bytes at a time.
#[test]
fn single_files_match_the_reference() {
    mpi_test(|comm| {
        for seed in 0..24u64 {
            let (records, len) = [(1, 5), (3, 40), (6, 300), (2, 2000)][seed as usize % 4];
            let fa = fasta(seed, records, len);
            let fq = fastq(seed, records + 2, len.min(150));
            let piece = [1, 7, 64, 1 << 20][seed as usize % 4];
            let keep_case = seed % 5 == 0;
            let opts = SeqOptions {
                keep_case,
                ..SeqOptions::default()
            };
            for (name, bytes) in [
                ("a.fa", &fa),
                ("a.fa.gz", &fa),
                ("a.bgzf.fa.gz", &fa),
                ("b.fq", &fq),
                ("b.fastq.gz", &fq),
                ("b.bgzf.fq.gz", &fq),
            ] {
                let case = one(name, bytes.clone(), opts.clone(), piece);
                check(comm, &format!("s{seed}"), &case);
            }
        }
        // Files of a few bgzip-sized blocks: at p > 1 some pes' ranges hold no block start, and
        // a pe reads up to a block past its range to finish its last one.
        for (name, bytes) in [
            ("c.bgzf-big.fa.gz", fasta(9, 90, 10000)),
            ("d.bgzf-big.fq.gz", fastq(9, 3000, 150)),
        ] {
            assert!(bytes.len() > 3 * 65280, "{name}: {} bytes", bytes.len());
            check(
                comm,
                "big",
                &one(name, bytes, SeqOptions::default(), 1 << 20),
            );
        }
    });
}

/// Corner files: empty, only a header, only blank lines, one record without a line break,
/// headers with no name, one-byte lines, a name and a read each longer than a pe's range, FASTQ
/// files that end in blank lines (after an empty read; over several pes' ranges); each plain, as a
/// gzip stream and as BGZF.
#[test]
fn corner_files() {
    mpi_test(|comm| {
        let cases: &[(&str, &[u8])] = &[
            ("e.fa", b""),
            ("e.fq", b""),
            ("h.fa", b">"),
            ("h2.fa", b">only\n"),
            ("b.fa", b"\n\n\r\n"),
            ("n.fa", b">x\nACGT"),
            ("m.fa", b">\n>\n>\nA\n>\n"),
            ("o.fa", b">r\nA\nc\nG\nt\nN\n"),
            ("q.fq", b"@\n\n+\n\n"),
            ("q2.fq", b"@r\nA\n+\n!"),
            ("t.fq", b"@r\nAC\n+\nII\n\n \r\n\n"),
            ("t2.fq", b"@\n\n+\n\n\n\n"),
            ("t3.fq", b"\n \n\n"),
        ];
        // Names and reads longer than a pe's range: a name and a FASTQ record over several pes.
        let long_fa = format!(">{} d\nACGT\n>{}\nGG\n", "n".repeat(200), "m".repeat(150));
        let long_fq = format!(
            "@r\n{}\n+\n{}\n@s\nA\n+\n!\n",
            "A".repeat(300),
            "I".repeat(300)
        );
        let mut cases: Vec<(&str, Vec<u8>)> = cases.iter().map(|(n, b)| (*n, b.to_vec())).collect();
        cases.push(("long.fa", long_fa.into_bytes()));
        cases.push(("long.fq", long_fq.into_bytes()));
        // Blank lines that fill whole pes' ranges after the last record.
        cases.push((
            "tail.fq",
            format!("@r\nAC\n+\nII\n{}", "\n".repeat(300)).into_bytes(),
        ));
        for (k, (name, bytes)) in cases.iter().enumerate() {
            // Plain, and as a gzip stream that pe 0 deals out in pieces of 1 and 3 bytes (most
            // of them keep no character of T).
            for piece in [1, 3] {
                let case = one(name, bytes.to_vec(), SeqOptions::default(), piece);
                check(comm, &format!("c{k}p{piece}"), &case);
                let case = one(
                    &format!("{name}.gz"),
                    bytes.to_vec(),
                    SeqOptions::default(),
                    piece,
                );
                check(comm, &format!("c{k}p{piece}"), &case);
            }
            let case = one(
                &format!("bgzf-{name}.gz"),
                bytes.to_vec(),
                SeqOptions::default(),
                1,
            );
            check(comm, &format!("c{k}"), &case);
        }
    });
}

/// Several inputs in one text: FASTA, FASTQ, gzip and raw files mixed; and sequence files with
/// their reverse complements.
#[test]
fn several_inputs_and_revcomp() {
    mpi_test(|comm| {
        for seed in 0..8u64 {
            let mut rng = Rng::new(seed);
            let raw: Vec<u8> = (0..rng.range(0, 50))
                .map(|_| rng.below(256) as u8)
                .collect();
            let mixed = Case {
                files: vec![
                    ("x.fa".into(), fasta(seed, 3, 60), Kind::Fasta),
                    ("y.bin".into(), raw, Kind::Raw),
                    ("z.fq.gz".into(), fastq(seed, 4, 30), Kind::Fastq),
                    ("w.fna.gz".into(), fasta(seed + 100, 2, 90), Kind::Fasta),
                ],
                opts: SeqOptions::default(),
                piece: 5,
            };
            check(comm, &format!("m{seed}"), &mixed);
            let rc = Case {
                files: vec![
                    ("x.fa".into(), fasta(seed, 4, 100), Kind::Fasta),
                    ("z.fq".into(), fastq(seed, 3, 20), Kind::Fastq),
                    ("v.fa.gz".into(), fasta(seed + 200, 3, 70), Kind::Fasta),
                ],
                opts: SeqOptions {
                    revcomp: true,
                    keep_case: seed % 2 == 0,
                    ..SeqOptions::default()
                },
                piece: 16,
            };
            check(comm, &format!("r{seed}"), &rc);
        }
    });
}

/// An input that changes between the scan, which counts T, and the placing: a raw file, read
/// then, is an error on every pe, naming the file, whether it grew or shrank; a gzip file, read
/// once in the scan (pe 0 decompresses it and deals its characters out), gives the T it had when
/// it was read, whatever it became after.
#[test]
fn an_input_changed_between_the_passes_is_an_error_or_was_read_already() {
    mpi_test(|comm| {
        let reads = fasta(11, 6, 120);
        let cases: [(&str, Vec<u8>, Vec<u8>); 4] = [
            (
                "grew.fa.gz",
                gzip(&reads, 1),
                gzip(&[&reads[..], b"\n>x\nACGT\n"].concat(), 2),
            ),
            (
                "shrank.fa.gz",
                gzip(&reads, 2),
                gzip(&reads[..reads.len() / 2], 1),
            ),
            ("grew.txt", b"abcabc".repeat(50), b"abcabc".repeat(51)),
            ("shrank.txt", b"abcabc".repeat(50), b"abc".repeat(7)),
        ];
        for (name, before, after) in cases {
            let path = PathBuf::from(format!("changed-{name}"));
            if comm.rank() == 0 {
                std::fs::write(&path, &before).unwrap();
            }
            comm.barrier();
            let opts = SeqOptions::default();
            let files = InputFile::open_all(comm, std::slice::from_ref(&path), &opts).unwrap();
            let scanned = psa::io::seq::scan(comm, &files, &opts, 64).unwrap();
            comm.barrier();
            if comm.rank() == 0 {
                std::fs::write(&path, &after).unwrap();
            }
            comm.barrier();
            let placed = scanned.place(comm);
            if name.ends_with(".gz") {
                let got = placed.unwrap_or_else(|e| panic!("{name}: {e}"));
                let names = [path.display().to_string()];
                let (t, _) = reference(&[(reads.clone(), Kind::Fasta)], &names, false, false);
                assert_eq!(got.layout, Layout::block(t.len(), comm.size()), "{name}");
                let me = comm.rank();
                let want = &t[got.layout.start(me)..got.layout.end(me)];
                assert!(
                    got.text == want,
                    "{name}: pe {me}'s block of T is not the file's as read"
                );
                comm.barrier();
                continue;
            }
            let err = match placed {
                Ok(_) => panic!("{name}: a changed input was placed"),
                Err(e) => e.to_string(),
            };
            // pe 0 reports the change it finds; the other pes may hear of it from pe 0.
            let found = err.contains("changed while being read") && err.contains(name);
            assert!(
                found || (comm.rank() != 0 && err.starts_with("pe 0 failed")),
                "{name}: {err}"
            );
            comm.barrier();
        }
    });
}

/// gzip files with BGZF blocks that are not one chain of them to their end are streamed by pe 0 as
/// any gzip, with the same result: a plain gzip member after the blocks, among them, or before
/// them; a file cut inside its last block (an error, as for any truncated gzip). A damaged block
/// is an error on every pe, naming the file and the block. (A header's bytes found inside a
/// block's data, which text input cannot put there stored, are `bgzf::tests`'.)
#[test]
fn bgzf_files_that_do_not_chain_are_streamed_and_damaged_blocks_refused() {
    mpi_test(|comm| {
        let fa = fasta(5, 6, 200);
        let (a, b) = (&fa[..300], &fa[300..]);
        let (b1, b2) = b.split_at(b.len() / 2);
        let cases: [(&str, Vec<u8>); 3] = [
            ("end.fa.gz", [bgzf(a, &[29, 3], 1), gzip(b, 1)].concat()),
            (
                "middle.fa.gz",
                [bgzf(a, &[29], 1), gzip(b1, 1), bgzf(b2, &[17], 1)].concat(),
            ),
            ("first.fa.gz", [gzip(a, 1), bgzf(b, &[29], 1)].concat()),
        ];
        for (k, (name, encoded)) in cases.into_iter().enumerate() {
            let path = PathBuf::from(format!("bz{k}-{name}"));
            if comm.rank() == 0 {
                std::fs::write(&path, &encoded).unwrap();
            }
            comm.barrier();
            let size = std::fs::metadata(&path).unwrap().len();
            let part = psa::internals::bgzf_read_part(comm, &path, size).unwrap();
            assert!(part.is_none(), "{name}: read in parallel");
            let case = one(name, fa.clone(), SeqOptions::default(), 64);
            verify(comm, &format!("bz{k}"), std::slice::from_ref(&path), &case);
        }
        let good = bgzf(&fa, &[97], 1);
        let mut cut = good.clone();
        cut.truncate(good.len() - 28 - 5); // into the last data block's footer
        let mut damaged = good.clone();
        // The CRC of the block that holds the middle of the file.
        let (mut block, mut at) = (0, 0);
        while at < good.len() / 2 {
            block = at;
            at += usize::from(u16::from_le_bytes([good[at + 16], good[at + 17]])) + 1;
        }
        damaged[at - 8] ^= 0x40;
        for (name, bytes, want) in [
            ("cut.fa.gz", cut, "truncated".to_string()),
            (
                "damaged.fa.gz",
                damaged,
                format!("the gzip block at byte {block} is damaged"),
            ),
        ] {
            let path = PathBuf::from(format!("bzbad-{name}"));
            if comm.rank() == 0 {
                std::fs::write(&path, &bytes).unwrap();
            }
            comm.barrier();
            let opts = SeqOptions::default();
            let files = InputFile::open_all(comm, std::slice::from_ref(&path), &opts).unwrap();
            let err = match load(comm, &files, &opts, 64) {
                Ok(_) => panic!("{name}: loaded"),
                Err(e) => e.to_string(),
            };
            let own = err.contains(&want) && err.contains(name);
            assert!(own || err.starts_with("pe "), "{name}: {err}");
            // The lowest failing pe prints its own error: some pe holds it.
            assert!(comm.any(own), "{name}: no pe names the problem: {err}");
            comm.barrier();
        }
    });
}
