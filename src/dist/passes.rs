//! Local passes over a pe's records on its threads, each writing every output slot once:
//! placing records after an exchange ([`scatter`], [`scatter2`]), keeping some in order
//! ([`collect_kept`]), the positions whose byte is a round's found 64 at a time ([`each_equal`],
//! [`count_equal`], [`Select`]) and records built by kind ([`build_by_kind`]). Local: no
//! communication.

use rayon::prelude::*;

use crate::comm::exclusive_prefix;
use crate::util::{serial, SyncPtr, CHUNK};

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
    if !crate::util::parallel() {
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

#[cfg(test)]
mod tests {
    use super::*;

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
