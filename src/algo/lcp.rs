//! The LCP array from the distributed suffix array, as libsais' `libsais_lcp` defines it: LCP[0]
//! = 0 and LCP[i] = the length of the longest common prefix of suffixes SA[i−1] and SA[i].
//!
//! # Why not Kasai
//!
//! Kasai's algorithm walks the text in order and reuses LCP[ISA[i]] − 1 for position i + 1:
//! serial by nature. Cut per pe, each pe must start its slice from scratch, and on aⁿ, Fibonacci
//! strings or a block repeated many times the first suffixes of every slice have LCPs of order
//! n: comparing them character by character costs O(n) per pe, O(p·n) in all, with characters
//! fetched across pe boundaries. Here every adjacent pair (SA[i−1], SA[i]) is resolved on its own,
//! with cost logarithmic in its LCP, and all pairs of all pes advance together in batched request
//! rounds:
//!
//! 1. `lcp prefixes`: the first [`crate::Tunables::lcp_prefix`] (≤ 16) characters of every
//!    suffix of the pe's SA entries, fetched exactly from their owners (one request round, 16
//!    bytes an answer), compared with the neighbour's: on real text most pairs differ there and
//!    are done.
//! 2. `lcp hashes`: Karp–Rabin fingerprints of the text's prefixes, H[j] = Σ_{t<j} T[t]·B^t
//!    mod 2^61 − 1, B drawn at random on pe 0 and broadcast. Each pe holds H of its slice
//!    (8 bytes per character); the sums of the pes to its left (one all-gather) make them global.
//!    T[a..a+m) and T[b..b+m) agree (with high probability, see below) iff
//!    (H[a+m] − H[a])·B^b = (H[b+m] − H[b])·B^a; B^x comes from four local tables of 2^16
//!    powers, so no power is fetched or computed by squaring.
//! 3. `lcp search`: for the remaining pairs, first the whole shorter suffix (one round settles
//!    aⁿ), then a galloping search (lengths 2ℓ from the known common
//!    length ℓ) and then a binary search between the last equal and the first unequal length,
//!    all pairs at once: each request round fetches H[a+m] and H[b+m] of every open pair from
//!    their owners. O(log n) rounds in all (about 2·log₂ of the largest LCP); per pe O(n/p)
//!    queries per round, so O(n/p · log n) work and volume per pe on aⁿ, whose pairs all stay
//!    open. The rounds run while any pe has an open pair.
//! 4. `lcp verify`: for each value found by fingerprints, the characters at ℓ − 1 (must agree)
//!    and at ℓ (must differ, or one suffix end there) are fetched exactly; a pair that fails was
//!    a collision and is searched again with a new base (up to [`ATTEMPTS`] bases, then the run
//!    fails with an error saying so).
//!
//! # Error probability
//!
//! A fingerprint never calls equal strings unequal, so a search can only overestimate an LCP,
//! and only through a collision. For two unequal windows the difference of the two sides is a
//! nonzero polynomial in B of degree below a + b + m ≤ 2n, so one comparison collides with
//! probability at most 2n / (2^61 − 1) over the random B (Schwartz–Zippel). With c comparisons
//! in all (c ≤ (n − 1) × the rounds, about n·2·log₂ n on aⁿ and far fewer on real text, where
//! most pairs end in step 1), the chance that any is a collision is at most c·2n/(2^61 − 1):
//! about 10⁻⁸ for n = 10⁶ even if every pair stayed open, but a vacuous bound above n ≈ 5·10⁸
//! in that worst case. The bound is a worst case over texts and comparisons; step 4 catches every
//! collision that leaves unequal characters at ℓ − 1 or equal ones at ℓ (a collision elsewhere in
//! the window passes it). This is the price of not being quadratic; a text that must be exact
//! can be checked with libsais on one node.
//!
//! Memory per pe beyond the text and the SA: the LCP entries (8 bytes each), the hashes (8 bytes
//! per character), 16 bytes per entry for the prefixes in step 1, 40 bytes per open pair in
//! steps 3–4, and each request round's buffers, at most [`crate::Tunables::request_piece`]
//! queries per round (about 40 bytes each).

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use crate::dist::{fetch, fetch_in_rounds, last_of_left, right_halo, Layout};
use crate::error::{Error, Result};
use crate::Ctx;

/// The modulus of the fingerprints, the Mersenne prime 2^61 − 1.
const P: u64 = (1 << 61) - 1;

/// Characters one prefix record holds (step 1 compares at most this many).
pub const PREFIX_MAX: usize = 16;

/// Bases tried before the run gives up (each after a detected collision).
pub const ATTEMPTS: usize = 4;

/// `a·b mod P` for a, b < P.
#[inline]
fn mul(a: u64, b: u64) -> u64 {
    let r = a as u128 * b as u128;
    let x = (r as u64 & P) + (r >> 61) as u64;
    if x >= P {
        x - P
    } else {
        x
    }
}

#[inline]
fn add(a: u64, b: u64) -> u64 {
    let x = a + b;
    if x >= P {
        x - P
    } else {
        x
    }
}

#[inline]
fn sub(a: u64, b: u64) -> u64 {
    if a >= b {
        a - b
    } else {
        a + P - b
    }
}

/// B^x for any x < 2^64 from four tables of 2^16 powers: B^(d·2^(16k)) for every 16-bit digit
/// d of x in place k (three multiplications a power; 2 MiB).
struct Powers {
    tables: [Vec<u64>; 4],
}

impl Powers {
    fn new(base: u64) -> Powers {
        let mut tables: [Vec<u64>; 4] = Default::default();
        let mut step = base; // B^(2^(16k))
        for t in tables.iter_mut() {
            let mut v = Vec::with_capacity(1 << 16);
            let mut x = 1u64;
            for _ in 0..1 << 16 {
                v.push(x);
                x = mul(x, step);
            }
            step = x; // B^(2^(16(k+1)))
            *t = v;
        }
        Powers { tables }
    }

    #[inline]
    fn pow(&self, x: u64) -> u64 {
        let [t0, t1, t2, t3] = &self.tables;
        let lo = mul(t0[(x & 0xffff) as usize], t1[(x >> 16 & 0xffff) as usize]);
        match x >> 32 {
            0 => lo,
            _ => mul(
                lo,
                mul(t2[(x >> 32 & 0xffff) as usize], t3[(x >> 48) as usize]),
            ),
        }
    }
}

/// The fingerprints of T's prefixes held by one pe: `h[k] = H[lo + k + 1]`.
struct Hashes {
    h: Vec<u64>,
    powers: Powers,
}

impl Hashes {
    /// H[x] for a fetched value: 0 for x = 0, else the owner's answer.
    fn at_local(&self, k: usize) -> u64 {
        self.h[k]
    }
}

/// One open pair of step 3: SA entry `slot` of this pe against its left neighbour, with
/// T[a..a+lo) = T[b..b+lo) (by fingerprint) and T[a..a+hi) ≠ T[b..b+hi) (hi = the shorter
/// suffix's length + 1 while unknown).
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
#[repr(C)]
struct Search {
    slot: u64,
    /// H[a] and H[b].
    ha: u64,
    hb: u64,
    lo: u64,
    /// Top bit: still galloping.
    hi: u64,
}

const GALLOP: u64 = 1 << 63;
/// In `hi`: the first comparison is at the shorter suffix's whole length (one round settles
/// every pair of a periodic text whose shorter suffix is a prefix of the longer, as all of aⁿ's).
const MAX_FIRST: u64 = 1 << 62;

impl Search {
    fn galloping(&self) -> bool {
        self.hi & GALLOP != 0
    }
    fn hi(&self) -> u64 {
        self.hi & !(GALLOP | MAX_FIRST)
    }
    fn done(&self) -> bool {
        self.hi() - self.lo <= 1
    }
    /// The length to compare next.
    fn probe(&self) -> u64 {
        if self.hi & MAX_FIRST != 0 {
            return self.hi() - 1;
        }
        match self.galloping() {
            true => (2 * self.lo).max(self.lo + 1).min(self.hi() - 1),
            false => (self.lo + self.hi()) / 2,
        }
    }
    /// Records the comparison at length m: equal raises `lo` (galloping goes on), unequal
    /// lowers `hi` and ends the galloping.
    fn update(&mut self, m: u64, equal: bool) {
        let first = self.hi & MAX_FIRST != 0;
        self.hi &= !MAX_FIRST;
        match (equal, first) {
            (true, _) => self.lo = m,
            // The whole length differs: gallop up from lo below it.
            (false, true) => self.hi = m | GALLOP,
            (false, false) => self.hi = m,
        }
    }
}

/// The LCP array of the text whose suffix array is `sa`. Collective.
///
/// Entry: `text` and `sa` are this pe's slices of T and its suffix array under the same
/// `layout`. Exit: this pe's LCP entries, for the same range as its SA entries. An error (the
/// same on every pe) only when [`ATTEMPTS`] bases in a row gave a detected collision.
pub fn lcp(ctx: &Ctx, text: &[u8], sa: &[u64], layout: &Layout) -> Result<Vec<u64>> {
    ctx.install(|ctx| lcp_here(ctx, text, sa, layout))
}

fn lcp_here(ctx: &Ctx, text: &[u8], sa: &[u64], layout: &Layout) -> Result<Vec<u64>> {
    let comm = &ctx.comm;
    let n = layout.len() as u64;
    let prev = last_of_left(comm, sa);
    let pair = |k: usize| -> (u64, u64) {
        let a = if k == 0 { prev.unwrap_or(0) } else { sa[k - 1] };
        (a, sa[k])
    };
    let first_global = layout.start(comm.rank()) == 0;
    let (mut lcp, mut open) = ctx.phase("lcp prefixes", || {
        prefixes(ctx, text, sa, layout, prev, first_global)
    });
    let total_open = comm.all_reduce_sum(open.len() as u64);
    if comm.rank() == 0 {
        log::debug!("lcp: {total_open} of {n} pairs share more than the exact prefix");
    }
    let mut attempt = 0;
    while comm.any(!open.is_empty()) {
        if attempt == ATTEMPTS {
            return comm.agree(Err(Error::Invalid(format!(
                "the LCP search met a fingerprint collision with {ATTEMPTS} random bases in a row (this should not happen: please report it)"
            ))));
        }
        attempt += 1;
        let mut base = crate::io::output::random_tag() % (P - (1 << 17)) + (1 << 16);
        comm.broadcast(&mut base, 0);
        let hashes = ctx.phase("lcp hashes", || hashes(ctx, text, layout, base));
        let found = ctx.phase("lcp search", || search(ctx, &hashes, layout, open, &pair));
        drop(hashes);
        let failed = ctx.phase("lcp verify", || verify(ctx, text, layout, &found, &pair));
        let mut again = Vec::new();
        for (s, ok) in found.iter().zip(&failed) {
            match ok {
                true => lcp[s.slot as usize] = s.lo,
                false => again.push(s.slot),
            }
        }
        let collisions = comm.all_reduce_sum(again.len() as u64);
        if collisions > 0 && comm.rank() == 0 {
            log::warn!("lcp: {collisions} fingerprint collisions found; searching those pairs again with a new base");
        }
        open = again;
    }
    Ok(lcp)
}

/// Step 1: the exact comparison of the first `lcp_prefix` characters. Returns this pe's LCP
/// entries (final where the prefixes differ) and the slots of the pairs left open.
fn prefixes(
    ctx: &Ctx,
    text: &[u8],
    sa: &[u64],
    layout: &Layout,
    prev: Option<u64>,
    first_global: bool,
) -> (Vec<u64>, Vec<u64>) {
    let comm = &ctx.comm;
    let n = layout.len() as u64;
    let k = ctx.tune.lcp_prefix.min(PREFIX_MAX);
    let halo = right_halo(comm, text, PREFIX_MAX);
    // The first k characters at local position i, big-endian, zero-padded past the end.
    let prefix_at = |i: usize| -> [u64; 2] {
        let mut b = [0u8; PREFIX_MAX];
        for (j, c) in b.iter_mut().enumerate().take(k) {
            let x = i + j;
            *c = match x < text.len() {
                true => text[x],
                false => halo.get(x - text.len()).copied().unwrap_or(0),
            };
        }
        [
            u64::from_be_bytes(b[..8].try_into().unwrap_or_default()),
            u64::from_be_bytes(b[8..].try_into().unwrap_or_default()),
        ]
    };
    let mine: Vec<[u64; 2]> = fetch_in_rounds(comm, layout, sa, ctx.tune.request_piece, prefix_at);
    let left = last_of_left(comm, &mine);
    let common = |x: [u64; 2], y: [u64; 2]| -> u64 {
        match (x[0] ^ y[0], x[1] ^ y[1]) {
            (0, 0) => PREFIX_MAX as u64,
            (0, d) => 8 + (d.leading_zeros() / 8) as u64,
            (d, _) => (d.leading_zeros() / 8) as u64,
        }
    };
    let mut lcp = vec![0u64; sa.len()];
    let open: Vec<u64> = lcp
        .par_iter_mut()
        .enumerate()
        .filter_map(|(j, out)| {
            if j == 0 && first_global {
                return None; // LCP[0] = 0
            }
            let (a, pa) = match j {
                0 => (prev.unwrap_or(0), left.unwrap_or_default()),
                _ => (sa[j - 1], mine[j - 1]),
            };
            let b = sa[j];
            let shorter = n - a.max(b);
            let l = common(pa, mine[j]).min(k as u64).min(shorter);
            *out = l;
            (l == k as u64 && l < shorter).then_some(j as u64)
        })
        .collect();
    (lcp, open)
}

/// Step 2: this pe's fingerprints of T's prefixes, made global. Collective.
fn hashes(ctx: &Ctx, text: &[u8], layout: &Layout, base: u64) -> Hashes {
    let comm = &ctx.comm;
    let powers = Powers::new(base);
    let lo = layout.start(comm.rank());
    const CHUNK: usize = 1 << 16;
    // Each chunk's own sum Σ T[t]·B^t (global exponents), then the running sums.
    let mut h = vec![0u64; text.len()];
    let sums: Vec<u64> = h
        .par_chunks_mut(CHUNK)
        .zip(text.par_chunks(CHUNK))
        .enumerate()
        .map(|(c, (out, t))| {
            let mut p = powers.pow((lo + c * CHUNK) as u64);
            let mut acc = 0;
            for (o, &x) in out.iter_mut().zip(t) {
                acc = add(acc, mul(x as u64, p));
                *o = acc;
                p = mul(p, base);
            }
            acc
        })
        .collect();
    let mine = sums.iter().fold(0, |a, &s| add(a, s));
    let all = comm.all_gather(mine);
    let before = all[..comm.rank()].iter().fold(0, |a, &s| add(a, s));
    let mut offsets = Vec::with_capacity(sums.len());
    let mut acc = before;
    for s in &sums {
        offsets.push(acc);
        acc = add(acc, *s);
    }
    h.par_chunks_mut(CHUNK)
        .zip(offsets)
        .for_each(|(out, off)| out.iter_mut().for_each(|x| *x = add(*x, off)));
    Hashes { h, powers }
}

/// Fetches H[x] for every x (≤ n) in one request round (the caller keeps `xs` within a
/// request piece). Collective.
fn fetch_h(ctx: &Ctx, hashes: &Hashes, layout: &Layout, xs: &[u64]) -> Vec<u64> {
    // H[0] = 0 is known; H[x] for x ≥ 1 is h[x − 1] of x − 1's owner (x = 0 asks for index 0
    // and ignores the answer, so the queries keep their order without a filtered copy).
    let queries: Vec<u64> = xs.iter().map(|&x| x.saturating_sub(1)).collect();
    let mut got = fetch(&ctx.comm, layout, &queries, |k| hashes.at_local(k));
    for (g, &x) in got.iter_mut().zip(xs) {
        if x == 0 {
            *g = 0;
        }
    }
    got
}

/// Runs `f` on consecutive pieces of `items` of at most `piece` each, every pe the same number
/// of times (the most any pe needs; the others pass empty pieces), so that `f` may run request
/// rounds. Collective.
fn in_pieces<T>(
    comm: &crate::comm::Comm,
    items: &mut [T],
    piece: usize,
    mut f: impl FnMut(&mut [T]),
) {
    let piece = piece.max(1);
    let rounds = comm.all_reduce_max(items.len().div_ceil(piece) as u64) as usize;
    for r in 0..rounds {
        let lo = (r * piece).min(items.len());
        let hi = ((r + 1) * piece).min(items.len());
        f(&mut items[lo..hi]);
    }
}

/// Step 3: the galloping and binary search of every open pair. Returns every pair with its
/// `lo` = the LCP found. Collective. Each request round asks two fingerprints per pair, in
/// pieces of half a request piece of pairs, so its buffers stay within the piece.
fn search(
    ctx: &Ctx,
    hashes: &Hashes,
    layout: &Layout,
    open: Vec<u64>,
    pair: &(dyn Fn(usize) -> (u64, u64) + Sync),
) -> Vec<Search> {
    let comm = &ctx.comm;
    let n = layout.len() as u64;
    let k = ctx.tune.lcp_prefix.min(PREFIX_MAX) as u64;
    let half = (ctx.tune.request_piece / 2).max(1);
    let mut all: Vec<Search> = open
        .iter()
        .map(|&s| {
            let (a, b) = pair(s as usize);
            Search {
                slot: s,
                ha: 0,
                hb: 0,
                lo: k,
                hi: (n - a.max(b) + 1) | GALLOP | MAX_FIRST,
            }
        })
        .collect();
    drop(open);
    in_pieces(comm, &mut all, half, |part| {
        let ends: Vec<u64> = part
            .iter()
            .flat_map(|s| {
                let (a, b) = pair(s.slot as usize);
                [a, b]
            })
            .collect();
        let h0 = fetch_h(ctx, hashes, layout, &ends);
        for (j, s) in part.iter_mut().enumerate() {
            (s.ha, s.hb) = (h0[2 * j], h0[2 * j + 1]);
        }
    });
    let mut rounds = 0;
    loop {
        // The open ones first: each round only they ask.
        let live = partition_open(&mut all);
        if !comm.any(live > 0) {
            break;
        }
        rounds += 1;
        in_pieces(comm, &mut all[..live], half, |part| {
            let xs: Vec<u64> = part
                .iter()
                .flat_map(|s| {
                    let (a, b) = pair(s.slot as usize);
                    let m = s.probe();
                    [a + m, b + m]
                })
                .collect();
            let got = fetch_h(ctx, hashes, layout, &xs);
            drop(xs);
            part.par_iter_mut().enumerate().for_each(|(j, s)| {
                let (a, b) = pair(s.slot as usize);
                let m = s.probe();
                let left = mul(sub(got[2 * j], s.ha), hashes.powers.pow(b));
                let right = mul(sub(got[2 * j + 1], s.hb), hashes.powers.pow(a));
                s.update(m, left == right);
            });
        });
    }
    if comm.rank() == 0 {
        log::debug!("lcp: the search took {rounds} request rounds");
    }
    all
}

/// Moves the searches that are not done to the front; returns how many there are.
fn partition_open(all: &mut [Search]) -> usize {
    let mut live = 0;
    for j in 0..all.len() {
        if !all[j].done() {
            all.swap(live, j);
            live += 1;
        }
    }
    live
}

/// Step 4: for each found LCP ℓ, T[a+ℓ−1] = T[b+ℓ−1] (ℓ > 0) and T[a+ℓ] ≠ T[b+ℓ] unless one
/// suffix ends at ℓ, checked exactly. Returns whether each pair passed. Collective.
fn verify(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    found: &[Search],
    pair: &(dyn Fn(usize) -> (u64, u64) + Sync),
) -> Vec<bool> {
    let n = layout.len() as u64;
    // Positions ℓ − 1 and ℓ of both suffixes; n (past the end) is not asked.
    let at = |s: &Search| -> [u64; 4] {
        let (a, b) = pair(s.slot as usize);
        let l = s.lo;
        [
            (a + l).wrapping_sub(1),
            (b + l).wrapping_sub(1),
            a + l,
            b + l,
        ]
    };
    let queries: Vec<u64> = found.iter().flat_map(at).filter(|&x| x < n).collect();
    let chars: Vec<u8> =
        fetch_in_rounds(&ctx.comm, layout, &queries, ctx.tune.request_piece, |i| {
            text[i]
        });
    let mut it = chars.into_iter();
    found
        .iter()
        .map(|s| {
            // ℓ ≥ 1 here (ℓ ≥ the exact prefix, and pairs with ℓ = 0 ended in step 1 unless
            // lcp_prefix = 0, where a + ℓ − 1 wraps: skip that half then).
            let [p0, p1, p2, p3] = at(s);
            let mut c = [None; 4];
            for (slot, x) in c.iter_mut().zip([p0, p1, p2, p3]) {
                if x < n {
                    *slot = it.next();
                }
            }
            let last_agrees = s.lo == 0 || c[0] == c[1];
            let next_differs = c[2].is_none() || c[3].is_none() || c[2] != c[3];
            last_agrees && next_differs
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_agree_with_repeated_multiplication() {
        let b = 123_456_789_012_345u64;
        let t = Powers::new(b);
        let mut x = 1u64;
        for e in 0..70_000u64 {
            assert_eq!(t.pow(e), x, "B^{e}");
            x = mul(x, b);
        }
        // A large exponent by squaring.
        let e = (1u64 << 40) + 12_345_678_901;
        let (mut r, mut sq, mut k) = (1u64, b, e);
        while k > 0 {
            if k & 1 == 1 {
                r = mul(r, sq);
            }
            sq = mul(sq, sq);
            k >>= 1;
        }
        assert_eq!(t.pow(e), r);
    }

    #[test]
    fn mod_arithmetic() {
        assert_eq!(mul(P - 1, P - 1), 1);
        assert_eq!(add(P - 1, 1), 0);
        assert_eq!(sub(0, 1), P - 1);
    }

    #[test]
    fn search_steps() {
        // True LCP 37, known equal 16, shorter suffix 100: gallop 32, 64 (unequal), then binary.
        let mut s = Search {
            slot: 0,
            ha: 0,
            hb: 0,
            lo: 16,
            hi: 101 | GALLOP | MAX_FIRST,
        };
        let mut steps = 0;
        while !s.done() {
            let m = s.probe();
            s.update(m, m <= 37);
            steps += 1;
        }
        assert_eq!(s.lo, 37);
        assert!(steps <= 9, "{steps}");
        // Equal to the end of the shorter suffix.
        let mut s = Search {
            slot: 0,
            ha: 0,
            hb: 0,
            lo: 0,
            hi: 6 | GALLOP | MAX_FIRST,
        };
        let mut steps = 0;
        while !s.done() {
            let m = s.probe();
            s.update(m, true);
            steps += 1;
        }
        assert_eq!((s.lo, steps), (5, 1));
    }
}
