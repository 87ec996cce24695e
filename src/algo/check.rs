//! Distributed suffix array checker in O(n/p) memory per pe: besides the text and the suffix
//! array it keeps the inverse (in the narrowest index width that holds n: 4, 5 or 8 bytes per
//! character), then the compared pairs (8 bytes), and exchanges its records in pieces of bounded
//! size.
//!
//! SA is correct iff (1) it is a permutation of [0, n) and (2) for every two neighbours
//! SA[j], SA[j+1]: (t[SA[j]], ISA[SA[j]+1]) < (t[SA[j+1]], ISA[SA[j+1]+1]), where the rank of the
//! empty suffix at n is smaller than every other (Burkhardt & Kärkkäinen's check, as in
//! Distributed DCX' `sa_check`).

use crate::dist::{exchange, right_halo, send_to_owners, Layout};
use crate::error::{Error, Result};
use crate::index::{Index, IndexWidth, U40};
use crate::Ctx;

/// Checks a distributed suffix array. Collective. Entry: `text` and `sa` are this pe's slices
/// under the same `layout`. Returns the same verdict on every pe. Runs on the context's threads
/// ([`Ctx::install`]).
pub fn check(ctx: &Ctx, text: &[u8], sa: &[u64], layout: &Layout) -> Result<()> {
    // The inverse in the narrowest index width that holds n (the "unset" marker), or the one
    // the configuration forces.
    let width = IndexWidth::choose(layout.len() as u64, ctx.tune.forced_index_width());
    ctx.install(|ctx| match width {
        IndexWidth::W32 => check_here::<u32>(ctx, text, sa, layout),
        IndexWidth::W40 => check_here::<U40>(ctx, text, sa, layout),
        IndexWidth::W64 => check_here::<u64>(ctx, text, sa, layout),
    })
}

/// [`check`] on the calling thread's pool, the inverse held in `I`.
fn check_here<I: Index>(ctx: &Ctx, text: &[u8], sa: &[u64], layout: &Layout) -> Result<()> {
    let comm = &ctx.comm;
    let me = comm.rank();
    let n = layout.len();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let local = if sa.len() != hi - lo {
        Err(Error::CheckFailed(format!(
            "pe {me} holds {} entries, expected {}",
            sa.len(),
            hi - lo
        )))
    } else if n as u64 >= 1 << 56 {
        Err(Error::CheckFailed(format!(
            "the checker takes texts below 2^56 characters, not {n}"
        )))
    } else if let Some(bad) = sa.iter().find(|&&x| x as usize >= n) {
        Err(Error::CheckFailed(format!(
            "entry {bad} is not below n = {n}"
        )))
    } else {
        Ok(())
    };
    comm.agree(local)?;

    // Pieces of at most `piece` records per pe, so that the exchanged records stay small beside
    // the two arrays the check keeps (the inverse, then the compared pairs): 8 bytes per
    // character each.
    let piece = piece_records(hi - lo, comm.round_bytes());
    let pieces = comm.all_reduce_max((hi - lo).div_ceil(piece) as u64) as usize;
    let range = |k: usize| (k * piece).min(hi - lo)..((k + 1) * piece).min(hi - lo);

    // (1) Permutation: send (position, rank) to the owner of the position, piece by piece.
    // n marks a position not (yet) seen: every rank is below it.
    let unset = I::from_u64(n as u64);
    let mut isa = vec![unset; hi - lo];
    let mut dup = None;
    for k in 0..pieces {
        let pairs: Vec<[u64; 2]> = sa[range(k)]
            .iter()
            .zip(range(k))
            .map(|(&i, j)| [i, (lo + j) as u64])
            .collect();
        for [i, r] in exchange(comm, pairs, |x| layout.owner(x[0] as usize)) {
            let slot = &mut isa[i as usize - lo];
            if *slot != unset {
                dup = Some(i);
            }
            *slot = I::from_u64(r);
        }
    }
    let local = match dup {
        Some(i) => Err(Error::CheckFailed(format!(
            "position {i} appears more than once"
        ))),
        None if isa.contains(&unset) => Err(Error::CheckFailed("some position is missing".into())),
        None => Ok(()),
    };
    comm.agree(local)?;

    // (2) Order: for each position i send (rank of i, t[i] and the rank of i+1 (1-based, 0 for
    // i+1 = n) packed into one word) to the pe that holds SA entry ISA[i]. n < 2^56, so the
    // character fits above the rank.
    let next = right_halo(comm, &isa, 1);
    let mut by_rank = vec![0u64; hi - lo];
    for k in 0..pieces {
        let tuples: Vec<[u64; 2]> = range(k)
            .map(|j| {
                let nr = match isa.get(j + 1) {
                    Some(&r) => r.to_u64() + 1,
                    None => next.first().map_or(0, |&r| r.to_u64() + 1),
                };
                [isa[j].to_u64(), (text[j] as u64) << 56 | nr]
            })
            .collect();
        send_to_owners(comm, layout, tuples, &mut by_rank[..], |&[r, key]| {
            (r as usize, key)
        });
    }
    drop(isa);
    let after = right_halo(comm, &by_rank, 1);
    let bad = by_rank
        .iter()
        .zip(by_rank.iter().skip(1).chain(after.first()))
        .position(|(a, b)| a >= b);
    comm.agree(match bad {
        Some(j) => Err(Error::CheckFailed(format!(
            "suffixes SA[{}] and SA[{}] are out of order",
            lo + j,
            lo + j + 1
        ))),
        None => Ok(()),
    })
}

/// Records per pe in one piece of the check: an eighth of the pe's `len` positions, at least 2^16
/// and at most 2^22 (64 MiB of exchanged pairs), fewer when the exchanges are limited to
/// `round_bytes` per pe (so a small `--exchange-round-bytes` forces many pieces on a small input).
fn piece_records(len: usize, round_bytes: usize) -> usize {
    (len / 8)
        .clamp(1 << 16, 1 << 22)
        .min(round_bytes / 16)
        .max(1)
}
