//! Moving records between pes, the collectives: to computed destinations ([`exchange`],
//! [`exchange_by`], [`exchange_tail`]; in rounds when [`Comm::round_bytes`] says so), back into a
//! block layout ([`rebalance`], [`rebalance_into`]), lookups by global index ([`fetch`]), and an
//! exchange run piece after piece that keeps its buffers ([`PieceExchange`]). The bucketing
//! before each all-to-all is [`super::bucket`]'s.

use bytemuck::Pod;
use rayon::prelude::*;

use super::bucket::{bucket, bucket_impl, bucket_rounds};
use super::Layout;
use crate::comm::{exclusive_prefix, Comm};
use crate::index::Index;
use crate::util::{serial, SyncPtr, CHUNK};

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
    let (send, counts) = bucket(data, p, dest);
    comm.all_to_all_v(&send, &counts)
}

/// Sends every record to the pe `dest(record)`, taking the records by value. Collective.
///
/// Like [`exchange_by`] but the input is consumed: it is freed as soon as it is bucketed, so the
/// peak is two copies (input + send buffer, then send buffer + received records) plus one `u32`
/// per record. The order within a source is kept, but callers should not rely on it.
#[must_use]
pub fn exchange<T, F>(comm: &Comm, mut data: Vec<T>, dest: F) -> Vec<T>
where
    T: Pod + Send + Sync,
    F: Fn(&T) -> usize + Sync,
{
    exchange_tail(comm, &mut data, 0, dest)
}

/// [`exchange`] of the records `records[from..]`, which leave `records` (truncated to `from`,
/// its spare capacity given back) before the all-to-all. Collective.
///
/// Entry and exit as [`exchange`] for the tail. Memory: the tail is bucketed straight from
/// `records` into the send buffer, so a step holds the records not yet sent, one send buffer and
/// the received records, never a copy of the tail beside them (with exchange rounds or at p = 1
/// a tail after `from` > 0 is split off first). [`exchange`] is the whole vector's case.
#[must_use]
pub fn exchange_tail<T, F>(comm: &Comm, records: &mut Vec<T>, from: usize, dest: F) -> Vec<T>
where
    T: Pod + Send + Sync,
    F: Fn(&T) -> usize + Sync,
{
    // The tail as a vector of its own (the whole vector itself from 0, no copy).
    let take = |records: &mut Vec<T>| {
        if from == 0 {
            return std::mem::take(records);
        }
        let tail = records.split_off(from);
        records.shrink_to_fit();
        tail
    };
    let p = comm.size();
    if p == 1 {
        return take(records);
    }
    let rounds = comm.rounds_for(std::mem::size_of_val(&records[from..]));
    if rounds > 1 {
        let (send, counts) = bucket_rounds(take(records), p, rounds, dest);
        return comm.all_to_all_rounds(send, &counts, rounds);
    }
    // Bucket into a send buffer and give the tail's memory back before the all-to-all: the peak
    // is two copies either way (tail + send, then send + received), and a scatter with p
    // sequential write streams is much faster than an in-place cycle-chasing permutation.
    let (send, counts) = bucket(&records[from..], p, dest);
    records.truncate(from);
    records.shrink_to_fit();
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
    let counts = overlaps(target, first, last, p);
    if p == 1 {
        return data;
    }
    comm.all_to_all_v(&data, &counts)
}

/// For every pe r < p, how many of the global indices `[first, last)` fall in r's range of `target`.
fn overlaps(target: &Layout, first: usize, last: usize, p: usize) -> Vec<usize> {
    (0..p)
        .map(|r| {
            let lo = target.start(r).max(first);
            let hi = target.end(r).min(last);
            hi.saturating_sub(lo)
        })
        .collect()
}

/// Stores a contiguous range of a sequence in its places of `target`, keeping the order (one
/// round of [`rebalance`] into a preallocated part). Collective.
///
/// Entry: the pieces of all pes, concatenated in pe order, are the elements
/// `[start, start + total)` of a sequence of `target.len()` elements (`start` the same on every
/// pe); `out` is this pe's part of `target` (`target.local_len(me)` slots). Exit:
/// `out[i - target.start(me)]` holds element i for every i of that range this pe owns; the other
/// slots are untouched. Returns `total` (the same on every pe).
///
/// Cost: one exclusive scan, one reduction, one all-to-all of the pieces. Memory: the received
/// elements (this pe's share of the range) until they are copied into `out`.
pub fn rebalance_into<T: Pod + Send + Sync>(
    comm: &Comm,
    piece: &[T],
    start: u64,
    target: &Layout,
    out: &mut [T],
) -> u64 {
    let p = comm.size();
    let me = comm.rank();
    let first = (start + comm.exscan_sum(piece.len() as u64)) as usize;
    let total = comm.all_reduce_sum(piece.len() as u64);
    let last = first + piece.len();
    let counts = overlaps(target, first, last, p);
    let got = if p == 1 {
        piece.to_vec()
    } else {
        comm.all_to_all_v(piece, &counts)
    };
    // What this pe receives is the range's intersection with its own part, in order.
    if !got.is_empty() {
        let at = (start as usize).max(target.start(me)) - target.start(me);
        out[at..at + got.len()].copy_from_slice(&got);
    }
    total
}

/// Looks up values by global index: for each `queries[k]` (a global index below `layout.len()`),
/// the pe owning it answers `lookup(index - its start)`. Collective. Returns the answers in query
/// order. Communication: two all-to-alls, `size_of::<Q>()` bytes out and `size_of::<R>()` back
/// per query another pe owns. Memory: besides queries and answers, a send buffer of queries
/// (freed before the answers travel) and the answers as they come back, which are put in query
/// order by recomputing each query's owner (no slot per query is kept).
///
/// Queries this pe owns are answered where they are when they are at least half of them (the
/// prefix-doubling case: i + d lies in i's own slice but near its end): only the others are
/// listed, bucketed and sent, and their answers slotted in between.
#[must_use]
pub fn fetch<Q, R, F>(comm: &Comm, layout: &Layout, queries: &[Q], lookup: F) -> Vec<R>
where
    Q: Index,
    R: Pod + Send + Sync,
    F: Fn(usize) -> R + Sync,
{
    if comm.size() == 1 {
        return queries
            .par_iter()
            .map(|&q| lookup(q.to_u64() as usize))
            .collect();
    }
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let mine = |q: &Q| (lo..hi).contains(&(q.to_u64() as usize));
    // Others' queries per chunk of CHUNK queries.
    let others: Vec<usize> = if serial(queries.len()) {
        vec![queries.iter().filter(|q| !mine(q)).count()]
    } else {
        queries
            .par_chunks(CHUNK)
            .map(|c| c.iter().filter(|q| !mine(q)).count())
            .collect()
    };
    if 2 * others.iter().sum::<usize>() > queries.len() {
        return fetch_remote(comm, layout, queries, &lookup);
    }
    let remote: Vec<Q> = queries.iter().filter(|q| !mine(q)).copied().collect();
    let got = fetch_remote(comm, layout, &remote, &lookup);
    drop(remote);
    // The answers in query order: own queries looked up, the others taken in turn from `got`
    // (each chunk starting after the others' queries of the chunks before it).
    let starts = exclusive_prefix(&others);
    let mut out: Vec<R> = Vec::with_capacity(queries.len());
    let ptr = SyncPtr(out.as_mut_ptr());
    let fill = |k: usize, qs: &[Q], mut next: usize| {
        for (j, q) in qs.iter().enumerate() {
            let r = if mine(q) {
                lookup(q.to_u64() as usize - lo)
            } else {
                next += 1;
                got[next - 1]
            };
            // SAFETY: slot k·CHUNK + j < len belongs to this query alone.
            unsafe { ptr.write(k * CHUNK + j, r) };
        }
    };
    if starts.len() == 1 {
        fill(0, queries, 0);
    } else {
        queries
            .par_chunks(CHUNK)
            .zip(starts.into_par_iter())
            .enumerate()
            .for_each(|(k, (qs, next))| fill(k, qs, next));
    }
    // SAFETY: the chunks cover 0..len exactly once.
    unsafe { out.set_len(queries.len()) };
    out
}

/// [`fetch`] with every query sent to its owner (this pe's own through the all-to-all too).
/// Collective.
fn fetch_remote<Q, R, F>(comm: &Comm, layout: &Layout, queries: &[Q], lookup: &F) -> Vec<R>
where
    Q: Index,
    R: Pod + Send + Sync,
    F: Fn(usize) -> R + Sync,
{
    let p = comm.size();
    let owner = |q: &Q| layout.owner(q.to_u64() as usize);
    let (send, counts, placement) = bucket_impl(queries, p, owner, true);
    // How many each pe asks of me (transposed counts) follows from the exchange itself.
    let (asked, recv_counts) = comm.all_to_all_v_counts(&send, &counts);
    drop(send);
    let base = layout.start(comm.rank());
    let answers: Vec<R> = asked
        .par_iter()
        .map(|&q| lookup(q.to_u64() as usize - base))
        .collect();
    drop(asked);
    let back = comm.all_to_all_v(&answers, &recv_counts);
    drop(answers);
    placement.gather(queries, &back, owner)
}

/// [`fetch`] in rounds of at most `piece` queries per pe, so that its buffers (about 40 bytes
/// per query, twice the answers) stay small beside what the caller holds. Collective; every pe
/// runs the same number of rounds (the most any pe needs). Returns the answers in query order.
#[must_use]
pub fn fetch_in_rounds<R, F>(
    comm: &Comm,
    layout: &Layout,
    queries: &[u64],
    piece: usize,
    lookup: F,
) -> Vec<R>
where
    R: Pod + Send + Sync,
    F: Fn(usize) -> R + Sync,
{
    let piece = piece.max(1);
    let rounds = comm.all_reduce_max(queries.len().div_ceil(piece) as u64) as usize;
    let mut out = Vec::with_capacity(queries.len());
    for r in 0..rounds {
        let lo = (r * piece).min(queries.len());
        let hi = ((r + 1) * piece).min(queries.len());
        out.extend(fetch(comm, layout, &queries[lo..hi], &lookup));
    }
    out
}

/// An exchange run piece after piece (the checker's steps) that keeps its send and receive
/// buffers: their pages stay resident instead of fresh ones (zeroed by the kernel) for every
/// piece. Entry of each [`PieceExchange::send`]: any records on any pe; exit: `recv` holds the
/// records sent to this pe, grouped by source pe, in their order within a source. Memory: the
/// largest piece's records twice (sent and received), kept until the value is dropped; cost:
/// one all-to-all per piece, `make` twice per record.
pub struct PieceExchange<T> {
    send: Vec<T>,
    /// The records received by the last [`PieceExchange::send`].
    pub recv: Vec<T>,
}

impl<T: Pod> PieceExchange<T> {
    /// Sends `make(x)` = (destination pe, record) for every x of `items` to its destination, into
    /// `self.recv` (grouped by source). `make` runs twice per item: to count, then to place.
    /// Collective.
    pub fn send<X>(
        &mut self,
        comm: &Comm,
        items: impl Iterator<Item = X> + Clone,
        make: impl Fn(X) -> (usize, T),
    ) {
        let mut at = vec![0usize; comm.size() + 1];
        for x in items.clone() {
            at[make(x).0 + 1] += 1;
        }
        let counts = at[1..].to_vec();
        for q in 1..at.len() {
            at[q] += at[q - 1];
        }
        self.send.clear();
        self.send.resize(at[comm.size()], T::zeroed());
        for x in items {
            let (q, r) = make(x);
            self.send[at[q]] = r;
            at[q] += 1;
        }
        comm.all_to_all_v_into(&self.send, &counts, &mut self.recv);
    }
}

impl<T> Default for PieceExchange<T> {
    fn default() -> Self {
        PieceExchange {
            send: Vec::new(),
            recv: Vec::new(),
        }
    }
}

impl<I: Index> PieceExchange<[I; 2]> {
    /// The received (position in `lo..lo + len`, value) pairs reordered by regions of 2^15
    /// positions (into the send buffer, free after the exchange), so that writing them into an
    /// array of `len` slots touches one cache-sized region at a time instead of the whole array
    /// at random (the checker's inverse: its writes at random were most of its time). Local.
    pub fn received_by_region(&mut self, lo: usize, len: usize) -> &[[I; 2]] {
        const SHIFT: u32 = 15;
        let region = |x: &[I; 2]| (x[0].to_u64() as usize - lo) >> SHIFT;
        let mut at = vec![0usize; (len >> SHIFT) + 2];
        for x in &self.recv {
            at[region(x) + 1] += 1;
        }
        for r in 1..at.len() {
            at[r] += at[r - 1];
        }
        self.send.clear();
        self.send.resize(self.recv.len(), [I::from_u64(0); 2]);
        for x in &self.recv {
            let r = region(x);
            self.send[at[r]] = *x;
            at[r] += 1;
        }
        &self.send
    }
}
