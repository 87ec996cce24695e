//! Moving records between pes: to computed destinations, or back into a block layout.

use bytemuck::Pod;
use rayon::prelude::*;

use super::Layout;
use crate::comm::{exclusive_prefix, Comm};
use crate::index::Index;

/// Records per task in the parallel loops of this module.
const CHUNK: usize = 1 << 16;

/// Whether a loop over `len` records should run on the calling thread: with one thread per pe
/// (the usual one pe per core) or little data, handing the loop to rayon's pool costs more than
/// it saves (its tasks and their joins, on a pool of one thread, only slow the loop).
fn serial(len: usize) -> bool {
    len < CHUNK || rayon::current_num_threads() == 1
}

/// A raw pointer that may cross threads: every user writes disjoint slots.
struct SyncPtr<T>(*mut T);
impl<T> Clone for SyncPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SyncPtr<T> {}
unsafe impl<T: Send> Send for SyncPtr<T> {}
unsafe impl<T: Send> Sync for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    /// # Safety
    /// `i` is in bounds of the allocation and no other thread touches slot `i` meanwhile.
    #[inline]
    unsafe fn write(self, i: usize, v: T) {
        unsafe { self.0.add(i).write(v) }
    }
}

/// Groups `data` by destination (stable within a destination): returns the send buffer (pe 0's
/// records first, …) and the count per destination. Parallel over chunks of the input (per-chunk
/// histograms, then each chunk writes its own slots), so it scales with the pe's threads.
fn bucket<T, F>(data: &[T], p: usize, dest: F) -> (Vec<T>, Vec<usize>)
where
    T: Pod + Send + Sync,
    F: Fn(&T) -> usize + Sync,
{
    let (send, counts, _) = bucket_impl(data, p, dest, false);
    (send, counts)
}

/// Where [`bucket_impl`] put the records: chunk k (records `k·chunk ..`) wrote its records of
/// destination d from `starts[k][d]` on, in their order. O(p) numbers per chunk instead of one
/// slot per record; [`Placement::gather`] follows it back.
struct Placement {
    chunk: usize,
    starts: Vec<Vec<usize>>,
}

impl Placement {
    /// `out[j] = items[slot of data[j]]`: the j-th record's counterpart in a buffer laid out as
    /// the send buffer (answers coming back from the pes in the order they were asked), in the
    /// records' order; `dest` must give the destinations the bucketing saw. One pass, on the pe's
    /// threads per chunk.
    fn gather<T, U, F>(self, data: &[T], items: &[U], dest: F) -> Vec<U>
    where
        T: Sync,
        U: Copy + Send + Sync,
        F: Fn(&T) -> usize + Sync,
    {
        let len = data.len();
        let mut out: Vec<U> = Vec::with_capacity(len);
        let ptr = SyncPtr(out.as_mut_ptr());
        let chunk = self.chunk.max(1);
        let fill = |k: usize, xs: &[T], mut pos: Vec<usize>| {
            for (j, x) in xs.iter().enumerate() {
                let slot = &mut pos[dest(x)];
                // SAFETY: slot k·chunk + j < len belongs to this record alone.
                unsafe { ptr.write(k * chunk + j, items[*slot]) };
                *slot += 1;
            }
        };
        if self.starts.len() <= 1 {
            if let Some(pos) = self.starts.into_iter().next() {
                fill(0, data, pos);
            }
        } else {
            data.par_chunks(chunk)
                .zip(self.starts.into_par_iter())
                .enumerate()
                .for_each(|(k, (xs, pos))| fill(k, xs, pos));
        }
        // SAFETY: the chunks cover 0..len exactly once.
        unsafe { out.set_len(len) };
        out
    }
}

/// The records of one step ([`each_equal`]: the positions j with `step[j] == s`), bucketed by
/// destination straight into `send` (its old contents replaced; no list of the step's records
/// made first): `counts[c]` holds, per destination pe, how many positions of chunk c (positions
/// `c * chunk ..`) of this step go there (from an earlier pass), and `make(j)` gives the
/// destination (below `p`) and the record of position j (it must agree with the counts: a
/// disagreement panics). Returns the count per destination. On the pe's threads, a chunk each.
/// Local.
///
/// Memory: the send buffer (exactly the step's records, written once, never zeroed).
pub fn bucket_step_into<T, F>(
    step: &[u8],
    s: u8,
    (chunk, counts): (usize, &[&[usize]]),
    p: usize,
    make: F,
    send: &mut Vec<T>,
) -> Vec<usize>
where
    T: Pod + Send + Sync,
    F: Fn(usize) -> (usize, T) + Sync,
{
    let chunk = chunk.max(1);
    assert_eq!(
        counts.len(),
        step.len().div_ceil(chunk),
        "one count per chunk"
    );
    assert!(counts.iter().all(|c| c.len() == p), "one count per pe");
    let (total, starts) = chunk_starts(counts.iter().copied(), p);
    let len: usize = total.iter().sum();
    send.clear();
    send.reserve(len);
    let out = SyncPtr(send.as_mut_ptr());
    let fill = |c: usize, bytes: &[u8]| {
        let (mut at, count) = (starts[c].clone(), counts[c]);
        each_equal(bytes, s, |j| {
            let (d, r) = make(c * chunk + j);
            assert!(
                at[d] < starts[c][d] + count[d],
                "more records for pe {d} than counted"
            );
            // SAFETY: at[d] lies in (chunk c, destination d)'s own slots (checked above), which
            // no other chunk writes, and below len.
            unsafe { out.write(at[d], r) };
            at[d] += 1;
        });
        let written = (at.iter().zip(&starts[c])).map(|(a, b)| a - b);
        assert!(
            written.eq(count.iter().copied()),
            "fewer records than counted"
        );
    };
    if rayon::current_num_threads() == 1 || counts.len() == 1 {
        for (c, bytes) in step.chunks(chunk).enumerate() {
            fill(c, bytes);
        }
    } else {
        (step.par_chunks(chunk).enumerate()).for_each(|(c, bytes)| fill(c, bytes));
    }
    // SAFETY: every chunk wrote exactly its counted slots (checked), and they cover 0..len.
    unsafe { send.set_len(len) };
    total
}

/// From per-chunk counts per destination (`hists`, chunk by chunk, p counts each): the total
/// per destination and where each (chunk, destination) starts in a send buffer grouped by
/// destination, all of a destination's records of earlier chunks first. Local.
fn chunk_starts<'a>(
    hists: impl Iterator<Item = &'a [usize]> + Clone,
    p: usize,
) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut total = vec![0usize; p];
    for h in hists.clone() {
        for (t, &x) in total.iter_mut().zip(h) {
            *t += x;
        }
    }
    let mut next = exclusive_prefix(&total);
    let starts = hists
        .map(|h| {
            let at = next.clone();
            for (x, &k) in next.iter_mut().zip(h) {
                *x += k;
            }
            at
        })
        .collect();
    (total, starts)
}

/// [`bucket`] that can also return where it put the records ([`Placement`]).
fn bucket_impl<T, F>(
    data: &[T],
    p: usize,
    dest: F,
    want_placement: bool,
) -> (Vec<T>, Vec<usize>, Placement)
where
    T: Pod + Send + Sync,
    F: Fn(&T) -> usize + Sync,
{
    if serial(data.len()) {
        let dests: Vec<u32> = data.iter().map(|x| dest(x) as u32).collect();
        let mut counts = vec![0usize; p];
        for &d in &dests {
            counts[d as usize] += 1;
        }
        let mut pos = exclusive_prefix(&counts);
        let placement = Placement {
            chunk: data.len(),
            starts: if want_placement {
                vec![pos.clone()]
            } else {
                Vec::new()
            },
        };
        let mut send: Vec<T> = Vec::with_capacity(data.len());
        let spare = send.spare_capacity_mut();
        for (x, &d) in data.iter().zip(&dests) {
            let slot = &mut pos[d as usize];
            spare[*slot].write(*x);
            *slot += 1;
        }
        // SAFETY: the counts add up to data.len(), so every slot below it was written once.
        unsafe { send.set_len(data.len()) };
        return (send, counts, placement);
    }
    let dests: Vec<u32> = data.par_iter().map(|x| dest(x) as u32).collect();
    let hists: Vec<Vec<usize>> = dests
        .par_chunks(CHUNK)
        .map(|c| {
            let mut h = vec![0usize; p];
            for &d in c {
                h[d as usize] += 1;
            }
            h
        })
        .collect();
    let (counts, starts) = chunk_starts(hists.iter().map(|h| &h[..]), p);
    drop(hists);
    let placement = Placement {
        chunk: CHUNK,
        starts: if want_placement {
            starts.clone()
        } else {
            Vec::new()
        },
    };
    let mut send: Vec<T> = Vec::with_capacity(data.len());
    let out = SyncPtr(send.as_mut_ptr());
    data.par_chunks(CHUNK)
        .zip(dests.par_chunks(CHUNK))
        .zip(starts.into_par_iter())
        .for_each(|((xs, ds), mut pos)| {
            for (x, &d) in xs.iter().zip(ds) {
                let slot = &mut pos[d as usize];
                // SAFETY: each chunk owns slots [starts[k][d], starts[k][d] + its count of d)
                // for every d; these ranges are disjoint and lie below data.len().
                unsafe { out.write(*slot, *x) };
                *slot += 1;
            }
        });
    // SAFETY: the ranges above cover 0..data.len() exactly once.
    unsafe { send.set_len(data.len()) };
    (send, counts, placement)
}

/// `out[index(x)] = value(x)` for every item, in parallel: the placement loops after an exchange
/// (ranks, names, records by position). Panics when an index is out of range or repeated (each
/// slot may be written once: a repeated index is a bug in the caller).
pub fn scatter<T, U, F>(items: &[T], out: &mut [U], f: F)
where
    T: Sync,
    U: Copy + Send + Sync,
    F: Fn(&T) -> (usize, U) + Sync,
{
    if serial(items.len()) {
        for x in items {
            let (i, v) = f(x);
            out[i] = v;
        }
        return;
    }
    let len = out.len();
    let ptr = SyncPtr(out.as_mut_ptr());
    let seen: Vec<std::sync::atomic::AtomicU64> = if cfg!(debug_assertions) {
        (0..len.div_ceil(64)).map(|_| Default::default()).collect()
    } else {
        Vec::new()
    };
    items.par_chunks(CHUNK).for_each(|c| {
        for x in c {
            let (i, v) = f(x);
            assert!(i < len, "scatter index {i} out of range {len}");
            if cfg!(debug_assertions) {
                let bit = 1u64 << (i % 64);
                let old = seen[i / 64].fetch_or(bit, std::sync::atomic::Ordering::Relaxed);
                assert!(old & bit == 0, "scatter index {i} repeated");
            }
            // SAFETY: i < len, and the caller's indices are distinct (checked in debug builds),
            // so no two threads write the same slot.
            unsafe { ptr.write(i, v) };
        }
    });
}

/// `(0..len).map(f).collect()`, on the pe's threads when it has several (a plain loop with one:
/// rayon's splitting would only add calls). Local.
pub fn collect_range<T: Send>(len: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if rayon::current_num_threads() == 1 {
        (0..len).map(f).collect()
    } else {
        (0..len).into_par_iter().map(f).collect()
    }
}

/// `f(j, &v[j])` for every j with `!drop[j]`, in order, in parallel, into a vector of exactly
/// that many elements (a filtered parallel collect would hold the result twice at its peak).
pub fn collect_kept<T, U, F>(v: &[T], drop: &[bool], f: F) -> Vec<U>
where
    T: Sync,
    U: Send + Sync,
    F: Fn(usize, &T) -> U + Sync,
{
    assert_eq!(v.len(), drop.len());
    collect_where(v, |j, _| !drop[j], f)
}

/// `f(j, &v[j])` for every j with `keep(j, &v[j])`, in order, in parallel, into a vector of
/// exactly that many elements ([`collect_kept`] with the test as a function: `keep` runs twice
/// per element, so it should be cheap). Local.
pub fn collect_where<T, U, K, F>(v: &[T], keep: K, f: F) -> Vec<U>
where
    T: Sync,
    U: Send + Sync,
    K: Fn(usize, &T) -> bool + Sync,
    F: Fn(usize, &T) -> U + Sync,
{
    if serial(v.len()) {
        let count = v.iter().enumerate().filter(|&(j, x)| keep(j, x)).count();
        let mut out = Vec::with_capacity(count);
        out.extend(
            (v.iter().enumerate())
                .filter(|&(j, x)| keep(j, x))
                .map(|(j, x)| f(j, x)),
        );
        return out;
    }
    let kept: Vec<usize> = v
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(k, c)| {
            let j0 = k * CHUNK;
            c.iter()
                .enumerate()
                .filter(|&(j, x)| keep(j0 + j, x))
                .count()
        })
        .collect();
    let starts = exclusive_prefix(&kept);
    let total = kept.iter().sum();
    let mut out: Vec<U> = Vec::with_capacity(total);
    let ptr = SyncPtr(out.as_mut_ptr());
    v.par_chunks(CHUNK)
        .zip(starts.into_par_iter())
        .enumerate()
        .for_each(|(k, (xs, mut slot))| {
            for (j, x) in xs.iter().enumerate() {
                let j = k * CHUNK + j;
                if keep(j, x) {
                    // SAFETY: chunk k owns slots [starts[k], starts[k] + kept[k]) < total
                    // (`keep` gives the same answer on both passes).
                    unsafe { ptr.write(slot, f(j, x)) };
                    slot += 1;
                }
            }
        });
    // SAFETY: the chunks' ranges cover 0..total exactly once.
    unsafe { out.set_len(total) };
    out
}

/// Which of a pe's positions `lo..hi` [`build_by_kind`] visits.
#[derive(Clone, Copy, Debug)]
pub enum Select<'a> {
    /// Every position.
    All,
    /// The positions i whose byte `of[i - lo]` is `this` (a key range's positions, its index
    /// noted once per position: the callers of [`crate::dist::sort_in_rounds`] with several
    /// ranges). Found 64 bytes at a time ([`each_equal`]), so the positions of other ranges
    /// cost little.
    Round {
        /// One byte per position of `lo..hi`.
        of: &'a [u8],
        /// The byte wanted.
        this: u8,
    },
}

impl Select<'_> {
    /// Calls `f(i)` for each selected position i of `a..b` (within `lo..hi`), in order.
    #[inline]
    fn each(&self, lo: usize, a: usize, b: usize, mut f: impl FnMut(usize)) {
        match *self {
            Select::All => (a..b).for_each(f),
            Select::Round { of, this } => each_equal(&of[a - lo..b - lo], this, |j| f(a + j)),
        }
    }
}

/// Calls `f(j)` for every j with `bytes[j] == this`, in order: a mask of the equal bytes per 64,
/// its set bits visited. A value held by about one byte in R has about 64 / R hits per block, so
/// the loop over them ends — and its end is mispredicted — once per 64 bytes rather than once per
/// word of eight, which was most of a sparse scan's cost. Local.
#[inline]
pub fn each_equal(bytes: &[u8], this: u8, mut f: impl FnMut(usize)) {
    let (blocks, rest) = bytes.as_chunks::<64>();
    for (k, block) in blocks.iter().enumerate() {
        let mut hit = equal_bytes(block, this);
        while hit != 0 {
            f(64 * k + hit.trailing_zeros() as usize);
            hit &= hit - 1;
        }
    }
    let tail = 64 * blocks.len();
    for (j, &r) in rest.iter().enumerate() {
        if r == this {
            f(tail + j);
        }
    }
}

/// How many bytes of `bytes` equal `this`: the masks of [`each_equal`], counted. Local.
#[inline]
pub fn count_equal(bytes: &[u8], this: u8) -> usize {
    let (blocks, rest) = bytes.as_chunks::<64>();
    let whole: usize = blocks
        .iter()
        .map(|block| equal_bytes(block, this).count_ones() as usize)
        .sum();
    whole + rest.iter().filter(|&&r| r == this).count()
}

/// Bit j set where `block[j] == this`: four 16-byte compares on x86-64 (SSE2, always there).
#[cfg(target_arch = "x86_64")]
#[inline]
fn equal_bytes(block: &[u8; 64], this: u8) -> u64 {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set1_epi8};
    let quarters: &[[u8; 16]; 4] = bytemuck::cast_ref(block);
    // SAFETY: SSE2 is part of every x86-64 CPU (the target's baseline); no memory is touched
    // but the values passed.
    unsafe {
        let want = _mm_set1_epi8(this as i8);
        quarters.iter().enumerate().fold(0u64, |m, (q, quarter)| {
            let v: __m128i = bytemuck::cast(*quarter);
            let bits = _mm_movemask_epi8(_mm_cmpeq_epi8(v, want)) as u16;
            m | u64::from(bits) << (16 * q)
        })
    }
}

/// Bit j set where `block[j] == this`.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn equal_bytes(block: &[u8; 64], this: u8) -> u64 {
    block
        .iter()
        .enumerate()
        .fold(0u64, |m, (j, &r)| m | u64::from(r == this) << j)
}

/// The records `make(i)` of the positions `lo..hi` that `select` takes, each into the output of
/// its kind `kind(i)` (positions of kind ≥ K are skipped), in position order within a kind. On
/// the pe's threads in chunks: the records of each kind per chunk are counted first (`kind`
/// should be cheap), then every chunk writes its own range of each output, so nothing is held
/// twice.
pub fn build_by_kind<R, const K: usize>(
    lo: usize,
    hi: usize,
    select: Select,
    kind: impl Fn(usize) -> usize + Sync,
    make: impl Fn(usize) -> R + Sync,
) -> [Vec<R>; K]
where
    R: Send + Sync,
{
    let count = |a: usize, b: usize| {
        let mut k = [0usize; K];
        select.each(lo, a, b, |i| {
            let t = kind(i);
            if t < K {
                k[t] += 1;
            }
        });
        k
    };
    if serial(hi.saturating_sub(lo)) {
        let k = count(lo, hi);
        let mut out: [Vec<R>; K] = std::array::from_fn(|t| Vec::with_capacity(k[t]));
        select.each(lo, lo, hi, |i| {
            let t = kind(i);
            if t < K {
                out[t].push(make(i));
            }
        });
        return out;
    }
    let range = |c: usize| (lo + c * CHUNK, (lo + (c + 1) * CHUNK).min(hi));
    let counts: Vec<[usize; K]> = (0..(hi - lo).div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let (a, b) = range(c);
            count(a, b)
        })
        .collect();
    let mut total = [0usize; K];
    let starts: Vec<[usize; K]> = counts
        .iter()
        .map(|k| {
            let s = total;
            for t in 0..K {
                total[t] += k[t];
            }
            s
        })
        .collect();
    let mut out: [Vec<R>; K] = std::array::from_fn(|t| Vec::with_capacity(total[t]));
    let ptrs: [SyncPtr<R>; K] = std::array::from_fn(|t| SyncPtr(out[t].as_mut_ptr()));
    starts
        .into_par_iter()
        .enumerate()
        .for_each(|(c, mut slot)| {
            let (a, b) = range(c);
            select.each(lo, a, b, |i| {
                let t = kind(i);
                if t < K {
                    // SAFETY: chunk c owns slots [starts[c][t], starts[c][t] + counts[c][t]) of
                    // output t, all below total[t].
                    unsafe { ptrs[t].write(slot[t], make(i)) };
                    slot[t] += 1;
                }
            });
        });
    for (t, v) in out.iter_mut().enumerate() {
        // SAFETY: the chunks' ranges cover 0..total[t] exactly once.
        unsafe { v.set_len(total[t]) };
    }
    out
}

/// [`scatter`] into two arrays at once: `a[i] = x`, `b[i] = y` for `(i, x, y) = f(item)`.
pub fn scatter2<T, U, V, F>(items: &[T], a: &mut [U], b: &mut [V], f: F)
where
    T: Sync,
    U: Copy + Send + Sync,
    V: Copy + Send + Sync,
    F: Fn(&T) -> (usize, U, V) + Sync,
{
    if serial(items.len()) {
        for x in items {
            let (i, u, v) = f(x);
            a[i] = u;
            b[i] = v;
        }
        return;
    }
    let len = a.len().min(b.len());
    let (pa, pb) = (SyncPtr(a.as_mut_ptr()), SyncPtr(b.as_mut_ptr()));
    items.par_chunks(CHUNK).for_each(|c| {
        for x in c {
            let (i, u, v) = f(x);
            assert!(i < len, "scatter index {i} out of range {len}");
            // SAFETY: as in `scatter`: in range, and the caller's indices are distinct.
            unsafe {
                pa.write(i, u);
                pb.write(i, v);
            }
        }
    });
}

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

/// The first record of round `r` of `rounds` among `c` records (rounds split evenly).
fn round_cut(r: usize, c: usize, rounds: usize) -> usize {
    (r as u128 * c as u128 / rounds as u128) as usize
}

/// Buckets `data` for [`Comm::all_to_all_rounds`], consuming it: the send buffer holds `rounds`
/// segments, segment r holding for each destination d (in order) the r-th of `rounds` even
/// parts of d's records, in their original order. Returns the buffer and `counts[r * p + d]`.
///
/// Memory: about one copy of the records at any time. The buffer comes zeroed from the
/// allocator (its pages become resident as they are written), and the input is consumed from
/// its end in `rounds` pieces, each freed once placed. Cost: two passes computing `dest`.
fn bucket_rounds<T, F>(mut data: Vec<T>, p: usize, rounds: usize, dest: F) -> (Vec<T>, Vec<usize>)
where
    T: Pod + Send + Sync,
    F: Fn(&T) -> usize + Sync,
{
    let hist = |c: &[T]| {
        let mut h = vec![0usize; p];
        for x in c {
            h[dest(x)] += 1;
        }
        h
    };
    let per_dest: Vec<usize> = data.par_chunks(CHUNK).map(hist).reduce(
        || vec![0usize; p],
        |a, b| a.iter().zip(&b).map(|(x, y)| x + y).collect(),
    );
    let counts: Vec<usize> = (0..rounds * p)
        .map(|k| {
            let (r, d) = (k / p, k % p);
            round_cut(r + 1, per_dest[d], rounds) - round_cut(r, per_dest[d], rounds)
        })
        .collect();
    let offsets = exclusive_prefix(&counts);
    let mut send: Vec<T> = bytemuck::allocation::zeroed_vec(data.len());
    // Records are placed from the last to the first: next[d] counts down d's records.
    let mut next = per_dest.clone();
    let piece = data.len().div_ceil(rounds).max(1);
    while !data.is_empty() {
        let lo = data.len().saturating_sub(piece);
        for x in data[lo..].iter().rev() {
            let d = dest(x);
            next[d] -= 1;
            let k = next[d];
            let c = per_dest[d];
            // The round whose part of d's records holds the k-th: cut(r) ≤ k < cut(r + 1).
            let r = ((k + 1) * rounds).div_ceil(c) - 1;
            send[offsets[r * p + d] + k - round_cut(r, c, rounds)] = *x;
        }
        data.truncate(lo);
        data.shrink_to_fit();
    }
    (send, counts)
}

/// Sends every record to the pe that owns its index in `layout` and stores it there: the
/// "send to the owner, then place" step of every algorithm (names or ranks into text order, SA
/// entries into their slots, a recursion's string into its layout). Collective.
///
/// Entry: any records on any pe; `at(record)` gives (global index below `layout.len()`, value),
/// and no two records on any pes share an index. `out` is this pe's part of `layout`
/// (`layout.local_len(me)` slots; or two such slices, written together, for a value pair).
/// Exit: `out[i - layout.start(me)]` holds the value of the record with index i, for every record
/// sent here; the other slots are untouched. Records reach their owner in no particular order.
///
/// Cost: one bucketing pass, one all-to-all of the records, one placing pass. Memory: as
/// [`exchange`] (the input is freed once bucketed: two copies of the records at the peak).
pub fn send_to_owners<T, O, F>(comm: &Comm, layout: &Layout, records: Vec<T>, out: O, at: F)
where
    T: Pod + Send + Sync,
    O: Slots,
    F: Fn(&T) -> (usize, O::Value) + Sync,
{
    let lo = layout.start(comm.rank());
    let got = exchange(comm, records, |x| layout.owner(at(x).0));
    out.place(&got, |x| {
        let (i, v) = at(x);
        (i - lo, v)
    });
}

/// [`send_to_owners`] in `pieces` steps, each taking the records at the end of `records` (about
/// 1/`pieces` of them) and freeing them before the next step. Collective: every pe passes the
/// same `pieces`. Entry and exit as [`send_to_owners`] into one slice.
///
/// Cost: `pieces` all-to-alls. Memory: the records not yet sent plus two copies of one step's
/// (instead of two copies of all of them).
pub fn send_to_owners_in_pieces<T, U, F>(
    comm: &Comm,
    layout: &Layout,
    mut records: Vec<T>,
    out: &mut [U],
    pieces: usize,
    at: F,
) where
    T: Pod + Send + Sync,
    U: Copy + Send + Sync,
    F: Fn(&T) -> (usize, U) + Sync,
{
    let pieces = pieces.max(1);
    let piece = records.len().div_ceil(pieces);
    let lo = layout.start(comm.rank());
    for _ in 0..pieces {
        let from = records.len().saturating_sub(piece);
        let got = exchange_tail(comm, &mut records, from, |x| layout.owner(at(x).0));
        scatter(&got, &mut *out, |x| {
            let (i, v) = at(x);
            (i - lo, v)
        });
    }
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

/// Where [`send_to_owners`] stores its values: one slice, or two slices written together.
pub trait Slots {
    /// The value stored in one slot.
    type Value;
    /// `self[i] = v` for `(i, v) = f(item)`, every item (see [`scatter`]).
    fn place<T: Sync>(self, items: &[T], f: impl Fn(&T) -> (usize, Self::Value) + Sync);
}

impl<U: Copy + Send + Sync> Slots for &mut [U] {
    type Value = U;
    fn place<T: Sync>(self, items: &[T], f: impl Fn(&T) -> (usize, U) + Sync) {
        scatter(items, self, f);
    }
}

impl<U: Copy + Send + Sync, V: Copy + Send + Sync> Slots for (&mut [U], &mut [V]) {
    type Value = (U, V);
    fn place<T: Sync>(self, items: &[T], f: impl Fn(&T) -> (usize, (U, V)) + Sync) {
        scatter2(items, self.0, self.1, |x| {
            let (i, (u, v)) = f(x);
            (i, u, v)
        });
    }
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

impl<T> Default for PieceExchange<T> {
    fn default() -> Self {
        PieceExchange {
            send: Vec::new(),
            recv: Vec::new(),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A step's records bucketed straight from counted positions: grouped by destination, in
    /// position order within one, the counts returned, on 1 and 3 threads, in one chunk and in
    /// several; a count that disagrees with the records panics.
    #[test]
    fn bucket_step_groups_a_steps_records() {
        let (p, steps, len) = (5, 3u8, 20_000);
        let step: Vec<u8> = (0..len as u64)
            .map(|j| (j.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 60) as u8 % steps)
            .collect();
        let dest = |j: usize| (j * 7 + j / 3) % p;
        for threads in [1, 3] {
            for chunk in [len, 4096, 999] {
                let counts: Vec<Vec<usize>> = (step.chunks(chunk).enumerate())
                    .map(|(c, bytes)| {
                        let mut h = vec![0usize; steps as usize * p];
                        for (j, &s) in bytes.iter().enumerate() {
                            h[s as usize * p + dest(c * chunk + j)] += 1;
                        }
                        h
                    })
                    .collect();
                for s in 0..steps {
                    let of_step: Vec<&[usize]> = (counts.iter())
                        .map(|h| &h[s as usize * p..(s as usize + 1) * p])
                        .collect();
                    let mut send = vec![7u64; 3];
                    let got = crate::dist::test_pool(threads).install(|| {
                        bucket_step_into(
                            &step,
                            s,
                            (chunk, &of_step),
                            p,
                            |j| (dest(j), j as u64),
                            &mut send,
                        )
                    });
                    let mut want: Vec<u64> = Vec::new();
                    let mut want_counts = Vec::new();
                    for d in 0..p {
                        let mine = (0..len).filter(|&j| step[j] == s && dest(j) == d);
                        want_counts.push(mine.clone().count());
                        want.extend(mine.map(|j| j as u64));
                    }
                    assert_eq!(
                        got, want_counts,
                        "step {s}, {threads} threads, chunk {chunk}"
                    );
                    assert_eq!(send, want, "step {s}, {threads} threads, chunk {chunk}");
                }
            }
        }
        let wrong: Vec<usize> = vec![0; p];
        let result = std::panic::catch_unwind(|| {
            let mut send: Vec<u64> = Vec::new();
            bucket_step_into(
                &step,
                0,
                (len, &[&wrong[..]]),
                p,
                |j| (dest(j), 0u64),
                &mut send,
            )
        });
        assert!(result.is_err(), "records beyond the counts are refused");
    }

    /// Bucketing over several chunks and threads (and in one piece): grouped by destination,
    /// stable within one, and the placement leads from each record to its place.
    #[test]
    fn bucket_is_a_stable_grouping() {
        let pool = crate::dist::test_pool(3);
        let data: Vec<u64> = (0..(5 * CHUNK as u64 + 123))
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7)
            .collect();
        let dest = |x: &u64| (*x % 7) as usize;
        for data in [&data[..], &data[..1000]] {
            let (send, counts, placement) = pool.install(|| bucket_impl(data, 7, dest, true));
            let mut want: Vec<u64> = Vec::new();
            for d in 0..7 {
                want.extend(data.iter().filter(|x| dest(x) == d));
            }
            assert_eq!(send, want);
            assert_eq!(counts.iter().sum::<usize>(), data.len());
            let back = pool.install(|| placement.gather(data, &send, dest));
            assert_eq!(back, data);
        }
    }

    /// `count_equal` counts as a plain filter does, for every byte value (the high-bit ones
    /// included), with and without a tail shorter than a block.
    #[test]
    fn count_equal_counts_every_value() {
        let bytes: Vec<u8> = (0..1000u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 57) as u8 | ((i % 3) as u8) << 7)
            .collect();
        for len in [0, 63, 64, 129, 1000] {
            for v in 0..=255u8 {
                let want = bytes[..len].iter().filter(|&&b| b == v).count();
                assert_eq!(
                    count_equal(&bytes[..len], v),
                    want,
                    "value {v}, {len} bytes"
                );
            }
        }
    }

    /// `build_by_kind` with a round's selection takes exactly the positions whose byte is the
    /// round's (every byte value, the high-bit ones included; a tail shorter than a word; chunks
    /// on several threads and one), by kind, in position order.
    #[test]
    fn build_by_kind_selects_a_rounds_positions() {
        let lo = 1000;
        let len = 2 * CHUNK + 13;
        let of: Vec<u8> = (0..len as u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
            .collect();
        let kind = |i: usize| i % 3; // kind 2 is skipped
        for threads in [1, 3] {
            let pool = crate::dist::test_pool(threads);
            for this in [0u8, 1, 127, 128, 129, 254, 255] {
                let want: [Vec<usize>; 2] = std::array::from_fn(|t| {
                    (lo..lo + len)
                        .filter(|&i| of[i - lo] == this && kind(i) == t)
                        .collect()
                });
                for hi in [lo + len, lo + 5] {
                    let got: [Vec<usize>; 2] = pool.install(|| {
                        build_by_kind(lo, hi, Select::Round { of: &of, this }, kind, |i| i)
                    });
                    let cut = |v: &[usize]| v.iter().copied().filter(|&i| i < hi).collect();
                    let want: [Vec<usize>; 2] = std::array::from_fn(|t| cut(&want[t]));
                    assert_eq!(got, want, "byte {this}, {threads} threads, hi {hi}");
                }
            }
            let all: [Vec<usize>; 2] =
                pool.install(|| build_by_kind(lo, lo + len, Select::All, kind, |i| i));
            assert_eq!(
                all[1],
                (lo..lo + len).filter(|i| i % 3 == 1).collect::<Vec<_>>()
            );
        }
    }

    /// Round-major bucketing: segment r holds, per destination in order, the r-th even part of
    /// that destination's records in their original order.
    #[test]
    fn bucket_rounds_splits_each_destination_evenly() {
        let data: Vec<u64> = (0..10_007u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 9)
            .collect();
        let dest = |x: &u64| (*x % 5) as usize;
        for rounds in [1, 2, 3, 7, 64] {
            let (send, counts) = bucket_rounds(data.clone(), 5, rounds, dest);
            assert_eq!(send.len(), data.len());
            let mut at = 0;
            let mut got: Vec<Vec<u64>> = vec![Vec::new(); 5];
            for r in 0..rounds {
                for (d, part) in got.iter_mut().enumerate() {
                    let c = counts[r * 5 + d];
                    assert!(send[at..at + c].iter().all(|x| dest(x) == d));
                    part.extend_from_slice(&send[at..at + c]);
                    at += c;
                }
            }
            for (d, part) in got.iter().enumerate() {
                let want: Vec<u64> = data.iter().copied().filter(|x| dest(x) == d).collect();
                assert_eq!(*part, want, "rounds {rounds}, destination {d}");
                let sizes: Vec<usize> = (0..rounds).map(|r| counts[r * 5 + d]).collect();
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(hi - lo <= 1, "uneven parts {sizes:?}");
            }
        }
    }

    #[test]
    fn collect_kept_filters_in_order() {
        let pool = crate::dist::test_pool(3);
        let n = 4 * CHUNK + 17;
        let v: Vec<u64> = (0..n as u64).collect();
        let drop: Vec<bool> = v
            .iter()
            .map(|x| x % 3 == 1 || *x > (3 * CHUNK) as u64)
            .collect();
        let got = pool.install(|| collect_kept(&v, &drop, |j, x| (j as u64) * 10 + x));
        let want: Vec<u64> = v
            .iter()
            .filter(|x| !drop[**x as usize])
            .map(|x| x * 11)
            .collect();
        assert_eq!(got, want);
        assert_eq!(got.capacity(), want.len());
    }

    #[test]
    fn scatter_places_every_item() {
        let pool = crate::dist::test_pool(3);
        let n = 3 * CHUNK + 5;
        let items: Vec<usize> = (0..n).map(|i| (i * 7919) % n).collect();
        let mut out = vec![usize::MAX; n];
        pool.install(|| scatter(&items, &mut out, |&i| (i, i * 2)));
        assert!(out.iter().enumerate().all(|(i, &v)| v == i * 2));
    }
}
