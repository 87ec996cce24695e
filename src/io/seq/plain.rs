//! The distributed parse of a plain (or BGZF-inflated) FASTA or FASTQ file: every pe parses its
//! own byte range from a state of prefix scans; a FASTQ file's trailing blank lines cut off first
//! ([`fastq_end`]); names cut by pe boundaries put together on pe 0, FASTQ records cut by them
//! checked from their pieces on every pe.

use super::input::{Format, InputFile};
use super::parser::{
    assemble, invalid, is_space, quality_mismatch, Frag, LineError, Parse, Parsed, Parser, State,
    TRAILING,
};
use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::Result;

/// This pe's part of a file's T characters, and its records (on pe 0).
#[derive(Default)]
pub(super) struct Part {
    /// This pe's T characters of the file.
    pub(super) kept: Vec<u8>,
    /// Every record of the file: name and start, relative to the file's first character (pe 0).
    pub(super) starts: Vec<(Vec<u8>, u64)>,
    /// T characters of the whole file.
    pub(super) total: u64,
}

/// What a pe's byte range says about the state after it, for the scans.
fn line_starts_summary(halo: Option<u8>, bytes: &[u8], first: u64) -> (u64, u64, bool) {
    let mut newlines = 0u64;
    // ((line start + 1) << 1) | header flag, of the last line start in the range (0: none).
    let mut last = 0u64;
    let mut header = false;
    let mut note = |at: usize| {
        let h = bytes[at] == b'>';
        header |= h;
        last = ((first + at as u64 + 1) << 1) | h as u64;
    };
    if !bytes.is_empty() && halo.is_none_or(|b| b == b'\n') {
        note(0);
    }
    for (k, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            newlines += 1;
            if k + 1 < bytes.len() {
                note(k + 1);
            }
        }
    }
    (newlines, last, header)
}

/// Where a plain FASTQ file's records end (a byte offset): after the line break that ends the
/// record holding the file's last line with a byte that is not whitespace, when the file has that
/// line break; else (an incomplete record, left to the parser's errors) at its end. Only blank
/// lines may follow (a file may end in some); the pes parse up to there. Collective: `bytes` is
/// this pe's range of the file from offset `a`.
fn fastq_end(comm: &Comm, bytes: &[u8], a: usize) -> usize {
    let count = |s: &[u8]| s.iter().filter(|&&b| b == b'\n').count() as u64;
    // This pe's last byte that is not whitespace, and the line breaks before it (one pass).
    let last_byte = bytes.iter().rposition(|&b| !is_space(b));
    let (head, tail) = bytes.split_at(last_byte.unwrap_or(0));
    let upto = count(head);
    let newlines = upto + count(tail);
    let before = comm.exscan_sum(newlines);
    // 1 + the line of that byte (0: none).
    let last = last_byte.map_or(0, |_| before + upto + 1);
    let last = comm.all_reduce_max(last);
    // The records' lines: up to the end of the record of that line (none: an empty text).
    let lines = last.div_ceil(4) * 4;
    // The line break that ends line `lines` - 1: the lines-th of the file.
    let cut = match lines.checked_sub(before) {
        Some(k) if k > 0 && k <= newlines => bytes
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'\n')
            .nth(k as usize - 1)
            .map(|(j, _)| a + j + 1),
        _ => None,
    };
    let cut = comm.all_reduce_max(cut.map_or(0, |c| c as u64 + 1));
    match (lines, cut) {
        (0, _) => 0,
        (_, 0) => usize::MAX,
        (_, c) => c as usize - 1,
    }
}

/// Parses a plain FASTA or FASTQ file, every pe its own byte range. Collective.
pub(super) fn parse_plain(comm: &Comm, file: &InputFile, keep_case: bool) -> Result<Part> {
    let bytes_layout = Layout::block(file.size as usize, comm.size());
    let (a, b) = (
        bytes_layout.start(comm.rank()),
        bytes_layout.end(comm.rank()),
    );
    let read = crate::io::read_range(&file.path, a.saturating_sub(1), b);
    let buf = comm.agree(read)?;
    let halo = (a > 0).then(|| buf[0]);
    parse_range(comm, file, keep_case, buf, (a > 0) as usize, a, halo)
}

/// Parses a FASTA or FASTQ file that every pe holds a range of: `buf[skip..]` is this pe's,
/// bytes `[a, a + len)` of the (decompressed) file, the ranges in pe order and together the whole
/// file; `halo` the byte before it (None at the file's start). Collective. Exit: this pe's T
/// characters (`kept`), T's characters of the whole file and (pe 0) its records. Cost: one pass
/// over the range (two for FASTQ), a few scans and reductions, the cut names gathered on pe 0.
pub(super) fn parse_range(
    comm: &Comm,
    file: &InputFile,
    keep_case: bool,
    mut buf: Vec<u8>,
    skip: usize,
    a: usize,
    halo: Option<u8>,
) -> Result<Part> {
    let p = comm.size();
    let me = comm.rank();
    let b = a + buf.len() - skip;
    let mut bytes = &buf[skip..];
    let mut at_line_start = halo.is_none_or(|b| b == b'\n');
    if file.format == Format::Fastq {
        let cut = fastq_end(comm, bytes, a);
        if a >= cut {
            at_line_start = true;
        }
        bytes = &bytes[..cut.clamp(a, b) - a];
    }
    let (newlines, last, header) = line_starts_summary(halo, bytes, a as u64);
    let line = comm.exscan_sum(newlines);
    let last_before = comm.exscan_max(last);
    let seen = comm.exscan_max(header as u64) > 0;
    let in_header = !at_line_start
        && match file.format {
            Format::Fasta => last_before & 1 == 1,
            _ => line.is_multiple_of(4),
        };
    let st = State {
        line,
        at_line_start,
        in_header,
        name_open: in_header,
        // The range starts inside a header just after a carriage return (a pe's range ended
        // with it): the line goes on here, so the CR is alone unless a '\n' comes first.
        cr_last: in_header && halo == Some(b'\r'),
        seen_header: seen,
        partial: true,
        ..State::default()
    };
    let mut out = Parsed::default();
    if in_header {
        out.frags.push(Frag::Cont {
            name: Vec::new(),
            done: false,
        });
    }
    let mut parser = Parser::new(file.format, keep_case, st);
    let mut r = parser.feed(bytes, &mut out);
    if r.is_ok() {
        r = match (me + 1 == p, parser.st.trailing) {
            (true, _) => parser.finish(&mut out),
            // Blank lines that end this pe's piece, with a byte that is not whitespace after
            // them (the piece ends before the file's last such byte).
            (false, Some(line)) => Err(LineError {
                line,
                msg: TRAILING.into(),
            }),
            (false, None) => {
                parser.end_piece(&mut out);
                Ok(())
            }
        };
    }
    comm.agree(r.map_err(|e| invalid(&file.path, e.line, e.msg)))?;
    drop(std::mem::take(&mut buf));
    // FASTQ records cut by pe boundaries: their pieces, summed, checked on every pe.
    if file.format == Format::Fastq {
        let cut = comm.all_gather_v(&out.cut);
        comm.agree(check_cut_records(&cut).map_err(|e| invalid(&file.path, e.line, e.msg)))?;
    }
    let base = comm.exscan_sum(out.kept.len() as u64);
    let total = comm.all_reduce_sum(out.kept.len() as u64);
    let starts = gather_names(comm, &out.frags, base);
    Ok(Part {
        kept: out.kept,
        starts,
        total,
    })
}

/// Sums the pieces of FASTQ records cut by pe boundaries (in pe order) and checks each.
fn check_cut_records(cut: &[[u64; 3]]) -> Parse<()> {
    let mut sorted = cut.to_vec();
    sorted.sort_by_key(|c| c[0]);
    for group in sorted.chunk_by(|x, y| x[0] == y[0]) {
        let seq: u64 = group.iter().map(|c| c[1]).sum();
        let qual: u64 = group.iter().map(|c| c[2]).sum();
        if seq != qual {
            return Err(LineError {
                line: group[0][0] * 4 + 3,
                msg: quality_mismatch(seq, qual),
            });
        }
    }
    Ok(())
}

/// Hands every pe's name pieces to pe 0 (in pe order) and puts the names together there:
/// (name, first character relative to the file). `base`: the file's characters on the pes before
/// this one. Collective; the result is empty on other pes.
fn gather_names(comm: &Comm, frags: &[Frag], base: u64) -> Vec<(Vec<u8>, u64)> {
    let mut wire = Vec::new();
    for f in frags {
        let (kind, at, name, done) = match f {
            Frag::Start { at, name, done } => (0u8, base + at, name, done),
            Frag::Cont { name, done } => (1u8, 0, name, done),
        };
        wire.push(kind);
        wire.extend_from_slice(&at.to_le_bytes());
        wire.push(*done as u8);
        wire.extend_from_slice(&(name.len() as u64).to_le_bytes());
        wire.extend_from_slice(name);
    }
    let mut all = Vec::new();
    comm.stream_to_root(&wire, 0, 1 << 24, None, |_, piece: &[u8]| {
        all.extend_from_slice(piece)
    });
    if comm.rank() != 0 {
        return Vec::new();
    }
    let mut frags = Vec::new();
    let mut i = 0;
    let word = |i: usize| u64::from_le_bytes(all[i..i + 8].try_into().expect("8 bytes"));
    while i < all.len() {
        let (kind, at, done) = (all[i], word(i + 1), all[i + 9] == 1);
        let len = word(i + 10) as usize;
        let name = all[i + 18..i + 18 + len].to_vec();
        i += 18 + len;
        frags.push(match kind {
            0 => Frag::Start { at, name, done },
            _ => Frag::Cont { name, done },
        });
    }
    assemble(frags)
}
