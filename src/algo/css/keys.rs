//! Phase 2, the keys: the first sort's record of every position ([`FirstKey`]: its next k
//! characters packed big-endian, so integer order is lexicographic order, padded with the
//! smallest code, the clamped length min(n − i, k) and the position i), made from the text and
//! a halo of k − 1 characters ([`KeyGen`]), all at once or range by range ([`RangeKeys`]).
//! Memory per pe: the halo; the records (16 B each with 64-bit keys, 24 B with 128-bit keys) of
//! all positions with one sort range, else of one range at a time, and with 128-bit keys a byte
//! per position naming its range.

use std::cell::RefCell;

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use super::alphabet::{Codes, KeyWord};
use crate::dist::{build_by_kind, right_halo, Layout, RoundBounds, Select, SortKey};
use crate::local::LocalSort;
use crate::token::Token;
use crate::util::CHUNK;
use crate::Ctx;

/// Positions take 56 bits of the first sort's record ([`FirstKey`]): a longer text goes to pDC3.
pub(super) const POSITION_BITS: u32 = 56;

/// Phase 2: the first sort's records of this pe's positions (see [`HiKey`]), made from the text
/// and a halo of k − 1 characters: all at once ([`KeyGen::all`]), one at a time
/// ([`KeyGen::at`]), or those of one key range ([`KeyGen::range`], for the sort in rounds).
pub(super) struct KeyGen<'a, R: FirstKey, C: Token = u8> {
    text: &'a [C],
    halo: Vec<C>,
    pub(super) codes: &'a Codes,
    /// The global position of `text[0]`, and the text's length.
    lo: usize,
    n: usize,
    /// The used bits of a key (b·k).
    mask: R::Word,
}

impl<'a, R: FirstKey, C: Token> KeyGen<'a, R, C> {
    /// Collective (the halo). `codes` packs keys of `R`'s word.
    pub(super) fn new(ctx: &Ctx, text: &'a [C], layout: &Layout, codes: &'a Codes) -> Self {
        assert_eq!(codes.word, R::Word::BITS, "keys packed for this record");
        let halo = right_halo(&ctx.comm, text, codes.k - 1);
        KeyGen {
            text,
            halo,
            codes,
            lo: layout.start(ctx.comm.rank()),
            n: layout.len(),
            mask: R::Word::ones(codes.word - codes.align),
        }
    }

    /// The keys of this pe's positions and, with one sort range (`ranges` = 1), every record
    /// made at once (a range would be made by filtering all). Collective (the halo).
    pub(super) fn made(
        ctx: &Ctx,
        text: &'a [C],
        layout: &Layout,
        codes: &'a Codes,
        ranges: usize,
    ) -> (Self, Option<Vec<R>>) {
        let keys = KeyGen::new(ctx, text, layout, codes);
        let held = (ranges == 1).then(|| keys.all());
        (keys, held)
    }

    /// Number of records (this pe's positions).
    pub(super) fn len(&self) -> usize {
        self.text.len()
    }

    /// The code of local character j (the halo past the slice; the smallest code past the end).
    #[inline]
    fn chr(&self, j: usize) -> u64 {
        let c = match self.text.get(j) {
            Some(&c) => c,
            None => match self.halo.get(j - self.text.len()) {
                Some(&c) => c,
                None => return 0,
            },
        };
        self.codes.code[c.to_u64() as usize]
    }

    #[inline]
    fn record(&self, j: usize, key: R::Word) -> R {
        let i = self.lo + j;
        R::new(key.shl(self.codes.align), (self.n - i).min(self.codes.k), i)
    }

    /// The record of local position j (its characters read from the slice directly unless its
    /// key reaches into the halo).
    #[inline]
    pub(super) fn at(&self, j: usize) -> R {
        let (b, k) = (self.codes.b, self.codes.k);
        let key = match self.text.get(j..j + k) {
            Some(chars) => R::Word::pack(chars, &self.codes.code, b),
            None => (j..j + k).fold(R::Word::ones(0), |key, t| key.push(b, self.chr(t))),
        };
        self.record(j, key.and(self.mask))
    }

    /// Calls `f` on the records of local positions j0, j0 + 1, …, j0 + len − 1, in order (a
    /// window of k characters rolled forward one character per position).
    #[inline]
    fn each(&self, j0: usize, len: usize, mut f: impl FnMut(R)) {
        let (b, k) = (self.codes.b, self.codes.k);
        let mut key = R::Word::ones(0);
        for t in 0..k - 1 {
            key = key.push(b, self.chr(j0 + t));
        }
        for j in j0..j0 + len {
            key = key.push(b, self.chr(j + k - 1)).and(self.mask);
            f(self.record(j, key));
        }
    }

    /// The records of local positions j0, j0 + 1, … into `dst`.
    fn fill(&self, j0: usize, dst: &mut [R]) {
        let mut slots = dst.iter_mut();
        self.each(j0, slots.len(), |r| {
            if let Some(slot) = slots.next() {
                *slot = r;
            }
        });
    }

    /// Every record, in position order.
    fn all(&self) -> Vec<R> {
        let mut out = vec![R::zeroed(); self.len()];
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, dst)| self.fill(c * CHUNK, dst));
        out
    }

    /// The records x with lo ≤ x < hi (None: unbounded), in position order, made and filtered
    /// in one pass (no record outside the range is stored). Memory: the result about twice while
    /// the pieces of the tasks are joined.
    fn range(&self, lo: Option<R>, hi: Option<R>) -> Vec<R> {
        let keep = |x: &R| lo.is_none_or(|l| l <= *x) & hi.is_none_or(|h| *x < h);
        // One buffer of a chunk per task, reused; each chunk's records copied out at their size
        // (a vector grown by doubling leaves freed blocks behind in the allocator). Every record
        // is written and the count advanced only for a kept one: no branch to mispredict when
        // the ranges are many and the keys random.
        let pieces: Vec<Vec<R>> = (0..self.len().div_ceil(CHUNK))
            .into_par_iter()
            .map_init(
                || vec![R::zeroed(); CHUNK + 1],
                |buf, c| {
                    let j0 = c * CHUNK;
                    let mut kept = 0;
                    self.each(j0, CHUNK.min(self.len() - j0), |r| {
                        buf[kept] = r;
                        kept += usize::from(keep(&r));
                    });
                    buf[..kept].to_vec()
                },
            )
            .collect();
        pieces.concat()
    }

    /// The key range of every local position under `bounds` (one byte each), from its key
    /// alone where no bound shares the key ([`RoundBounds::round_of_coarse`]). One pass making
    /// every record, on the pe's threads.
    fn rounds(&self, bounds: &RoundBounds<R>) -> Vec<u8> {
        let keys = bounds.coarse_keys(|b| b.key());
        let mut of = vec![0u8; self.len()];
        of.par_chunks_mut(CHUNK).enumerate().for_each(|(c, dst)| {
            let mut slots = dst.iter_mut();
            self.each(c * CHUNK, slots.len(), |r| {
                if let Some(slot) = slots.next() {
                    *slot = bounds.round_of_coarse(&keys, r.key(), |b| *b <= r) as u8;
                }
            });
        });
        of
    }

    /// The records of the local positions j with `of[j] == this` ([`Self::rounds`]), in
    /// position order: each made from its k characters, the others skipped 64 at a time.
    fn in_round(&self, of: &[u8], this: u8) -> Vec<R> {
        let [v] = build_by_kind::<R, 1>(
            0,
            self.len(),
            Select::Round { of, this },
            |_| 0,
            |j| self.at(j),
        );
        v
    }

    /// Calls `f` on the records of every chunk of positions (made into a buffer when not held)
    /// and reduces the results. On the pe's threads.
    pub(super) fn map_chunks<A: Send>(
        &self,
        held: Option<&[R]>,
        f: impl Fn(&[R]) -> A + Sync + Send,
        reduce: impl Fn(A, A) -> A + Sync + Send,
        zero: impl Fn() -> A + Sync + Send,
    ) -> A {
        match held {
            Some(v) => v.par_chunks(CHUNK).map(&f).reduce(&zero, &reduce),
            None => (0..self.len().div_ceil(CHUNK))
                .into_par_iter()
                .map(|c| {
                    let j0 = c * CHUNK;
                    let mut buf = vec![R::zeroed(); CHUNK.min(self.len() - j0)];
                    self.fill(j0, &mut buf);
                    f(&buf)
                })
                .reduce(&zero, &reduce),
        }
    }
}

/// The first sort's records range by range, as [`crate::dist::sort_in_rounds`] asks for them:
/// those made at once when held, else each range's made from the text again (the phase "keys").
pub(super) struct RangeKeys<'k, 'a, R: FirstKey, C: Token = u8> {
    keys: &'k KeyGen<'a, R, C>,
    held: RefCell<Option<Vec<R>>>,
    /// With 128-bit keys in several ranges, the range of each position (a byte each, during
    /// the sort).
    round_of: RefCell<Vec<u8>>,
}

impl<'k, 'a, R: FirstKey, C: Token> RangeKeys<'k, 'a, R, C> {
    pub(super) fn new(keys: &'k KeyGen<'a, R, C>, held: Option<Vec<R>>) -> Self {
        RangeKeys {
            keys,
            held: RefCell::new(held),
            round_of: RefCell::new(Vec::new()),
        }
    }

    /// The records of range k of `bounds` on this pe. Local.
    pub(super) fn of_range(&self, ctx: &Ctx, bounds: &RoundBounds<R>, k: usize) -> Vec<R> {
        if let Some(all) = self.held.borrow_mut().take() {
            return all;
        }
        let keys = self.keys;
        ctx.phase("keys", || {
            if bounds.rounds() == 1 {
                return keys.all();
            }
            // Keys of 64 bits (small alphabets: DNA's keys of 21 or 32 characters): a pass
            // rolling over every position per range, and no byte per position held (the first
            // sort is where such texts peak). Keys of 128 bits (16–24 characters): every
            // position's range found once costs less than a pass per range.
            if keys.codes.word == 64 {
                let (lo, hi) = bounds.range(k);
                return keys.range(lo, hi);
            }
            // Every position's range found once (a byte each, the memory of a character), then
            // each range's records made from their characters, the others skipped.
            if k == 0 {
                *self.round_of.borrow_mut() = keys.rounds(bounds);
            }
            let records = keys.in_round(&self.round_of.borrow(), k as u8);
            if k + 1 == bounds.rounds() {
                *self.round_of.borrow_mut() = Vec::new();
            }
            records
        })
    }
}

/// A first-sort record: a key of k characters ([`KeyWord`]), the clamped length min(n − i, k),
/// and the position i, ordered by key, then length, then position scrambled. Sample sort splits
/// by the whole record (so equal keys spread over pes), but the local sort looks at the key
/// only, which halves its radix passes; the clamped length matters only for the ≤ k−1 short
/// suffixes at the end of the text, which [`order_tails`] then puts in place.
///
/// The position is stored scrambled ([`crate::dist::scramble`] in [`POSITION_BITS`]), which
/// [`FirstKey::pos`] undoes: a group's members are ordered by it in the splitters and key
/// ranges, so a range that cuts a large group (aⁿ: one group of n − k + 1) takes a pseudo-random
/// part of every pe's members.
pub(super) trait FirstKey: SortKey + std::fmt::Debug {
    type Word: KeyWord;
    fn new(key: Self::Word, clamped_len: usize, pos: usize) -> Self;
    /// The packed characters.
    fn key(self) -> Self::Word;
    /// The clamped length and the scrambled position: [len (7 bits) | position (56)].
    fn tail(self) -> u64;
    /// min(n − i, k).
    fn clamped_len(self) -> usize {
        (self.tail() >> POSITION_BITS) as usize
    }
    /// The position i.
    fn pos(self) -> u64 {
        crate::dist::unscramble(self.tail(), POSITION_BITS)
    }
    /// Key and clamped length equal: the same group of the first sort.
    fn same_group(self, o: Self) -> bool {
        self.key() == o.key() && self.clamped_len() == o.clamped_len()
    }
    /// The records as [`HiKey`]s, if they are.
    fn as_narrow(v: &[Self]) -> Option<&[HiKey]>;
}

/// [`FirstKey::tail`] of a record.
fn key_tail(clamped_len: usize, pos: usize) -> u64 {
    (clamped_len as u64) << POSITION_BITS | crate::dist::scramble(pos as u64, POSITION_BITS)
}

/// The first sort's record with a 64-bit key: [key (64 bits) | tail (64)] as one `u128`, 16
/// bytes.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Pod, Zeroable)]
pub(super) struct HiKey(u128);

impl HiKey {
    /// Key and clamped length: equal exactly for the suffixes of one group of the first sort.
    pub(super) fn id(self) -> u128 {
        self.0 >> POSITION_BITS
    }
}

impl FirstKey for HiKey {
    type Word = u64;

    fn new(key: u64, clamped_len: usize, pos: usize) -> Self {
        HiKey((key as u128) << 64 | key_tail(clamped_len, pos) as u128)
    }

    fn key(self) -> u64 {
        (self.0 >> 64) as u64
    }

    fn tail(self) -> u64 {
        self.0 as u64
    }

    fn as_narrow(v: &[Self]) -> Option<&[HiKey]> {
        Some(v)
    }
}

impl SortKey for HiKey {
    /// Ascending by key and clamped length (the order of the groups); positions within a group
    /// in any order.
    fn sort_local(v: &mut [Self], sorter: &dyn LocalSort) {
        sorter.sort_u128_by_high(bytemuck::cast_slice_mut(v));
        order_tails(v);
    }
}

/// The first sort's record with a 128-bit key: [tail, key's low word, key's high word], 24 bytes
/// (a `u128` field would align it to 32).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub(super) struct WideKey([u64; 3]);

impl FirstKey for WideKey {
    type Word = u128;

    fn new(key: u128, clamped_len: usize, pos: usize) -> Self {
        WideKey([key_tail(clamped_len, pos), key as u64, (key >> 64) as u64])
    }

    fn key(self) -> u128 {
        (self.0[2] as u128) << 64 | self.0[1] as u128
    }

    fn tail(self) -> u64 {
        self.0[0]
    }

    fn as_narrow(_: &[Self]) -> Option<&[HiKey]> {
        None
    }
}

impl Ord for WideKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.0[2], self.0[1], self.0[0]).cmp(&(o.0[2], o.0[1], o.0[0]))
    }
}

impl PartialOrd for WideKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl SortKey for WideKey {
    /// As [`HiKey`]'s: by key, then [`order_tails`].
    fn sort_local(v: &mut [Self], sorter: &dyn LocalSort) {
        sorter.sort_u192_by_high(bytemuck::cast_slice_mut(v));
        order_tails(v);
    }
}

/// In a run sorted by key only, moves the records of suffixes shorter than k (clamped length
/// below the longest of their run of equal keys) to the front of that run, ordered by length: a
/// shorter suffix whose padded key equals a longer one's is a prefix of it and sorts first.
/// Positions within a group stay in any order. Local; one pass, plus O(length) for the runs that
/// hold such a record.
fn order_tails<R: FirstKey>(v: &mut [R]) {
    let mut j = 1;
    while j < v.len() {
        if v[j].key() != v[j - 1].key() || v[j].clamped_len() == v[j - 1].clamped_len() {
            j += 1;
            continue;
        }
        let key = v[j].key();
        let mut a = j - 1;
        while a > 0 && v[a - 1].key() == key {
            a -= 1;
        }
        let mut e = j;
        while e < v.len() && v[e].key() == key {
            e += 1;
        }
        let run = &mut v[a..e];
        let k = run.iter().map(|r| r.clamped_len()).max().unwrap_or(0);
        let mut short: Vec<R> = run
            .iter()
            .copied()
            .filter(|r| r.clamped_len() < k)
            .collect();
        short.sort_unstable_by_key(|r| r.clamped_len());
        let long: Vec<R> = run
            .iter()
            .copied()
            .filter(|r| r.clamped_len() >= k)
            .collect();
        for (slot, r) in run.iter_mut().zip(short.into_iter().chain(long)) {
            *slot = r;
        }
        j = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::cpu::CpuSort;

    const POSITION_MASK: u64 = (1u64 << POSITION_BITS) - 1;

    /// A first-sort record gives back the position it was made with (the scrambling is a
    /// bijection of 56 bits), and its order is the key's, then the clamped length's.
    #[test]
    fn first_sort_records_keep_position_and_order() {
        let mut rng = crate::util::SplitMix::new(5);
        let edges = [0, 1, 2, 3, (1 << 32) - 1, 1 << 32, (1 << POSITION_BITS) - 1];
        let positions: Vec<u64> = edges
            .into_iter()
            .chain((0..10_000).map(|_| rng.next() & POSITION_MASK))
            .collect();
        let wide_key = 7u128 << 100 | 3 << 64 | 1;
        for &i in &positions {
            let r = HiKey::new(7 << 40, 9, i as usize);
            assert_eq!((r.pos(), r.key(), r.clamped_len()), (i, 7 << 40, 9));
            let w = WideKey::new(wide_key, 18, i as usize);
            assert_eq!((w.pos(), w.key(), w.clamped_len()), (i, wide_key, 18));
        }
        let a = HiKey::new(5, 3, (1 << POSITION_BITS) - 1);
        let b = HiKey::new(5, 4, 0);
        let c = HiKey::new(6, 1, 12345);
        assert!(a < b && b < c);
        assert!(a.same_group(HiKey::new(5, 3, 0)) && !a.same_group(b));
        // Wide keys order by both words of the key (the high one first), then the length.
        let w = |key: u128, len, pos| WideKey::new(key, len, pos);
        let order = [
            w(5, 3, (1 << POSITION_BITS) - 1),
            w(5, 4, 0),
            w(6, 1, 12345),
            w(1 << 64, 1, 0),
            w(1 << 64 | 1, 1, 0),
            w(u128::MAX, 25, 0),
        ];
        assert!(order.windows(2).all(|x| x[0] < x[1]), "{order:?}");
        assert!(order[0].same_group(w(5, 3, 7)) && !order[0].same_group(order[1]));
        // The local sort orders 24-byte records by key and puts shorter suffixes first.
        let mut v: Vec<WideKey> = (0..3000u64)
            .map(|i| {
                w(
                    ((i % 7) as u128) << 90 | (i % 3) as u128,
                    18 - (i % 2) as usize,
                    i as usize,
                )
            })
            .collect();
        WideKey::sort_local(&mut v, &CpuSort::new(1));
        assert!(v
            .windows(2)
            .all(|x| (x[0].key(), x[0].clamped_len()) <= (x[1].key(), x[1].clamped_len())));
        // Consecutive positions of one group are spread over the 56 bits (no range of the
        // splitters takes one pe's block of positions whole).
        let mut low: Vec<u64> = (0..1000)
            .map(|i| HiKey::new(0, 8, i).0 as u64 & POSITION_MASK)
            .collect();
        low.sort_unstable();
        assert!(low[500] > 1 << (POSITION_BITS - 3) && low[499] < 7 << (POSITION_BITS - 3));
    }
}
