//! The document table of an index built with `--doc-sep TOKEN` (`OUT.docs`): where each
//! document's tokens begin, in text order, little-endian entries of the SA's width.
//!
//! A document is begun by its separator token, and its tokens are those after it up to the next
//! separator (or T's end). Tokens before T's first separator are a document of their own, the
//! first, starting at 0. The table holds each document's first position after its separator:
//! `psa query --locate` finds a hit's document by binary search and counts its offset from
//! there. Every pe writes the entries of its block at their place (an exclusive prefix sum of
//! the counts), a chunk at a time: nothing is gathered, and memory holds one chunk.

use std::path::Path;

use rayon::prelude::*;

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};
use crate::io::index::side_path;
use crate::io::output::Named;
use crate::io::OutputFile;
use crate::token::{Token, TokenWidth};

/// Tokens scanned (and at most entries held) at a time.
const CHUNK: usize = 1 << 20;

/// Refuses a separator the job cannot use, before anything is read: one with sequence input
/// (FASTA/FASTQ records are its documents already), or one that is no token of the width.
pub(super) fn admissible(sep: Option<u32>, width: TokenWidth, sequence: bool) -> Result<()> {
    let Some(sep) = sep else {
        return Ok(());
    };
    if sequence {
        return Err(Error::Usage(
            "--doc-sep marks documents in raw input or tokens; FASTA/FASTQ records are documents already (psa query --locate names them)".into(),
        ));
    }
    let max = (1u64 << (8 * width.bytes())) - 1;
    match (sep as u64) <= max {
        true => Ok(()),
        false => Err(Error::Usage(format!(
            "--doc-sep {sep} is not a token of {width} byte(s) (0 to {max}): give --token-width too, or a smaller separator"
        ))),
    }
}

/// Writes `OUT.docs` for `text`, this pe's block of T (its place in `layout`), documents begun
/// by `sep`, in entries of `width` bytes; put in place by the caller with the index. Returns
/// the file and the number of documents. Collective.
pub(super) fn write_docs<T: Token>(
    comm: &Comm,
    (out, inputs, force): (&Path, &[&Path], bool),
    sep: T,
    text: &[T],
    layout: &Layout,
    width: usize,
) -> Result<(OutputFile, u64)> {
    let me = comm.rank();
    let n = layout.len() as u64;
    let start = layout.start(me) as u64;
    // T's first document has no separator where T does not begin with one (the pe holding T's
    // first token says so: with n < p the first pes hold none).
    let leading = start == 0 && text.first().is_some_and(|&t| t != sep);
    // A separator that ends T begins no token: its empty document is left out (an entry of n
    // might not fit the entries' width).
    let last_ends_t = text.last() == Some(&sep) && start + text.len() as u64 == n;
    let seps = text.par_iter().filter(|&&t| t == sep).count() as u64 - last_ends_t as u64;
    let mine = seps + leading as u64;
    let first = comm.exscan_sum(mine);
    let total = comm.all_reduce_sum(mine);
    let file = OutputFile::create_named(
        comm,
        &side_path(out, ".docs"),
        inputs,
        force,
        (total as usize, width),
        "document table",
        Named::Beside,
    )?;
    let written = (|| {
        let mut at = first as usize;
        if leading {
            file.write_part(at, &[0u64])?;
            at += 1;
        }
        for (k, chunk) in text.chunks(CHUNK).enumerate() {
            let base = start + (k * CHUNK) as u64;
            let begins: Vec<u64> = (chunk.iter().enumerate())
                .filter(|&(_, &t)| t == sep)
                .map(|(i, _)| base + i as u64 + 1)
                .filter(|&b| b < n)
                .collect();
            file.write_part(at, &begins)?;
            at += begins.len();
        }
        file.sync_local()
    })();
    comm.agree(written)?;
    Ok((file, total))
}
