//! Bucketing a pe's records by destination pe, the local pass before every all-to-all: stable
//! within a destination, on the pe's threads per chunk ([`bucket`], with where each record went:
//! [`Placement`]); one step's records straight from counts made earlier
//! ([`bucket_step_into`]); round-major for [`Comm::all_to_all_rounds`] ([`bucket_rounds`]).
//! Local: no communication.

use bytemuck::Pod;
use rayon::prelude::*;

use super::passes::each_equal;
use crate::comm::exclusive_prefix;
#[cfg(doc)]
use crate::comm::Comm;
use crate::util::{parallel, serial, SyncPtr, CHUNK};

/// Groups `data` by destination (stable within a destination): returns the send buffer (pe 0's
/// records first, …) and the count per destination. Parallel over chunks of the input (per-chunk
/// histograms, then each chunk writes its own slots), so it scales with the pe's threads.
pub(super) fn bucket<T, F>(data: &[T], p: usize, dest: F) -> (Vec<T>, Vec<usize>)
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
pub(super) struct Placement {
    chunk: usize,
    starts: Vec<Vec<usize>>,
}

impl Placement {
    /// `out[j] = items[slot of data[j]]`: the j-th record's counterpart in a buffer laid out as
    /// the send buffer (answers coming back from the pes in the order they were asked), in the
    /// records' order; `dest` must give the destinations the bucketing saw. One pass, on the pe's
    /// threads per chunk.
    pub(super) fn gather<T, U, F>(self, data: &[T], items: &[U], dest: F) -> Vec<U>
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
    if !parallel() || counts.len() == 1 {
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
pub(super) fn bucket_impl<T, F>(
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
pub(super) fn bucket_rounds<T, F>(
    mut data: Vec<T>,
    p: usize,
    rounds: usize,
    dest: F,
) -> (Vec<T>, Vec<usize>)
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
}
