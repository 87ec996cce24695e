//! The patterns of a query: a batch of them in one buffer ([`Batch`]), and a patterns file read
//! a chunk at a time into batches ([`Patterns`]), so that memory holds about two batches whatever
//! the file's size.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::seq::{Format, Sequences};

/// Patterns per batch: answered in parallel, written in order.
pub const BATCH: usize = 1 << 16;
/// A batch also ends once it holds this many bytes of patterns (or its file's next chunk would
/// pass it).
const BATCH_BYTES: usize = 16 << 20;
/// Bytes read from a patterns file at a time (decompressed).
const CHUNK: usize = 1 << 20;

/// Patterns one after another in one buffer, in order, with whitespace around them dropped where
/// the index asks it ([`Batch::new`]).
#[derive(Debug, Default)]
pub struct Batch {
    bytes: Vec<u8>,
    /// Where each pattern ends in `bytes`.
    ends: Vec<usize>,
    /// Drop the whitespace around each pattern (a sequence index, whose text holds none; a
    /// token index, whose patterns are ids).
    trim: bool,
}

impl Batch {
    /// An empty batch, trimming its patterns where `trim`.
    pub fn new(trim: bool) -> Batch {
        Batch {
            trim,
            ..Batch::default()
        }
    }

    /// An empty batch that trims as this one does.
    pub fn empty_like(&self) -> Batch {
        Batch::new(self.trim)
    }

    /// Appends `pat` (trimmed where asked), even an empty one.
    pub fn push(&mut self, pat: &[u8]) {
        let pat = match self.trim {
            true => pat.trim_ascii(),
            false => pat,
        };
        self.bytes.extend_from_slice(pat);
        self.ends.push(self.bytes.len());
    }

    /// Appends `pat` (trimmed where asked) unless it is empty: a file's blank lines and empty
    /// reads are skipped.
    fn push_some(&mut self, pat: &[u8]) {
        let before = self.bytes.len();
        self.push(pat);
        if self.bytes.len() == before {
            self.ends.pop();
        }
    }

    /// Patterns held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes of patterns held.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Pattern `i`.
    pub fn get(&self, i: usize) -> &[u8] {
        let start = match i {
            0 => 0,
            i => self.ends[i - 1],
        };
        &self.bytes[start..self.ends[i]]
    }

    /// Empties it, keeping its memory.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
}

/// A patterns file (`-`: standard input) read a chunk at a time and handed out in batches, so
/// that memory holds one batch (and the pattern in progress), whatever the file's size: a FASTA
/// or FASTQ file's sequences (empty records included), else one pattern a line (empty lines
/// included, a `\r` before the line break dropped). gzip is recognised by its first bytes.
pub struct Patterns {
    input: Box<dyn Read + Send>,
    /// The file as messages name it.
    shown: String,
    path: PathBuf,
    gzip: bool,
    /// FASTA or FASTQ: their parser and format; None: one pattern a line.
    reads: Option<(Sequences, Format)>,
    /// Lines: the line in progress (its end not read yet).
    line: Vec<u8>,
    /// The chunk last read, of which `chunk[ahead..]` is not cut into patterns yet.
    chunk: Vec<u8>,
    ahead: usize,
    ended: bool,
}

impl Patterns {
    /// Opens `path` (`-`: standard input) in `format` (None: by the file's name,
    /// [`Format::from_name`]; standard input: lines). For a `sequence` index, whose text holds
    /// no `>` or `@`, a file read as lines by its name that starts like FASTA or FASTQ is refused
    /// (say `--patterns-format`); blank lines before a FASTA/FASTQ file's first record are
    /// dropped (its line numbers then count from that record).
    pub fn open(path: &Path, format: Option<Format>, sequence: bool) -> Result<Patterns> {
        let stdin = path == Path::new("-");
        let raw: Box<dyn Read + Send> = match stdin {
            true => Box::new(std::io::stdin()),
            false => Box::new(File::open(path).map_err(|e| Error::io("read patterns", path, e))?),
        };
        let mut raw = std::io::BufReader::with_capacity(1 << 16, raw);
        let mut head = Vec::with_capacity(2);
        (&mut raw)
            .take(2)
            .read_to_end(&mut head)
            .map_err(|e| Error::io("read patterns", path, e))?;
        let gzip = head == [0x1f, 0x8b];
        let whole = std::io::Cursor::new(head).chain(raw);
        let input: Box<dyn Read + Send> = match gzip {
            true => Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(
                whole,
            ))),
            false => Box::new(whole),
        };
        let asked = format.is_some();
        let format = match (format, stdin) {
            (Some(f), _) => f,
            (None, true) => Format::Raw,
            (None, false) => Format::from_name(path),
        };
        let mut p = Patterns {
            input,
            shown: match stdin {
                true => "standard input".into(),
                false => path.display().to_string(),
            },
            path: path.to_path_buf(),
            gzip,
            reads: (format != Format::Raw).then(|| (Sequences::new(format), format)),
            line: Vec::new(),
            chunk: Vec::with_capacity(CHUNK),
            ahead: 0,
            ended: false,
        };
        // Lines of whitespace on a sequence index are dropped anyway: what comes first after
        // them decides whether the file looks like reads.
        if format != Format::Raw || (sequence && !asked) {
            p.skip_leading_space()?;
        }
        match p.chunk.get(p.ahead) {
            Some(&b) if format == Format::Raw && !asked && sequence && (b == b'>' || b == b'@') => {
                Err(Error::Usage(format!(
                    "{}: read as one pattern a line (no --patterns-format), but it starts with '{}' like a {} file, and no sequence text holds that byte: give --patterns-format fasta, fastq or lines",
                    p.shown,
                    b as char,
                    if b == b'>' { "FASTA" } else { "FASTQ" },
                )))
            }
            _ => Ok(p),
        }
    }

    /// Reads the next chunk, up to [`CHUNK`] bytes (none: the end of the file).
    fn read_chunk(&mut self) -> Result<()> {
        self.chunk.clear();
        self.ahead = 0;
        match (&mut self.input)
            .take(CHUNK as u64)
            .read_to_end(&mut self.chunk)
        {
            Ok(_) => Ok(()),
            Err(e) if self.gzip => Err(Error::BadInput(format!(
                "{}: not a valid gzip stream ({e})",
                self.shown
            ))),
            Err(e) => Err(Error::io("read patterns", &self.path, e)),
        }
    }

    /// Reads past the whitespace the file starts with: the first chunk that holds more is kept,
    /// from its first other byte on.
    fn skip_leading_space(&mut self) -> Result<()> {
        loop {
            self.read_chunk()?;
            let lead = self
                .chunk
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
            if lead < self.chunk.len() || self.chunk.is_empty() {
                self.ahead = lead;
                return Ok(());
            }
        }
    }

    /// Fills `batch` (emptied first) with the next patterns, at most about [`BATCH`] of them or
    /// [`BATCH_BYTES`] bytes besides one chunk's, in file order, the file's empty ones
    /// skipped. False once the file has been read whole (the batch may then hold its last
    /// patterns).
    pub fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
        batch.clear();
        while !self.ended && batch.len() < BATCH && batch.bytes() < BATCH_BYTES {
            if self.ahead == self.chunk.len() {
                self.read_chunk()?;
            }
            self.ended = self.chunk.is_empty();
            let chunk = std::mem::take(&mut self.chunk);
            let cut = self.cut(&chunk[self.ahead..], batch);
            self.ahead = chunk.len();
            self.chunk = chunk;
            cut?;
        }
        Ok(!self.ended)
    }

    /// Cuts `bytes`, the next bytes of the file (empty: its end), into patterns appended to
    /// `batch`.
    fn cut(&mut self, bytes: &[u8], batch: &mut Batch) -> Result<()> {
        let Some((reads, format)) = &mut self.reads else {
            self.cut_lines(bytes, batch);
            return Ok(());
        };
        let mut push = |p: &[u8]| batch.push_some(p);
        let parsed = match bytes.is_empty() {
            true => reads.finish(&mut push),
            false => reads.feed(bytes, &mut push),
        };
        parsed.map_err(|e| {
            Error::BadInput(format!(
                "{}: {e} (read as {}; --patterns-format lines reads one pattern a line)",
                self.shown,
                format.name().to_uppercase()
            ))
        })
    }

    /// [`Self::cut`] for a file of one pattern a line.
    fn cut_lines(&mut self, bytes: &[u8], batch: &mut Batch) {
        fn line(l: &[u8]) -> &[u8] {
            l.strip_suffix(b"\r").unwrap_or(l)
        }
        let mut rest = bytes;
        while let Some(end) = newline(rest) {
            match self.line.is_empty() {
                true => batch.push_some(line(&rest[..end])),
                false => {
                    self.line.extend_from_slice(&rest[..end]);
                    batch.push_some(line(&self.line));
                    self.line.clear();
                }
            }
            rest = &rest[end + 1..];
        }
        self.line.extend_from_slice(rest);
        if bytes.is_empty() && !self.line.is_empty() {
            batch.push_some(line(&self.line));
            self.line.clear();
        }
    }
}

/// Where the first line break in `s` is, eight bytes at a time.
fn newline(s: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    let mut i = 0;
    while let Some(word) = s.get(i..i + 8) {
        let w = u64::from_le_bytes(word.try_into().unwrap_or([0; 8])) ^ (ONES * b'\n' as u64);
        // The lowest byte that is 0 has its high bit set here (bytes above it may too).
        let zero = w.wrapping_sub(ONES) & !w & (ONES << 7);
        if zero != 0 {
            return Some(i + (zero.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    s[i..].iter().position(|&b| b == b'\n').map(|k| i + k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_are_found_anywhere() {
        for len in 0..40 {
            for at in 0..=len {
                let mut s = vec![b'\x8a'; len];
                s.iter_mut().step_by(3).for_each(|b| *b = 0x0b);
                if at < len {
                    s[at] = b'\n';
                }
                let want = s.iter().position(|&b| b == b'\n');
                assert_eq!(newline(&s), want, "{len} {at}");
            }
        }
    }
}
