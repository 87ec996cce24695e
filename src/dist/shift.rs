//! Halo exchange with neighbouring pes, across pes that hold nothing.

use bytemuck::Pod;

use crate::comm::Comm;

/// Up to `k` elements that follow this pe's slice in the global sequence (the concatenation of
/// all slices in pe order); fewer only at the global end. Collective. Works when neighbours
/// hold fewer than `k` elements or none. Communication: every pe receives ≤ k·p elements, so keep
/// k small.
#[must_use]
pub fn right_halo<T: Pod>(comm: &Comm, local: &[T], k: usize) -> Vec<T> {
    let head = &local[..k.min(local.len())];
    let lens = comm.all_gather(head.len() as u64);
    let heads = comm.all_gather_v(head);
    let mut out = Vec::with_capacity(k);
    let mut off: usize = lens[..=comm.rank()].iter().map(|&l| l as usize).sum();
    for &l in &lens[comm.rank() + 1..] {
        let l = l as usize;
        let take = l.min(k - out.len());
        out.extend_from_slice(&heads[off..off + take]);
        off += l;
        if out.len() == k {
            break;
        }
    }
    out
}

/// The last element of the nearest pe to the left that holds any element, if there is one.
/// Collective.
#[must_use]
pub fn last_of_left<T: Pod>(comm: &Comm, local: &[T]) -> Option<T> {
    let tail = &local[local.len().saturating_sub(1)..];
    let lens = comm.all_gather(tail.len() as u64);
    let tails = comm.all_gather_v(tail);
    let before: usize = lens[..comm.rank()].iter().map(|&l| l as usize).sum();
    if before == 0 {
        None
    } else {
        Some(tails[before - 1])
    }
}
