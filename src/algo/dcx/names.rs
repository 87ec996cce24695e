//! Step 1 of the skeleton, naming the samples: by a sample sort of their keys in key ranges
//! ([`name_samples`], the keys made where they are needed: [`SampleSource`]), without a sort
//! where the windows pack into small codes ([`name_by_codes`]), or from pCSS' prefix names
//! ([`name_pairs`]); what it leaves on each pe ([`Named`]).

use rayon::prelude::*;

use super::cover::Cover;
use super::{Level, Samples};
use crate::dist::{
    build_by_kind, name_round, rank_round, sort_in_rounds, Layout, Pair, Ranges, RoundBounds,
    Select, SortKey,
};
use crate::index::Index;
use crate::util::{parallel, CHUNK};
use crate::Ctx;

/// A sample's sort record: its first X characters and its position, in some packing (`bi`: the
/// bits of the position where the packing needs them).
pub(super) trait SampleKey: SortKey {
    /// Whether two records hold the same characters.
    fn same_chars(&self, o: &Self, bi: u32) -> bool;
    /// The position.
    fn index(&self, bi: u32) -> u64;
}

/// The sample keys of this pe, made where they are needed (once per key range): its positions
/// `lo..hi`, the key of each sample position among them, and the dummy's key (on the last pe,
/// when the level has one).
pub(super) struct SampleSource<K, F> {
    pub(super) lo: usize,
    pub(super) hi: usize,
    pub(super) key: F,
    pub(super) dummy: Option<K>,
}

impl<K: SampleKey, F: Fn(usize) -> K + Sync> SampleSource<K, F> {
    /// The keys of this pe's sample positions that `select` takes, in position order, and the
    /// dummy's if `dummy` says so. In chunks on the pe's threads; counted first, so nothing is
    /// held twice. Local.
    pub(super) fn keys<C: Cover>(&self, select: Select, dummy: bool) -> Vec<K> {
        let is_sample = |i: usize| C::slot(i % C::X) < C::S;
        let [mut v] = build_by_kind::<K, 1>(
            self.lo,
            self.hi,
            select,
            |i| usize::from(!is_sample(i)),
            &self.key,
        );
        v.extend(self.dummy.filter(|_| dummy));
        v
    }

    /// The round of each of this pe's positions (of its key for a sample; unused elsewhere) and
    /// the dummy's. On the pe's threads. Local.
    pub(super) fn rounds<C: Cover>(&self, bounds: &RoundBounds<K>) -> (Vec<u8>, Option<u8>) {
        let is_sample = |i: usize| C::slot(i % C::X) < C::S;
        let round = |k: &K| bounds.round_of(k) as u8;
        let of = (self.lo..self.hi)
            .into_par_iter()
            .map(|i| {
                if is_sample(i) {
                    round(&(self.key)(i))
                } else {
                    0
                }
            })
            .collect();
        (of, self.dummy.as_ref().map(round))
    }

    /// A key for drawing the key ranges' bounds: that of the first sample at or after `lo + j`
    /// (or before it, near the end); only the ranges' balance depends on it. Local.
    pub(super) fn near<C: Cover>(&self, j: usize) -> K {
        let is_sample = |i: usize| C::slot(i % C::X) < C::S;
        let i = self.lo + j;
        (i..self.hi.min(i + C::X))
            .chain((self.lo..i).rev())
            .find(|&i| is_sample(i))
            .map(&self.key)
            .or(self.dummy)
            .unwrap_or_else(K::zeroed)
    }
}

/// What step 1 leaves on one pe: the names of its share of the samples (the dummy included).
pub(super) struct Named<I> {
    /// (name, place in the recursion string) pairs. Plain names are 1 + the number of distinct
    /// smaller windows; ranked names (`ranked`) are 1 + the number of samples with smaller
    /// windows, shifted left by one bit that is set where no other sample has the window.
    pub(super) pairs: Vec<[I; 2]>,
    /// Whether all names differ (they are then the ranks).
    pub(super) unique: bool,
    /// Whether the names are ranked and tagged.
    pub(super) ranked: bool,
}

impl<I: Index> Named<I> {
    /// Plain names.
    pub(super) fn plain(pairs: Vec<[I; 2]>, unique: bool) -> Self {
        Named {
            pairs,
            unique,
            ranked: false,
        }
    }
}

/// Step 1 for sample keys: sorts them and names them, in the key ranges of a level of `n`
/// characters ([`Level::name_rounds`]) one after the other ([`sort_in_rounds`]: the round of
/// every sample is found once, then each range's keys are made from the text again, sorted,
/// named and freed; a window whose samples straddle two ranges keeps one name, [`name_round`]).
/// Where a level may discard ([`DcxOptions::discard_share`](crate::config::DcxOptions) at most
/// 1, and twice the names fit `I`) the names are ranked and tagged ([`rank_round`], [`Named`]),
/// otherwise plain. Collective.
///
/// Memory: one range's keys (two copies during its exchange), the pairs named so far (two
/// indices per sample) and with several ranges one byte per position, instead of every key at
/// once.
pub(super) fn name_samples<C: Cover, K: SampleKey, I: Index>(
    ctx: &Ctx,
    n: usize,
    smp: &Samples<C>,
    source: SampleSource<K, impl Fn(usize) -> K + Sync>,
    bi: u32,
    lv: Level,
) -> Named<I> {
    let comm = &ctx.comm;
    let phases = lv.phases;
    let rounds = lv.name_rounds(n);
    let ranked = ctx.config.dcx.discard_share <= 1.0 && 2 * smp.m as u64 + 3 <= I::MAX;
    let round_of = std::cell::RefCell::new((Vec::new(), None));
    let mut pairs: Vec<[I; 2]> = Vec::new();
    let (mut distinct, mut last) = (0u64, 0u64);
    sort_in_rounds(
        ctx,
        phases.sort_samples,
        Ranges::new(rounds),
        source.hi - source.lo,
        |j| source.near::<C>(j),
        |bounds, k| {
            ctx.phase(phases.sample_keys, || {
                if rounds == 1 {
                    return source.keys::<C>(Select::All, true);
                }
                if k == 0 {
                    *round_of.borrow_mut() = source.rounds::<C>(bounds);
                }
                let (of, dummy) = &*round_of.borrow();
                let this = k as u8;
                source.keys::<C>(Select::Round { of, this }, *dummy == Some(this))
            })
        },
        |round| {
            let same = |a: &K, b: &K| a.same_chars(b, bi);
            let place = |k: &K| smp.rpos(k.index(bi) as usize) as u64;
            pairs.reserve_exact(round.sorted.len());
            if ranked {
                let r = ctx.phase(phases.name_samples, || rank_round(comm, &round, last, same));
                (distinct, last) = (distinct + r.new, r.last);
                let tagged = r.names.iter().zip(&r.unique);
                pairs.extend(
                    round
                        .sorted
                        .iter()
                        .zip(tagged)
                        .map(|(k, (&nm, &u))| <[I; 2]>::pack(nm << 1 | u64::from(u), place(k))),
                );
            } else {
                let names = ctx.phase(phases.name_samples, || {
                    let (names, new) = name_round(comm, &round, distinct, same);
                    distinct += new;
                    names
                });
                let named = round.sorted.iter().zip(&names);
                pairs.extend(named.map(|(k, &nm)| <[I; 2]>::pack(nm, place(k))));
            }
        },
    );
    Named {
        pairs,
        unique: distinct as usize == smp.m,
        ranked,
    }
}

/// The widest sample codes that [`name_by_codes`] takes: a bitmap of 2^24 bits (2 MiB a pe)
/// over all codes. DC3's triples fit it up to 8 bits a character: texts of at most 255 distinct
/// bytes (numbered densely: DNA's 9-bit codes, English's 21) and recursion levels of at most
/// 255 names.
pub(super) const CODE_BITS: u32 = 24;

/// Step 1 without a sort, where a sample's window packs into a code of at most `bits` ≤
/// [`CODE_BITS`] bits (its characters, most significant first: codes order as the windows, the
/// empty window of the dummy is code 0): every pe marks its samples' codes in a bitmap over all
/// codes, one reduction ors the bitmaps, and a sample's name is 1 + the number of marked codes
/// below its own, the name that sorting the windows gives it (1 + the number of distinct smaller
/// windows). Returns plain names ([`Named`]). Collective.
///
/// Entry: this pe's slice of the level (`code(i)` for its sample positions). Communication: one
/// reduction of 2^bits bits. Memory: the bitmap and a count per word (1.5 × 2^bits / 8 bytes),
/// and the pairs.
pub(super) fn name_by_codes<C: Cover, I: Index>(
    ctx: &Ctx,
    layout: &Layout,
    smp: &Samples<C>,
    bits: u32,
    code: impl Fn(usize) -> u64 + Sync,
    lv: Level,
) -> Named<I> {
    debug_assert!(bits <= CODE_BITS);
    let phases = lv.phases;
    let comm = &ctx.comm;
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let dummy = smp.dummy && me == comm.size() - 1;
    // This pe's samples in position order: global sample indices first..first + count.
    let first = C::samples_below(lo);
    let count = C::samples_below(hi) - first;
    let position = |k: usize| C::X * ((first + k) / C::S) + C::residue((first + k) % C::S);
    let words = (1usize << bits).div_ceil(64);
    let marks = ctx.phase(phases.sample_keys, || {
        let mark = |mut m: Vec<u64>, k: usize| {
            let c = code(position(k));
            m[(c >> 6) as usize] |= 1 << (c & 63);
            m
        };
        let mut m = if parallel() && count >= CHUNK {
            // One bitmap per thread, not per split.
            let per_thread = count.div_ceil(rayon::current_num_threads());
            (0..count)
                .into_par_iter()
                .with_min_len(per_thread)
                .fold(|| vec![0u64; words], mark)
                .reduce(
                    || vec![0u64; words],
                    |mut a, b| {
                        a.iter_mut().zip(b).for_each(|(x, y)| *x |= y);
                        a
                    },
                )
        } else {
            (0..count).fold(vec![0u64; words], mark)
        };
        m[0] |= u64::from(dummy);
        comm.all_reduce_or_vec(&mut m);
        m
    });
    ctx.phase(phases.name_samples, || {
        // Marked codes in the words before each word.
        let mut before = Vec::with_capacity(words);
        let mut distinct = 0u64;
        for w in &marks {
            before.push(distinct as u32);
            distinct += w.count_ones() as u64;
        }
        let name = |c: u64| {
            let w = (c >> 6) as usize;
            1 + before[w] as u64 + (marks[w] & ((1u64 << (c & 63)) - 1)).count_ones() as u64
        };
        let pair = |k: usize| {
            let i = position(k);
            <[I; 2]>::pack(name(code(i)), smp.rpos(i) as u64)
        };
        let mut pairs = Vec::with_capacity(count + usize::from(dummy));
        if parallel() && count >= CHUNK {
            pairs.par_extend((0..count).into_par_iter().map(pair));
        } else {
            pairs.extend((0..count).map(pair));
        }
        if dummy {
            pairs.push(<[I; 2]>::pack(1, smp.rpos(layout.len()) as u64));
        }
        Named::plain(pairs, distinct as usize == smp.m)
    })
}

/// Step 1 from prefix names (pCSS' hand-over): `name_of[j]` is the name of position `lo + j`, the
/// number of suffixes whose first h > X characters are smaller (a suffix shorter than h has a
/// name of its own). Returns (name + 1, place in the recursion string) for this pe's samples.
/// Local.
pub(super) fn name_pairs<C: Cover, I: Index, N: Index>(
    ctx: &Ctx,
    layout: &Layout,
    smp: &Samples<C>,
    name_of: &[N],
) -> Vec<[I; 2]> {
    let me = ctx.comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    (lo..hi)
        .filter(|&i| C::slot(i % C::X) < C::S)
        .map(|i| Pair::pack(name_of[i - lo].to_u64() + 1, smp.rpos(i) as u64))
        .collect()
}
