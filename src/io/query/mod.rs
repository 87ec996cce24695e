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

mod answer;
mod patterns;

use std::io::Write;
use std::path::PathBuf;

pub use patterns::{Batch, Patterns};

use super::index::Index;
use super::seq::Format;
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
    let mut index = Index::open(&q.index)?;
    index.warnings.iter().for_each(|w| warn(w));
    let sequence = index.meta.sequence;
    let tokens = index.meta.token_width > 0;
    // Whitespace around a pattern is dropped where the text cannot hold it, or separates ids.
    let mut first = Batch::new(sequence || tokens);
    q.patterns.iter().for_each(|p| first.push(p));
    if (0..first.len()).any(|i| first.get(i).is_empty()) {
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
    let file = match &q.patterns_file {
        Some(f) => Some(Patterns::open(f, format, sequence)?),
        None => None,
    };
    let mut report = answer_all(&mut index, q, first, file, out)?;
    report.secs = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Answers the command line's patterns (`first`), then `file`'s a batch at a time: each batch
/// answered on rayon's threads while the next one is read, then written in order. Builds the
/// search's top level before a batch once the patterns so far make it worth it
/// ([`Index::top_pays_after`]). Stops quietly where the reader stopped reading.
fn answer_all(
    index: &mut Index,
    q: &Query,
    mut current: Batch,
    mut file: Option<Patterns>,
    out: &mut impl Write,
) -> Result<QueryReport> {
    let mut report = QueryReport::default();
    let buffers = answer::Buffers::default();
    let mut next = current.empty_like();
    let mut more = file.is_some();
    while more || !current.is_empty() {
        if !index.has_top() && report.patterns + current.len() > index.top_pays_after() {
            index.build_top()?;
        }
        let shared: &Index = index;
        let (answered, read) = rayon::join(
            || answer::answer_batch(shared, &current, q, &buffers),
            || match (&mut file, more) {
                (Some(f), true) => f.next_batch(&mut next),
                _ => Ok(false),
            },
        );
        report.patterns += current.len();
        for (text, count) in answered? {
            report.matches += count;
            if !written(out.write_all(&text))? {
                return Ok(report);
            }
            buffers.give(text);
        }
        more = read?;
        std::mem::swap(&mut current, &mut next);
        next.clear();
    }
    written(out.flush())?;
    Ok(report)
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
