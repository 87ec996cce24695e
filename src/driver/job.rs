//! What a job is given ([`Job`]), what it settles before the build ([`Run`]) and what it
//! measured ([`Report`]; gathered and shown by `report.rs`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::io::seq::{InputFile, SeqOptions};
use crate::io::Width;
use crate::plan::Plan;
use crate::stats::PhaseSummary;
use crate::token::{TokenOrder, TokenWidth};

/// What the command line asks for.
#[derive(Clone, Debug)]
pub struct Job {
    /// The input files, in T order (one or more).
    pub inputs: Vec<PathBuf>,
    /// How the inputs become the text (formats, case, reverse complements).
    pub seq: SeqOptions,
    /// Where the suffix array goes (a file, a device or a FIFO); unused without `write_sa`.
    pub output: PathBuf,
    /// Write the suffix array (false: `--no-sa`, only the BWT and/or LCP array; then neither
    /// `output` nor the index files beside it are created).
    pub write_sa: bool,
    /// Where the BWT goes (`--bwt`): n bytes, and its primary index in `PATH.primary`.
    pub bwt: Option<PathBuf>,
    /// Where the LCP array goes (`--lcp`): n entries of the SA's width.
    pub lcp: Option<PathBuf>,
    /// Bytes per token of every input (`--token-width`; 1: bytes). Wider tokens: raw input
    /// only, each input's size a multiple of it; n, the SA, the BWT and the LCP array count
    /// tokens.
    pub token_width: TokenWidth,
    /// The text is of token ids (`--token-width` given, even 1): its index takes patterns of
    /// decimal ids, not characters.
    pub token_ids: bool,
    /// The token that begins each document (`--doc-sep`): the index gets a document table
    /// (`OUT.docs`), and `psa query --locate` places hits in documents.
    pub doc_sep: Option<u32>,
    /// Write infini-gram's table (`--infini-gram`): suffixes compared as the little-endian bytes
    /// of the file (wider tokens read byte-swapped, [`TokenOrder::FileBytes`]), every entry the
    /// byte offset of its token (its index times the token width), `Width::Auto` infini-gram's
    /// width ([`crate::io::infini_gram_width`]); no index files, BWT or LCP array.
    pub infini_gram: bool,
    /// Bytes per SA entry.
    pub width: Width,
    /// Run the distributed checker before the output is put in place (renamed).
    pub check: bool,
    /// Where to write the report as JSON (`--stats`).
    pub stats: Option<PathBuf>,
    /// Replace a read-only output (or stats file) instead of refusing.
    pub force: bool,
    /// Log the memory plan (pe 0, at info) before the build; else only when it changes a knob.
    pub show_plan: bool,
}

/// What a finished job measured (the same on every pe).
#[derive(Clone, Debug)]
pub struct Report {
    /// Characters of the text.
    pub n: usize,
    /// Bytes per SA entry written.
    pub width: usize,
    /// Wall time of the whole job, seconds.
    pub total_secs: f64,
    /// Every phase, summarised over pes.
    pub phases: Vec<PhaseSummary>,
    /// Peak resident memory of each pe over the run, bytes.
    pub peak_rss: Vec<u64>,
    /// Bytes each pe sent.
    pub bytes_sent: Vec<u64>,
    /// The largest share of one pe after a sort, over the mean.
    pub max_imbalance: f64,
    /// pCSS prefix-doubling rounds (0 for DC3).
    pub refine_rounds: usize,
    /// Whether the distributed checker passed the result.
    pub checked: bool,
    /// The memory plan the run kept ([`crate::plan::choose`]).
    pub plan: Plan,
    /// The BWT's primary index (with `--bwt`).
    pub bwt_primary: Option<u64>,
}

impl Job {
    /// How the job's tokens compare: as the file's bytes for infini-gram's table, else by value.
    pub fn token_order(&self) -> TokenOrder {
        match self.infini_gram {
            true => TokenOrder::FileBytes,
            false => TokenOrder::Value,
        }
    }

    /// What each SA entry is multiplied by when written: the token width for infini-gram's byte
    /// offsets, else 1.
    pub fn entry_scale(&self) -> u64 {
        match self.infini_gram {
            true => self.token_width.bytes() as u64,
            false => 1,
        }
    }
}

/// What [`super::run`] settled before the build.
pub(super) struct Run<'a> {
    pub(super) job: &'a Job,
    pub(super) files: &'a [InputFile],
    pub(super) inputs: &'a [&'a Path],
    pub(super) sequence: bool,
    pub(super) n: usize,
    pub(super) width: usize,
    pub(super) plan: Plan,
    pub(super) t0: Instant,
}
