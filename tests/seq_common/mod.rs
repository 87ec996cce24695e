//! Sequence-input tests' reference and generators (used by tests/seq.rs and tests/mpi_seq.rs).
//!
//! The reference reads whole files the plainest way (split into lines, then records), apart
//! from psa's parser, and builds T by README's rule.

#![allow(dead_code)]

use std::io::Write;

use crate::common::Rng;

/// A record of the reference: name, start in T, length.
pub type Rec = (String, u64, u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Raw,
    Fasta,
    Fastq,
}

fn seq_of(lines: &[&[u8]], keep_case: bool) -> Vec<u8> {
    let mut s: Vec<u8> = lines
        .iter()
        .flat_map(|l| l.iter().copied())
        .filter(|b| !b.is_ascii_whitespace() && *b != 0x0b)
        .collect();
    if !keep_case {
        s.make_ascii_uppercase();
    }
    s
}

fn name_of(header: &[u8]) -> String {
    let body = &header[1..];
    let end = body
        .iter()
        .position(|b| b.is_ascii_whitespace() || *b == 0x0b)
        .unwrap_or(body.len());
    String::from_utf8_lossy(&body[..end]).into_owned()
}

/// (name, sequence) of each record of a whole file.
pub fn records_of(bytes: &[u8], kind: Kind, keep_case: bool) -> Vec<(String, Vec<u8>)> {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    match kind {
        Kind::Raw => unreachable!(),
        Kind::Fasta => {
            let mut out: Vec<(String, Vec<&[u8]>)> = Vec::new();
            for l in lines {
                if l.first() == Some(&b'>') {
                    out.push((name_of(l), Vec::new()));
                } else if let Some(last) = out.last_mut() {
                    last.1.push(l);
                }
            }
            out.into_iter()
                .map(|(n, ls)| (n, seq_of(&ls, keep_case)))
                .collect()
        }
        // Blank lines after the record of the last line that is not blank end the file.
        Kind::Fastq => lines[..lines
            .iter()
            .rposition(|l| !l.iter().all(|b| b.is_ascii_whitespace()))
            .map_or(0, |k| (k / 4 + 1) * 4)
            .min(lines.len())]
            .chunks(4)
            .map(|r| (name_of(r[0]), seq_of(&r[1..2], keep_case)))
            .collect(),
    }
}

/// The complement README gives.
pub fn complement(b: u8) -> u8 {
    let pairs = b"ATTAUACGGCRYYRKMMKBVVBDHHD";
    for pair in pairs.chunks(2) {
        if b.to_ascii_uppercase() == pair[0] {
            return if b.is_ascii_lowercase() {
                pair[1].to_ascii_lowercase()
            } else {
                pair[1]
            };
        }
    }
    b
}

/// T and its records for whole files, by README's rule. Raw files are named by `names`.
pub fn reference(
    files: &[(Vec<u8>, Kind)],
    names: &[String],
    keep_case: bool,
    revcomp: bool,
) -> (Vec<u8>, Vec<Rec>) {
    let mut t = Vec::new();
    let mut recs = Vec::new();
    for ((bytes, kind), fname) in files.iter().zip(names) {
        if *kind == Kind::Raw {
            recs.push((fname.clone(), t.len() as u64, bytes.len() as u64));
            t.extend_from_slice(bytes);
            continue;
        }
        for (name, seq) in records_of(bytes, *kind, keep_case) {
            recs.push((name, t.len() as u64, seq.len() as u64));
            t.extend_from_slice(&seq);
            t.push(b'$');
        }
    }
    if revcomp {
        let fwd = recs.len();
        for k in (0..fwd).rev() {
            let (name, start, len) = recs[k].clone();
            let s = start as usize;
            let rc: Vec<u8> = t[s..s + len as usize]
                .iter()
                .rev()
                .map(|&b| complement(b))
                .collect();
            recs.push((format!("{name}/rc"), t.len() as u64, len));
            t.extend(rc);
            t.push(b'$');
        }
    }
    (t, recs)
}

/// Every occurrence of `pat` in `t` (naive scan).
pub fn naive_find(t: &[u8], pat: &[u8]) -> Vec<u64> {
    if pat.len() > t.len() {
        return Vec::new();
    }
    (0..=t.len() - pat.len())
        .filter(|&i| &t[i..i + pat.len()] == pat)
        .map(|i| i as u64)
        .collect()
}

fn name(rng: &mut Rng) -> Vec<u8> {
    let alnum = b"abcXYZ0189_.|:";
    (0..rng.range(0, 12))
        .map(|_| alnum[rng.below(alnum.len() as u64) as usize])
        .collect()
}

fn residues(rng: &mut Rng, len: usize) -> Vec<u8> {
    let letters = b"ACGTACGTacgtNnRYKMSWBDHV*-";
    (0..len)
        .map(|_| letters[rng.below(letters.len() as u64) as usize])
        .collect()
}

fn eol(rng: &mut Rng, crlf: bool) -> &'static [u8] {
    if crlf || rng.chance(3) {
        b"\r\n"
    } else {
        b"\n"
    }
}

/// A FASTA file with the awkward parts: odd and mixed line lengths, CRLF, lower case, empty
/// records, blank lines, long headers (so pe boundaries fall inside them), spaces in sequence
/// lines, no final line break.
pub fn fasta(seed: u64, records: usize, max_len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let crlf = rng.chance(30);
    let mut f = Vec::new();
    for _ in 0..records {
        f.push(b'>');
        f.extend(name(&mut rng));
        if rng.chance(50) {
            f.extend_from_slice(b" some description\twith tabs > and @ and +");
            f.extend(name(&mut rng));
        }
        f.extend_from_slice(eol(&mut rng, crlf));
        let len = if rng.chance(15) {
            0
        } else {
            rng.range(0, max_len + 1)
        };
        let seq = residues(&mut rng, len);
        let width = rng.range(1, 80);
        for line in seq.chunks(width) {
            let cut = rng.range(0, line.len());
            f.extend_from_slice(&line[..cut]);
            if rng.chance(5) {
                f.push(b' ');
            }
            f.extend_from_slice(&line[cut..]);
            f.extend_from_slice(eol(&mut rng, crlf));
            if rng.chance(3) {
                f.extend_from_slice(eol(&mut rng, crlf));
            }
        }
    }
    if rng.chance(30) {
        while f.last().is_some_and(|b| b.is_ascii_whitespace()) {
            f.pop();
        }
    }
    f
}

/// A FASTQ file: names, qualities that hold '@' and '+', empty reads, CRLF sometimes, blank
/// lines at the end sometimes.
pub fn fastq(seed: u64, records: usize, max_len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let crlf = rng.chance(30);
    let nl: &[u8] = if crlf { b"\r\n" } else { b"\n" };
    let mut f = Vec::new();
    for _ in 0..records {
        f.push(b'@');
        f.extend(name(&mut rng));
        if rng.chance(40) {
            f.extend_from_slice(b" 1:N:0:ACGT");
        }
        f.extend_from_slice(nl);
        let len = rng.range(0, max_len + 1);
        f.extend(residues(&mut rng, len));
        f.extend_from_slice(nl);
        f.push(b'+');
        f.extend_from_slice(nl);
        f.extend((0..len).map(|_| b"@+!#I~5"[rng.below(7) as usize]));
        f.extend_from_slice(nl);
    }
    if rng.chance(20) {
        while f.last().is_some_and(|b| b.is_ascii_whitespace()) {
            f.pop();
        }
    }
    if rng.chance(4) {
        f.extend_from_slice(b"\n\n \t\r\n");
    }
    f
}

/// `bytes` gzip-compressed (cut into several gzip members when `members` > 1, as bgzip does).
pub fn gzip(bytes: &[u8], members: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let per = bytes.len().div_ceil(members.max(1)).max(1);
    for part in bytes.chunks(per) {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(part).unwrap();
        out.extend(z.finish().unwrap());
    }
    if bytes.is_empty() {
        let z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        out.extend(z.finish().unwrap());
    }
    out
}

/// `bytes` in BGZF, bgzip's blocked gzip: block k holds the next `sizes[k mod sizes.len()]` bytes
/// (bgzip itself fills blocks with 65,280), each a gzip member whose header's `BC` field gives its
/// size; then bgzip's empty end-of-file block. `level` 0 stores the data uncompressed (a block of
/// 65,280 bytes then takes 65,311, near the format's largest).
pub fn bgzf(bytes: &[u8], sizes: &[usize], level: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut at, mut k) = (0, 0);
    while at < bytes.len() {
        let len = sizes[k % sizes.len()].clamp(1, bytes.len() - at);
        out.extend(psa::internals::bgzf_block(&bytes[at..at + len], level));
        (at, k) = (at + len, k + 1);
    }
    out.extend(psa::internals::bgzf_block(b"", level));
    out
}
