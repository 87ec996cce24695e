//! The job on a text of tokens wider than a byte (`--token-width 2|4`): raw inputs only, read
//! as little-endian tokens ([`crate::io::tokens`]); then the same build, check, BWT and LCP
//! array as for bytes, counted in tokens, and the same index files, whose records (one an
//! input file) count tokens too.

use super::job::Run;
use crate::dist::Layout;
use crate::error::Result;
use crate::io::seq::Record;
pub(super) use crate::io::tokens::admissible;
use crate::io::tokens::read_tokens;
use crate::token::Token;
use crate::Ctx;

/// Step 2 for tokens `T`: this pe's block of tokens read (in the job's [`crate::TokenOrder`]).
/// Collective.
pub(super) fn read<T: Token>(ctx: &Ctx, run: &Run<'_>) -> Result<(Vec<T>, Layout)> {
    let comm = &ctx.comm;
    if comm.rank() == 0 {
        log::info!(
            "building the suffix array of {} ({} tokens of {} bytes) on {} pes × {} threads with {:?}, {}-byte entries",
            super::report::shown_inputs(&run.job.inputs),
            run.n,
            T::WIDTH,
            comm.size(),
            ctx.config.threads,
            run.plan.knobs.algo,
            run.width
        );
    }
    let order = run.job.token_order();
    ctx.phase("read", || read_tokens::<T>(comm, run.files, run.n, order))
}

/// The index's records of a text of tokens (pe 0's; none elsewhere): one an input file, named
/// by its path, its start and length in tokens.
pub(super) fn records(rank: usize, run: &Run<'_>) -> Vec<Record> {
    use std::os::unix::ffi::OsStrExt;
    if rank != 0 {
        return Vec::new();
    }
    let width = run.job.token_width.bytes() as u64;
    let mut at = 0;
    (run.files.iter())
        .map(|f| {
            let len = f.size / width;
            at += len;
            Record {
                name: f.path.as_os_str().as_bytes().to_vec(),
                start: at - len,
                len,
            }
        })
        .collect()
}
