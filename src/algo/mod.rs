//! Suffix array algorithms: each a short driver of named phases over the `dist` primitives.

pub mod bwt;
pub mod check;
pub mod css;
pub mod dcx;
pub mod lcp;
pub mod offload;
pub mod oracle;
pub mod repeats;
pub mod seq;
pub mod sink;
mod steps;

pub use dcx::{dc3, dc7};

/// Pieces of a vector consumed from its end, or of records sent in steps, are at least this
/// large (below it a step's collectives cost more than its bytes). With
/// [`crate::Config::map_threshold`] at most this (the default), a freed piece goes back to the
/// kernel at once.
const PIECE_BYTES: usize = 1 << 20;

/// Steps for sending `bytes` of records on this pe: 8 (each step an eighth of the records, two
/// copies of it while it travels, beside the records not sent yet), fewer when a step would be
/// below [`PIECE_BYTES`] on every pe — or below the exchange round (`--exchange-round-bytes`,
/// [`crate::Comm::round_bytes`]) where that is smaller: a lean plan's small rounds, and the tests'
/// tiny ones, which so reach the steps on small inputs. Collective (one reduction).
pub(crate) fn pieces(ctx: &crate::Ctx, bytes: usize) -> usize {
    let piece = PIECE_BYTES.min(ctx.comm.round_bytes()).max(1);
    let most = ctx.comm.all_reduce_max(bytes.div_ceil(piece) as u64);
    (most as usize).clamp(1, 8)
}

/// Calls `f(lo, &v[lo..hi])` on pieces of `v` from its end to its start (about an eighth of it
/// each, at least [`PIECE_BYTES`]), freeing each piece after its call: what `f` makes from the
/// elements replaces them instead of stacking on them. Local.
pub(crate) fn consume_from_end<T>(mut v: Vec<T>, mut f: impl FnMut(usize, &[T])) {
    let piece = v
        .len()
        .div_ceil(8)
        .max(PIECE_BYTES / std::mem::size_of::<T>().max(1));
    while !v.is_empty() {
        let lo = v.len().saturating_sub(piece);
        f(lo, &v[lo..]);
        v.truncate(lo);
        v.shrink_to_fit();
    }
}
