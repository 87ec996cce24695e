//! The job on a text of tokens wider than a byte (`--token-width 2|4`): raw inputs only, read
//! as little-endian tokens ([`crate::io::tokens`]); then the same build, check, BWT and LCP
//! array as for bytes, counted in tokens. No index files are written beside the SA.

use super::job::Run;
use super::{build, Built, Files};
use crate::error::Result;
pub(super) use crate::io::tokens::admissible;
use crate::io::tokens::read_tokens;
use crate::token::Token;
use crate::Ctx;

/// Steps 2 and 3 of the job for tokens `T`: this pe's block of tokens read (in the job's
/// [`crate::TokenOrder`]), then built (checked, BWT, LCP). Returns what the report takes from it. Collective.
pub(super) fn read_and_build<T: Token>(ctx: &Ctx, run: &Run<'_>, files: &Files) -> Result<Built> {
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
    let (text, layout) = ctx.phase("read", || read_tokens::<T>(comm, run.files, run.n, order))?;
    build(ctx, run, files, text, &layout)
}
