//! The LCP array from the distributed suffix array, as libsais' `libsais_lcp` defines it: LCP[0]
//! = 0 and LCP[i] = the length of the longest common prefix of suffixes SA[i−1] and SA[i].
//!
//! # Method
//!
//! Kasai's algorithm walks the text in order and reuses PLCP[j] − 1 for position j + 1: serial
//! by nature, and with characters compared one by one it costs O(n) per pe on aⁿ, Fibonacci
//! strings or a repeated block whatever the cut. Here the pairs are handled in text (PLCP)
//! order, PLCP[j] = the LCP of suffix j and suffix Φ[j] = SA[ISA[j] − 1], and Kasai's lemma
//! PLCP[j + 1] ≥ PLCP[j] − 1 only bounds the search of each pair, so all pairs of all pes
//! advance together in batched request rounds:
//!
//! 1. `lcp phi`: each SA entry i > 0 sends (SA[i], SA[i − 1]) to the owner of text position
//!    SA[i] (rounds of a request piece, 16 bytes a record): each pe holds Φ of its text slice.
//! 2. `lcp prefixes`: for every local position j, the first [`crate::LcpOptions::prefix`]
//!    (≤ 16) characters of suffix Φ[j] fetched exactly (16 bytes an answer) and compared with
//!    T[j..], which is local: on real text most pairs differ there and are done; the rest are
//!    open, PLCP ≥ lcp_prefix.
//! 3. `lcp hashes`: Karp–Rabin fingerprints of the text's prefixes, H[j] = Σ_{t<j} T[t]·B^t
//!    mod 2^61 − 1, B drawn at random on pe 0 and broadcast. Each pe holds H of its slice
//!    (8 bytes per character); the sums of the pes to its left (one all-gather) make them global.
//!    T[a..a+m) and T[b..b+m) agree (with high probability, see below) iff
//!    (H[a+m] − H[a])·B^b = (H[b+m] − H[b])·B^a; B^x comes from four local tables of 2^16
//!    powers, so no power is fetched or computed by squaring.
//! 4. `lcp search`: the open positions level by level, as the sparse-PLCP idea samples them:
//!    level 0 takes the open positions j ≡ 0 mod s of each pe's slice (s =
//!    [`crate::LcpOptions::sample`], default [`AUTO_SAMPLE`]) and the slice's last one; level
//!    ℓ the open odd multiples of s/2^ℓ, down to 1. A position's bounds come from the nearest
//!    known PLCP on each side (within s on level 0, within the level's step after it, so one
//!    is always there): PLCP[j] ∈ [PLCP[j0] − (j − j0), PLCP[j1] + (j1 − j)] for j0 < j < j1,
//!    clamped to [lcp_prefix, the shorter suffix]. Each pair then takes one exact window round
//!    (T[a+L..a+L+16) and T[b+L..b+L+16) with H[a+L] and H[b+L] beside them, 24 bytes an
//!    answer): a difference in the window or an upper bound within it ends the pair exactly; else
//!    the fingerprint search goes on from L + 16: first the upper bound (one round settles aⁿ),
//!    then galloping from L + 16 and a binary search. Where PLCP changes slowly (aⁿ, Fibonacci,
//!    repeated blocks: it mostly drops by one a position) the interval of a level with step t is
//!    about 2t wide, so below step 8 nearly every pair ends in its window round; the fingerprint
//!    searches are level 0's n/s pairs (about 2·log₂ of their LCP rounds each) and a few
//!    wide-interval ones. Cost per pe: about 2·n/p window queries (one per open position, two
//!    characters ends) over all levels, plus the fingerprint rounds; O(log s) levels, each in
//!    request pieces of pairs, every pe running as many pieces as the fullest.
//! 5. Verification, piece by piece inside `lcp search`: for each value found by fingerprints
//!    the characters at ℓ − 1 (must agree) and at ℓ (must differ, or a suffix end there) are
//!    fetched exactly. A failure anywhere means a collision: the steps from 2 on run again with a
//!    new base (up to [`ATTEMPTS`] bases, then the run fails with an error saying so).
//! 6. `lcp order`: LCP[i] = PLCP[SA[i]], one fetch per SA entry in request pieces.
//!
//! # Error probability
//!
//! A fingerprint never calls equal strings unequal, so a search can only overestimate a value,
//! and only through a collision. For two unequal windows the difference of the two sides is a
//! nonzero polynomial in B of degree below a + b + m ≤ 2n, so one comparison collides with
//! probability at most 2n / (2^61 − 1) over the random B (Schwartz–Zippel). If no comparison
//! collides every value is exact, the bounds taken from neighbours included; with c comparisons
//! in all (a few per open position at most, far fewer on real text, where most pairs end in
//! step 2 or their window) the chance that any collides is at most c·2n/(2^61 − 1): about 10⁻⁸
//! for n = 10⁶ even if every pair searched, but a vacuous bound above n ≈ 5·10⁸ in that worst
//! case. Step 5 catches every collision that leaves unequal characters at ℓ − 1 or equal ones at
//! ℓ (a collision elsewhere, or one that a neighbour's bound carried on, passes it). This is the
//! price of not being quadratic; a text that must be exact can be checked with libsais on one
//! node.
//!
//! # Memory
//!
//! Per pe beyond the text: the SA narrowed to 4 bytes an entry (8 when n ≥ 2^32 − 1; the
//! caller's 8-byte SA is freed at the start), Φ and PLCP (4 bytes each, likewise), the hashes (8
//! bytes per character) and the pieces' buffers: a piece is [`crate::LcpOptions::request_piece`]
//! queries, at most 1/32 of the block (at least 2^13), about 40 bytes a query (a search pair
//! 64 bytes, its two window answers 48 and their staging). About 21 bytes per character at the
//! search's peak, 17 at the end (the LCP entries, 8 bytes each, with the SA, PLCP and text).

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use crate::dist::{fetch, last_of_left, right_halo, send_to_owners, Layout};
use crate::error::{Error, Result};
use crate::index::IndexWidth;
use crate::token::Token;
use crate::util::CHUNK;
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

/// The index type of the per-character arrays (Φ, PLCP, the SA copy): `u32` when every value
/// and the marker fit (n < 2^32 − 1), else `u64` (forced on small inputs by a forced index width
/// wider than 32 bits: `--index-bits 40|64`, `--force-wide`).
trait Word: Pod + Send + Sync + Eq {
    /// "Unknown" (PLCP) or "none" (Φ of the suffix of rank 0).
    const NONE: Self;
    fn of(x: u64) -> Self;
    fn get(self) -> u64;
}

impl Word for u32 {
    const NONE: u32 = u32::MAX;
    fn of(x: u64) -> u32 {
        x as u32
    }
    fn get(self) -> u64 {
        self as u64
    }
}

impl Word for u64 {
    const NONE: u64 = u64::MAX;
    fn of(x: u64) -> u64 {
        x
    }
    fn get(self) -> u64 {
        self
    }
}

/// This pe's slice of T and the first [`PREFIX_MAX`] characters after it: windows of 16 bytes
/// at any local position (16 characters of a byte text, 8 or 4 of a token text:
/// [`Windows::chars`]).
struct Windows<'a, T> {
    text: &'a [T],
    halo: Vec<T>,
}

impl<T: Token> Windows<'_, T> {
    /// Characters in a window.
    fn chars(&self) -> u64 {
        (PREFIX_MAX / T::WIDTH.bytes()) as u64
    }

    /// T[i..i + chars) of local position i, each character big-endian, zero-padded past the end
    /// of T.
    fn at(&self, i: usize) -> [u64; 2] {
        let mut b = [0u8; PREFIX_MAX];
        let w = T::WIDTH.bytes();
        for (j, c) in b.chunks_exact_mut(w).enumerate() {
            let x = i + j;
            let t = match x < self.text.len() {
                true => Some(self.text[x]),
                false => self.halo.get(x - self.text.len()).copied(),
            };
            let v = t.map_or(0, |t| t.to_u64());
            c.copy_from_slice(&v.to_be_bytes()[8 - w..]);
        }
        [
            u64::from_be_bytes(b[..8].try_into().unwrap_or_default()),
            u64::from_be_bytes(b[8..].try_into().unwrap_or_default()),
        ]
    }

    /// The length of the common prefix of two windows in characters (at most
    /// [`Windows::chars`]; padding counts as characters).
    fn common(&self, x: [u64; 2], y: [u64; 2]) -> u64 {
        common(x, y) / T::WIDTH.bytes() as u64
    }
}

/// The length of the common prefix of two windows in bytes (at most 16).
fn common(x: [u64; 2], y: [u64; 2]) -> u64 {
    match (x[0] ^ y[0], x[1] ^ y[1]) {
        (0, 0) => PREFIX_MAX as u64,
        (0, d) => 8 + (d.leading_zeros() / 8) as u64,
        (d, _) => (d.leading_zeros() / 8) as u64,
    }
}

/// The fingerprints of T's prefixes held by one pe: `h[k] = H[lo + k + 1]`, `first = H[lo]`.
struct Hashes {
    h: Vec<u64>,
    first: u64,
    powers: Powers,
}

impl Hashes {
    /// H[lo + k] for a local position k.
    fn at(&self, k: usize) -> u64 {
        match k {
            0 => self.first,
            _ => self.h[k - 1],
        }
    }
}

/// One pair of the search: PLCP at text position `b` (local position `j`), the pair (a = Φ[b],
/// b), with T[a..a+lo) = T[b..b+lo) and T[a..a+hi) ≠ T[b..b+hi) (hi's flags aside). From `base`
/// on (when not [`EXACT`]) equality is by fingerprint, `ha` = H[a + base], `hb` = H[b + base].
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
#[repr(C)]
struct Pair {
    j: u64,
    a: u64,
    b: u64,
    base: u64,
    ha: u64,
    hb: u64,
    lo: u64,
    /// Top bits: [`GALLOP`], [`MAX_FIRST`].
    hi: u64,
}

/// In `Pair::base`: every comparison so far was exact (no fingerprint to verify).
const EXACT: u64 = u64::MAX;
/// In `hi`: still galloping.
const GALLOP: u64 = 1 << 63;
/// In `hi`: the first comparison is at the upper bound (one round settles every pair whose
/// bound is met, as all of aⁿ's).
const MAX_FIRST: u64 = 1 << 62;

impl Pair {
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

/// What the owner of position x answers in a window round: T[x..x+16) and H[x].
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
#[repr(C)]
struct WindowAnswer {
    chars: [u64; 2],
    h: u64,
}

/// The LCP array of the text whose suffix array is `sa`. Collective.
///
/// Entry: `text` and `sa` are this pe's slices of T and its suffix array under the same
/// `layout`; `sa` is consumed (a narrower copy is kept while it is needed). Exit: this pe's LCP
/// entries, for the same range as its SA entries. An error (the same on every pe) only when
/// [`ATTEMPTS`] bases in a row gave a detected collision.
pub fn lcp<T: Token>(ctx: &Ctx, text: &[T], sa: Vec<u64>, layout: &Layout) -> Result<Vec<u64>> {
    Ok(lcp_with(ctx, text, sa, layout, false)?.0)
}

/// [`lcp`], and this pe's SA part given back (rebuilt from the narrower copy the construction
/// keeps, so the SA is never held twice at full width while the LCP array is made): (LCP, SA).
/// Collective.
pub fn lcp_keeping_sa<T: Token>(
    ctx: &Ctx,
    text: &[T],
    sa: Vec<u64>,
    layout: &Layout,
) -> Result<(Vec<u64>, Vec<u64>)> {
    let (lcp, sa) = lcp_with(ctx, text, sa, layout, true)?;
    Ok((lcp, sa.unwrap_or_default()))
}

/// [`lcp`], and where `keep_sa` this pe's SA part given back. Collective.
fn lcp_with<T: Token>(
    ctx: &Ctx,
    text: &[T],
    sa: Vec<u64>,
    layout: &Layout,
    keep_sa: bool,
) -> Result<(Vec<u64>, Option<Vec<u64>>)> {
    let forced_wide = ctx
        .config
        .forced_index_width()
        .is_some_and(|w| w != IndexWidth::W32);
    ctx.install(
        |ctx| match layout.len() < u32::MAX as usize && !forced_wide {
            true => lcp_here::<u32, T>(ctx, text, sa, layout, keep_sa),
            false => lcp_here::<u64, T>(ctx, text, sa, layout, keep_sa),
        },
    )
}

/// Queries a pe sends in one request round: `request_piece`, at most 1/32 of the block (at
/// least 2^13), so that the rounds' buffers stay small beside the per-character arrays.
fn piece_len(ctx: &Ctx, block: usize) -> usize {
    ctx.config
        .lcp
        .request_piece
        .min((block / 32).max(1 << 13))
        .max(2)
}

/// The sample step of the search's first level: `lcp_sample`, or [`AUTO_SAMPLE`]; a power of
/// two.
fn sample_step(ctx: &Ctx) -> usize {
    match ctx.config.lcp.sample {
        0 => AUTO_SAMPLE,
        s => s.next_power_of_two(),
    }
}

/// The sample step when `lcp_sample` is 0 (see the module documentation).
pub const AUTO_SAMPLE: usize = 1024;

fn lcp_here<W: Word, T: Token>(
    ctx: &Ctx,
    text: &[T],
    sa: Vec<u64>,
    layout: &Layout,
    keep_sa: bool,
) -> Result<(Vec<u64>, Option<Vec<u64>>)> {
    let comm = &ctx.comm;
    let n = layout.len() as u64;
    let piece = piece_len(ctx, text.len());
    let sa: Vec<W> = {
        let narrow = sa.par_iter().map(|&x| W::of(x)).collect();
        drop(sa);
        narrow
    };
    let phi = ctx.phase("lcp phi", || phi(ctx, &sa, layout, text.len(), piece));
    let windows = Windows {
        text,
        halo: right_halo(comm, text, PREFIX_MAX),
    };
    let mut attempt = 0;
    let plcp = loop {
        if attempt == ATTEMPTS {
            return comm.agree(Err(Error::Invalid(format!(
                "the LCP search met a fingerprint collision with {ATTEMPTS} random bases in a row (this should not happen: please report it)"
            ))));
        }
        attempt += 1;
        let mut plcp = ctx.phase("lcp prefixes", || {
            prefixes(ctx, &windows, &phi, layout, piece)
        });
        let open = plcp.par_iter().filter(|&&x| x == W::NONE).count() as u64;
        let total_open = comm.all_reduce_sum(open);
        if comm.rank() == 0 {
            log::debug!("lcp: {total_open} of {n} pairs share more than the exact prefix");
        }
        if total_open == 0 {
            break plcp;
        }
        let mut base = crate::io::output::random_tag() % (P - (1 << 17)) + (1 << 16);
        comm.broadcast(&mut base, 0);
        let hashes = ctx.phase("lcp hashes", || hashes(ctx, text, layout, base));
        let collided = ctx.phase("lcp search", || {
            search(ctx, &windows, &hashes, layout, &phi, &mut plcp, piece)
        });
        drop(hashes);
        let collided = comm.any(collided);
        if !collided {
            break plcp;
        }
        if comm.rank() == 0 {
            log::warn!("lcp: a fingerprint collision was found; searching again with a new base");
        }
    };
    drop(phi);
    let lcp = ctx.phase("lcp order", || to_sa_order(ctx, &sa, &plcp, layout, piece));
    drop(plcp);
    let sa = keep_sa.then(|| sa.par_iter().map(|x| x.get()).collect());
    Ok((lcp, sa))
}

/// Φ of this pe's text positions: `phi[j − lo]` = SA[ISA[j] − 1], [`Word::NONE`] for the suffix
/// of rank 0. Collective: each SA entry sends (SA[i], SA[i − 1]) to the owner of SA[i], in rounds
/// of `piece` records (16 bytes each).
fn phi<W: Word>(ctx: &Ctx, sa: &[W], layout: &Layout, len: usize, piece: usize) -> Vec<W> {
    let comm = &ctx.comm;
    let prev = last_of_left(comm, sa);
    let mut phi = vec![W::NONE; len];
    let rounds = comm.all_reduce_max(sa.len().div_ceil(piece) as u64) as usize;
    for r in 0..rounds {
        let (x, y) = ((r * piece).min(sa.len()), ((r + 1) * piece).min(sa.len()));
        let records: Vec<[u64; 2]> = (x..y)
            .into_par_iter()
            .filter_map(|k| {
                let left = if k == 0 { prev } else { Some(sa[k - 1]) };
                left.map(|a| [sa[k].get(), a.get()])
            })
            .collect();
        send_to_owners(comm, layout, records, &mut phi[..], |r| {
            (r[0] as usize, W::of(r[1]))
        });
    }
    phi
}

/// Step 1: PLCP at every local position by an exact comparison of the first `lcp_prefix`
/// characters: final where they differ or a suffix ends, [`Word::NONE`] (open) where not.
/// Collective: one round per `piece` positions asks 16 characters at Φ[j].
fn prefixes<W: Word, T: Token>(
    ctx: &Ctx,
    windows: &Windows<T>,
    phi: &[W],
    layout: &Layout,
    piece: usize,
) -> Vec<W> {
    let comm = &ctx.comm;
    let n = layout.len() as u64;
    let lo = layout.start(comm.rank()) as u64;
    let k = (ctx.config.lcp.prefix as u64).min(windows.chars());
    let len = phi.len();
    let mut plcp = vec![W::NONE; len];
    let rounds = comm.all_reduce_max(len.div_ceil(piece) as u64) as usize;
    for r in 0..rounds {
        let (x, y) = ((r * piece).min(len), ((r + 1) * piece).min(len));
        let queries: Vec<u64> = phi[x..y]
            .iter()
            .map(|&a| if a == W::NONE { 0 } else { a.get() })
            .collect();
        let got: Vec<[u64; 2]> = fetch(comm, layout, &queries, |i| windows.at(i));
        drop(queries);
        plcp[x..y].par_iter_mut().enumerate().for_each(|(d, out)| {
            let j = x + d;
            if phi[j] == W::NONE {
                *out = W::of(0); // the suffix of rank 0: LCP[0] = 0
                return;
            }
            let (a, b) = (phi[j].get(), lo + j as u64);
            let shorter = n - a.max(b);
            let l = windows.common(got[d], windows.at(j)).min(k).min(shorter);
            if l < k || l == shorter {
                *out = W::of(l);
            }
        });
    }
    plcp
}

/// Step 2: this pe's fingerprints of T's prefixes, made global. Collective.
fn hashes<T: Token>(ctx: &Ctx, text: &[T], layout: &Layout, base: u64) -> Hashes {
    let comm = &ctx.comm;
    let powers = Powers::new(base);
    let lo = layout.start(comm.rank());
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
                acc = add(acc, mul(x.to_u64(), p));
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
    Hashes {
        h,
        first: before,
        powers,
    }
}

/// Fetches H[x] for every x (≤ n) in one request round (the caller keeps `xs` within a
/// request piece). Collective.
fn fetch_h(ctx: &Ctx, hashes: &Hashes, layout: &Layout, xs: &[u64]) -> Vec<u64> {
    // H[x] for x ≥ 1 is h[x − 1] of x − 1's owner (x = 0 asks for index 0 and takes H[0] = 0).
    let queries: Vec<u64> = xs.iter().map(|&x| x.saturating_sub(1)).collect();
    let mut got = fetch(&ctx.comm, layout, &queries, |k| hashes.h[k]);
    for (g, &x) in got.iter_mut().zip(xs) {
        if x == 0 {
            *g = 0;
        }
    }
    got
}

/// Step 3: PLCP at every open position, level by level (see the module documentation).
/// Returns whether this pe met a collision. Collective.
fn search<W: Word, T: Token>(
    ctx: &Ctx,
    windows: &Windows<T>,
    hashes: &Hashes,
    layout: &Layout,
    phi: &[W],
    plcp: &mut [W],
    piece: usize,
) -> bool {
    let comm = &ctx.comm;
    let n = layout.len() as u64;
    let lo = layout.start(comm.rank()) as u64;
    let k = (ctx.config.lcp.prefix as u64).min(windows.chars());
    let len = plcp.len();
    let step = sample_step(ctx);
    let per_piece = (piece / 2).max(1);
    let mut collided = false;
    let (mut rounds, mut pairs_total, mut fingerprinted) = (0u64, 0u64, 0u64);
    let mut t = step;
    let mut first = true;
    // The pairs of a level that its window rounds left open.
    let mut rest: Vec<Pair> = Vec::new();
    loop {
        // The positions of this level: the open multiples of t (the multiples of 2t are known
        // from the levels before), and on the first level also the slice's last position.
        let span = per_piece.saturating_mul(t);
        let pieces = comm.all_reduce_max(len.div_ceil(span) as u64) as usize;
        for r in 0..pieces {
            let (x, y) = ((r * span).min(len), ((r + 1) * span).min(len));
            let known: &[W] = plcp;
            let extra = (first && len > 0 && !(len - 1).is_multiple_of(t) && x < len && len <= y)
                .then_some(len - 1);
            let reach = if first { step } else { t };
            let mut pairs: Vec<Pair> = (0..(y - x).div_ceil(t))
                .into_par_iter()
                .map(|i| x + i * t)
                .chain(extra.into_par_iter())
                .filter(|&j| known[j] == W::NONE)
                .map(|j| {
                    let (a, b) = (phi[j].get(), lo + j as u64);
                    let (lower, upper) = bounds(known, j, reach, k, n - a.max(b));
                    Pair {
                        j: j as u64,
                        a,
                        b,
                        base: EXACT,
                        ha: 0,
                        hb: 0,
                        lo: lower,
                        hi: upper + 1,
                    }
                })
                .collect();
            pairs_total += pairs.len() as u64;
            // One exact window at the lower bound for every pair.
            let queries: Vec<u64> = pairs
                .iter()
                .filter(|s| !s.done())
                .flat_map(|s| [s.a + s.lo, s.b + s.lo])
                .collect();
            let got: Vec<WindowAnswer> = fetch(comm, layout, &queries, |i| WindowAnswer {
                chars: windows.at(i),
                h: hashes.at(i),
            });
            drop(queries);
            let open = pairs.iter_mut().filter(|s| !s.done());
            for (s, w) in open.zip(got.chunks_exact(2)) {
                let c = windows.common(w[0].chars, w[1].chars);
                if c < windows.chars() || s.lo + c >= s.hi() - 1 {
                    let l = (s.lo + c).min(s.hi() - 1);
                    (s.lo, s.hi) = (l, l + 1);
                } else {
                    (s.base, s.ha, s.hb) = (s.lo, w[0].h, w[1].h);
                    s.lo += c;
                    s.hi |= GALLOP | MAX_FIRST;
                }
            }
            drop(got);
            rounds += 1;
            for s in pairs.iter().filter(|s| s.done()) {
                plcp[s.j as usize] = W::of(s.lo);
            }
            rest.extend(pairs.into_iter().filter(|s| !s.done()));
        }
        // The level's fingerprint searches, all pieces advancing together each round.
        loop {
            let live = partition_open(&mut rest);
            if !comm.any(live > 0) {
                break;
            }
            rounds += 1;
            in_pieces(comm, &mut rest[..live], per_piece, |part| {
                let xs: Vec<u64> = part
                    .iter()
                    .flat_map(|s| {
                        let m = s.probe();
                        [s.a + m, s.b + m]
                    })
                    .collect();
                let got = fetch_h(ctx, hashes, layout, &xs);
                drop(xs);
                part.par_iter_mut().enumerate().for_each(|(i, s)| {
                    let m = s.probe();
                    let left = mul(sub(got[2 * i], s.ha), hashes.powers.pow(s.b + s.base));
                    let right = mul(sub(got[2 * i + 1], s.hb), hashes.powers.pow(s.a + s.base));
                    s.update(m, left == right);
                });
            });
        }
        // The fingerprint results, checked at ℓ − 1 and ℓ (in pieces).
        fingerprinted += rest.len() as u64;
        in_pieces(comm, &mut rest, per_piece, |part| {
            collided |= !verify(ctx, windows.text, layout, part);
        });
        for s in &rest {
            plcp[s.j as usize] = W::of(s.lo);
        }
        rest.clear();
        rest.shrink_to_fit();
        if t == 1 {
            break;
        }
        t /= 2;
        first = false;
    }
    let rounds = comm.all_reduce_max(rounds);
    let (pairs_total, fingerprinted) = (
        comm.all_reduce_sum(pairs_total),
        comm.all_reduce_sum(fingerprinted),
    );
    if comm.rank() == 0 {
        log::debug!(
            "lcp: the search took {rounds} request rounds for {pairs_total} pairs, {fingerprinted} of them by fingerprints"
        );
    }
    collided
}

/// The bounds on PLCP[j] (local position j, open: at least `k`) from the nearest known values
/// within `reach` on each side (PLCP[j + d] ≥ PLCP[j] − d, Kasai's lemma, both ways) and the
/// shorter suffix's length: (lower, upper), lower ≤ upper.
fn bounds<W: Word>(known: &[W], j: usize, reach: usize, k: u64, shorter: u64) -> (u64, u64) {
    let mut lower = k;
    let mut upper = shorter;
    for d in 1..=reach.min(j) {
        let v = known[j - d];
        if v != W::NONE {
            lower = lower.max(v.get().saturating_sub(d as u64));
            break;
        }
    }
    for d in 1..=reach.min(known.len() - 1 - j) {
        let v = known[j + d];
        if v != W::NONE {
            upper = upper.min(v.get() + d as u64);
            break;
        }
    }
    (lower.min(shorter), upper.max(lower.min(shorter)))
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

/// Moves the searches that are not done to the front; returns how many there are.
fn partition_open(all: &mut [Pair]) -> usize {
    let mut live = 0;
    for j in 0..all.len() {
        if !all[j].done() {
            all.swap(live, j);
            live += 1;
        }
    }
    live
}

/// The check of fingerprint results: for each found ℓ (≥ 1), T[a+ℓ−1] = T[b+ℓ−1] and T[a+ℓ] ≠
/// T[b+ℓ] unless one suffix ends at ℓ, exactly. Returns whether all passed. Collective (one
/// request round).
fn verify<T: Token>(ctx: &Ctx, text: &[T], layout: &Layout, found: &[Pair]) -> bool {
    let n = layout.len() as u64;
    let queries: Vec<u64> = found
        .iter()
        .flat_map(|s| [s.a + s.lo - 1, s.b + s.lo - 1, s.a + s.lo, s.b + s.lo])
        .map(|x| x.min(n - 1))
        .collect();
    let chars: Vec<T> = fetch(&ctx.comm, layout, &queries, |i| text[i]);
    found.iter().zip(chars.chunks_exact(4)).all(|(s, c)| {
        let ends = s.a.max(s.b) + s.lo == n;
        c[0] == c[1] && (ends || c[2] != c[3])
    })
}

/// Step 4: LCP[i] = PLCP[SA[i]] for this pe's SA entries. Collective: rounds of `piece`
/// queries.
fn to_sa_order<W: Word>(
    ctx: &Ctx,
    sa: &[W],
    plcp: &[W],
    layout: &Layout,
    piece: usize,
) -> Vec<u64> {
    let comm = &ctx.comm;
    let mut out = Vec::with_capacity(sa.len());
    let rounds = comm.all_reduce_max(sa.len().div_ceil(piece) as u64) as usize;
    for r in 0..rounds {
        let (x, y) = ((r * piece).min(sa.len()), ((r + 1) * piece).min(sa.len()));
        let queries: Vec<u64> = sa[x..y].iter().map(|s| s.get()).collect();
        let got: Vec<W> = fetch(comm, layout, &queries, |i| plcp[i]);
        out.extend(got.iter().map(|v| v.get()));
    }
    out
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
        let mut s = Pair {
            j: 0,
            a: 0,
            b: 0,
            base: 0,
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
        let mut s = Pair {
            j: 0,
            a: 0,
            b: 0,
            base: 0,
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
