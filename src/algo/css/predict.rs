//! Phase 2b, the prediction: a sample of 2^12 keys of ⌊64/b⌋ characters, counted over all such
//! keys, estimates how many suffixes share their key with another one (runs of one character not
//! counted), so that a repetitive text goes to a difference cover before a wasted sort. Memory
//! per pe: the drawn keys of all pes (16 B each), a filter and table over them (under 200 KiB),
//! a count per drawn key per task, and without held records one chunk of keys per task.

use super::alphabet::Codes;
use super::keys::{FirstKey, HiKey, KeyGen};
use crate::dist::Layout;
use crate::token::Token;
use crate::Ctx;

/// The sampled fraction of suffixes that share their first k characters with another one, and k.
/// The keys are those of one 64-bit word whatever the first sort's (the hand-over fraction was
/// measured on them): the first sort's records when it holds them and they are such keys
/// (`held`), else made again. The driver asks only where a hand-over before the sort is
/// possible. Collective.
pub(super) fn predict<R: FirstKey, C: Token>(
    ctx: &Ctx,
    text: &[C],
    layout: &Layout,
    codes: &Codes,
    held: Option<&[R]>,
) -> (f64, usize) {
    ctx.phase("predict", || {
        let narrow = Codes::packed(codes.code.clone(), codes.b, 64);
        let keys = KeyGen::<HiKey, C>::new(ctx, text, layout, &narrow);
        let held = held.and_then(R::as_narrow);
        let shared = shared_key_fraction(ctx, &keys, held, layout.len());
        (shared, narrow.k)
    })
}

/// Codes of at most this many bits: a 64-bit key holds 4 or more characters, as on the texts
/// the hand-over fraction was measured on (bytes) and on 16-bit tokens, whose word-level English
/// stays below it.
const PREDICT_MAX_BITS: u32 = 16;

/// Whether the prediction applies to this alphabet. Wider codes (32-bit tokens of more than 2^16
/// values) leave 2 or 3 characters in a 64-bit key, which most suffixes of any text share: on
/// 32-bit word-level English (284,823 values) 86 % of them did, over the hand-over fraction,
/// while the first sort's 6 characters left 48 % tied and doubling took half of pDC3's time and
/// memory. There the first sort runs, and the hand-over after it (`Progress::Tied`) still
/// catches a repetitive text.
pub(super) fn predicts(codes: &Codes) -> bool {
    codes.b <= PREDICT_MAX_BITS
}

/// 2^12 draws: the estimate's standard error is below 0.01, and the filter and table stay in
/// the first cache levels, so counting costs a few ns per key even when nearly all keys hit.
const SAMPLES: usize = 1 << 12;

/// Estimates the fraction of suffixes whose key (first k characters and clamped length) some
/// other suffix shares, runs of one character not counted (the run step orders those): about
/// 2^12 positions drawn at random over all pes (at least one per pe), and every pe counts how
/// often each drawn key occurs among its own keys. O(n/p) hash probes per pe and one small
/// all-gather and reduction. Collective; every pe gets the same value.
fn shared_key_fraction<C: Token>(
    ctx: &Ctx,
    keys: &KeyGen<HiKey, C>,
    held: Option<&[HiKey]>,
    n: usize,
) -> f64 {
    let comm = &ctx.comm;
    let drawn = comm.all_gather_v(&draw(keys, comm.rank(), n));
    if drawn.is_empty() {
        return 0.0;
    }
    let mut distinct = drawn.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let table = KeyTable::of(&distinct);
    let counts = keys.map_chunks(
        held,
        |chunk| {
            let mut c = vec![0u64; distinct.len()];
            for r in chunk {
                if let Some(j) = table.find(r.id()) {
                    c[j] += 1;
                }
            }
            c
        },
        |mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
            a
        },
        || vec![0u64; distinct.len()],
    );
    let counts = comm.all_reduce_sum_vec(&counts);
    let shared = drawn
        .iter()
        .filter(|&&x| {
            let j = distinct
                .binary_search(&x)
                .expect("a drawn key is among the distinct ones");
            counts[j] >= 2 && !keys.codes.is_run((x >> 8) as u64)
        })
        .count();
    shared as f64 / drawn.len() as f64
}

/// This pe's share of the draws ([`HiKey::id`]s of random positions), proportional to its slice.
/// Local.
fn draw<C: Token>(keys: &KeyGen<HiKey, C>, me: usize, n: usize) -> Vec<u128> {
    let len = keys.len();
    if len == 0 {
        return Vec::new();
    }
    let want = (len as u128 * SAMPLES as u128).div_ceil(n.max(1) as u128) as usize;
    let mut rng = crate::util::SplitMix::new(0x9e37_79b9 ^ ((me as u64) << 32));
    (0..want.min(len))
        .map(|_| keys.at((rng.next() % len as u64) as usize).id())
        .collect()
}

/// The distinct drawn keys, found by key: a bit filter (64 bits per drawn key) in front of an
/// open-addressing table (load ≤ 1/4) of 44-bit fingerprints and 20-bit indices. Keys of a text
/// that is not repetitive mostly miss the filter; a fingerprint shared by two different keys
/// (odds about 2^-44 per pair) would only nudge the estimate.
struct KeyTable {
    filter: Vec<u64>,
    table: Vec<u64>,
}

impl KeyTable {
    /// The table of `distinct` keys (fewer than 2^20). Local.
    fn of(distinct: &[u128]) -> Self {
        let slots = (4 * distinct.len()).next_power_of_two();
        let filter_bits = (64 * distinct.len()).next_power_of_two().max(64);
        let mut t = KeyTable {
            filter: vec![0u64; filter_bits / 64],
            table: vec![0u64; slots],
        };
        for (j, &x) in distinct.iter().enumerate() {
            let h = mix(x);
            let f = t.fslot(h);
            t.filter[f / 64] |= 1 << (f % 64);
            let mut s = t.slot_of(h);
            while t.table[s] != 0 {
                s = (s + 1) & (slots - 1);
            }
            t.table[s] = fingerprint(h) | (j as u64 + 1);
        }
        t
    }

    /// The index of key x among the distinct keys, if it is one of them.
    #[inline]
    fn find(&self, x: u128) -> Option<usize> {
        let h = mix(x);
        let f = self.fslot(h);
        if self.filter[f / 64] & (1 << (f % 64)) == 0 {
            return None;
        }
        let fp = fingerprint(h);
        let mut s = self.slot_of(h);
        loop {
            let e = self.table[s];
            if e == 0 {
                return None;
            }
            if e >> 20 << 20 == fp {
                return Some((e & 0xfffff) as usize - 1);
            }
            s = (s + 1) & (self.table.len() - 1);
        }
    }

    #[inline]
    fn slot_of(&self, h: u64) -> usize {
        (h >> (64 - self.table.len().trailing_zeros())) as usize
    }

    #[inline]
    fn fslot(&self, h: u64) -> usize {
        let filter_bits = 64 * self.filter.len();
        (h.rotate_left(21) >> (64 - filter_bits.trailing_zeros())) as usize
    }
}

#[inline]
fn mix(x: u128) -> u64 {
    let (hi, lo) = ((x >> 64) as u64, x as u64);
    (lo ^ hi.wrapping_mul(0xd1b5_4a32_d192_ed03)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

#[inline]
fn fingerprint(h: u64) -> u64 {
    h.wrapping_mul(0xff51_afd7_ed55_8ccd) >> 20 << 20
}
