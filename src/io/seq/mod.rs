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
//! The record splitter is psa's own (a line-oriented state machine, [`parser::Parser`]), not a crate's:
//! the distributed case needs to start parsing in the middle of a file from a state computed by
//! prefix scans, and to report the pieces of names and records cut by pe boundaries; the readers
//! of needletail or noodles start at the beginning of a stream. The same kernel parses the gzip
//!
//! The parts: `input.rs` (the inputs, the options, the records), `parser.rs` (the kernel),
//! `plain.rs` (the distributed parse of a plain file's byte ranges), `gzip.rs` (pe 0 streams a
//! gzip file and deals it out), `place.rs` (T's characters to their owners, the reverse
//! complement), `local.rs` (sequential parsing for `psa query`); this file the two halves of
//! [`load`]: [`scan`] and [`Scanned::place`].

mod gzip;
mod input;
mod local;
mod parser;
mod place;
mod plain;

pub use input::{Format, InputFile, Loaded, Record, SeqOptions};
pub use local::{text_of, Sequences};
pub use place::complement;

use std::os::unix::ffi::OsStrExt;

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};
use gzip::{deal_gzip, Dealt};
use place::{place, with_revcomp};
use plain::{parse_plain, parse_range, Part};

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
                    starts: vec![(f.path.as_os_str().as_bytes().to_vec(), 0)],
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

    /// Every record T will hold as (name, whether it is a reverse complement's twin, whose name
    /// then ends in `/rc`, start, length), in the order of [`Loaded::records`]: the scanned
    /// ones, then with `--revcomp` their twins as [`Scanned::place`] makes them. pe 0's (the
    /// others hold no records). Local.
    pub fn rows(&self) -> impl Iterator<Item = (&[u8], bool, u64, u64)> + '_ {
        let forward = (self.records.iter()).map(|r| (&r.name[..], false, r.start, r.len));
        let twins = (self.records.iter().rev())
            .filter(|_| self.opts.revcomp)
            .map(|r| (&r.name[..], true, twin_start(self.forward, r), r.len));
        forward.chain(twins)
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

/// Where the reverse complement of `r` starts in T, whose forward half has `base` characters:
/// it ends where `r`'s mirror image begins.
fn twin_start(base: u64, r: &Record) -> u64 {
    2 * base - 1 - (r.start + r.len)
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
        let start = twin_start(base, r);
        let mut name = Vec::with_capacity(r.name.len() + 3);
        name.extend_from_slice(&r.name);
        name.extend_from_slice(b"/rc");
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
