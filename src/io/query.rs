//! `psa query`: counts and locations of patterns in a built index, without MPI, on the threads
//! of rayon's pool (patterns in batches, each batch's answers written in pattern order; a
//! patterns file is read a batch at a time, so memory holds one batch whatever its size).
//!
//! Output (TSV), for each pattern in order: `pattern<TAB>count`; with `locate`, then one line per
//! reported match, `pattern<TAB>record<TAB>offset` (offset in the record; for a raw input the
//! record is the input file; with a document table, the document's number and the offset in
//! it). With `json`, one JSON object per pattern and line instead.
//!
//! A token index (`--token-width`) takes patterns of decimal token ids separated by spaces (one
//! pattern a line in a file), and counts n-grams.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::index::{tsv_field, Index};
use super::seq::{Format, Sequences};
use crate::config::json_str;
use crate::error::{Error, Result};

/// What `psa query` asks.
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// The SA file of the index (`OUT`).
    pub index: PathBuf,
    /// Patterns from the command line.
    pub patterns: Vec<Vec<u8>>,
    /// A file of patterns (`-`: standard input): one a line, or the reads of a FASTA/FASTQ
    /// file (gzip too).
    pub patterns_file: Option<PathBuf>,
    /// The patterns file's format ([`Format::Raw`]: one pattern a line); None: by its name, as
    /// the build's inputs ([`Format::from_name`]).
    pub patterns_format: Option<Format>,
    /// Report where the matches are, not only how many (`--locate`).
    pub locate: bool,
    /// At most this many matches reported per pattern (None: all).
    pub max_hits: Option<usize>,
    /// One JSON object per pattern instead of TSV (`--json`).
    pub json: bool,
}

/// What a query run did (for the log).
#[derive(Clone, Debug, Default)]
pub struct QueryReport {
    /// Patterns answered.
    pub patterns: usize,
    /// Matches counted over all patterns.
    pub matches: u64,
    /// Wall time, seconds.
    pub secs: f64,
}

/// Patterns per batch: answered in parallel, written in order.
const BATCH: usize = 1 << 14;
/// A batch also ends once it holds this many bytes of patterns (or its file's next chunk would
/// pass it).
const BATCH_BYTES: usize = 16 << 20;
/// Bytes read from a patterns file at a time (decompressed).
const CHUNK: usize = 1 << 20;

/// A patterns file (`-`: standard input) read a chunk at a time and handed out in batches, so
/// that memory holds one batch (and the pattern in progress), whatever the file's size: a FASTA
/// or FASTQ file's sequences (empty records included), else one pattern a line (empty lines
/// included, a `\r` before the line break dropped). gzip is recognised by its first bytes.
pub struct Patterns {
    input: Box<dyn Read>,
    /// The file as messages name it.
    shown: String,
    path: PathBuf,
    gzip: bool,
    /// FASTA or FASTQ: their parser and format; None: one pattern a line.
    reads: Option<(Sequences, Format)>,
    /// Lines: the line in progress (its end not read yet).
    line: Vec<u8>,
    /// Bytes read ahead (while looking at the file's start), not yet cut into patterns.
    ahead: Vec<u8>,
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
        let raw: Box<dyn Read> = match stdin {
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
        let input: Box<dyn Read> = match gzip {
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
            ahead: Vec::new(),
            ended: false,
        };
        // Lines of whitespace on a sequence index are dropped anyway: what comes first after
        // them decides whether the file looks like reads.
        if format != Format::Raw || (sequence && !asked) {
            p.skip_leading_space()?;
        }
        match p.ahead.first() {
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

    /// Reads up to [`CHUNK`] bytes (none: the end of the file).
    fn read_chunk(&mut self) -> Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(CHUNK);
        match (&mut self.input).take(CHUNK as u64).read_to_end(&mut buf) {
            Ok(_) => Ok(buf),
            Err(e) if self.gzip => Err(Error::BadInput(format!(
                "{}: not a valid gzip stream ({e})",
                self.shown
            ))),
            Err(e) => Err(Error::io("read patterns", &self.path, e)),
        }
    }

    /// Reads past the whitespace the file starts with, keeping the first chunk that holds more
    /// in [`Self::ahead`].
    fn skip_leading_space(&mut self) -> Result<()> {
        loop {
            let chunk = self.read_chunk()?;
            let lead = chunk.iter().take_while(|b| b.is_ascii_whitespace()).count();
            if lead < chunk.len() || chunk.is_empty() {
                self.ahead = chunk[lead..].to_vec();
                return Ok(());
            }
        }
    }

    /// The next batch of patterns (at most about [`BATCH`] patterns or [`BATCH_BYTES`] bytes
    /// besides one chunk's), in file order; None once the file has been read whole.
    pub fn next_batch(&mut self) -> Result<Option<Vec<Vec<u8>>>> {
        if self.ended {
            return Ok(None);
        }
        let mut batch = Vec::new();
        let mut bytes = 0;
        while !self.ended && batch.len() < BATCH && bytes < BATCH_BYTES {
            let chunk = match self.ahead.is_empty() {
                true => self.read_chunk()?,
                false => std::mem::take(&mut self.ahead),
            };
            bytes += chunk.len();
            self.ended = chunk.is_empty();
            self.cut(&chunk, &mut batch)?;
        }
        Ok(Some(batch))
    }

    /// Cuts `chunk`, the next bytes of the file (empty: its end), into patterns pushed to `batch`.
    fn cut(&mut self, chunk: &[u8], batch: &mut Vec<Vec<u8>>) -> Result<()> {
        let Some((reads, format)) = &mut self.reads else {
            let mut lines = chunk.split(|&b| b == b'\n');
            let last = lines.next_back().unwrap_or(&[]);
            for l in lines {
                self.line.extend_from_slice(l);
                let mut l = std::mem::take(&mut self.line);
                if l.last() == Some(&b'\r') {
                    l.pop();
                }
                batch.push(l);
            }
            self.line.extend_from_slice(last);
            if chunk.is_empty() && !self.line.is_empty() {
                self.cut(b"\n", batch)?;
            }
            return Ok(());
        };
        let parsed = match chunk.is_empty() {
            true => reads.finish(batch),
            false => reads.feed(chunk, batch),
        };
        parsed.map_err(|e| {
            Error::BadInput(format!(
                "{}: {e} (read as {}; --patterns-format lines reads one pattern a line)",
                self.shown,
                format.name().to_uppercase()
            ))
        })
    }
}

/// Answers `q` into `out`, after handing `warn` what the index's opening found doubtful
/// ([`Index::warnings`]), so a user sees it before the answers. The patterns of the command line
/// come first, then the patterns file's, read and answered a batch at a time ([`Patterns`]);
/// a bad patterns file is refused before any answer, one that turns out bad later (a parse or
/// gzip error) ends the answers there with its error. Runs on the current rayon pool.
pub fn run(q: &Query, out: &mut impl Write, warn: impl Fn(&str)) -> Result<QueryReport> {
    let t0 = std::time::Instant::now();
    if q.max_hits.is_some() && !q.locate {
        return Err(Error::Usage(
            "--max-hits limits the occurrences --locate reports: give --locate too".into(),
        ));
    }
    let index = Index::open(&q.index)?;
    index.warnings.iter().for_each(|w| warn(w));
    let sequence = index.meta.sequence;
    let tokens = index.meta.token_width > 0;
    // Whitespace around a pattern is dropped where the text cannot hold it, or separates ids.
    let trim = sequence || tokens;
    let mut patterns = q.patterns.clone();
    trim_all(&mut patterns, trim);
    if patterns.iter().any(|p| p.is_empty()) {
        return Err(Error::Usage(match (sequence, tokens) {
            (true, _) => "an empty pattern (or only whitespace, which a sequence index drops) occurs at every position: give patterns of at least one character",
            (_, true) => "an empty pattern occurs at every position: give patterns of at least one token id",
            _ => "an empty pattern occurs at every position: give patterns of at least one character",
        }.into()));
    }
    let format = match (tokens, q.patterns_format) {
        (true, Some(f)) if f != Format::Raw => {
            return Err(Error::Usage(format!(
                "a token index takes patterns of token ids, one a line: not --patterns-format {}",
                f.name()
            )))
        }
        (true, _) => Some(Format::Raw),
        (false, f) => f,
    };
    let mut file = match &q.patterns_file {
        Some(f) => Some(Patterns::open(f, format, sequence)?),
        None => None,
    };
    let mut answers = Answers {
        index: &index,
        q,
        out,
        report: QueryReport::default(),
    };
    let mut going = answers.write(&patterns)?;
    while let (true, Some(file)) = (going, &mut file) {
        let Some(mut batch) = file.next_batch()? else {
            break;
        };
        // Empty ones in a file (blank lines, empty reads) are skipped.
        trim_all(&mut batch, trim);
        batch.retain(|p| !p.is_empty());
        going = answers.write(&batch)?;
    }
    if going {
        written(answers.out.flush())?;
    }
    let mut report = answers.report;
    report.secs = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Drops the whitespace around each pattern where `trim` (a sequence index, whose text holds
/// none; a token index, whose patterns are ids).
fn trim_all(patterns: &mut [Vec<u8>], trim: bool) {
    if !trim {
        return;
    }
    for p in patterns.iter_mut() {
        let t = p.trim_ascii();
        if t.len() != p.len() {
            *p = t.to_vec();
        }
    }
}

/// Whether a write reached the reader: false when it stopped reading (`| head`), which ends
/// the answers without an error.
fn written(r: std::io::Result<()>) -> Result<bool> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        r => r
            .map(|()| true)
            .map_err(|e| Error::io("write", "standard output", e)),
    }
}

/// The answers of a query as they are written, with what they counted.
struct Answers<'a, W: Write> {
    index: &'a Index,
    q: &'a Query,
    out: &'a mut W,
    report: QueryReport,
}

impl<W: Write> Answers<'_, W> {
    /// Answers `patterns`, [`BATCH`] at a time in parallel, each batch written in order.
    /// Returns false once the reader stopped reading.
    fn write(&mut self, patterns: &[Vec<u8>]) -> Result<bool> {
        let (index, q) = (self.index, self.q);
        let max = q.max_hits.unwrap_or(usize::MAX);
        for batch in patterns.chunks(BATCH) {
            let answers: Vec<(Vec<u8>, u64)> = batch
                .par_iter()
                .map(|pat| answer(index, pat, q.locate, max, q.json))
                .collect::<Result<_>>()?;
            for (text, count) in answers {
                self.report.patterns += 1;
                self.report.matches += count;
                if !written(self.out.write_all(&text))? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

/// The lines answering one pattern, and its count. Errors where the index is damaged. The
/// tab-separated lines hold the pattern's and the records' names' bytes as they are; JSON,
/// which is UTF-8, shows bytes that are not as U+FFFD.
fn answer(
    index: &Index,
    pat: &[u8],
    locate: bool,
    max: usize,
    json: bool,
) -> Result<(Vec<u8>, u64)> {
    let key = match index.meta.token_width {
        0 => index.fold(pat),
        w => std::borrow::Cow::Owned(token_key(pat, w)?),
    };
    let range = index.range(&key)?;
    let count = (range.1 - range.0) as u64;
    let hits = match locate {
        true => index.locate(range, max)?,
        false => Vec::new(),
    };
    let documents = index.meta.doc_sep.is_some();
    let name = |r: usize| -> std::borrow::Cow<'_, [u8]> {
        match documents {
            true => r.to_string().into_bytes().into(),
            false => (index.meta.records.get(r))
                .map_or(&[][..], |r| &r.name[..])
                .into(),
        }
    };
    let place = match documents {
        true => "document",
        false => "record",
    };
    if json {
        let shown = String::from_utf8_lossy(pat);
        let mut s = format!("{{\"pattern\": {}, \"count\": {count}", json_str(&shown));
        if locate {
            let list: Vec<String> = hits
                .iter()
                .map(|h| {
                    let shown = match documents {
                        true => h.record.to_string(),
                        false => json_str(&String::from_utf8_lossy(&name(h.record))),
                    };
                    format!(
                        "{{\"{place}\": {shown}, \"offset\": {}, \"text_offset\": {}}}",
                        h.offset, h.text_offset
                    )
                })
                .collect();
            s.push_str(&format!(", \"hits\": [{}]", list.join(", ")));
        }
        s.push_str("}\n");
        return Ok((s.into_bytes(), count));
    }
    let shown = tsv_field(pat);
    let mut s = [&shown[..], format!("\t{count}\n").as_bytes()].concat();
    for h in &hits {
        s.extend_from_slice(&shown);
        s.push(b'\t');
        s.extend_from_slice(&tsv_field(&name(h.record)));
        s.extend_from_slice(format!("\t{}\n", h.offset).as_bytes());
    }
    Ok((s, count))
}

/// The bytes a token index's file holds for `pat`, decimal token ids separated by whitespace:
/// each id little-endian in `width` bytes. Errors name the pattern and the id that is not one.
fn token_key(pat: &[u8], width: u32) -> Result<Vec<u8>> {
    let max = (1u64 << (8 * width)) - 1;
    let mut key = Vec::with_capacity(pat.len());
    for id in pat
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
    {
        let value = std::str::from_utf8(id)
            .ok()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&v| v <= max);
        let Some(value) = value else {
            return Err(Error::BadInput(format!(
                "pattern '{}': '{}' is not a token id: this index holds tokens of {width} byte(s), and takes patterns of decimal ids 0 to {max} separated by spaces",
                String::from_utf8_lossy(pat),
                String::from_utf8_lossy(id)
            )));
        };
        key.extend_from_slice(&value.to_le_bytes()[..width as usize]);
    }
    Ok(key)
}
