//! CPU backend: voracious radix sort with the pe's thread count.

use std::cmp::Ordering;

use bytemuck::{Pod, Zeroable};
use voracious_radix_sort::{RadixSort, Radixable};

use super::LocalSort;

/// Below this many records a single-threaded sort is faster than spawning threads.
const MT_THRESHOLD: usize = 1 << 16;

/// Voracious radix sort; multithreaded (`voracious_mt_sort`) with `threads` threads for large
/// inputs.
pub struct CpuSort {
    threads: usize,
}

impl CpuSort {
    /// A sorter that uses `threads` threads (at least 1) for large sorts.
    pub fn new(threads: usize) -> Self {
        CpuSort {
            threads: threads.max(1),
        }
    }
}

impl LocalSort for CpuSort {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn threads(&self) -> usize {
        self.threads
    }

    fn sort_u64(&self, v: &mut [u64]) {
        if self.threads > 1 && v.len() >= MT_THRESHOLD {
            v.voracious_mt_sort(self.threads);
        } else {
            v.voracious_sort();
        }
    }

    fn sort_u128(&self, v: &mut [u128]) {
        if self.threads > 1 && v.len() >= MT_THRESHOLD {
            v.voracious_mt_sort(self.threads);
        } else {
            v.voracious_sort();
        }
    }

    fn sort_u128_by_high(&self, v: &mut [u128]) {
        let r: &mut [HiKeyed] = bytemuck::cast_slice_mut(v);
        if self.threads > 1 && r.len() >= MT_THRESHOLD {
            r.voracious_mt_sort(self.threads);
        } else {
            r.voracious_sort();
        }
    }

    fn sort_u192_by_high(&self, v: &mut [[u64; 3]]) {
        let r: &mut [HiKeyed192] = bytemuck::cast_slice_mut(v);
        if self.threads > 1 && r.len() >= MT_THRESHOLD {
            r.voracious_mt_sort(self.threads);
        } else {
            r.voracious_sort();
        }
    }
}

// HiKeyed reads a u128 as (low, high) halves in memory order.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "HiKeyed assumes little-endian u128 layout"
);

/// A u128 seen as (low, high) halves in memory order (little-endian), sorted by `hi`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct HiKeyed {
    lo: u64,
    hi: u64,
}

impl PartialEq for HiKeyed {
    fn eq(&self, o: &Self) -> bool {
        self.hi == o.hi
    }
}

impl PartialOrd for HiKeyed {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        self.hi.partial_cmp(&o.hi)
    }
}

impl Radixable<u64> for HiKeyed {
    type Key = u64;
    #[inline]
    fn key(&self) -> u64 {
        self.hi
    }
}

/// Three 64-bit words (least significant first) sorted by the high two as one `u128`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct HiKeyed192 {
    lo: u64,
    hi: [u64; 2],
}

impl HiKeyed192 {
    #[inline]
    fn hi(&self) -> u128 {
        (self.hi[1] as u128) << 64 | self.hi[0] as u128
    }
}

impl PartialEq for HiKeyed192 {
    fn eq(&self, o: &Self) -> bool {
        self.hi == o.hi
    }
}

impl PartialOrd for HiKeyed192 {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        self.hi().partial_cmp(&o.hi())
    }
}

impl Radixable<u128> for HiKeyed192 {
    type Key = u128;
    #[inline]
    fn key(&self) -> u128 {
        self.hi()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_like_std() {
        let mut x = 0x9e3779b97f4a7c15u64;
        let mut v: Vec<u64> = (0..200_000)
            .map(|_| {
                crate::util::xorshift(&mut x);
                x % 1000
            })
            .collect();
        let mut w = v.clone();
        w.sort();
        CpuSort::new(2).sort_u64(&mut v);
        assert_eq!(v, w);
        let mut a: Vec<u128> = w.iter().rev().map(|&k| (k as u128) << 70 | 5).collect();
        let mut b = a.clone();
        b.sort();
        CpuSort::new(1).sort_u128(&mut a);
        assert_eq!(a, b);
        let mut c: Vec<u128> = w
            .iter()
            .rev()
            .enumerate()
            .map(|(j, &k)| (k as u128) << 64 | j as u128)
            .collect();
        CpuSort::new(2).sort_u128_by_high(&mut c);
        assert!(c.windows(2).all(|x| x[0] >> 64 <= x[1] >> 64));
        let mut got: Vec<u64> = c.iter().map(|&x| x as u64).collect();
        got.sort();
        assert_eq!(got, (0..w.len() as u64).collect::<Vec<_>>());
    }

    #[test]
    fn sorts_192_bit_records_by_their_high_words() {
        let mut x = 0x2545f4914f6cdd1du64;
        let mut next = || crate::util::xorshift(&mut x);
        // Few distinct high words (ties), both high words in play, the low word a tag.
        for (len, threads) in [(1000, 1), (200_000, 1), (200_000, 3)] {
            let mut v: Vec<[u64; 3]> = (0..len as u64)
                .map(|j| [j, ((next() % 7) << 60) | (next() % 3), (next() % 5) << 62])
                .collect();
            let mut want: Vec<(u64, u64)> = v.iter().map(|r| (r[2], r[1])).collect();
            want.sort_unstable();
            CpuSort::new(threads).sort_u192_by_high(&mut v);
            let got: Vec<(u64, u64)> = v.iter().map(|r| (r[2], r[1])).collect();
            assert_eq!(got, want, "{len} records, {threads} threads");
            let mut tags: Vec<u64> = v.iter().map(|r| r[0]).collect();
            tags.sort_unstable();
            assert_eq!(tags, (0..len as u64).collect::<Vec<_>>());
        }
    }
}
