//! The unresolved positions of a pe as a bit per position ([`OpenPositions`]): how a doubling
//! round finds its suffixes while they are marked rather than listed, and how the run step finds
//! the suffixes inside runs. Memory per pe: n/p/8 bytes, and a count per block of 64 words.

use bytemuck::Pod;
use rayon::prelude::*;

use super::records::Depth;
use crate::dist::collect_range;

/// This pe's unresolved positions (depth not [`super::records::resolved`]) as one bit per position, with their
/// count before each block of [`OpenPositions::BLOCK_WORDS`] words: a range of a doubling round
/// finds its positions by skipping empty words (n/p/64 steps and one per unresolved position,
/// however few are left), and a splitter draw finds the j-th one without a list of them. Made
/// once per round (a later range's positions refined or resolved by an earlier one keep their
/// bit, but their names stay in the earlier range). Local; one pass over the depths; n/p/8 bytes.
pub(super) struct OpenPositions {
    pub(super) words: Vec<u64>,
    /// The unresolved positions before each block of words.
    before: Vec<usize>,
    pub(super) count: usize,
}

impl OpenPositions {
    const BLOCK_WORDS: usize = 64;
    /// Words per piece of the parallel passes.
    const PIECE_WORDS: usize = 1 << 10;

    /// The positions whose depth is `open`.
    pub(super) fn of(depth_of: &[Depth], open: impl Fn(Depth) -> bool + Sync) -> Self {
        let words: Vec<u64> = collect_range(depth_of.len().div_ceil(64), |w| {
            let bits = &depth_of[64 * w..(64 * w + 64).min(depth_of.len())];
            (bits.iter().enumerate()).fold(0u64, |x, (b, &d)| x | (u64::from(open(d)) << b))
        });
        let per_block: Vec<usize> = (words.par_chunks(Self::BLOCK_WORDS))
            .map(|b| b.iter().map(|w| w.count_ones() as usize).sum())
            .collect();
        let mut before = Vec::with_capacity(per_block.len());
        let mut count = 0;
        for c in per_block {
            before.push(count);
            count += c;
        }
        OpenPositions {
            words,
            before,
            count,
        }
    }

    /// The local index of the j-th unresolved position (j < count).
    pub(super) fn nth(&self, j: usize) -> usize {
        let b = self.before.partition_point(|&c| c <= j) - 1;
        let mut left = j - self.before[b];
        for w in b * Self::BLOCK_WORDS.. {
            let mut x = self.words[w];
            let ones = x.count_ones() as usize;
            if left < ones {
                for _ in 0..left {
                    x &= x - 1;
                }
                return 64 * w + x.trailing_zeros() as usize;
            }
            left -= ones;
        }
        unreachable!("fewer than j unresolved positions")
    }

    /// `f(j)` of every position j held in a word w (positions 64w … 64w + 63) with `word(w)`, in
    /// increasing order. Local; one pass over the words on one thread.
    pub(super) fn each_in(&self, word: impl Fn(usize) -> bool, mut f: impl FnMut(usize)) {
        for c in 0..self.pieces() {
            self.each_of_piece(c, &word, &mut f);
        }
    }

    /// `make(j)` of the unresolved positions j with `keep(j)`, in increasing order of j. Two
    /// passes in parallel (count per piece, then fill), no copy of the result.
    pub(super) fn listed<T: Pod + Send>(
        &self,
        keep: impl Fn(usize) -> bool + Sync,
        make: impl Fn(usize) -> T + Sync,
    ) -> Vec<T> {
        self.listed_in(|_| true, keep, make)
    }

    /// [`Self::listed`] of the positions in the words w with `word(w)` only.
    pub(super) fn listed_in<T: Pod + Send>(
        &self,
        word: impl Fn(usize) -> bool + Sync,
        keep: impl Fn(usize) -> bool + Sync,
        make: impl Fn(usize) -> T + Sync,
    ) -> Vec<T> {
        // Counted without a branch on `keep` (with several key ranges it is a coin toss).
        let counts: Vec<usize> = (0..self.pieces())
            .into_par_iter()
            .map(|c| {
                let mut m = 0;
                self.each_of_piece(c, &word, |j| m += usize::from(keep(j)));
                m
            })
            .collect();
        self.fill(&counts, word, keep, make)
    }

    /// How many positions of each piece lie in each of `ranges` key ranges: entry
    /// `c · ranges + r` counts those of piece c with `range_of(j) == Some(r)` (None: in none),
    /// for [`Self::listed_counted`]. One pass for every range, on the pe's threads.
    pub(super) fn count_by_range(
        &self,
        ranges: usize,
        range_of: impl Fn(usize) -> Option<usize> + Sync,
    ) -> Vec<usize> {
        (0..self.pieces())
            .into_par_iter()
            .flat_map_iter(|c| {
                // A last slot for the positions in no range: no branch.
                let mut m = vec![0usize; ranges + 1];
                self.each_of_piece(c, &|_| true, |j| m[range_of(j).unwrap_or(ranges)] += 1);
                m.truncate(ranges);
                m
            })
            .collect()
    }

    /// [`Self::listed`] of range r of [`Self::count_by_range`]'s `counts` of `ranges` ranges:
    /// `keep(j)` must hold exactly for the positions counted in range r. One pass.
    pub(super) fn listed_counted<T: Pod + Send>(
        &self,
        counts: &[usize],
        ranges: usize,
        r: usize,
        keep: impl Fn(usize) -> bool + Sync,
        make: impl Fn(usize) -> T + Sync,
    ) -> Vec<T> {
        let counts: Vec<usize> = counts.iter().skip(r).step_by(ranges).copied().collect();
        self.fill(&counts, |_| true, keep, make)
    }

    /// Pieces of [`Self::PIECE_WORDS`] words.
    fn pieces(&self) -> usize {
        self.words.len().div_ceil(Self::PIECE_WORDS)
    }

    /// `f(j)` for the unresolved positions j of piece c in the words w with `word(w)`, in order.
    #[inline]
    fn each_of_piece(&self, c: usize, word: &impl Fn(usize) -> bool, mut f: impl FnMut(usize)) {
        let first = c * Self::PIECE_WORDS;
        let end = (first + Self::PIECE_WORDS).min(self.words.len());
        for w in first..end {
            let bits = self.words[w];
            if bits == 0 || !word(w) {
                continue;
            }
            let mut x = bits;
            while x != 0 {
                f(64 * w + x.trailing_zeros() as usize);
                x &= x - 1;
            }
        }
    }

    /// `make(j)` of the positions j with `keep(j)` in the words taken, `counts[c]` of them in
    /// piece c, in order: each piece fills its own part of the result. Local.
    fn fill<T: Pod + Send>(
        &self,
        counts: &[usize],
        word: impl Fn(usize) -> bool + Sync,
        keep: impl Fn(usize) -> bool + Sync,
        make: impl Fn(usize) -> T + Sync,
    ) -> Vec<T> {
        let mut out = vec![T::zeroed(); counts.iter().sum()];
        let mut slices = Vec::with_capacity(counts.len());
        let mut rest = &mut out[..];
        for &c in counts {
            let (head, tail) = rest.split_at_mut(c);
            slices.push(head);
            rest = tail;
        }
        slices.into_par_iter().enumerate().for_each(|(c, dst)| {
            let mut slots = dst.iter_mut();
            self.each_of_piece(c, &word, |j| {
                if keep(j) {
                    if let Some(slot) = slots.next() {
                        *slot = make(j);
                    }
                }
            });
            debug_assert!(slots.next().is_none(), "piece {c}: fewer kept than counted");
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unresolved positions' bits list and count what a plain filter of the depths does (all,
    /// by key range from one count, in the words taken), at lengths around the word, block and
    /// piece sizes, dense and sparse, on 1 and 3 threads.
    #[test]
    fn open_positions_list_and_count_the_unresolved() {
        let words = OpenPositions::PIECE_WORDS;
        let lens = [
            0,
            1,
            63,
            64,
            65,
            4095,
            4097,
            64 * words - 1,
            64 * words + 70,
            3 * 64 * words,
        ];
        for threads in [1, 3] {
            let pool = crate::dist::test_pool(threads);
            pool.install(|| {
                let mut rng = crate::util::SplitMix::new(5);
                for len in lens {
                    for every in [1, 2, 97, 100_000] {
                        let depth_of: Vec<Depth> = (0..len)
                            .map(|_| {
                                if rng.next().is_multiple_of(every) {
                                    Depth::at_most(8)
                                } else {
                                    Depth::RESOLVED
                                }
                            })
                            .collect();
                        let open: Vec<usize> = (0..len)
                            .filter(|&j| depth_of[j] != Depth::RESOLVED)
                            .collect();
                        let o = OpenPositions::of(&depth_of, |d| d != Depth::RESOLVED);
                        assert_eq!(o.count, open.len());
                        for (j, &at) in open.iter().enumerate() {
                            assert_eq!(o.nth(j), at, "len {len}, every {every}, j {j}");
                        }
                        let odd: Vec<u32> = o.listed(|j| j % 2 == 1, |j| j as u32);
                        let want: Vec<u32> = open
                            .iter()
                            .filter(|&&j| j % 2 == 1)
                            .map(|&j| j as u32)
                            .collect();
                        assert_eq!(odd, want, "len {len}, every {every}");
                        // Ranges counted in one pass, each filled in one more: position j in
                        // range j mod 5, every third position in none.
                        let range_of = |j: usize| (!j.is_multiple_of(3)).then_some(j % 5);
                        let counts = o.count_by_range(5, range_of);
                        for r in 0..5 {
                            let got: Vec<u32> = o.listed_counted(
                                &counts,
                                5,
                                r,
                                |j| range_of(j) == Some(r),
                                |j| j as u32,
                            );
                            let want: Vec<u32> = open
                                .iter()
                                .filter(|&&j| range_of(j) == Some(r))
                                .map(|&j| j as u32)
                                .collect();
                            assert_eq!(got, want, "len {len}, every {every}, range {r}");
                        }
                        let mut each = Vec::new();
                        o.each_in(|w| w % 3 != 1, |j| each.push(j));
                        let want: Vec<usize> = open
                            .iter()
                            .copied()
                            .filter(|&j| (j / 64) % 3 != 1)
                            .collect();
                        assert_eq!(each, want, "len {len}, every {every}: each_in");
                    }
                }
            });
        }
    }
}
