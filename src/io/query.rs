//! `psa query`: counts and locations of patterns in a built index, without MPI, on the threads
//! of rayon's pool (patterns in batches, each batch's answers written in pattern order).
//!
//! Output (TSV), for each pattern in order: `pattern<TAB>count`; with `locate`, then one line per
//! reported match, `pattern<TAB>record<TAB>offset` (offset in the record; for a raw input the
//! record is the input file). With `json`, one JSON object per pattern and line instead.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::index::{tsv_field, Index};
use super::seq::{text_of, Format, SeqOptions};
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

/// Reads a patterns file (`-`: standard input) in `format` (None: by the file's name,
/// [`Format::from_name`]): a FASTA or FASTQ file's sequences (empty records skipped), else one
/// pattern a line (empty lines skipped, a `\r` before the line break dropped). gzip is
/// recognised by its first bytes. For a `sequence` index, whose text holds no `>` or `@`, a
/// file read as lines by its name that starts like FASTA or FASTQ is refused (say
/// `--patterns-format`).
pub fn read_patterns(path: &Path, format: Option<Format>, sequence: bool) -> Result<Vec<Vec<u8>>> {
    let stdin = path == Path::new("-");
    let asked = format.is_some();
    let mut bytes = match stdin {
        true => {
            let mut v = Vec::new();
            std::io::stdin()
                .read_to_end(&mut v)
                .map_err(|e| Error::io("read patterns", "standard input", e))?;
            v
        }
        false => std::fs::read(path).map_err(|e| Error::io("read patterns", path, e))?,
    };
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut plain)
            .map_err(|e| {
                Error::BadInput(format!("{}: not a valid gzip stream ({e})", path.display()))
            })?;
        bytes = plain;
    }
    let format = match (format, stdin) {
        (Some(f), _) => f,
        (None, true) => Format::Raw,
        (None, false) => Format::from_name(path),
    };
    let lead = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    let looks_like_reads = matches!(bytes.get(lead), Some(b'>' | b'@'));
    if format == Format::Raw && !asked && sequence && looks_like_reads {
        return Err(Error::Usage(format!(
            "{}: read as one pattern a line (no --patterns-format), but it starts with '{}' like a {} file, and no sequence text holds that byte: give --patterns-format fasta, fastq or lines",
            match stdin {
                true => "standard input".into(),
                false => path.display().to_string(),
            },
            bytes[lead] as char,
            if bytes[lead] == b'>' { "FASTA" } else { "FASTQ" },
        )));
    }
    if format == Format::Raw {
        return Ok(bytes
            .split(|&b| b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .filter(|l| !l.is_empty())
            .map(|l| l.to_vec())
            .collect());
    }
    let opts = SeqOptions {
        keep_case: true,
        ..SeqOptions::default()
    };
    // Blank lines before the first record are no part of it (FASTQ's parser wants a record at
    // once); its line numbers then count from the first record.
    bytes.drain(..lead);
    let (t, records) = text_of(&[(bytes, format)], &opts).map_err(|e| {
        Error::BadInput(format!(
            "{}: {e} (read as {}; --patterns-format lines reads one pattern a line)",
            path.display(),
            format.name().to_uppercase()
        ))
    })?;
    Ok(records
        .iter()
        .filter(|r| r.len > 0)
        .map(|r| t[r.start as usize..(r.start + r.len) as usize].to_vec())
        .collect())
}

/// Answers `q` into `out`, after handing `warn` what the index's opening found doubtful
/// ([`Index::warnings`]), so a user sees it before the answers. Runs on the current rayon pool.
pub fn run(q: &Query, out: &mut impl Write, warn: impl Fn(&str)) -> Result<QueryReport> {
    let t0 = std::time::Instant::now();
    if q.max_hits.is_some() && !q.locate {
        return Err(Error::Usage(
            "--max-hits limits the occurrences --locate reports: give --locate too".into(),
        ));
    }
    let index = Index::open(&q.index)?;
    index.warnings.iter().for_each(|w| warn(w));
    // A sequence text holds no whitespace: the whitespace around a pattern is no part of it.
    let trim = |p: &mut Vec<u8>| {
        let t = p.trim_ascii();
        if index.meta.sequence && t.len() != p.len() {
            *p = t.to_vec();
        }
    };
    let mut patterns = q.patterns.clone();
    patterns.iter_mut().for_each(trim);
    if patterns.iter().any(|p| p.is_empty()) {
        return Err(Error::Usage(match index.meta.sequence {
            true => "an empty pattern (or only whitespace, which a sequence index drops) occurs at every position: give patterns of at least one character",
            false => "an empty pattern occurs at every position: give patterns of at least one character",
        }.into()));
    }
    if let Some(f) = &q.patterns_file {
        // Empty ones in a file (blank lines, empty reads) are skipped.
        let mut read = read_patterns(f, q.patterns_format, index.meta.sequence)?;
        read.iter_mut().for_each(trim);
        patterns.extend(read.into_iter().filter(|p| !p.is_empty()));
    }
    let max = q.max_hits.unwrap_or(usize::MAX);
    let mut matches = 0u64;
    let write_err = |e| Error::io("write", "standard output", e);
    // A reader that stops reading (`| head`) ends the answers: no error.
    let written = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        r => r.map(|()| true).map_err(write_err),
    };
    'batches: for batch in patterns.chunks(BATCH) {
        let answers: Vec<(String, u64)> = batch
            .par_iter()
            .map(|pat| answer(&index, pat, q.locate, max, q.json))
            .collect::<Result<_>>()?;
        for (text, count) in answers {
            matches += count;
            if !written(out.write_all(text.as_bytes()))? {
                break 'batches;
            }
        }
    }
    written(out.flush())?;
    Ok(QueryReport {
        patterns: patterns.len(),
        matches,
        secs: t0.elapsed().as_secs_f64(),
    })
}

/// The lines answering one pattern, and its count. Errors where the index is damaged.
fn answer(
    index: &Index,
    pat: &[u8],
    locate: bool,
    max: usize,
    json: bool,
) -> Result<(String, u64)> {
    let folded = index.fold(pat);
    let range = index.range(&folded)?;
    let count = (range.1 - range.0) as u64;
    let shown = String::from_utf8_lossy(pat);
    let hits = match locate {
        true => index.locate(range, max)?,
        false => Vec::new(),
    };
    let name = |r: usize| {
        index
            .meta
            .records
            .get(r)
            .map_or("", |r| r.name.as_str())
            .to_string()
    };
    let mut s = String::new();
    if json {
        s.push_str(&format!(
            "{{\"pattern\": {}, \"count\": {count}",
            json_str(&shown)
        ));
        if locate {
            let list: Vec<String> = hits
                .iter()
                .map(|h| {
                    format!(
                        "{{\"record\": {}, \"offset\": {}, \"text_offset\": {}}}",
                        json_str(&name(h.record)),
                        h.offset,
                        h.text_offset
                    )
                })
                .collect();
            s.push_str(&format!(", \"hits\": [{}]", list.join(", ")));
        }
        s.push_str("}\n");
    } else {
        let shown = tsv_field(&shown);
        s.push_str(&format!("{shown}\t{count}\n"));
        for h in &hits {
            let name = name(h.record);
            s.push_str(&format!("{shown}\t{}\t{}\n", tsv_field(&name), h.offset));
        }
    }
    Ok((s, count))
}
