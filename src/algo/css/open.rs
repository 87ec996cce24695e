use super::*;

/// This pe's unresolved positions (depth not [`resolved`]) as one bit per position, with their
/// count before each block of [`OpenPositions::BLOCK_WORDS`] words: a range of a doubling round
/// finds its positions by skipping empty words (n/p/64 steps and one per unresolved position,
/// however few are left), and a splitter draw finds the j-th one without a list of them. Made
/// once per round (a later range's positions refined or resolved by an earlier one keep their
/// bit, but their names stay in the earlier range). Local; one pass over the depths; n/p/8 bytes.
pub(super) struct OpenPositions {
    pub(super) words: Vec<u64>,
    /// The unresolved positions before each block of words.
    pub(super) before: Vec<usize>,
    pub(super) count: usize,
}

impl OpenPositions {
    pub(super) const BLOCK_WORDS: usize = 64;
    /// Words per piece of the parallel passes.
    pub(super) const PIECE_WORDS: usize = 1 << 10;

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
    pub(super) fn pieces(&self) -> usize {
        self.words.len().div_ceil(Self::PIECE_WORDS)
    }

    /// `f(j)` for the unresolved positions j of piece c in the words w with `word(w)`, in order.
    #[inline]
    pub(super) fn each_of_piece(&self, c: usize, word: &impl Fn(usize) -> bool, mut f: impl FnMut(usize)) {
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
    pub(super) fn fill<T: Pod + Send>(
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
