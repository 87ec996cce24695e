//! The Burrows–Wheeler transform from the distributed suffix array, as libsais' `libsais_bwt`
//! defines it: the BWT of T$ with the `$` left out, and its primary index.
//!
//! With SA the suffix array of T (n ≥ 1) and r0 = ISA[0] (the rank of the whole text), the BWT
//! of T$ has n + 1 characters: row 0 is the suffix `$`, preceded by T[n−1]; row i + 1 is suffix
//! SA[i], preceded by T[SA[i] − 1], or by `$` when SA[i] = 0 (row r0 + 1). Leaving the `$` out
//! gives n bytes `U`: U[0] = T[n−1], U[i + 1] = T[SA[i] − 1] for i < r0, U[i] = T[SA[i] − 1] for
//! i > r0; the primary index is r0 + 1 (libsais: the index i0 with SA[i0 − 1] = 0; 0 for n = 0).
//!
//! Phases: `bwt` — one request ([`fetch`], in pieces of at most `request_piece` queries and
//! 1/32 of the block): every pe asks the owner of SA[i] − 1 for its character (pe 0 also for
//! T[n − 1]), and finds r0 by one reduction. Each pe ends with the bytes of U for its SA entries,
//! one contiguous range of U. Memory per pe beside the text: the BWT (a character per entry) and one
//! piece of the SA (read from memory or from the output file: [`SaSource`]), its queries and
//! answers.

use super::sink::SaSource;
use crate::dist::{fetch, Layout};
use crate::error::Result;
use crate::token::Token;
use crate::Ctx;

/// This pe's part of the BWT, in characters `T` (bytes, or the tokens of a token text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BwtPart<T = u8> {
    /// The characters of U this pe holds (one per SA entry it holds, less the entry of SA = 0;
    /// pe 0 also U[0]).
    pub bytes: Vec<T>,
    /// Where `bytes` start in U.
    pub first: usize,
    /// The primary index (libsais' convention; 0 for an empty text). The same on every pe.
    pub primary: u64,
}

/// The BWT of the text whose suffix array is `sa`. Collective.
///
/// Entry: `text` is this pe's slice of T under `layout`, `sa` this pe's part of its suffix array
/// under the same layout (a slice, or the output file the build wrote it to). Exit: this pe's
/// [`BwtPart`]; the parts of all pes, in pe order, are U. Cost: one [`fetch`] of one character
/// per SA entry (in pieces) and a few reductions. An error reading the file is an error on
/// every pe.
pub fn bwt<'a, T: Token>(
    ctx: &Ctx,
    text: &[T],
    sa: impl Into<SaSource<'a>>,
    layout: &Layout,
) -> Result<BwtPart<T>> {
    let sa = sa.into();
    ctx.install(|ctx| ctx.phase("bwt", || bwt_here(ctx, text, sa, layout)))
}

fn bwt_here<T: Token>(ctx: &Ctx, text: &[T], sa: SaSource, layout: &Layout) -> Result<BwtPart<T>> {
    let comm = &ctx.comm;
    let me = comm.rank();
    let n = layout.len();
    let lo = layout.start(me);
    if n == 0 {
        return Ok(BwtPart {
            bytes: Vec::new(),
            first: 0,
            primary: 0,
        });
    }
    let len = sa.len(layout.local_len(me));
    // Queries: T[SA[i] − 1] for every entry but suffix 0's, in SA order; pe 0 first asks T[n−1].
    // In pieces of at most `piece` queries per pe, so that the requests (8 bytes each, a few
    // copies inside `fetch`) stay small beside the SA and the BWT itself.
    let piece = ctx
        .config
        .lcp
        .request_piece
        .min((len / 32).max(1 << 13))
        .max(2);
    let pieces = comm.all_reduce_max(len.div_ceil(piece) as u64) as usize;
    let mut bytes: Vec<T> = Vec::with_capacity(len + 1);
    // r0: the rank of suffix 0, found by the pe that holds it.
    let mut here = u64::MAX;
    for k in 0..pieces.max(1) {
        let range = (k * piece).min(len)..((k + 1) * piece).min(len);
        let from = range.start;
        let part = comm.agree(sa.piece(lo, range))?;
        if let Some(j) = part.iter().position(|&x| x == 0) {
            here = (lo + from + j) as u64;
        }
        let last = (me == 0 && k == 0).then_some(n as u64 - 1);
        let queries: Vec<u64> = last
            .into_iter()
            .chain(part.iter().filter(|&&x| x > 0).map(|&x| x - 1))
            .collect();
        drop(part);
        bytes.extend(fetch(comm, layout, &queries, |i| text[i]));
    }
    let r0 = comm.all_reduce_min(here) as usize;
    // U's index of this pe's first byte: pe 0 starts at 0; pe r > 0 after U[0] and the entries
    // before lo, less the one of r0 if it is among them.
    let first = match me {
        0 => 0,
        _ => 1 + lo - usize::from(r0 < lo),
    };
    Ok(BwtPart {
        bytes,
        first,
        primary: r0 as u64 + 1,
    })
}

#[cfg(test)]
mod tests {
    /// The definition above on a small text, against libsais.
    #[test]
    fn the_definition_matches_libsais() {
        for text in [
            &b"banana"[..],
            b"a",
            b"abracadabra",
            b"\x00\xff\x00",
            b"aaaa",
        ] {
            let sa = crate::algo::oracle::naive_sa(text);
            let n = text.len();
            let r0 = sa.iter().position(|&x| x == 0).unwrap();
            let mut u = vec![text[n - 1]];
            u.extend(sa.iter().filter(|&&x| x > 0).map(|&x| text[x as usize - 1]));
            let want = libsais::BwtConstruction::for_text(text)
                .with_owned_temporary_array_buffer32()
                .single_threaded()
                .run()
                .unwrap();
            assert_eq!(u, want.bwt(), "{text:?}");
            assert_eq!(r0 + 1, want.primary_index(), "{text:?}");
        }
    }
}
