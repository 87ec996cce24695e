//! Sequence input: FASTA and FASTQ files (plain or gzip) and several input files, turned into the
//! one text T whose suffix array psa builds, with the table of its records.
//!
//! T for sequence input: each record's sequence with line breaks and whitespace removed and ASCII
//! letters upper-cased (unless `keep_case`), followed by the byte `$`, records in file order and
//! files in the order given. With `revcomp`, the reverse complement of everything before T's last
//! `$` follows, then one more `$`: the records' reverse complements, last record first, each
//! followed by `$`. A raw file adds its bytes as they are (no `$`) and is one record.
//!
//! How the text is read:
//! - a plain FASTA or FASTQ file: every pe parses its own byte range (plus one byte to its left).
//!   What a range needs from before it (the line number, whether it starts inside a header, the
//!   record in progress) comes from prefix scans over the pes ([`Comm::exscan_sum`] and
//!   [`Comm::exscan_max`]); a name cut by a pe boundary is put together on pe 0, and a FASTQ
//!   record cut by one is checked from its pieces on every pe. No pe reads more than its range.
//! - a BGZF file (bgzip's blocked gzip): every pe decompresses the blocks that start in its byte
//!   range ([`super::bgzf`]) and parses them as a plain file's range, from the same scans;
//! - any other gzip file cannot be split: pe 0 decompresses it once, as a stream, a piece of
//!   [`crate::Config::read_piece`] bytes at a time (flate2's `MultiGzDecoder`, so files of many
//!   members read too), parses it and deals each piece's characters out at once, an equal share to
//!   every pe; once T's length is known, each piece's shares move to the pes that own them in T's
//!   layout, as a plain file's do. pe 0 holds one piece at a time, never the whole file.
//! - a raw file: every pe reads its part of T with positioned reads.
//!
//! The record splitter is psa's own (a line-oriented state machine, [`Parser`]), not a crate's:
//! the distributed case needs to start parsing in the middle of a file from a state computed by
//! prefix scans, and to report the pieces of names and records cut by pe boundaries; the readers
//! of needletail or noodles start at the beginning of a stream. The same kernel parses the gzip
//! stream, so both paths keep one set of rules and errors.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};

/// The kind of an input file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Any bytes, indexed as they are.
    Raw,
    /// FASTA: `>name description` lines, each followed by sequence lines.
    Fasta,
    /// FASTQ: records of four lines (`@name`, sequence, `+`, qualities).
    Fastq,
}

impl Format {
    /// The name used on the command line and in the index: "raw", "fasta" or "fastq".
    pub fn name(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Fasta => "fasta",
            Format::Fastq => "fastq",
        }
    }

    /// The format its name implies: `.fa .fasta .fna .ffn .faa .fas` are FASTA, `.fq .fastq`
    /// FASTQ, each optionally followed by `.gz`; anything else is raw.
    pub fn from_name(path: &Path) -> Format {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        match ext {
            "fa" | "fasta" | "fna" | "ffn" | "faa" | "fas" => Format::Fasta,
            "fq" | "fastq" => Format::Fastq,
            _ => Format::Raw,
        }
    }
}

/// How the inputs become T.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeqOptions {
    /// Every input's format; None: each file's from its name ([`Format::from_name`]).
    pub format: Option<Format>,
    /// Keep the case of sequence letters (default: upper-case them).
    pub keep_case: bool,
    /// Append the reverse complement of the records (sequence input only).
    pub revcomp: bool,
}

/// One input file as the run sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputFile {
    /// The path as given.
    pub path: PathBuf,
    /// Its format (by `--format`, else by its name).
    pub format: Format,
    /// gzip-compressed (found by its first two bytes; only sequence files are decompressed).
    pub gzip: bool,
    /// Bytes on disk.
    pub size: u64,
    /// Its modification time when opened ([`crate::io::index::modified_time`]), kept in the
    /// index: a raw input edited in place later keeps its size, not its time.
    pub modified: Option<crate::io::index::Mtime>,
}

/// One record of T: a FASTA/FASTQ record or a raw file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The first word of the header (for a raw file, its path as given; a reverse complement's
    /// name ends in `/rc`).
    pub name: String,
    /// Offset of its first character in T.
    pub start: u64,
    /// Characters (the `$` after it not counted).
    pub len: u64,
}

/// T's parts on every pe and what pe 0 knows about them.
pub struct Loaded {
    /// This pe's part of T (`layout`'s block).
    pub text: Vec<u8>,
    /// The block layout of T over the pes.
    pub layout: Layout,
    /// Every record in T order (pe 0; empty elsewhere).
    pub records: Vec<Record>,
}

fn invalid(path: &Path, line: u64, msg: impl std::fmt::Display) -> Error {
    Error::BadInput(format!("{}: line {}: {msg}", path.display(), line + 1))
}

impl InputFile {
    /// Looks at `path` (its size and first bytes) and decides its format. Local.
    pub fn open(path: &Path, forced: Option<Format>) -> Result<InputFile> {
        let size = super::input_len(path)? as u64;
        let modified = crate::io::index::modified_time(path);
        let format = forced.unwrap_or_else(|| Format::from_name(path));
        let mut magic = [0u8; 2];
        let gzip = format != Format::Raw
            && size >= 2
            && File::open(path)
                .and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut magic, 0))
                .map_err(|e| Error::io("read input", path, e))
                .map(|()| magic == [0x1f, 0x8b])?;
        Ok(InputFile {
            path: path.to_path_buf(),
            format,
            gzip,
            size,
            modified,
        })
    }

    /// The files of a run, the same on every pe (their sizes agreed). Collective.
    pub fn open_all(comm: &Comm, paths: &[PathBuf], opts: &SeqOptions) -> Result<Vec<InputFile>> {
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            let size = super::agreed_input_len(comm, p)?;
            let f = comm.agree(InputFile::open(p, opts.format))?;
            debug_assert_eq!(f.size, size as u64);
            // Every pe must read it the same way (a gzip is streamed by pe 0, plain text parsed
            // by all): copies that differ between nodes are refused.
            if comm.all_reduce_min(u64::from(f.gzip)) != comm.all_reduce_max(u64::from(f.gzip)) {
                return comm.agree(Err(Error::BadInput(format!(
                    "{}: some pes see a gzip file and others do not: the input differs between nodes",
                    p.display()
                ))));
            }
            files.push(f);
        }
        let raw = files.iter().any(|f| f.format == Format::Raw);
        if opts.revcomp && raw {
            return comm.agree(Err(Error::Usage(
                "--revcomp needs sequence input (FASTA or FASTQ): a raw input has no strands"
                    .into(),
            )));
        }
        if opts.keep_case && !files.iter().any(|f| f.format != Format::Raw) && comm.rank() == 0 {
            log::warn!(
                "--keep-case has no effect here: a raw input's bytes are kept as they are (only FASTA and FASTQ are upper-cased)"
            );
        }
        Ok(files)
    }

    /// T's length when it is known without reading (every input raw).
    pub fn known_len(files: &[InputFile]) -> Option<usize> {
        files
            .iter()
            .all(|f| f.format == Format::Raw)
            .then(|| files.iter().map(|f| f.size as usize).sum())
    }
}

// ------------------------------------------------------------------------------------------------
// The kernel: one piece of a file, from a known state

/// Where the parser stands between two bytes of a file.
#[derive(Clone, Copy, Debug, Default)]
struct State {
    /// Index of the current line (0-based).
    line: u64,
    /// The next byte starts a line.
    at_line_start: bool,
    /// The current line is a header (FASTA `>`, FASTQ `@`).
    in_header: bool,
    /// The current header's name (its first word) has not ended yet.
    name_open: bool,
    /// FASTA: a header came at or before this point.
    seen_header: bool,
    /// FASTQ: sequence and quality characters of the current record seen in this piece.
    seq: u64,
    qual: u64,
    /// FASTQ: the current record began before this piece (its counts are pieces).
    partial: bool,
    /// FASTQ: a blank line came where a record should start, at this line; from there on only
    /// whitespace may follow (a file may end in blank lines, a record may not follow one).
    trailing: Option<u64>,
}

/// A piece of a record's name: the start of a record, or the rest of a header cut by a pe
/// boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Frag {
    /// A record starts: its first character is T's character `at` (counted from the start of
    /// this piece's characters until [`Parsed::rebase`]).
    Start { at: u64, name: Vec<u8>, done: bool },
    /// More of the last record's header.
    Cont { name: Vec<u8>, done: bool },
}

/// What parsing one piece produced.
#[derive(Default, Debug)]
struct Parsed {
    /// T's characters of the piece.
    kept: Vec<u8>,
    /// Characters counted before `kept` (kept characters handed on already, in the stream).
    drained: u64,
    frags: Vec<Frag>,
    /// FASTQ records cut by a piece boundary: (record index, sequence, quality) characters seen.
    cut: Vec<[u64; 3]>,
}

impl Parsed {
    fn here(&self) -> u64 {
        self.drained + self.kept.len() as u64
    }
}

/// A parse error at a line of the file (0-based).
#[derive(Debug, PartialEq, Eq)]
struct LineError {
    line: u64,
    msg: String,
}

type Parse<T> = std::result::Result<T, LineError>;

/// The line-oriented state machine of FASTA and FASTQ (see the module docs).
struct Parser {
    format: Format,
    keep_case: bool,
    st: State,
}

fn is_space(b: u8) -> bool {
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
    fn new(format: Format, keep_case: bool, st: State) -> Self {
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
    fn feed(&mut self, bytes: &[u8], out: &mut Parsed) -> Parse<()> {
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
            if seg
                .iter()
                .position(|&b| b == b'\r')
                .is_some_and(|k| k + 1 < seg.len())
            {
                return self.error(
                    "a carriage return alone ends a line here (classic Mac line breaks): convert them first, e.g. tr '\\r' '\\n' < IN > OUT",
                );
            }
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
    fn end_piece(&mut self, out: &mut Parsed) {
        let between = self.st.at_line_start && self.st.line.is_multiple_of(4);
        if self.format == Format::Fastq && !between {
            out.cut.push([self.st.line / 4, self.st.seq, self.st.qual]);
        }
    }

    /// The file ends here.
    fn finish(&mut self, out: &mut Parsed) -> Parse<()> {
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
const TRAILING: &str =
    "blank line or whitespace where a FASTQ record ('@') should start (only blank lines may end the file)";

fn quality_mismatch(seq: u64, qual: u64) -> String {
    format!("the quality line has {qual} characters but the sequence has {seq}")
}

// ------------------------------------------------------------------------------------------------
// The distributed parse of a plain file

/// This pe's part of a file's T characters, and its records (on pe 0).
#[derive(Default)]
struct Part {
    kept: Vec<u8>,
    /// Every record of the file: name and start, relative to the file's first character (pe 0).
    starts: Vec<(String, u64)>,
    /// T characters of the whole file.
    total: u64,
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
fn parse_plain(comm: &Comm, file: &InputFile, keep_case: bool) -> Result<Part> {
    let bytes_layout = Layout::block(file.size as usize, comm.size());
    let (a, b) = (
        bytes_layout.start(comm.rank()),
        bytes_layout.end(comm.rank()),
    );
    let read = super::read_range(&file.path, a.saturating_sub(1), b);
    let buf = comm.agree(read)?;
    let halo = (a > 0).then(|| buf[0]);
    parse_range(comm, file, keep_case, buf, (a > 0) as usize, a, halo)
}

/// Parses a FASTA or FASTQ file that every pe holds a range of: `buf[skip..]` is this pe's,
/// bytes `[a, a + len)` of the (decompressed) file, the ranges in pe order and together the whole
/// file; `halo` the byte before it (None at the file's start). Collective. Exit: this pe's T
/// characters (`kept`), T's characters of the whole file and (pe 0) its records. Cost: one pass
/// over the range (two for FASTQ), a few scans and reductions, the cut names gathered on pe 0.
fn parse_range(
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
fn gather_names(comm: &Comm, frags: &[Frag], base: u64) -> Vec<(String, u64)> {
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

/// Names from their pieces: a continuation extends the record before it while its name is open.
fn assemble(frags: Vec<Frag>) -> Vec<(String, u64)> {
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
    out.into_iter()
        .map(|(n, at, _)| (String::from_utf8_lossy(&n).into_owned(), at))
        .collect()
}

// ------------------------------------------------------------------------------------------------
// gzip: pe 0 streams

/// Reads up to `buf.len()` decompressed bytes (fewer only at the end), and the error that
/// stopped it early, if any (the bytes before it are still good to parse).
fn fill(r: &mut impl Read, buf: &mut [u8]) -> (usize, Option<std::io::Error>) {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

/// Streams the decompressed file through the parser on pe 0, a piece at a time: `each(kept)`
/// gets every piece's T characters. Local (pe 0). Returns the records and T's characters.
fn stream_gzip(
    file: &InputFile,
    keep_case: bool,
    piece: usize,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<Part> {
    let f = File::open(&file.path).map_err(|e| Error::io("open input", &file.path, e))?;
    let mut z = flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(1 << 20, f));
    let st = State {
        at_line_start: true,
        ..State::default()
    };
    let mut parser = Parser::new(file.format, keep_case, st);
    let mut out = Parsed::default();
    let mut buf = vec![0u8; piece.max(1)];
    loop {
        let (got, failed) = fill(&mut z, &mut buf);
        parser
            .feed(&buf[..got], &mut out)
            .map_err(|e| invalid(&file.path, e.line, e.msg))?;
        if let Some(e) = failed {
            let why = match e.kind() {
                std::io::ErrorKind::UnexpectedEof => "the gzip stream is truncated".to_string(),
                _ => format!("not a valid gzip stream ({e})"),
            };
            return Err(invalid(&file.path, parser.st.line, why));
        }
        if got == 0 {
            break;
        }
        each(&out.kept)?;
        out.drained += out.kept.len() as u64;
        out.kept.clear();
    }
    parser
        .finish(&mut out)
        .map_err(|e| invalid(&file.path, e.line, e.msg))?;
    each(&out.kept)?;
    let total = out.here();
    Ok(Part {
        kept: Vec::new(),
        starts: assemble(out.frags),
        total,
    })
}

/// A gzip file's characters as pe 0 dealt them while it decompressed the file once
/// ([`deal_gzip`]): of every piece, this pe's share, at its offset in the file's span of T, one
/// share per piece (possibly empty), the same number on every pe.
struct Dealt(Vec<(u64, Vec<u8>)>);

/// The one pass over a gzip file: pe 0 decompresses and parses it a piece at a time
/// ([`stream_gzip`]) and deals every piece's characters out at once, an equal share to each pe in
/// pe order, so that every pe holds about its share of the file's characters (and pe 0 the
/// records) by the end, before T's layout is known; [`place_all`] then moves each piece's shares to
/// their owners. Collective; an error of the stream (a bad gzip, a truncated one, a parse error)
/// is an error on every pe. Cost: one decompression on pe 0; per piece one broadcast of three
/// words and one all-to-all of its characters from pe 0 (with its all-to-all of counts).
fn deal_gzip(
    comm: &Comm,
    file: &InputFile,
    keep_case: bool,
    piece: usize,
) -> Result<(Part, Dealt)> {
    let (p, me) = (comm.size(), comm.rank());
    let mut mine = Vec::new();
    // One round per piece: pe 0 says whether a piece follows (1), or the stream ended (0) or
    // failed (2), with the piece's first character's offset and its length; then deals it.
    let deal = |kept: &[u8], at: u64, mine: &mut Vec<(u64, Vec<u8>)>| {
        let mut head = [1, at, kept.len() as u64];
        comm.broadcast(&mut head, 0);
        let [go, at, len] = head;
        if go != 1 {
            return false;
        }
        let cut = |d: usize| len as usize * d / p;
        // pe 0 sends, the others only receive.
        let counts: Vec<usize> = match me {
            0 => (0..p).map(|d| cut(d + 1) - cut(d)).collect(),
            _ => vec![0; p],
        };
        let (got, _) = comm.all_to_all_v_counts(kept, &counts);
        mine.push((at + cut(me) as u64, got));
        true
    };
    let part = if me == 0 {
        let mut at = 0u64;
        let r = stream_gzip(file, keep_case, piece, |kept| {
            if !kept.is_empty() {
                deal(kept, at, &mut mine);
                at += kept.len() as u64;
            }
            Ok(())
        });
        let mut end = [if r.is_ok() { 0u64 } else { 2 }, 0, 0];
        comm.broadcast(&mut end, 0);
        comm.agree(r)?
    } else {
        while deal(&[], 0, &mut mine) {}
        comm.agree(Ok(Part::default()))?
    };
    let mut total = part.total;
    comm.broadcast(&mut total, 0);
    Ok((Part { total, ..part }, Dealt(mine)))
}

// ------------------------------------------------------------------------------------------------
// Placing T's characters

/// Moves `piece`, T's characters `[first, first + piece.len())`, to the pes that own them in
/// `target`. Collective: every pe passes one piece (possibly empty); the pieces of one call are
/// disjoint. Exit: the characters of all pieces that this pe owns, in T order. Cost: an
/// all-gather of one word, an all-to-all of counts and one of the characters (each sent once).
#[must_use]
fn place(comm: &Comm, first: usize, piece: &[u8], target: &Layout) -> Vec<u8> {
    let p = comm.size();
    let end = first + piece.len();
    let counts: Vec<usize> = (0..p)
        .map(|d| {
            target
                .end(d)
                .min(end)
                .saturating_sub(target.start(d).max(first))
        })
        .collect();
    let firsts = comm.all_gather(first as u64);
    let (got, from) = comm.all_to_all_v_counts(piece, &counts);
    // Segments arrive in pe order; put them in T order.
    let mut segs = Vec::with_capacity(p);
    let mut off = 0;
    for (s, &c) in from.iter().enumerate() {
        segs.push((firsts[s], off, c));
        off += c;
    }
    if segs.windows(2).all(|w| w[0].0 <= w[1].0) {
        return got;
    }
    segs.sort_by_key(|s| s.0);
    let mut out = Vec::with_capacity(got.len());
    for (_, off, c) in segs {
        out.extend_from_slice(&got[off..off + c]);
    }
    out
}

/// The complement of a nucleotide code (IUPAC; case kept; U pairs with A); anything else
/// (`$`, `*`, `-`, amino acids without a complement code) stays.
pub fn complement(b: u8) -> u8 {
    let c = match b.to_ascii_uppercase() {
        b'A' => b'T',
        b'T' | b'U' => b'A',
        b'C' => b'G',
        b'G' => b'C',
        b'R' => b'Y',
        b'Y' => b'R',
        b'K' => b'M',
        b'M' => b'K',
        b'B' => b'V',
        b'V' => b'B',
        b'D' => b'H',
        b'H' => b'D',
        _ => return b,
    };
    if b.is_ascii_lowercase() {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

/// T followed by the reverse complement of `T[..n-1]` and a `$` (T ends in `$`): each pe's block
/// of `layout` (n characters) in, its block of the layout of 2n characters out. Collective.
#[must_use]
fn with_revcomp(comm: &Comm, text: Vec<u8>, layout: &Layout) -> (Vec<u8>, Layout) {
    let n = layout.len();
    let target = Layout::block(2 * n, comm.size());
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let fwd = place(comm, lo, &text, &target);
    let upto = hi.min(n.saturating_sub(1));
    let rc: Vec<u8> = text[..upto.saturating_sub(lo).min(text.len())]
        .iter()
        .rev()
        .map(|&b| complement(b))
        .collect();
    let rc_first = if rc.is_empty() {
        2 * n
    } else {
        2 * n - 1 - upto
    };
    drop(text);
    let back = place(comm, rc_first, &rc, &target);
    let mut out = fwd;
    out.extend(back);
    if n > 0 && target.end(me) == 2 * n && target.local_len(me) > 0 {
        out.push(b'$');
    }
    debug_assert_eq!(out.len(), target.local_len(me));
    (out, target)
}

// ------------------------------------------------------------------------------------------------
// The driver

/// A gzip input of at least this many bytes that pe 0 streams alone at p > 1 is worth a hint.
const STREAM_HINT_BYTES: u64 = 16 << 20;

/// How a file's characters reach their pes once T's layout is known.
enum Pending {
    Raw,
    Plain(Vec<u8>),
    Gzip(Dealt),
}

impl Pending {
    /// A parsed file's part, its kept characters moved out to wait for T's layout.
    fn plain(mut part: Part) -> (Part, Pending) {
        let kept = std::mem::take(&mut part.kept);
        (part, Pending::Plain(kept))
    }
}

/// Reads every input into T, laid out evenly over the pes, with its records on pe 0: [`scan`]
/// then [`Scanned::place`]. Collective; an error on one pe is an error on all. `piece`: bytes pe
/// 0 decompresses at a time.
///
/// Memory per pe: while a file is parsed its byte range (a BGZF file's: the compressed range and
/// its blocks inflated, as much as that range holds), then its share of each sequence file's
/// characters (of a gzip stream's: its share of every piece) until T's layout is known, then its
/// block of T (twice that with `revcomp` while the reverse complement is placed); pe 0 also one
/// piece of a gzip stream and the names of the records.
pub fn load(comm: &Comm, files: &[InputFile], opts: &SeqOptions, piece: usize) -> Result<Loaded> {
    scan(comm, files, opts, piece)?.place(comm)
}

/// The inputs parsed and counted, T not yet laid out: [`Scanned::len`] is T's length (for a
/// plan made before T's characters move to its layout), [`Scanned::place`] moves them.
pub struct Scanned<'a> {
    files: &'a [InputFile],
    opts: SeqOptions,
    pending: Vec<(u64, Pending)>,
    records: Vec<Record>,
    /// Characters before the reverse complement.
    forward: u64,
}

/// The first half of [`load`]: every sequence file parsed (each pe keeps its share of its
/// characters; a gzip stream's decompressed by pe 0, which deals them out), the records found.
/// Collective.
pub fn scan<'a>(
    comm: &Comm,
    files: &'a [InputFile],
    opts: &SeqOptions,
    piece: usize,
) -> Result<Scanned<'a>> {
    let mut pending = Vec::with_capacity(files.len());
    let mut records = Vec::new();
    let mut base = 0u64;
    for f in files {
        let (part, how) = match (f.format, f.gzip) {
            (Format::Raw, _) => (
                Part {
                    kept: Vec::new(),
                    starts: vec![(f.path.display().to_string(), 0)],
                    total: f.size,
                },
                Pending::Raw,
            ),
            (_, false) => Pending::plain(parse_plain(comm, f, opts.keep_case)?),
            (_, true) => match super::bgzf::read_part(comm, &f.path, f.size)? {
                Some(z) => {
                    let (a, halo) = (z.offset as usize, z.before);
                    Pending::plain(parse_range(comm, f, opts.keep_case, z.bytes, 0, a, halo)?)
                }
                None => {
                    if comm.rank() == 0 && comm.size() > 1 && f.size >= STREAM_HINT_BYTES {
                        log::info!(
                            "{} is a gzip stream, not bgzip's BGZF: pe 0 decompresses it alone (`bgzip` it once, and every pe reads its part)",
                            f.path.display()
                        );
                    }
                    let (part, dealt) = deal_gzip(comm, f, opts.keep_case, piece)?;
                    (part, Pending::Gzip(dealt))
                }
            },
        };
        let end = base + part.total;
        // Each record runs to the next one's start, less its `$` (a raw file has none).
        let dollar = (f.format != Format::Raw) as u64;
        for (k, (name, at)) in part.starts.iter().enumerate() {
            let next = part.starts.get(k + 1).map_or(end, |s| base + s.1);
            records.push(Record {
                name: name.clone(),
                start: base + at,
                len: next - dollar - (base + at),
            });
        }
        pending.push((base, how));
        base = end;
    }
    Ok(Scanned {
        files,
        opts: opts.clone(),
        pending,
        records,
        forward: base,
    })
}

impl Scanned<'_> {
    /// T's length (with the reverse complement when asked).
    pub fn len(&self) -> u64 {
        self.forward * if self.opts.revcomp { 2 } else { 1 }
    }

    /// Whether T is empty.
    pub fn is_empty(&self) -> bool {
        self.forward == 0
    }

    /// Bytes of the records' table on this pe as the build holds it to its end (what pe 0 holds:
    /// the others keep no records, so the caller takes pe 0's): each record and its name's heap block (16-byte granules and a word of the allocator's
    /// besides), with their reverse complements' twins (names ending in `/rc`) when asked. Local.
    pub fn records_bytes(&self) -> u64 {
        let one = |name: usize| (size_of::<Record>() + name.div_ceil(16) * 16 + 16) as u64;
        let forward: u64 = self.records.iter().map(|r| one(r.name.capacity())).sum();
        let spare = (self.records.capacity() - self.records.len()) * size_of::<Record>();
        let twins = match self.opts.revcomp {
            true => (self.records.iter()).map(|r| one(r.name.len() + 3)).sum(),
            false => 0,
        };
        forward + spare as u64 + twins
    }

    /// The second half of [`load`]: T's characters to their pes in the block layout. Collective.
    pub fn place(self, comm: &Comm) -> Result<Loaded> {
        let Scanned {
            files,
            opts,
            pending,
            records,
            forward: base,
        } = self;
        place_all(comm, files, &opts, pending, records, base)
    }
}

/// [`Scanned::place`].
fn place_all(
    comm: &Comm,
    files: &[InputFile],
    opts: &SeqOptions,
    pending: Vec<(u64, Pending)>,
    mut records: Vec<Record>,
    base: u64,
) -> Result<Loaded> {
    let n = usize::try_from(base)
        .map_err(|_| Error::BadInput(format!("the text has {base} characters: too many")))?;
    let layout = Layout::block(n, comm.size());
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let mut text = Vec::with_capacity(layout.local_len(me));
    for (f, (first, how)) in files.iter().zip(pending) {
        let first = first as usize;
        match how {
            Pending::Raw => {
                let (a, b) = (lo.max(first), hi.min(first + f.size as usize));
                let part = match a < b {
                    true => super::read_range(&f.path, a - first, b - first),
                    false => Ok(Vec::new()),
                };
                let changed = super::input_len(&f.path).ok() != Some(f.size as usize);
                let part = match changed {
                    true => Err(Error::BadInput(format!(
                        "input '{}' changed while being read (it had {} bytes)",
                        f.path.display(),
                        f.size
                    ))),
                    false => part,
                };
                let part = comm.agree(part)?;
                // The usual case, one raw file: its part is the text (no second copy, no second
                // n bytes at the peak).
                match text.is_empty() {
                    true => text = part,
                    false => text.extend(part),
                }
            }
            Pending::Plain(kept) => {
                let at = first + comm.exscan_sum(kept.len() as u64) as usize;
                text.extend(place(comm, at, &kept, &layout));
            }
            Pending::Gzip(Dealt(shares)) => {
                // Piece by piece (every pe holds a share of each), in T order.
                for (at, share) in shares {
                    text.extend(place(comm, first + at as usize, &share, &layout));
                }
            }
        }
    }
    debug_assert_eq!(text.len(), layout.local_len(me));
    if !opts.revcomp {
        return Ok(Loaded {
            text,
            layout,
            records: if me == 0 { records } else { Vec::new() },
        });
    }
    let (text, layout) = with_revcomp(comm, text, &layout);
    let fwd = records.len();
    // Exactly the twins' room and names (what `Scanned::records_bytes` counts).
    records.reserve_exact(fwd);
    for k in (0..fwd).rev() {
        let r = &records[k];
        // The reverse complement of record k ends where its mirror image in T begins.
        let start = 2 * base - 1 - (r.start + r.len);
        let mut name = String::with_capacity(r.name.len() + 3);
        name.push_str(&r.name);
        name.push_str("/rc");
        records.push(Record {
            name,
            start,
            len: r.len,
        });
    }
    Ok(Loaded {
        text,
        layout,
        records: if me == 0 { records } else { Vec::new() },
    })
}

/// The sequences of a FASTA or FASTQ stream, record by record as it is fed, by the build's
/// parser: letters as they are (case kept), names dropped (`psa query` reads its patterns
/// files with it, a chunk at a time). Holds the record in progress; local.
pub struct Sequences {
    parser: Parser,
    out: Parsed,
    /// The characters of the record in progress (its end not seen yet).
    open: Vec<u8>,
}

impl Sequences {
    /// A parser at the start of a stream in `format` (FASTA or FASTQ).
    pub fn new(format: Format) -> Sequences {
        let st = State {
            at_line_start: true,
            ..State::default()
        };
        Sequences {
            parser: Parser::new(format, true, st),
            out: Parsed::default(),
            open: Vec::new(),
        }
    }

    /// Parses `bytes`, the next bytes of the stream, and pushes each record that ended in them
    /// to `done` (empty ones too). A parse error is "line N: why" (lines counted from 1).
    pub fn feed(
        &mut self,
        bytes: &[u8],
        done: &mut Vec<Vec<u8>>,
    ) -> std::result::Result<(), String> {
        let r = self.parser.feed(bytes, &mut self.out);
        self.hand_on(done);
        r.map_err(|e| format!("line {}: {}", e.line + 1, e.msg))
    }

    /// The stream ends: pushes its last record to `done`.
    pub fn finish(&mut self, done: &mut Vec<Vec<u8>>) -> std::result::Result<(), String> {
        let r = self.parser.finish(&mut self.out);
        self.hand_on(done);
        r.map_err(|e| format!("line {}: {}", e.line + 1, e.msg))
    }

    /// Moves the records that the characters kept so far end (each ends in `$`, which no
    /// sequence letter is) to `done`, and the rest to the record in progress.
    fn hand_on(&mut self, done: &mut Vec<Vec<u8>>) {
        let mut pieces = self.out.kept.split(|&b| b == b'$');
        let last = pieces.next_back().unwrap_or(&[]);
        for piece in pieces {
            self.open.extend_from_slice(piece);
            done.push(std::mem::take(&mut self.open));
        }
        self.open.extend_from_slice(last);
        self.out.kept.clear();
        self.out.frags.clear();
        self.out.cut.clear();
    }
}

/// T and its records from whole files in memory, sequentially, by the same parser (`psa query`
/// reads its patterns files with it; raw files are named `#k`). Local.
pub fn text_of(
    files: &[(Vec<u8>, Format)],
    opts: &SeqOptions,
) -> std::result::Result<(Vec<u8>, Vec<Record>), String> {
    let mut t = Vec::new();
    let mut records = Vec::new();
    for (k, (bytes, format)) in files.iter().enumerate() {
        let first = t.len() as u64;
        if *format == Format::Raw {
            t.extend_from_slice(bytes);
            records.push(Record {
                name: format!("#{k}"),
                start: first,
                len: bytes.len() as u64,
            });
            continue;
        }
        let st = State {
            at_line_start: true,
            ..State::default()
        };
        let mut parser = Parser::new(*format, opts.keep_case, st);
        let mut out = Parsed::default();
        parser
            .feed(bytes, &mut out)
            .and_then(|()| parser.finish(&mut out))
            .map_err(|e| format!("line {}: {}", e.line + 1, e.msg))?;
        let end = first + out.kept.len() as u64;
        let starts = assemble(out.frags);
        for (j, (name, at)) in starts.iter().enumerate() {
            let next = starts.get(j + 1).map_or(end, |s| first + s.1);
            records.push(Record {
                name: name.clone(),
                start: first + at,
                len: next - 1 - (first + at),
            });
        }
        t.extend_from_slice(&out.kept);
    }
    if opts.revcomp && !t.is_empty() {
        let n = t.len() as u64;
        let rc: Vec<u8> = t[..t.len() - 1]
            .iter()
            .rev()
            .map(|&b| complement(b))
            .collect();
        t.extend(rc);
        t.push(b'$');
        for k in (0..records.len()).rev() {
            let r = records[k].clone();
            records.push(Record {
                name: format!("{}/rc", r.name),
                start: 2 * n - 1 - (r.start + r.len),
                len: r.len,
            });
        }
    }
    Ok((t, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(bytes: &[u8], format: Format) -> (Vec<u8>, Vec<(String, u64, u64)>) {
        let (t, r) = text_of(&[(bytes.to_vec(), format)], &SeqOptions::default()).unwrap();
        (t, r.into_iter().map(|r| (r.name, r.start, r.len)).collect())
    }

    fn err(bytes: &[u8], format: Format) -> String {
        text_of(&[(bytes.to_vec(), format)], &SeqOptions::default()).unwrap_err()
    }

    #[test]
    fn fasta_text_rule() {
        let (text, recs) = t(b">a one\nacg\r\nT\n>b\n>c x\nNN n\n\n", Format::Fasta);
        assert_eq!(text, b"ACGT$$NNN$");
        assert_eq!(
            recs,
            [("a".into(), 0, 4), ("b".into(), 5, 0), ("c".into(), 6, 3)]
        );
        let (text, _) = t(b"\n\n>x", Format::Fasta);
        assert_eq!(text, b"$");
        assert_eq!(t(b"", Format::Fasta).0, b"");
    }

    #[test]
    fn fastq_text_rule() {
        let (text, recs) = t(b"@r1 d\nacgt\n+\nIIII\n@r2\n\n+r2\n\n", Format::Fastq);
        assert_eq!(text, b"ACGT$$");
        assert_eq!(recs, [("r1".into(), 0, 4), ("r2".into(), 5, 0)]);
        let (text, _) = t(b"@r1\r\nAC\r\n+\r\n!!\r\n", Format::Fastq);
        assert_eq!(text, b"AC$");
    }

    #[test]
    fn errors_name_the_line() {
        assert!(err(b"ACGT\n>a\n", Format::Fasta).starts_with("line 1: sequence before"));
        assert!(err(b">a\nAC\x00GT\n", Format::Fasta).starts_with("line 2: byte 0x00"));
        let e = err(b"@r\nACG\n+\nII\n", Format::Fastq);
        assert!(e.starts_with("line 4: the quality line has 2"), "{e}");
        let e = err(b"@r\nACG\n+\nIII\n@s\nA\n", Format::Fastq);
        assert!(
            e.contains("ends inside the FASTQ record that starts at line 5"),
            "{e}"
        );
        let e = err(b"@r\nACG\n-\nIII\n", Format::Fastq);
        assert!(e.starts_with("line 3:"), "{e}");
    }

    #[test]
    fn revcomp_mirrors_the_records() {
        let opts = SeqOptions {
            revcomp: true,
            ..SeqOptions::default()
        };
        let (text, recs) =
            text_of(&[(b">a\nAAC\n>b\nGT\n".to_vec(), Format::Fasta)], &opts).unwrap();
        assert_eq!(text, b"AAC$GT$AC$GTT$");
        let names: Vec<_> = recs
            .iter()
            .map(|r| (r.name.as_str(), r.start, r.len))
            .collect();
        assert_eq!(
            names,
            [("a", 0, 3), ("b", 4, 2), ("b/rc", 7, 2), ("a/rc", 10, 3)]
        );
    }

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

    #[test]
    fn formats_from_names() {
        for (n, f) in [
            ("g.fa", Format::Fasta),
            ("g.FNA.gz", Format::Fasta),
            ("r.fq.gz", Format::Fastq),
            ("r.fastq", Format::Fastq),
            ("t.txt", Format::Raw),
            ("t.gz", Format::Raw),
        ] {
            assert_eq!(Format::from_name(Path::new(n)), f, "{n}");
        }
    }

    /// A stream fed in pieces of any size gives each record's sequence (case kept, empty ones
    /// too) as the whole file read at once does, and its errors name the same line.
    #[test]
    fn sequences_stream_in_any_pieces() {
        let fasta = b">a x\nACg\r\nTT\n>\n>c\nN-*\n\n>d\nGG".as_slice();
        let fastq = b"@a\nACGT\n+\nIIII\n@b\n\n+\n\n@c\ngg\n+\n!!\n".as_slice();
        let opts = SeqOptions {
            keep_case: true,
            ..SeqOptions::default()
        };
        for (bytes, format) in [(fasta, Format::Fasta), (fastq, Format::Fastq)] {
            let (t, records) = text_of(&[(bytes.to_vec(), format)], &opts).unwrap();
            let want: Vec<Vec<u8>> = (records.iter())
                .map(|r| t[r.start as usize..(r.start + r.len) as usize].to_vec())
                .collect();
            for piece in [1, 2, 3, 7, bytes.len()] {
                let mut s = Sequences::new(format);
                let mut got = Vec::new();
                for part in bytes.chunks(piece) {
                    s.feed(part, &mut got).unwrap();
                }
                s.finish(&mut got).unwrap();
                assert_eq!(got, want, "{format:?} in pieces of {piece}");
            }
        }
        let mut s = Sequences::new(Format::Fastq);
        let mut got = Vec::new();
        s.feed(b"@a\nAC\n+\nI", &mut got).unwrap();
        s.feed(b"I\n@b\nA\n+\nII\n", &mut got).unwrap_err();
        let e = err(b"@a\nAC\n+\nII\n@b\nA\n+\nII\n", Format::Fastq);
        let mut s = Sequences::new(Format::Fastq);
        let streamed =
            (s.feed(b"@a\nAC\n+\nII\n@b\nA\n+\nII\n", &mut got)).and_then(|()| s.finish(&mut got));
        assert_eq!(streamed.unwrap_err(), e);
    }
}
