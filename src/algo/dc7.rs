//! DC7 finish for pCSS: the suffix array from order-consistent prefix names of depth ≥ 8, with a
//! recursion on 3/7 of the positions instead of DC3's 2/3.
//!
//! pCSS hands over to a difference-cover algorithm when prefix doubling would take
//! log(longest repeat) rounds over nearly all suffixes. At that point it already holds, for every
//! position i, a name: the number of suffixes whose first h characters are smaller, for a depth
//! h ≥ k ≥ 8 of i's group, where a suffix shorter than its depth has a name of its own. Such names
//! allow the difference cover D = {1, 2, 4} of Z_7 (Kärkkäinen–Sanders–Burkhardt's DCX with X = 7,
//! as in Distributed DCX by Haag, Kurpicz, Sanders and Schimek):
//!
//! 1. **recursion**: the string of names of the positions i mod 7 = 1, then 2, then 4 (3n/7
//!    characters) is solved by the distributed DC3 ([`super::dc3`]); its suffix array gives every
//!    sample position its rank among the samples. Names cover ≥ 8 > 7 characters, so a sample's
//!    name stands for its 7-character substring, and the last sample of each class (at most 7
//!    characters before the end) is shorter than its depth, so its name is unique: no dummy
//!    samples are needed.
//! 2. **ranks to text order**, then one **merge record** per position: (name(i), the ranks of the
//!    three sample positions among i..i+6, i).
//! 3. **merge**: for i mod 7 = a and j mod 7 = b there is an l < 7 with a + l and b + l both in D
//!    (mod 7); suffix i < suffix j iff (name(i), rank(i+l)) < (name(j), rank(j+l)) (equal names
//!    mean equal first h > l characters). Splitters from a random sample of all records cut the
//!    final order into p ranges; every record goes once to the pe of its range; there the samples
//!    are placed by rank (their ranks form one interval), the other residues are radix-sorted in
//!    two groups that share an offset l (0 and 3 by (name, rank(i+1)), 5 and 6 by
//!    (name, rank(i+3))), and the three sorted lists are merged.
//!
//! Against DC3 on the same names ([`super::dc3::finish_from_names`]) the recursion is 3/7 n
//! instead of 2/3 n characters (and with it every deeper level), for merge records of 20 instead
//! of 24 bytes.

use std::cmp::Ordering;

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use super::dc3::{level, merge_positions, merge_splitters, radix_sort_local};
use crate::dist::{
    build_by_kind, exchange, name_sorted, rebalance, right_halo, sample_sort, scatter, Layout, Pair,
};
use crate::local::LocalSort;
use crate::Ctx;

/// The period of the difference cover.
const X: usize = 7;
/// The sample residues: every difference mod 7 is a difference of two of them.
const D: [usize; 3] = [1, 2, 4];
/// SLOT[r]: the index of residue r in `D`, or 3 when r is not a sample residue.
const SLOT: [usize; X] = [3, 0, 1, 3, 2, 3, 3];

/// `CMP[a][b] = (slot of a + l, slot of b + l)` for the smallest l ≥ 0 with both a + l and b + l in
/// `D` (mod 7): the ranks that decide between a suffix at residue a and one at residue b once
/// their names are equal.
const CMP: [[(u8, u8); X]; X] = cover_table();

/// `LEN[a][b]`: that smallest l.
const LEN: [[u8; X]; X] = cover_len();

const fn cover_len() -> [[u8; X]; X] {
    let mut t = [[0u8; X]; X];
    let mut a = 0;
    while a < X {
        let mut b = 0;
        while b < X {
            let mut l = 0;
            while SLOT[(a + l) % X] == 3 || SLOT[(b + l) % X] == 3 {
                l += 1;
            }
            t[a][b] = l as u8;
            b += 1;
        }
        a += 1;
    }
    t
}

const fn cover_table() -> [[(u8, u8); X]; X] {
    let mut t = [[(0u8, 0u8); X]; X];
    let mut a = 0;
    while a < X {
        let mut b = 0;
        while b < X {
            let mut l = 0;
            while l < X {
                let (x, y) = (SLOT[(a + l) % X], SLOT[(b + l) % X]);
                if x < 3 && y < 3 {
                    t[a][b] = (x as u8, y as u8);
                    break;
                }
                l += 1;
            }
            assert!(l < X, "D is a difference cover of Z_7");
            b += 1;
        }
        a += 1;
    }
    t
}

/// A merge record: the position, its prefix name, and the ranks of the sample positions
/// i + ((d − i) mod 7) for d in `D` (0 past the end).
trait Rec7: Pod + Ord + Send + Sync {
    /// `head`: the name of i (names-based finish) or t[i..i+6) packed ([`dc7`]).
    fn new(i: u64, head: u64, r: [u64; 3]) -> Self;
    fn pos(&self) -> u64;
    /// The rank of i itself (i a sample position).
    fn own_rank(&self) -> u64;
    /// Sorts the records of one group of non-sample residues (see `GROUP`) by (name, rank at the
    /// group's offset).
    fn sort_class(v: Vec<Self>, sorter: &dyn LocalSort) -> Vec<Self>;
}

macro_rules! rec7 {
    ($name:ident, $w:ty) => {
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
        struct $name {
            name: $w,
            r: [$w; 3],
            i: $w,
        }

        impl Ord for $name {
            #[inline]
            fn cmp(&self, o: &Self) -> Ordering {
                let (sa, sb) = CMP[(self.i % X as $w) as usize][(o.i % X as $w) as usize];
                (self.name, self.r[sa as usize], self.i).cmp(&(o.name, o.r[sb as usize], o.i))
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }
    };
}

rec7!(Rec32, u32);
rec7!(Rec64, u64);

/// A merge record of [`dc7`]: `c` holds t[i..i+6) (`CB` bits per character, big-endian), so the
/// first l characters are `c >> (CB·(6 − l))`.
macro_rules! crec7 {
    ($name:ident, $w:ty) => {
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
        struct $name {
            c: u64,
            r: [$w; 3],
            i: $w,
        }

        impl Ord for $name {
            #[inline]
            fn cmp(&self, o: &Self) -> Ordering {
                let (a, b) = ((self.i % X as $w) as usize, (o.i % X as $w) as usize);
                let (sa, sb) = CMP[a][b];
                let sh = CB * (X as u32 - 1 - LEN[a][b] as u32);
                (self.c >> sh, self.r[sa as usize], self.i).cmp(&(o.c >> sh, o.r[sb as usize], o.i))
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }
    };
}

crec7!(CRec32, u32);
crec7!(CRec64, u64);

impl Rec7 for CRec32 {
    #[inline]
    fn new(i: u64, c: u64, r: [u64; 3]) -> Self {
        CRec32 {
            c,
            r: [r[0] as u32, r[1] as u32, r[2] as u32],
            i: i as u32,
        }
    }
    fn pos(&self) -> u64 {
        self.i as u64
    }
    fn own_rank(&self) -> u64 {
        self.r[SLOT[self.i as usize % X]] as u64
    }
    fn sort_class(v: Vec<Self>, sorter: &dyn LocalSort) -> Vec<Self> {
        // (key, index) in one u128 sorted by the key half, then a gather: several times faster
        // than radix-sorting the 24-byte records themselves by a computed key.
        if v.is_empty() {
            return v;
        }
        let max_key = v.iter().map(|r| r.group_key()).max().unwrap_or(0);
        let (kb, ib) = (
            64 - max_key.leading_zeros(),
            64 - (v.len() as u64).leading_zeros(),
        );
        if kb + ib <= 64 {
            // Key and index fit one u64 (residues 0 and 3 below ~2^40 characters): a sort of
            // 8-byte integers.
            let mut keyed: Vec<u64> = map_maybe_par(&v, |j, r| (r.group_key() << ib) | j as u64);
            sorter.sort_u64(&mut keyed);
            let mask = (1u64 << ib) - 1;
            map_maybe_par(&keyed, |_, &k| v[(k & mask) as usize])
        } else {
            let mut keyed: Vec<u128> =
                map_maybe_par(&v, |j, r| ((r.group_key() as u128) << 64) | j as u128);
            sorter.sort_u128_by_high(&mut keyed);
            map_maybe_par(&keyed, |_, &k| v[k as u64 as usize])
        }
    }
}

impl CRec32 {
    /// (first l characters, rank at i + l) for the record's group's offset l (1 or 3): within a
    /// group this orders exactly as the comparison does (27 + 32 bits at most; ranks are unique).
    #[inline]
    fn group_key(&self) -> u64 {
        let a = self.i as usize % X;
        let s = KEY_SLOT[a];
        let l = (D[s] + X - a) % X;
        ((self.c >> (CB as usize * (X - 1 - l))) << 32) | self.r[s] as u64
    }
}

/// The 64-bit records (positions from 2^32 on): fields as wide as the level needs, and a
/// comparison sort for the residue groups. `$head` names the record's head field.
macro_rules! wide_rec7 {
    ($name:ident, $head:ident) => {
        impl Rec7 for $name {
            #[inline]
            fn new(i: u64, head: u64, r: [u64; 3]) -> Self {
                $name { $head: head, r, i }
            }
            fn pos(&self) -> u64 {
                self.i
            }
            fn own_rank(&self) -> u64 {
                self.r[SLOT[self.i as usize % X]]
            }
            fn sort_class(mut v: Vec<Self>, _sorter: &dyn LocalSort) -> Vec<Self> {
                crate::dist::sample_sort::par_sort(&mut v);
                v
            }
        }
    };
}

wide_rec7!(CRec64, c);
wide_rec7!(Rec64, name);

impl Rec7 for Rec32 {
    #[inline]
    fn new(i: u64, name: u64, r: [u64; 3]) -> Self {
        Rec32 {
            name: name as u32,
            r: [r[0] as u32, r[1] as u32, r[2] as u32],
            i: i as u32,
        }
    }
    fn pos(&self) -> u64 {
        self.i as u64
    }
    fn own_rank(&self) -> u64 {
        self.r[SLOT[self.i as usize % X]] as u64
    }
    fn sort_class(mut v: Vec<Self>, sorter: &dyn LocalSort) -> Vec<Self> {
        // A pe's records lie in one range of the final order and a name is the SA index of its
        // group's first member, so the names of one pe span little more than its share: a
        // counting sort by name and a sort of each (small) group of equal names by rank beats a
        // radix sort of 20-byte records (seven passes of moves).
        let (lo, hi) = v
            .iter()
            .fold((u32::MAX, 0), |(a, b), r| (a.min(r.name), b.max(r.name)));
        if v.len() < 2 || (hi - lo) as usize > 4 * v.len() {
            radix_sort_local(bytemuck::cast_slice_mut::<_, ClassRec32>(&mut v), sorter);
            return v;
        }
        let mut start = vec![0u32; (hi - lo) as usize + 2];
        for r in v.iter() {
            start[(r.name - lo) as usize + 1] += 1;
        }
        for j in 1..start.len() {
            start[j] += start[j - 1];
        }
        let mut out = vec![Rec32::zeroed(); v.len()];
        let mut fill = start.clone();
        for r in v.iter() {
            let b = (r.name - lo) as usize;
            out[fill[b] as usize] = *r;
            fill[b] += 1;
        }
        let key = |r: &Rec32| r.r[KEY_SLOT[r.i as usize % X]];
        for w in start.windows(2) {
            let g = &mut out[w[0] as usize..w[1] as usize];
            if g.len() > 1 {
                g.sort_unstable_by_key(key);
            }
        }
        out
    }
}

/// Positions per chunk of the per-position loops.
const CHUNK: usize = 1 << 16;

/// Whether this pe's loops run on several threads (rayon's pool is the pe's threads).
fn parallel() -> bool {
    rayon::current_num_threads() > 1
}

/// `v.iter().enumerate().map(f).collect()`, on the pe's threads when it has several.
fn map_maybe_par<T: Sync, U: Send>(v: &[T], f: impl Fn(usize, &T) -> U + Sync) -> Vec<U> {
    if parallel() && v.len() >= CHUNK {
        v.par_iter().enumerate().map(|(j, x)| f(j, x)).collect()
    } else {
        v.iter().enumerate().map(|(j, x)| f(j, x)).collect()
    }
}

/// The non-sample residues fall into two groups that share a deciding offset l (any l with both
/// i + l and j + l sample positions decides, not only the smallest): residues 0 and 3 by
/// (name, rank(i + 1)), residues 5 and 6 by (name, rank(i + 3)). `GROUP[r]`: the group of
/// residue r (2 for samples); `KEY_SLOT[r]`: the slot of the rank its group's key uses.
const GROUP: [usize; X] = [0, 2, 2, 0, 2, 1, 1];
const KEY_SLOT: [usize; X] = [0, 3, 3, 2, 3, 0, 1];

/// A narrow non-sample record, radix-sorted by its group's key (name, rank(i + l)): within a
/// group that key orders exactly as the comparison does.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Pod, Zeroable)]
struct ClassRec32(Rec32);

impl voracious_radix_sort::Radixable<u64> for ClassRec32 {
    type Key = u64;
    #[inline]
    fn key(&self) -> u64 {
        let s = KEY_SLOT[self.0.i as usize % X];
        ((self.0.name as u64) << 32) | self.0.r[s] as u64
    }
}

/// Builds the suffix array from prefix names (see the module doc for what `name_of` must hold:
/// `name_of[j]` is the name of position `lo + j`, of depth ≥ 8). Collective; exit as
/// [`super::dc3::dc3`].
#[must_use]
pub fn finish_from_names(ctx: &Ctx, layout: &Layout, name_of: &[u64]) -> Vec<u64> {
    if fits_narrow(ctx, layout.len()) {
        finish_with::<Rec32, u64>(ctx, layout, name_of)
    } else {
        finish_with::<Rec64, u128>(ctx, layout, name_of)
    }
}

fn fits_narrow(ctx: &Ctx, n: usize) -> bool {
    (n as u64) + 2 < 1 << 32 && !ctx.tune.force_wide
}

/// Where the samples go in the recursion string: class d holds the positions d, d + 7, … below n,
/// and the string is class 1, then 2, then 4.
struct Samples {
    /// Offsets of the three classes in the recursion string.
    off: [usize; 3],
    /// Length of the recursion string.
    m: usize,
    /// Whether the string holds a dummy sample at position n (see [`Samples::new`]).
    dummy: bool,
}

impl Samples {
    /// With `dummy_if_needed` (samples named by their 7-character windows): when n mod 7 is 1 or
    /// 2, the last sample of that class is n − 7, whose window lies inside the text and need not
    /// be unique; a dummy sample at n (empty window, the smallest name) then ends the class, as
    /// DC3's dummy does. Prefix names of depth ≥ 8 need none: n − 7's is unique.
    fn new(n: usize, dummy_if_needed: bool) -> Self {
        let dummy = dummy_if_needed && (n % X == D[0] || n % X == D[1]);
        let count = |d: usize| {
            (if n > d { (n - d).div_ceil(X) } else { 0 }) + usize::from(dummy && n % X == d)
        };
        let off = [0, count(D[0]), count(D[0]) + count(D[1])];
        Samples {
            off,
            m: off[2] + count(D[2]),
            dummy,
        }
    }

    #[inline]
    fn rpos(&self, i: usize) -> usize {
        self.off[SLOT[i % X]] + i / X
    }

    #[inline]
    fn text_pos(&self, q: usize) -> usize {
        if q < self.off[1] {
            X * q + D[0]
        } else if q < self.off[2] {
            X * (q - self.off[1]) + D[1]
        } else {
            X * (q - self.off[2]) + D[2]
        }
    }
}

fn finish_with<R: Rec7, P: Pair>(ctx: &Ctx, layout: &Layout, name_of: &[u64]) -> Vec<u64> {
    let me = ctx.comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let smp = Samples::new(layout.len(), false);
    let pairs: Vec<P> = (lo..hi)
        .filter(|&i| SLOT[i % X] < 3)
        .map(|i| P::pack(name_of[i - lo] + 1, smp.rpos(i) as u64))
        .collect();
    let rank = sample_ranks(ctx, layout, &smp, pairs, false);
    merge_all::<R>(ctx, layout, rank, |i| name_of[i - lo])
}

/// Builds the suffix array of a byte text with DC7 from the start: the samples are named by their
/// first 7 characters (one sample sort of 3n/7 records), and the merge compares up to 6
/// characters and a rank. For texts where most suffixes share long prefixes (pCSS predicts these);
/// on others its merge is heavier than DC3's. Collective; same contract as [`super::dc3::dc3`].
#[must_use]
pub fn dc7(ctx: &Ctx, text: &[u8], layout: &Layout) -> Vec<u64> {
    if layout.len() <= ctx.config.base_case.max(X + 1) {
        return super::dc3::dc3(ctx, text, layout);
    }
    if fits_narrow(ctx, layout.len()) {
        dc7_with::<CRec32, u64>(ctx, text, layout)
    } else {
        dc7_with::<CRec64, u128>(ctx, text, layout)
    }
}

/// A sample's sort record: [7-character window | position]. Sample sort splits by the whole
/// integer (equal windows spread over pes), the local sort looks at the window only (half the
/// radix passes): naming needs equal windows together, not in position order.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Pod, Zeroable)]
struct WindowKey(u128);

impl crate::dist::SortKey for WindowKey {
    fn sort_local(v: &mut [Self], sorter: &dyn LocalSort) {
        sorter.sort_u128_by_high(bytemuck::cast_slice_mut(v));
    }
}

/// Bits per character in packed windows: byte + 1, 0 past the end.
const CB: u32 = 9;

fn dc7_with<R: Rec7, P: Pair>(ctx: &Ctx, text: &[u8], layout: &Layout) -> Vec<u64> {
    let comm = &ctx.comm;
    let me = comm.rank();
    let n = layout.len();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let smp = Samples::new(n, true);
    let halo = ctx.phase("halo", || right_halo(comm, text, X - 1));
    let at = |i: usize| -> u64 {
        if i < hi {
            text[i - lo] as u64 + 1
        } else {
            halo.get(i - hi).map_or(0, |&c| c as u64 + 1)
        }
    };
    // Every position's window t[i..i+7), CB bits per character, big-endian: rolled forward one
    // character per position.
    // Windows t[i..i+w), CB bits per character, big-endian, rolled forward one character per
    // position; in chunks of positions, in parallel when the pe has threads.
    let windows = |a: usize, b: usize, w: usize| {
        let mask = (1u64 << (CB as usize * w)) - 1;
        let mut c = (0..w - 1).fold(0u64, |acc, j| (acc << CB) | at(a + j));
        (a..b).map(move |i| {
            c = ((c << CB) | at(i + w - 1)) & mask;
            (i, c)
        })
    };
    let chunks = (hi - lo).div_ceil(CHUNK);
    let chunk = |c: usize| (lo + c * CHUNK, (lo + (c + 1) * CHUNK).min(hi));
    let keys: Vec<WindowKey> = ctx.phase("sample keys", || {
        let sample_keys = |c: usize| {
            let (a, b) = chunk(c);
            windows(a, b, X)
                .filter(|&(i, _)| SLOT[i % X] < 3)
                .map(|(i, c)| WindowKey(((c as u128) << 64) | i as u128))
        };
        let mut v: Vec<WindowKey> = if parallel() {
            // Samples per chunk follow from the residues: each chunk fills its own slice.
            let per: Vec<usize> = (0..chunks)
                .map(|c| {
                    let (a, b) = chunk(c);
                    (a..b).filter(|&i| SLOT[i % X] < 3).count()
                })
                .collect();
            let mut v = vec![WindowKey(0); per.iter().sum()];
            let mut parts: Vec<&mut [WindowKey]> = Vec::with_capacity(chunks);
            let mut rest = &mut v[..];
            for &k in &per {
                let (a, b) = std::mem::take(&mut rest).split_at_mut(k);
                parts.push(a);
                rest = b;
            }
            parts.into_par_iter().enumerate().for_each(|(c, dst)| {
                for (slot, key) in dst.iter_mut().zip(sample_keys(c)) {
                    *slot = key;
                }
            });
            v
        } else {
            (0..chunks).flat_map(sample_keys).collect()
        };
        if smp.dummy && me == comm.size() - 1 {
            v.push(WindowKey(n as u128));
        }
        v
    });
    let sorted = ctx.phase("sort samples", || sample_sort(ctx, keys));
    let (names, distinct) = ctx.phase("name samples", || {
        name_sorted(comm, &sorted, |a, b| a.0 >> 64 == b.0 >> 64)
    });
    // The last sample of each class (the dummy, if any, included) reaches past the end: its
    // window is unique, so it separates the classes.
    let pairs: Vec<P> = sorted
        .iter()
        .zip(&names)
        .map(|(&k, &nm)| P::pack(nm, smp.rpos(k.0 as u64 as usize) as u64))
        .collect();
    drop((sorted, names));
    let unique = distinct as usize == smp.m;
    let rank = sample_ranks(ctx, layout, &smp, pairs, unique);
    let mut heads = vec![0u64; hi - lo];
    let fill_heads = |(c, dst): (usize, &mut [u64])| {
        let (a, b) = chunk(c);
        for (slot, (_, w)) in dst.iter_mut().zip(windows(a, b, X - 1)) {
            *slot = w;
        }
    };
    if parallel() {
        heads.par_chunks_mut(CHUNK).enumerate().for_each(fill_heads);
    } else {
        heads.chunks_mut(CHUNK).enumerate().for_each(fill_heads);
    }
    merge_all::<R>(ctx, layout, rank, |i| heads[i - lo])
}

/// From (name ≥ 1, recursion position) pairs of all samples to the rank of every sample position
/// this pe owns, in text order (0 elsewhere). With `unique` the names are the ranks; otherwise the
/// recursion string is solved by DC3. Collective.
fn sample_ranks<P: Pair>(
    ctx: &Ctx,
    layout: &Layout,
    smp: &Samples,
    pairs: Vec<P>,
    unique: bool,
) -> Vec<u64> {
    let comm = &ctx.comm;
    let p = comm.size();
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let n = layout.len();
    // The dummy (position n) has the smallest name and rank 1: real ranks are shifted down by one.
    let shift = u64::from(smp.dummy);
    let pairs: Vec<P> = if unique {
        pairs
            .into_iter()
            .map(|x| (x.a(), smp.text_pos(x.b() as usize)))
            .filter(|&(_, i)| i < n)
            .map(|(r, i)| P::pack(r - shift, i as u64))
            .collect()
    } else {
        let rl = Layout::block(smp.m, p);
        let r_text: Vec<u64> = ctx.phase("build recursion", || {
            let got = exchange(comm, pairs, |x| rl.owner(x.b() as usize));
            let mut r = vec![0u64; rl.local_len(me)];
            let base = rl.start(me) as u64;
            scatter(&got, &mut r, |x| ((x.b() - base) as usize, x.a()));
            r
        });
        let sa_r = ctx.deeper(|| level::<u64>(ctx, &r_text, &rl));
        drop(r_text);
        let base = sa_r.first;
        sa_r.sa
            .iter()
            .enumerate()
            .map(|(k, &q)| (base + k as u64 + 1, smp.text_pos(q as usize)))
            .filter(|&(_, i)| i < n)
            .map(|(r, i)| P::pack(r - shift, i as u64))
            .collect()
    };
    ctx.phase("ranks to text", || {
        let got = exchange(comm, pairs, |x| layout.owner(x.b() as usize));
        let mut rank = vec![0u64; hi - lo];
        scatter(&got, &mut rank, |x| (x.b() as usize - lo, x.a()));
        rank
    })
}

/// The merge: one record per position (its `head`, the ranks of the three samples among
/// i..i+6); splitters from a sample of all of them cut the final order into p ranges; samples go
/// to their range's pe and are placed by rank there (their ranks form one interval per pe), the
/// two groups of other residues are sent and sorted one after the other, and a three-way merge
/// gives the pe's part, rebalanced to `layout`. Collective.
fn merge_all<R: Rec7>(
    ctx: &Ctx,
    layout: &Layout,
    rank: Vec<u64>,
    head: impl Fn(usize) -> u64 + Sync,
) -> Vec<u64> {
    let comm = &ctx.comm;
    let me = comm.rank();
    let n = layout.len();
    let (lo, hi) = (layout.start(me), layout.end(me));
    // Built already split into the samples and the two groups of other residues: each kind goes
    // in its own exchange, so the receiver needs no partition pass.
    let [samples, ga, gb]: [Vec<R>; 3] = ctx.phase("merge records", || {
        let halo = right_halo(comm, &rank, X - 1);
        let ra = |i: usize| -> u64 {
            if i < hi {
                rank[i - lo]
            } else {
                halo.get(i - hi).copied().unwrap_or(0)
            }
        };
        // Samples (group 2) first, then groups 0 and 1.
        build_by_kind(
            lo,
            hi,
            |i| (GROUP[i % X] + 1) % 3,
            |i| {
                let a = i % X;
                R::new(i as u64, head(i), D.map(|d| ra(i + (d + X - a) % X)))
            },
        )
    });
    drop(rank);
    let splitters = ctx.phase("merge splitters", || {
        merge_splitters(ctx, &[&samples, &ga, &gb], n)
    });
    let dest = |r: &R| splitters.partition_point(|s| s < r);
    let samples = ctx.phase("place samples", || {
        let got = exchange(comm, samples, dest);
        // The sample ranks received form the interval first..first + got.len().
        let first = comm.exscan_sum(got.len() as u64) + 1;
        let mut out = vec![R::zeroed(); got.len()];
        scatter(&got, &mut out, |r| ((r.own_rank() - first) as usize, *r));
        out
    });
    let [ga, gb] = ctx.phase("sort others", || {
        let t0 = std::time::Instant::now();
        let ga = R::sort_class(exchange(comm, ga, dest), ctx.sorter.as_ref());
        let t1 = t0.elapsed().as_secs_f64();
        let gb = R::sort_class(exchange(comm, gb, dest), ctx.sorter.as_ref());
        log::debug!(
            "dc7 others: exchange and sort {t1:.3} + {:.3} s",
            t0.elapsed().as_secs_f64() - t1
        );
        [ga, gb]
    });
    let sa = ctx.phase("merge", || merge_three(&ga, &gb, &samples));
    ctx.note_imbalance(sa.len(), n);
    ctx.phase("rebalance", || rebalance(comm, sa, layout))
}

/// The positions of three sorted lists, merged (each record's position once).
fn merge_three<R: Rec7>(a: &[R], b: &[R], c: &[R]) -> Vec<u64> {
    let mut out = Vec::with_capacity(a.len() + b.len() + c.len());
    let (mut x, mut y, mut z) = (0, 0, 0);
    // Three-way while all three have records, then two-way, then the rest.
    while x < a.len() && y < b.len() && z < c.len() {
        let (ra, rb, rc) = (&a[x], &b[y], &c[z]);
        if ra < rb {
            if ra < rc {
                out.push(ra.pos());
                x += 1;
            } else {
                out.push(rc.pos());
                z += 1;
            }
        } else if rb < rc {
            out.push(rb.pos());
            y += 1;
        } else {
            out.push(rc.pos());
            z += 1;
        }
    }
    let pos = |r: &R| r.pos();
    if x == a.len() {
        merge_positions(&mut out, &b[y..], &c[z..], pos);
    } else if y == b.len() {
        merge_positions(&mut out, &a[x..], &c[z..], pos);
    } else {
        merge_positions(&mut out, &a[x..], &b[y..], pos);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cover_table_decides_every_pair() {
        for a in 0..X {
            for b in 0..X {
                let (x, y) = CMP[a][b];
                let l = (D[x as usize] + X - a) % X;
                assert_eq!(l, LEN[a][b] as usize);
                assert_eq!((D[y as usize] + X - b) % X, l, "same offset l for {a}, {b}");
                // l is the smallest such offset.
                for l2 in 0..l {
                    assert!(SLOT[(a + l2) % X] == 3 || SLOT[(b + l2) % X] == 3);
                }
            }
        }
        // Every group of non-sample residues shares one offset to a sample position.
        for g in 0..2 {
            let members: Vec<usize> = (0..X).filter(|&r| GROUP[r] == g).collect();
            let offsets: Vec<usize> = members
                .iter()
                .map(|&r| (D[KEY_SLOT[r]] + X - r) % X)
                .collect();
            assert!(
                offsets.iter().all(|&l| l == offsets[0]),
                "group {g}: {offsets:?}"
            );
        }
        for r in 0..X {
            assert_eq!(GROUP[r] == 2, SLOT[r] < 3);
        }
    }
}
