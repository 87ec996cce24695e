//! infini-gram's index, built distributed (`psa --infini-gram --token-width W DIR`): for every
//! `DIR/tokenized.N` (the tokens infini-gram's tokenizer wrote, little-endian, W bytes each) that
//! has no `DIR/table.N`, the `table.N` its engine reads, each a job of its own ([`super::run`]):
//! the suffix array of the file's suffixes at token starts, compared as the file's bytes,
//! each entry the suffix's byte offset in infini-gram's width ([`crate::io::infini_gram_width`]).
//! The job's output safety holds for every table: written under a temporary name, put in place
//! whole, never over a file that is there (unless `force`).
//!
//! psa writes `table.N` only: infini-gram's engine also needs `offset.N` (the documents'
//! offsets, written by the tokenizer with `tokenized.N`); a shard without it is warned about.
//! An empty `tokenized.N` gets an empty `table.N` (infini-gram's engine cannot load an empty
//! shard, nor its indexer build one). While a table is built, its partial file
//! `.table.N.psa-partial-TAG` sits in DIR, where the engine would take it for a table: start the
//! engine once psa is done.

use std::path::{Path, PathBuf};

use super::job::{Job, Report};
use crate::error::{Error, Result};
use crate::io::seq::{Format, SeqOptions};
use crate::io::Width;
use crate::token::TokenWidth;
use crate::Ctx;

/// What `psa --infini-gram` is asked.
#[derive(Clone, Debug)]
pub struct InfiniGram {
    /// The index directory: `tokenized.N` files in, `table.N` files out.
    pub dir: PathBuf,
    /// Bytes per token of every `tokenized.N` (infini-gram's `u8`, `u16`, `u32`).
    pub token_width: TokenWidth,
    /// Bytes per table entry: auto is infini-gram's own width of each file.
    pub width: Width,
    /// Run the distributed checker on every table before it is put in place.
    pub check: bool,
    /// Rebuild the tables that are there too (replacing them, read-only ones as well).
    pub force: bool,
    /// Log each job's memory plan.
    pub show_plan: bool,
}

/// One shard of the index: `tokenized.N` and its `table.N`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// N, as the file's name has it (decimal digits).
    pub n: String,
    /// `DIR/tokenized.N`.
    pub tokens: PathBuf,
    /// `DIR/table.N`.
    pub table: PathBuf,
}

impl Shard {
    /// The shard N of `dir`.
    fn new(dir: &Path, n: &str) -> Shard {
        Shard {
            n: n.to_string(),
            tokens: dir.join(format!("tokenized.{n}")),
            table: dir.join(format!("table.{n}")),
        }
    }

    /// Whether `table.N` is there (as anything: a file, a link, a dangling link). Local.
    fn has_table(&self) -> bool {
        std::fs::symlink_metadata(&self.table).is_ok()
    }
}

/// The shards of `dir` (its `tokenized.N` files, N decimal digits) in the order of N, each with
/// whether its `table.N` is there. Local; reads the directory.
pub fn shards(dir: &Path) -> Result<Vec<(Shard, bool)>> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(Error::Usage(format!(
                "--infini-gram takes infini-gram's index directory (its tokenized.N files), but '{shown}' is not a directory"
            )))
        }
        Ok(_) => {}
        Err(e) => return Err(Error::io("read the index directory", dir, e)),
    }
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io("read the index directory", dir, e))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read the index directory", dir, e))?;
        let name = entry.file_name();
        let n = name.to_str().and_then(|s| s.strip_prefix("tokenized."));
        if let Some(n) = n.filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
            found.push(Shard::new(dir, n));
        }
    }
    if found.is_empty() {
        return Err(Error::Usage(format!(
            "'{shown}' holds no tokenized.N file (N = 0, 1, …): --infini-gram builds table.N from the tokenized.N that infini-gram's tokenizer writes"
        )));
    }
    found.sort_by(|a, b| (a.n.len(), &a.n).cmp(&(b.n.len(), &b.n)));
    Ok(found
        .into_iter()
        .map(|s| {
            let has = s.has_table();
            (s, has)
        })
        .collect())
}

/// Every shard of `ig.dir` to build: pe 0 lists the directory ([`shards`]) and tells the others.
/// Without `ig.force`, a shard whose table is there is left alone (pe 0 says so); a shard
/// without `offset.N` is warned about. Collective; every pe gets the same list.
fn shards_to_build(ctx: &Ctx, ig: &InfiniGram) -> Result<Vec<Shard>> {
    let comm = &ctx.comm;
    let listed = match comm.rank() {
        0 => shards(&ig.dir),
        _ => Ok(Vec::new()),
    };
    let listed = comm.agree(listed)?;
    let mut names = Vec::new();
    if comm.rank() == 0 {
        let (built, todo): (Vec<_>, Vec<_>) = listed.iter().partition(|(_, has)| *has && !ig.force);
        if !built.is_empty() {
            let list: Vec<&str> = built.iter().map(|(s, _)| s.n.as_str()).collect();
            log::info!(
                "'{}': table.N is there for N = {}: left as it is (--force rebuilds it)",
                ig.dir.display(),
                list.join(", ")
            );
        }
        for (s, _) in todo {
            let offsets = ig.dir.join(format!("offset.{}", s.n));
            if std::fs::symlink_metadata(&offsets).is_err() {
                log::warn!(
                    "'{}' is missing: infini-gram's engine needs it beside table.{} (its tokenizer writes it with tokenized.{}; psa does not)",
                    offsets.display(),
                    s.n,
                    s.n
                );
            }
            names.extend_from_slice(s.n.as_bytes());
            names.push(b'\n');
        }
    }
    comm.broadcast_bytes(&mut names, 0);
    Ok(String::from_utf8_lossy(&names)
        .lines()
        .map(|n| Shard::new(&ig.dir, n))
        .collect())
}

/// The job that builds one shard's table.
fn job(ig: &InfiniGram, shard: &Shard) -> Job {
    Job {
        inputs: vec![shard.tokens.clone()],
        seq: SeqOptions {
            format: Some(Format::Raw),
            keep_case: false,
            revcomp: false,
        },
        output: shard.table.clone(),
        write_sa: true,
        bwt: None,
        lcp: None,
        token_width: ig.token_width,
        token_ids: true,
        doc_sep: None,
        infini_gram: true,
        width: ig.width,
        check: ig.check,
        stats: None,
        force: ig.force,
        show_plan: ig.show_plan,
    }
}

/// Builds the table of every shard of `ig.dir` that has none (every shard with `ig.force`), one
/// job after another, in the order of N; returns each built shard with its job's report. A
/// table that appeared since the directory was listed is left alone. The first failure ends the
/// run (the tables built before it stay, whole; the failing one is not left). Collective.
pub fn run_dir(ctx: &Ctx, ig: &InfiniGram) -> Result<Vec<(Shard, Report)>> {
    let todo = shards_to_build(ctx, ig)?;
    let comm = &ctx.comm;
    if todo.is_empty() && comm.rank() == 0 {
        log::info!(
            "'{}': every tokenized.N has its table.N: nothing to build",
            ig.dir.display()
        );
    }
    let mut built = Vec::new();
    for shard in todo {
        let appeared = comm.rank() == 0 && !ig.force && shard.has_table();
        if comm.any(appeared) {
            if comm.rank() == 0 {
                log::warn!(
                    "'{}' appeared while psa ran: left as it is",
                    shard.table.display()
                );
            }
            continue;
        }
        let report = super::run(ctx, &job(ig, &shard))?;
        if comm.rank() == 0 {
            log::info!(
                "wrote '{}': {} tokens, {}-byte entries, in {:.3} s",
                shard.table.display(),
                report.n,
                report.width,
                report.total_secs
            );
        }
        built.push((shard, report));
    }
    Ok(built)
}
