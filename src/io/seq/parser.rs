//! The kernel: one piece of a FASTA or FASTQ file parsed from a known state ([`State`]) by the
//! line-oriented state machine [`Parser`], the one set of rules and errors of every path (a pe's
//! byte range, the gzip stream, `psa query`'s patterns); the pieces of names cut by piece
//! boundaries ([`Frag`]) put together ([`assemble`]).

use std::path::Path;

use super::input::Format;
use crate::error::Error;

pub(super) fn invalid(path: &Path, line: u64, msg: impl std::fmt::Display) -> Error {
    Error::BadInput(format!("{}: line {}: {msg}", path.display(), line + 1))
}

/// Where the parser stands between two bytes of a file.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct State {
    /// Index of the current line (0-based).
    pub(super) line: u64,
    /// The next byte starts a line.
    pub(super) at_line_start: bool,
    /// The current line is a header (FASTA `>`, FASTQ `@`).
    pub(super) in_header: bool,
    /// The current header's name (its first word) has not ended yet.
    pub(super) name_open: bool,
    /// The current header's last byte so far, at the end of a piece, is a carriage return: a
    /// CR alone if the line goes on in the next piece (a pe's range, a stream's piece).
    pub(super) cr_last: bool,
    /// FASTA: a header came at or before this point.
    pub(super) seen_header: bool,
    /// FASTQ: sequence and quality characters of the current record seen in this piece.
    pub(super) seq: u64,
    pub(super) qual: u64,
    /// FASTQ: the current record began before this piece (its counts are pieces).
    pub(super) partial: bool,
    /// FASTQ: a blank line came where a record should start, at this line; from there on only
    /// whitespace may follow (a file may end in blank lines, a record may not follow one).
    pub(super) trailing: Option<u64>,
}

/// A piece of a record's name: the start of a record, or the rest of a header cut by a pe
/// boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Frag {
    /// A record starts: its first character is T's character `at` (counted from the start of
    /// this piece's characters until [`Parsed::rebase`]).
    Start { at: u64, name: Vec<u8>, done: bool },
    /// More of the last record's header.
    Cont { name: Vec<u8>, done: bool },
}

/// What parsing one piece produced.
#[derive(Default, Debug)]
pub(super) struct Parsed {
    /// T's characters of the piece.
    pub(super) kept: Vec<u8>,
    /// Characters counted before `kept` (kept characters handed on already, in the stream).
    pub(super) drained: u64,
    pub(super) frags: Vec<Frag>,
    /// FASTQ records cut by a piece boundary: (record index, sequence, quality) characters seen.
    pub(super) cut: Vec<[u64; 3]>,
}

impl Parsed {
    pub(super) fn here(&self) -> u64 {
        self.drained + self.kept.len() as u64
    }
}

/// A parse error at a line of the file (0-based).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct LineError {
    pub(super) line: u64,
    pub(super) msg: String,
}

pub(super) type Parse<T> = std::result::Result<T, LineError>;

/// The line-oriented state machine of FASTA and FASTQ (see the module docs).
pub(super) struct Parser {
    format: Format,
    keep_case: bool,
    pub(super) st: State,
}

pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Bytes a sequence line may hold besides whitespace: letters (IUPAC codes, amino acids), `*`
/// (stop) and `-` (gap).
fn is_residue(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'*' || b == b'-'
}

fn shown(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", b as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

impl Parser {
    pub(super) fn new(format: Format, keep_case: bool, st: State) -> Self {
        Parser {
            format,
            keep_case,
            st,
        }
    }

    fn error<T>(&self, msg: impl Into<String>) -> Parse<T> {
        Err(LineError {
            line: self.st.line,
            msg: msg.into(),
        })
    }

    /// Parses `bytes`, the next bytes of the file.
    pub(super) fn feed(&mut self, bytes: &[u8], out: &mut Parsed) -> Parse<()> {
        let mut i = 0;
        while i < bytes.len() {
            if let Some(line) = self.st.trailing {
                return match bytes[i..].iter().all(|&b| is_space(b)) {
                    true => Ok(()),
                    false => Err(LineError {
                        line,
                        msg: TRAILING.into(),
                    }),
                };
            }
            if self.st.at_line_start {
                if self.format == Format::Fastq
                    && self.st.line.is_multiple_of(4)
                    && is_space(bytes[i])
                {
                    self.st.trailing = Some(self.st.line);
                    continue;
                }
                i += self.start_line(bytes[i], out)?;
            }
            let end = bytes[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |k| i + k);
            self.body(&bytes[i..end], out)?;
            if end < bytes.len() {
                self.st.cr_last = false;
                self.end_line(out)?;
                i = end + 1;
            } else {
                i = end;
            }
        }
        Ok(())
    }

    /// A line begins with `b`: decides what it is; returns the bytes it took (the marker).
    fn start_line(&mut self, b: u8, out: &mut Parsed) -> Parse<usize> {
        self.st.at_line_start = false;
        match self.format {
            Format::Fasta if b == b'>' => {
                if self.st.seen_header {
                    out.kept.push(b'$');
                }
                self.st.seen_header = true;
                self.begin_record(out);
                Ok(1)
            }
            Format::Fasta => Ok(0),
            _ => match (self.st.line % 4, b) {
                (0, b'@') => {
                    self.begin_record(out);
                    Ok(1)
                }
                (0, _) => self.error(format!(
                    "a FASTQ record starts with '@', not {} (is this a FASTQ file?)",
                    shown(b)
                )),
                (2, b'+') => Ok(1),
                (2, _) => self.error(format!(
                    "the third line of a FASTQ record starts with '+', not {}",
                    shown(b)
                )),
                _ => Ok(0),
            },
        }
    }

    fn begin_record(&mut self, out: &mut Parsed) {
        self.st.in_header = true;
        self.st.name_open = true;
        (self.st.seq, self.st.qual, self.st.partial) = (0, 0, false);
        out.frags.push(Frag::Start {
            at: out.here(),
            name: Vec::new(),
            done: false,
        });
    }

    /// The bytes of the current line in this piece (no line break).
    fn body(&mut self, seg: &[u8], out: &mut Parsed) -> Parse<()> {
        if self.st.in_header {
            if let Some(&b) = seg.iter().find(|&&b| b == 0) {
                return self.error(format!("{} in a header: this is not a text file", shown(b)));
            }
            // A carriage return inside a line (not before its '\n'): the lines end in CR alone
            // (classic Mac), which would make the whole file one header.
            let cr_inside =
                (seg.iter().position(|&b| b == b'\r')).is_some_and(|k| k + 1 < seg.len());
            if cr_inside || (self.st.cr_last && !seg.is_empty()) {
                return self.error(
                    "a carriage return alone ends a line here (classic Mac line breaks): convert them first, e.g. tr '\\r' '\\n' < IN > OUT",
                );
            }
            self.st.cr_last = seg.last().map_or(self.st.cr_last, |&b| b == b'\r');
            if self.st.name_open {
                let end = seg.iter().position(|&b| is_space(b));
                let word = &seg[..end.unwrap_or(seg.len())];
                let done = end.is_some();
                if let Some(Frag::Start { name, done: d, .. } | Frag::Cont { name, done: d }) =
                    out.frags.last_mut()
                {
                    name.extend_from_slice(word);
                    *d = done;
                }
                self.st.name_open = !done;
            }
            return Ok(());
        }
        match (self.format, self.st.line % 4) {
            (Format::Fasta, _) | (_, 1) => self.residues(seg, out),
            (_, 3) => {
                if let Some(&b) = seg
                    .iter()
                    .find(|&&b| !is_space(b) && !(b'!'..=b'~').contains(&b))
                {
                    return self.error(format!("{} is not a quality character", shown(b)));
                }
                self.st.qual += seg.iter().filter(|&&b| !is_space(b)).count() as u64;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Sequence bytes: checked, whitespace dropped, case folded, kept.
    fn residues(&mut self, seg: &[u8], out: &mut Parsed) -> Parse<()> {
        let before = out.kept.len();
        // Most lines are letters only: copied in one go; the others byte by byte.
        if seg.iter().all(|&b| is_residue(b)) {
            match self.keep_case {
                true => out.kept.extend_from_slice(seg),
                false => out.kept.extend(seg.iter().map(|b| b.to_ascii_uppercase())),
            }
        } else {
            for &b in seg {
                if is_residue(b) {
                    out.kept.push(if self.keep_case {
                        b
                    } else {
                        b.to_ascii_uppercase()
                    });
                } else if !is_space(b) {
                    out.kept.truncate(before);
                    let what = match self.format {
                        Format::Fasta => "FASTA",
                        _ => "FASTQ",
                    };
                    return self.error(format!(
                        "{} is not a sequence letter (is this a {what} file?)",
                        shown(b)
                    ));
                }
            }
        }
        let got = (out.kept.len() - before) as u64;
        if self.format == Format::Fasta && !self.st.seen_header && got > 0 {
            out.kept.truncate(before);
            return self.error("sequence before the first header ('>'): is this a FASTA file?");
        }
        self.st.seq += got;
        Ok(())
    }

    /// The current line ends (a line break, or the end of the file).
    fn end_line(&mut self, out: &mut Parsed) -> Parse<()> {
        if self.st.in_header {
            if self.st.name_open {
                if let Some(Frag::Start { done, .. } | Frag::Cont { done, .. }) =
                    out.frags.last_mut()
                {
                    *done = true;
                }
            }
            self.st.in_header = false;
            self.st.name_open = false;
        } else if self.format == Format::Fastq {
            match self.st.line % 4 {
                1 => out.kept.push(b'$'),
                3 => self.end_record(out)?,
                _ => {}
            }
        }
        self.st.line += 1;
        self.st.at_line_start = true;
        Ok(())
    }

    fn end_record(&mut self, out: &mut Parsed) -> Parse<()> {
        let (seq, qual) = (self.st.seq, self.st.qual);
        if self.st.partial {
            out.cut.push([self.st.line / 4, seq, qual]);
        } else if seq != qual {
            return self.error(quality_mismatch(seq, qual));
        }
        (self.st.seq, self.st.qual, self.st.partial) = (0, 0, false);
        Ok(())
    }

    /// The piece ends and the file goes on (on the next pe): a FASTQ record in progress is
    /// reported as a piece.
    pub(super) fn end_piece(&mut self, out: &mut Parsed) {
        let between = self.st.at_line_start && self.st.line.is_multiple_of(4);
        if self.format == Format::Fastq && !between {
            out.cut.push([self.st.line / 4, self.st.seq, self.st.qual]);
        }
    }

    /// The file ends here.
    pub(super) fn finish(&mut self, out: &mut Parsed) -> Parse<()> {
        let lines = self.st.line + !self.st.at_line_start as u64;
        if !self.st.at_line_start {
            self.end_line(out)?;
        }
        match self.format {
            Format::Fasta if self.st.seen_header => out.kept.push(b'$'),
            Format::Fastq if !lines.is_multiple_of(4) => {
                return Err(LineError {
                    line: lines - 1,
                    msg: format!(
                        "the file ends inside the FASTQ record that starts at line {} (a record has 4 lines)",
                        lines / 4 * 4 + 1
                    ),
                })
            }
            _ => {}
        }
        Ok(())
    }
}

/// A FASTQ file's blank line followed by more records.
pub(super) const TRAILING: &str =
    "blank line or whitespace where a FASTQ record ('@') should start (only blank lines may end the file)";

pub(super) fn quality_mismatch(seq: u64, qual: u64) -> String {
    format!("the quality line has {qual} characters but the sequence has {seq}")
}

/// Names from their pieces: a continuation extends the record before it while its name is open.
pub(super) fn assemble(frags: Vec<Frag>) -> Vec<(Vec<u8>, u64)> {
    let mut out: Vec<(Vec<u8>, u64, bool)> = Vec::new();
    for f in frags {
        match f {
            Frag::Start { at, name, done } => out.push((name, at, done)),
            Frag::Cont { name, done } => {
                if let Some(last) = out.last_mut().filter(|l| !l.2) {
                    last.0.extend_from_slice(&name);
                    last.2 = done;
                }
            }
        }
    }
    out.into_iter().map(|(n, at, _)| (n, at)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cut_anywhere_assemble() {
        let frags = vec![
            Frag::Start {
                at: 0,
                name: b"ch".to_vec(),
                done: false,
            },
            Frag::Cont {
                name: b"r1".to_vec(),
                done: true,
            },
            Frag::Cont {
                name: b"zz".to_vec(),
                done: true,
            },
            Frag::Start {
                at: 5,
                name: b"".to_vec(),
                done: false,
            },
            Frag::Cont {
                name: b"".to_vec(),
                done: false,
            },
            Frag::Cont {
                name: b"x".to_vec(),
                done: true,
            },
        ];
        assert_eq!(assemble(frags), [("chr1".into(), 0), ("x".into(), 5)]);
    }

    /// A carriage return alone is refused wherever the pieces are cut, one just after it
    /// included; CR LF is a line break wherever they are cut.
    #[test]
    fn a_carriage_return_alone_is_refused_in_any_pieces() {
        let st = State {
            at_line_start: true,
            ..State::default()
        };
        let parse = |bytes: &[u8], format, cut: usize| {
            let mut p = Parser::new(format, false, st);
            let mut out = Parsed::default();
            (p.feed(&bytes[..cut], &mut out))
                .and_then(|()| p.feed(&bytes[cut..], &mut out))
                .and_then(|()| p.finish(&mut out))
        };
        let alone: [(&[u8], Format); 3] = [
            (b">a one\rACGT", Format::Fasta),
            (b">a\rACGTACGT\r", Format::Fasta),
            (b"@r\rAC\r+\rII\r", Format::Fastq),
        ];
        for (bytes, format) in alone {
            for cut in 0..=bytes.len() {
                let e = parse(bytes, format, cut).unwrap_err();
                assert!(
                    e.msg.contains("carriage return alone"),
                    "{bytes:?} cut at {cut}: {e:?}"
                );
            }
        }
        for (bytes, format) in [
            (&b">a one\r\nACGT\r\n"[..], Format::Fasta),
            (b"@r\r\nAC\r\n+\r\nII\r\n", Format::Fastq),
        ] {
            for cut in 0..=bytes.len() {
                assert!(parse(bytes, format, cut).is_ok(), "{bytes:?} cut at {cut}");
            }
        }
    }
}
