//! Moving records between pes: to computed destinations, or back into a block layout.

use bytemuck::Pod;
use rayon::prelude::*;

use super::Layout;
use crate::comm::{exclusive_prefix, Comm};

/// Sends every record to the pe `dest(record)`. Collective.
///
/// Entry: any records on any pe. Exit: the records whose destination is this pe, ordered by source
/// pe, and within a source in their original order. Memory: the send buffer (one copy of the
/// input) plus the received records; one `u32` per record while bucketing.
#[must_use]
pub fn exchange_by<T, F>(comm: &Comm, data: &[T], dest: F) -> Vec<T>
where
    T: Pod + Send + Sync,
    F: Fn(&T) -> usize + Sync,
{
    let p = comm.size();
    if p == 1 {
        return data.to_vec();
    }
    let dests: Vec<u32> = data.par_iter().map(|x| dest(x) as u32).collect();
    let mut counts = vec![0usize; p];
    for &d in &dests {
        counts[d as usize] += 1;
    }
    let mut pos = exclusive_prefix(&counts);
    let mut send: Vec<T> = vec![T::zeroed(); data.len()];
    for (x, &d) in data.iter().zip(&dests) {
        let slot = &mut pos[d as usize];
        send[*slot] = *x;
        *slot += 1;
    }
    drop(dests);
    comm.all_to_all_v(&send, &counts)
}

/// Sends every record to the pe `dest(record)`, taking the records by value. Collective.
///
/// Like [`exchange_by`] but the input is consumed: it is freed as soon as it is bucketed, so the
/// peak is two copies (input + send buffer, then send buffer + received records) plus one `u32`
/// per record. The order within a source is kept, but callers should not rely on it.
#[must_use]
pub fn exchange<T, F>(comm: &Comm, data: Vec<T>, dest: F) -> Vec<T>
where
    T: Pod + Send + Sync,
    F: Fn(&T) -> usize + Sync,
{
    let p = comm.size();
    if p == 1 {
        return data;
    }
    let dests: Vec<u32> = data.par_iter().map(|x| dest(x) as u32).collect();
    let mut counts = vec![0usize; p];
    for &d in &dests {
        counts[d as usize] += 1;
    }
    // Scatter into a send buffer and free the input before the all-to-all: the peak is two
    // copies either way (input + send, then send + received), and a scatter with p sequential
    // write streams is much faster than an in-place cycle-chasing permutation.
    let mut pos = exclusive_prefix(&counts);
    let mut send: Vec<T> = Vec::with_capacity(data.len());
    let spare = send.spare_capacity_mut();
    for (x, &d) in data.iter().zip(&dests) {
        let slot = &mut pos[d as usize];
        spare[*slot].write(*x);
        *slot += 1;
    }
    // SAFETY: the counts add up to data.len(), so every slot below it was written exactly once.
    unsafe { send.set_len(data.len()) };
    drop(dests);
    drop(data);
    comm.all_to_all_v(&send, &counts)
}

/// Redistributes a sequence into `target`'s ranges, keeping the global order. Collective.
///
/// Entry: each pe holds a contiguous piece of the sequence (the global sequence is the
/// concatenation in pe order); lengths are arbitrary but must add up to `target.len()`.
/// Exit: pe r holds the elements `[target.start(r), target.end(r))`.
#[must_use]
pub fn rebalance<T: Pod + Send + Sync>(comm: &Comm, data: Vec<T>, target: &Layout) -> Vec<T> {
    let p = comm.size();
    let first = comm.exscan_sum(data.len() as u64) as usize;
    let last = first + data.len();
    let counts: Vec<usize> = (0..p)
        .map(|r| {
            let lo = target.start(r).max(first);
            let hi = target.end(r).min(last);
            hi.saturating_sub(lo)
        })
        .collect();
    if p == 1 {
        return data;
    }
    comm.all_to_all_v(&data, &counts)
}

/// Looks up values by global index: for each `queries[k]` (a global index below `layout.len()`),
/// the pe owning it answers `lookup(index - its start)`. Collective. Returns the answers in query
/// order. Communication: two all-to-alls, 8 bytes out and `size_of::<R>()` back per query.
#[must_use]
pub fn fetch<R, F>(comm: &Comm, layout: &Layout, queries: &[u64], lookup: F) -> Vec<R>
where
    R: Pod + Send + Sync,
    F: Fn(usize) -> R + Sync,
{
    let p = comm.size();
    let me = comm.rank();
    if p == 1 {
        return queries.par_iter().map(|&q| lookup(q as usize)).collect();
    }
    let dests: Vec<u32> = queries
        .par_iter()
        .map(|&q| layout.owner(q as usize) as u32)
        .collect();
    let mut counts = vec![0usize; p];
    for &d in &dests {
        counts[d as usize] += 1;
    }
    let starts = exclusive_prefix(&counts);
    let mut pos = starts.clone();
    let mut send = vec![0u64; queries.len()];
    let mut slot_of: Vec<usize> = Vec::with_capacity(queries.len());
    for (&q, &d) in queries.iter().zip(&dests) {
        let s = &mut pos[d as usize];
        send[*s] = q;
        slot_of.push(*s);
        *s += 1;
    }
    drop(dests);
    // How many each pe asks of me (transposed counts) follows from the exchange itself.
    let (asked, recv_counts) = comm.all_to_all_v_counts(&send, &counts);
    drop(send);
    let base = layout.start(me);
    let answers: Vec<R> = asked
        .par_iter()
        .map(|&q| lookup(q as usize - base))
        .collect();
    drop(asked);
    let back = comm.all_to_all_v(&answers, &recv_counts);
    drop(answers);
    slot_of.into_iter().map(|s| back[s]).collect()
}
