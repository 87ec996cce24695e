//! Suffix array algorithms: each a short driver of named phases over the `dist` primitives.

pub mod bwt;
pub mod check;
pub mod css;
pub mod dcx;
pub mod lcp;
pub mod oracle;
pub mod pooled;
pub mod seq;
pub mod sink;

pub use dcx::{dc3, dc7};

/// Pieces of a vector consumed from its end are at least this large: above glibc's largest
/// dynamic mmap threshold (32 MiB), so freeing the last piece does not send later large blocks to
/// the heap, where their freed pages would stay resident.
const PIECE_BYTES: usize = 64 << 20;

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
