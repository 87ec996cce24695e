//! Distributed suffix array checker in O(n/p) memory per pe.
//!
//! SA is correct iff (1) it is a permutation of [0, n) and (2) for every two neighbours
//! SA[j], SA[j+1]: (t[SA[j]], ISA[SA[j]+1]) < (t[SA[j+1]], ISA[SA[j+1]+1]), where the rank of the
//! empty suffix at n is smaller than every other (Burkhardt & Kärkkäinen's check, as in
//! Distributed DCX' `sa_check`).

use crate::dist::{exchange, right_halo, send_to_owners, Layout};
use crate::error::{Error, Result};
use crate::Ctx;

/// Checks a distributed suffix array. Collective. Entry: `text` and `sa` are this pe's slices
/// under the same `layout`. Returns the same verdict on every pe. Runs on the context's threads
/// ([`Ctx::install`]).
pub fn check(ctx: &Ctx, text: &[u8], sa: &[u64], layout: &Layout) -> Result<()> {
    ctx.install(|ctx| check_here(ctx, text, sa, layout))
}

/// [`check`] on the calling thread's pool.
fn check_here(ctx: &Ctx, text: &[u8], sa: &[u64], layout: &Layout) -> Result<()> {
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
    } else if let Some(bad) = sa.iter().find(|&&x| x as usize >= n) {
        Err(Error::CheckFailed(format!(
            "entry {bad} is not below n = {n}"
        )))
    } else {
        Ok(())
    };
    comm.agree(local)?;

    // (1) Permutation: send (position, rank) to the owner of the position.
    let pairs: Vec<[u64; 2]> = sa
        .iter()
        .enumerate()
        .map(|(k, &i)| [i, (lo + k) as u64])
        .collect();
    let got = exchange(comm, pairs, |x| layout.owner(x[0] as usize));
    let mut isa = vec![u64::MAX; hi - lo];
    let mut dup = None;
    for [i, r] in got {
        let slot = &mut isa[i as usize - lo];
        if *slot != u64::MAX {
            dup = Some(i);
        }
        *slot = r;
    }
    let local = match dup {
        Some(i) => Err(Error::CheckFailed(format!(
            "position {i} appears more than once"
        ))),
        None if isa.contains(&u64::MAX) => {
            Err(Error::CheckFailed("some position is missing".into()))
        }
        None => Ok(()),
    };
    comm.agree(local)?;

    // (2) Order: for each position i send (rank of i, t[i], rank of i+1 (1-based, 0 for i+1 = n))
    // to the pe that holds SA entry ISA[i].
    let next = right_halo(comm, &isa, 1);
    let tuples: Vec<[u64; 3]> = (lo..hi)
        .map(|i| {
            let nr = if i + 1 < hi {
                isa[i + 1 - lo] + 1
            } else {
                next.first().map_or(0, |&r| r + 1)
            };
            [isa[i - lo], text[i - lo] as u64, nr]
        })
        .collect();
    drop(isa);
    let mut by_rank = vec![[0u64; 2]; hi - lo];
    send_to_owners(comm, layout, tuples, &mut by_rank[..], |&[r, c, nr]| {
        (r as usize, [c, nr])
    });
    let after = right_halo(comm, &by_rank, 1);
    let mut bad = None;
    for j in 0..by_rank.len() {
        let b = if j + 1 < by_rank.len() {
            Some(&by_rank[j + 1])
        } else {
            after.first()
        };
        if let Some(b) = b {
            if by_rank[j] >= *b {
                bad = Some(lo + j);
                break;
            }
        }
    }
    comm.agree(match bad {
        Some(j) => Err(Error::CheckFailed(format!(
            "suffixes SA[{j}] and SA[{}] are out of order",
            j + 1
        ))),
        None => Ok(()),
    })
}
