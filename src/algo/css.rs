//! pCSS: one sample sort of k-character keys, then prefix doubling on the unresolved suffixes.
//!
//! Phases:
//! 1. **alphabet**: the set of byte values in the whole text (one reduction); b = bits per
//!    character (2 for DNA), k = ⌊64/b⌋ characters per 64-bit key for alphabets of at most 16
//!    letters (32 for DNA), else 2·⌊64/b⌋ per 128-bit key (18 for English's 7-bit codes, 16 for
//!    bytes): a 64-bit key of 8–12 characters left most suffixes of text and code for a first
//!    doubling round.
//! 2. **keys**: for each position i, the next k characters packed big-endian (so integer order is
//!    lexicographic order), padded with the smallest code, plus the clamped length min(n−i, k) so
//!    that a suffix shorter than k sorts before the longer ones it is a prefix of, plus i itself.
//!    Then **predict**: a sample of 2^12 keys of ⌊64/b⌋ characters, counted over all such keys,
//!    estimates how many suffixes share their key with another one (runs of one character not
//!    counted); above the hand-over
//!    fraction (85 %) doubling would take log(longest repeat) rounds over nearly all suffixes, and
//!    DC7 ([`super::dc7::dc7`]) builds the suffix array from the start instead of after a wasted
//!    sort (`--css-predicted dc3`: pDC3; `sort`: the first sort, then the DC7 finish). The
//!    fraction sits below the 88 % that source code shows, whose runs (indentation) the run step
//!    leaves tied, so that more than 90 % stay unresolved after the first sort; English text
//!    (about 80 %) is resolved by doubling in a few rounds.
//! 3. **sort keys**: one distributed sample sort of these 16- or 24-byte records (the position
//!    makes them unique, so runs of equal keys spread over all pes: aⁿ stays balanced), in
//!    `sort_rounds` ranges of keys one after the other ([`sort_in_rounds`]): the records of a
//!    range are made from the text again (128-bit keys: every position's range found once, a
//!    byte per position, and only its range's records made), sorted, named (phase 4) and their
//!    names sent to the owners of the positions, then freed.
//! 4. **names**: the name of a suffix is the global index of the first suffix with the same key
//!    (a max-scan across pes). A suffix alone in its group is final: its name is its SA index.
//! 5. **runs**: a suffix whose key is one character c repeated k times lies in a run c^r x…; one
//!    sort orders these by (x < c or the end before x > c, then r ascending resp. descending), and
//!    only equal (x < c, r) stay tied, with depth r. Their keys are made by the owners of their
//!    positions (who know r and x) and sorted in as many key ranges as keep a range within the
//!    first sort's.
//! 6. **refine** (prefix doubling over the unresolved suffixes only): every group has a depth d,
//!    the number of characters its members share (k after the first sort); the key of unresolved
//!    i is (name(i), name(i+d)), name(i+d) and the depth of its group fetched from the pe owning
//!    i+d. Sorting these keys splits each group; new names are group start + offset of the
//!    subgroup, new depths d + depth(i+d). Resolved suffixes drop out of later rounds (a round
//!    lists the positions whose depth is not [`resolved`]: no list of unresolved suffixes is
//!    held between rounds); when most
//!    stay unresolved, DC7 finishes from the names ([`super::dc7::finish_from_names`]; with
//!    `--css-finish dc3`, [`super::dc3::finish_from_names`]).
//! 7. **place**: every suffix's final name is its SA index: (name, i) goes to the owner of that
//!    index.
//!
//! Whether pCSS hands the work to a difference cover, and to which, is decided in one place
//! (`hand_over`): before anything (tiny texts, or positions too wide for the keys: pDC3), after
//! the prediction, and before every doubling round.
//!
//! No pe ever holds more than its share of the text, the names, or the records; runs of equal
//! keys are never compared character by character (pSFFX's O(n²) trap).
//!
//! Every name, position and depth of a run is stored in one index width ([`Index`]: 32 bits
//! below 2^32 characters, 40, or 64; [`index_width`], forced by `--index-bits`), and each record
//! is one generic definition: [`Suffix`] (an unresolved suffix or an update), [`Ahead`] (the
//! answer about i + d), [`Refine`] (a doubling round's key), and (name, position) pairs `[I; 2]`.
//! Only the first sort's keys ([`FirstKey`]: [`HiKey`], [`WideKey`]) have their own form: 64 or
//! 128 bits of characters beside a 56-bit position.
//!
//! Memory per pe, w bytes per index (4 below 2^32 characters): text n/p, names w per position
//! (only when some key repeats) and depths 2 B ([`Depth`]) while doubling, sort records 16 B
//! each (first sort of 64-bit keys, run step), 24 B (first sort of 128-bit keys, in 1.5× the
//! ranges) or 4w (doubling) with up to three copies during an exchange, of one range at a time,
//! the tied suffixes as records (3w each) after a sort in one range, or two bits per position
//! (tied outside or inside a run) after several; into a file the SA slice is never held whole
//! ([`place_names_in_pieces`]). The memory plan's measured model of the peak against the ranges
//! is `plan::css_costs`.

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use super::steps::{with_step, Pieces};
use super::{consume_from_end, pieces};
use crate::algo::sink::SaSink;
use crate::comm::Comm;
use crate::dist::{
    build_by_kind, collect_kept, exchange, fetch, right_halo, scatter, send_to_owners,
    send_to_owners_in_pieces, sort_in_rounds, Layout, Pair, Ranges, Round, RoundBounds, Select,
    Slots, SortKey,
};
use crate::index::{Index, IndexWidth, U40};
use crate::local::LocalSort;
use crate::{Ctx, Predicted};

/// Positions take 56 bits of the first sort's record ([`FirstKey`]): a longer text goes to pDC3.
const POSITION_BITS: u32 = 56;

/// Doubling is slow when a round leaves more than this fraction of the suffixes it started with
/// unresolved…
const SLOW_ROUND: f64 = 0.6;

/// …while more than n / `LARGE_REMAINDER` of them are left: then pCSS hands over.
const LARGE_REMAINDER: usize = 8;

fn bits(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// Builds the suffix array with pCSS. Collective; same contract as [`super::dc3::dc3`] (a `sink`
/// that writes gets every entry written where it belongs, and every pe gets None).
#[must_use]
pub fn css(ctx: &Ctx, text: &[u8], layout: &Layout, sink: &SaSink) -> Option<Vec<u64>> {
    let n = layout.len();
    if let Some(build) = hand_over(ctx, n, Progress::Start).and_then(HandOver::whole) {
        return build(ctx, text, layout, sink);
    }
    match index_width(ctx, n) {
        IndexWidth::W32 => css_in::<u32>(ctx, text, layout, sink),
        IndexWidth::W40 => css_in::<U40>(ctx, text, layout, sink),
        IndexWidth::W64 => css_in::<u64>(ctx, text, layout, sink),
    }
}

/// The index width of pCSS' records for a text of n characters: names (+ 1), positions and
/// depths are at most n, and one value above them marks a resolved suffix ([`resolved`]). The
/// narrowest that holds n + 1, or the forced one ([`crate::Tunables::forced_index_width`]).
/// Local.
fn index_width(ctx: &Ctx, n: usize) -> IndexWidth {
    IndexWidth::choose(n as u64 + 1, ctx.tune.forced_index_width())
}

/// The depth of a position whose suffix is alone in its group (its name is final): above every
/// depth (at most n; [`index_width`] leaves room). Doubling never needs such a suffix's depth:
/// a suffix whose successor's name is unique is alone in its new group.
fn resolved<I: Index>() -> I {
    I::from_u64(I::MAX)
}

/// [`css`] with every name, position and depth stored in `I`.
fn css_in<I: Index>(ctx: &Ctx, text: &[u8], layout: &Layout, sink: &SaSink) -> Option<Vec<u64>> {
    let n = layout.len();
    let codes = ctx.phase("alphabet", || Codes::of(ctx, text));
    let rounds = sort_rounds(ctx, layout);
    let first = match codes.word {
        64 => sorted_keys::<I, HiKey>(ctx, text, layout, &codes, rounds),
        _ => sorted_keys::<I, WideKey>(ctx, text, layout, &codes, rounds),
    };
    let (FirstNames { names, tied: ties }, decided) = match first {
        Ok(named) => named,
        Err(build) => {
            ctx.log.refine_rounds.set(0);
            return build(ctx, text, layout, sink);
        }
    };
    let (tied, deep) = (ties.total, ties.deep);
    if ctx.comm.rank() == 0 {
        log::info!(
            "css: {} characters per key ({} bits each), {rounds} sort round(s), {}-bit records; {tied} of {n} suffixes need refinement",
            codes.k,
            codes.b,
            I::BITS
        );
    }
    let mut name_of = match names {
        // Every name is final: it is the suffix's index in the SA.
        Names::Sorted(pairs) if tied == 0 => {
            ctx.log.refine_rounds.set(0);
            let sa = ctx.phase("place", || place::<I, _>(ctx, layout, pairs));
            return sink.deliver_layout_of(ctx, sa, layout);
        }
        Names::Sorted(pairs) => ctx.phase("names to text", || {
            let mut name_of = vec![I::zeroed(); layout.local_len(ctx.comm.rank())];
            names_to_text(&ctx.comm, layout, pairs, &mut name_of);
            name_of
        }),
        Names::Text(name_of) => name_of,
    };
    if tied == 0 {
        ctx.log.refine_rounds.set(0);
        return deliver_names(ctx, layout, name_of, sink);
    }
    let refined = if decided.is_some() {
        // Predicted: doubling would crawl. The first sort's names (depth k ≥ 8) are finished.
        Refined::HandedOver { rounds: 0 }
    } else if deep as f64 > ctx.tune.css_handover * n as f64 {
        // Too many tied suffixes outside runs to double (the run step cannot resolve them): the
        // hand-over `refine` would make before its first round, made before its list exists.
        let at = Progress::Doubling {
            round: 0,
            h: codes.k,
            remaining: tied,
            before: None,
        };
        let to = hand_over(ctx, n, at);
        debug_assert_eq!(to, Some(HandOver::Finish));
        Refined::HandedOver { rounds: 0 }
    } else {
        refine(ctx, text, layout, &codes, &mut name_of, ties, rounds)
    };
    match refined {
        Refined::HandedOver { rounds } => {
            ctx.log.refine_rounds.set(rounds);
            finish(ctx, text, layout, name_of, sink)
        }
        Refined::Resolved { rounds } => {
            ctx.log.refine_rounds.set(rounds);
            deliver_names(ctx, layout, name_of, sink)
        }
    }
}

/// Phases 2–4 in first-sort records `R` (keys of its word): the keys, the prediction, and the
/// first sort; or (Err) the algorithm the prediction hands the whole build to. With the names,
/// the hand-over decided for after the sort, if any. Collective.
fn sorted_keys<I: Index, R: FirstKey>(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    codes: &Codes,
    rounds: usize,
) -> Result<(FirstNames<I>, Option<HandOver>), Build> {
    let n = layout.len();
    let (keys, held) = ctx.phase("keys", || {
        let keys = KeyGen::<R>::new(ctx, text, layout, codes);
        // One round: every record made at once (a range would be made by filtering all).
        let held = (rounds == 1).then(|| keys.all());
        (keys, held)
    });
    let decided = predict(ctx, text, layout, codes, held.as_deref())
        .and_then(|(shared, k)| hand_over(ctx, n, Progress::Predicted { shared, k }));
    if let Some(build) = decided.and_then(HandOver::whole) {
        return Err(build);
    }
    // In ranges, a range holds as many bytes of records as one of 16-byte records would: there
    // the first sort's peak is what the memory plan's model measured.
    let ranges = match rounds {
        1 => 1,
        r => (r * std::mem::size_of::<R>()).div_ceil(std::mem::size_of::<HiKey>()),
    };
    // With the finish decided, only the number of unresolved suffixes matters.
    let names = first_sort::<I, R>(ctx, layout, &keys, held, ranges, decided.is_none());
    Ok((names, decided))
}

/// Where pCSS stands when it asks [`hand_over`].
enum Progress {
    /// Before anything.
    Start,
    /// After the keys: the predicted fraction of suffixes that share their first k characters
    /// with another suffix.
    Predicted { shared: f64, k: usize },
    /// Before doubling round `round + 1` (with h characters known): the suffixes unresolved now,
    /// and before the last round (None before the first).
    Doubling {
        round: usize,
        h: usize,
        remaining: u64,
        before: Option<u64>,
    },
}

/// What pCSS hands the work to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HandOver {
    /// pDC3 on the text, from the start.
    Dc3,
    /// DC7 on the text, from the start.
    Dc7,
    /// The difference-cover finish on the prefix names ([`finish`]): at once, or (decided before
    /// there are names) right after the first sort.
    Finish,
}

/// An algorithm that builds the whole suffix array (same contract as [`css`]).
type Build = fn(&Ctx, &[u8], &Layout, &SaSink) -> Option<Vec<u64>>;

impl HandOver {
    /// The algorithm that builds the whole suffix array instead, if this hand-over is one.
    fn whole(self) -> Option<Build> {
        match self {
            HandOver::Dc3 => Some(super::dc3::dc3),
            HandOver::Dc7 => Some(super::dc7::dc7),
            HandOver::Finish => None,
        }
    }
}

/// The one place that decides whether pCSS hands over to a difference cover, and to which:
/// - at the start, a text of at most `base_case` characters (gathering is cheaper than a
///   distributed sort) or of ≥ 2^[`POSITION_BITS`] (positions do not fit the key records) goes to
///   pDC3;
/// - after the prediction, when more than the hand-over fraction (`ctx.tune.css_handover`) of
///   the suffixes share their key: DC7 from the start (or what `ctx.tune.css_predicted` says);
/// - before a doubling round, when more than that fraction of all suffixes is unresolved, or
///   the last round was slow ([`SLOW_ROUND`], [`LARGE_REMAINDER`]): the finish on the current
///   names.
///
/// Every input is global, so every pe gets the same answer. Pe 0 logs the reason.
fn hand_over(ctx: &Ctx, n: usize, at: Progress) -> Option<HandOver> {
    let limit = ctx.tune.css_handover;
    let say = ctx.comm.rank() == 0;
    match at {
        Progress::Start => {
            (ctx.gathers(n) || bits(n as u64) > POSITION_BITS).then_some(HandOver::Dc3)
        }
        Progress::Predicted { shared, k } => {
            if shared <= limit {
                return None;
            }
            let (to, how) = match ctx.tune.css_predicted {
                Predicted::Dc7 => (HandOver::Dc7, "building with DC7"),
                Predicted::Dc3 => (HandOver::Dc3, "building with DC3"),
                Predicted::SortThenDc7 => {
                    (HandOver::Finish, "no doubling, DC7 after the first sort")
                }
            };
            if say {
                log::info!(
                    "css: about {:.0} % of the suffixes share their first {k} characters with another suffix; {how}",
                    100.0 * shared
                );
            }
            Some(to)
        }
        Progress::Doubling {
            round,
            h,
            remaining,
            before,
        } => {
            if let Some(before) = before {
                if remaining as f64 > SLOW_ROUND * before as f64
                    && remaining as usize > n / LARGE_REMAINDER
                {
                    if say {
                        log::info!("css: doubling resolves slowly ({before} → {remaining}); finishing with a difference cover on the prefix names");
                    }
                    return Some(HandOver::Finish);
                }
            }
            if remaining as f64 > limit * n as f64 {
                // Most suffixes share long prefixes (aⁿ, long repeats): doubling would take about
                // log(longest repeat) rounds over nearly all of them.
                if say {
                    log::info!("css: {remaining} of {n} suffixes unresolved after {round} rounds (h = {h}); finishing with a difference cover on the prefix names");
                }
                return Some(HandOver::Finish);
            }
            None
        }
    }
}

/// The hand-over's finish: the suffix array from the current prefix names (every group's depth is
/// at least k ≥ 8), by DC7 ([`super::dc7::finish_from_names`]) or, with `--css-finish dc3`, by
/// DC3. Collective.
fn finish<I: Index>(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    name_of: Vec<I>,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    if ctx.tune.css_finish_dc3 {
        super::dc3::finish_from_names(ctx, text, layout, name_of, sink)
    } else {
        super::dc7::finish_from_names(ctx, layout, name_of, sink)
    }
}

/// Phase 1: the text's alphabet, packed for keys: a code per byte value that occurs (in byte
/// order), `b` bits per code, `k` codes per key of one `word` ([`KeyWord`]; ⌊64/b⌋ per 64 bits):
/// 64 bits for alphabets of at most [`NARROW_ALPHABET`] letters (DNA: 21 or 32 characters), 128
/// above (text and code: 16–24 characters instead of the 8–12 of 64 bits, which left a doubling
/// round over most suffixes — English shares its first 9 characters with another suffix at 79 %
/// of its positions, its first 18 at 29 %).
struct Codes {
    code: [u64; 256],
    b: u32,
    /// Bits of a key: 64 or 128.
    word: u32,
    k: usize,
    /// Unused low bits of a key: word − b·k.
    align: u32,
    /// k ones, b bits apart: a run's key is its character times this.
    repunit: u128,
}

/// Alphabets of at most this many letters pack their keys in 64 bits (16 characters or more);
/// larger ones in 128. Small alphabets (DNA) peak in the first sort, whose records the wider key
/// makes half as large again; their 64-bit keys already hold 16 characters or more.
const NARROW_ALPHABET: u64 = 16;

impl Codes {
    /// Collective: one reduction of a 256-entry histogram.
    fn of(ctx: &Ctx, text: &[u8]) -> Self {
        let mut hist = vec![0u64; 256];
        for &c in text {
            hist[c as usize] += 1;
        }
        let hist = ctx.comm.all_reduce_sum_vec(&hist);
        let mut code = [0u64; 256];
        let mut sigma = 0u64;
        for c in 0..256 {
            if hist[c] > 0 {
                code[c] = sigma;
                sigma += 1;
            }
        }
        let b = bits(sigma.saturating_sub(1)).max(1);
        Codes::packed(code, b, if sigma <= NARROW_ALPHABET { 64 } else { 128 })
    }

    /// Codes of `b` bits in keys of `word` bits: as many characters as fit each 64-bit half.
    fn packed(code: [u64; 256], b: u32, word: u32) -> Self {
        let k = (word / 64 * (64 / b)) as usize;
        Codes {
            code,
            b,
            word,
            k,
            align: word - b * k as u32,
            repunit: (0..k).fold(0u128, |acc, _| (acc << b) | 1),
        }
    }

    /// Whether a key is one character repeated k times (its suffix lies in a run).
    fn is_run<W: KeyWord>(&self, key: W) -> bool {
        key == W::from_u128(self.repunit)
            .times(key.top(self.b))
            .shl(self.align)
    }
}

/// The integer a first-sort key is packed in ([`Codes::word`]): `u64` or `u128`.
trait KeyWord: Copy + Ord + Send + Sync + std::fmt::Debug {
    const BITS: u32;
    /// The low `bits` bits set.
    fn ones(bits: u32) -> Self;
    /// The low bits of `x`.
    fn from_u128(x: u128) -> Self;
    /// `(self << b) | code`, for 0 < b < 64.
    fn push(self, b: u32, code: u64) -> Self;
    /// The codes of `chars` packed big-endian, `b` bits each (at most `BITS` in all).
    fn pack(chars: &[u8], code: &[u64; 256], b: u32) -> Self;
    fn and(self, mask: Self) -> Self;
    fn shl(self, s: u32) -> Self;
    /// The top `b` bits.
    fn top(self, b: u32) -> u64;
    /// `self · c`, wrapping.
    fn times(self, c: u64) -> Self;
}

macro_rules! key_word {
    ($t:ty) => {
        impl KeyWord for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline]
            fn ones(bits: u32) -> Self {
                if bits >= <$t>::BITS {
                    <$t>::MAX
                } else {
                    (1 << bits) - 1
                }
            }
            #[inline]
            fn from_u128(x: u128) -> Self {
                x as $t
            }
            #[inline]
            fn push(self, b: u32, code: u64) -> Self {
                // Word by word: a u128 shifted by a count the compiler cannot bound tests and
                // selects for counts past 64 at every character.
                let (hi, lo) = ((self >> (64 % <$t>::BITS)) as u64, self as u64);
                let lo2 = (lo << b) | code;
                if <$t>::BITS == 64 {
                    return lo2 as $t;
                }
                let hi2 = (hi << b) | (lo >> (64 - b));
                ((hi2 as $t) << (64 % <$t>::BITS)) | lo2 as $t
            }
            #[inline]
            fn pack(chars: &[u8], code: &[u64; 256], b: u32) -> Self {
                let fold = |cs: &[u8]| {
                    cs.iter()
                        .fold(0u64, |key, &c| (key << b) | code[c as usize])
                };
                if <$t>::BITS == 64 {
                    return fold(chars) as $t;
                }
                // Two independent words (the last 64 bits' worth of characters, and the rest).
                let low = chars.len().min((64 / b) as usize);
                let (first, last) = chars.split_at(chars.len() - low);
                ((fold(first) as $t) << ((b * low as u32) % <$t>::BITS)) | fold(last) as $t
            }
            #[inline]
            fn and(self, mask: Self) -> Self {
                self & mask
            }
            #[inline]
            fn shl(self, s: u32) -> Self {
                self << s
            }
            #[inline]
            fn top(self, b: u32) -> u64 {
                (self >> (<$t>::BITS - b)) as u64
            }
            #[inline]
            fn times(self, c: u64) -> Self {
                self.wrapping_mul(c as $t)
            }
        }
    };
}
key_word!(u64);
key_word!(u128);

/// Phase 2: the first sort's records of this pe's positions (see [`HiKey`]), made from the text
/// and a halo of k − 1 characters: all at once ([`KeyGen::all`]), one at a time
/// ([`KeyGen::at`]), or those of one key range ([`KeyGen::range`], for the sort in rounds).
struct KeyGen<'a, R: FirstKey> {
    text: &'a [u8],
    halo: Vec<u8>,
    codes: &'a Codes,
    /// The global position of `text[0]`, and the text's length.
    lo: usize,
    n: usize,
    /// The used bits of a key (b·k).
    mask: R::Word,
}

/// Positions per task when making keys.
const KEY_CHUNK: usize = 1 << 16;

impl<'a, R: FirstKey> KeyGen<'a, R> {
    /// Collective (the halo). `codes` packs keys of `R`'s word.
    fn new(ctx: &Ctx, text: &'a [u8], layout: &Layout, codes: &'a Codes) -> Self {
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

    /// Number of records (this pe's positions).
    fn len(&self) -> usize {
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
        self.codes.code[c as usize]
    }

    #[inline]
    fn record(&self, j: usize, key: R::Word) -> R {
        let i = self.lo + j;
        R::new(key.shl(self.codes.align), (self.n - i).min(self.codes.k), i)
    }

    /// The record of local position j (its characters read from the slice directly unless its
    /// key reaches into the halo).
    #[inline]
    fn at(&self, j: usize) -> R {
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
        out.par_chunks_mut(KEY_CHUNK)
            .enumerate()
            .for_each(|(c, dst)| self.fill(c * KEY_CHUNK, dst));
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
        let pieces: Vec<Vec<R>> = (0..self.len().div_ceil(KEY_CHUNK))
            .into_par_iter()
            .map_init(
                || vec![R::zeroed(); KEY_CHUNK + 1],
                |buf, c| {
                    let j0 = c * KEY_CHUNK;
                    let mut kept = 0;
                    self.each(j0, KEY_CHUNK.min(self.len() - j0), |r| {
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
        of.par_chunks_mut(KEY_CHUNK)
            .enumerate()
            .for_each(|(c, dst)| {
                let mut slots = dst.iter_mut();
                self.each(c * KEY_CHUNK, slots.len(), |r| {
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
    fn map_chunks<A: Send>(
        &self,
        held: Option<&[R]>,
        f: impl Fn(&[R]) -> A + Sync + Send,
        reduce: impl Fn(A, A) -> A + Sync + Send,
        zero: impl Fn() -> A + Sync + Send,
    ) -> A {
        match held {
            Some(v) => v.par_chunks(KEY_CHUNK).map(&f).reduce(&zero, &reduce),
            None => (0..self.len().div_ceil(KEY_CHUNK))
                .into_par_iter()
                .map(|c| {
                    let j0 = c * KEY_CHUNK;
                    let mut buf = vec![R::zeroed(); KEY_CHUNK.min(self.len() - j0)];
                    self.fill(j0, &mut buf);
                    f(&buf)
                })
                .reduce(&zero, &reduce),
        }
    }
}

/// Phase 2b: the sampled fraction of suffixes that share their first k characters with another
/// one, and k, when a hand-over before the sort is possible (None otherwise). The keys are those
/// of one 64-bit word whatever the first sort's (the hand-over fraction was measured on them):
/// the first sort's records when it holds them and they are such keys (`held`), else made again.
/// Collective.
fn predict<R: FirstKey>(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    codes: &Codes,
    held: Option<&[R]>,
) -> Option<(f64, usize)> {
    (ctx.tune.css_handover < 1.0 && ctx.tune.css_predict).then(|| {
        ctx.phase("predict", || {
            let narrow = Codes::packed(codes.code, codes.b, 64);
            let keys = KeyGen::<HiKey>::new(ctx, text, layout, &narrow);
            let held = held.and_then(R::as_narrow);
            let shared = shared_key_fraction(ctx, &keys, held, layout.len());
            (shared, narrow.k)
        })
    })
}

/// The number of rounds of pCSS's sorts: `ctx.tune.sort_rounds`, or with 0 (auto) one — the
/// fastest; a memory budget makes the plan ([`crate::plan`]) choose more. Local (every pe has the
/// same settings).
fn sort_rounds(ctx: &Ctx, _layout: &Layout) -> usize {
    ctx.tune.sort_rounds.max(1)
}

/// What phase 4 leaves: the names (every suffix's (name, position) pair after one round; the
/// names in text order after several) and the suffixes it left tied.
struct FirstNames<I> {
    names: Names<I>,
    tied: Tied<I>,
}

/// The suffixes the first sort left tied: on this pe, as records where the sort left them
/// (`list`: depth 0 inside runs of one character, for the run step, k outside); with several
/// sort ranges as marks at this pe's positions instead ([`Marks`]: a bit per position, set where
/// the suffix there shares its key, instead of a record of 3 indices; `marks` outside runs,
/// `in_runs` inside). Empty when the suffixes are not kept. `total` and `deep` count them on all
/// pes (`deep`: those outside runs).
struct Tied<I> {
    list: Vec<Suffix<I>>,
    marks: Option<Marks>,
    in_runs: Option<Marks>,
    total: u64,
    deep: u64,
}

/// A bit per position of this pe, set by [`send_to_owners`] (the first sort's marks: the
/// suffixes that share their key, outside or inside runs). n/p/8 bytes.
struct Marks {
    words: Vec<u64>,
    len: usize,
}

impl Marks {
    /// `len` clear bits.
    fn new(len: usize) -> Self {
        Marks {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    fn get(&self, j: usize) -> bool {
        self.words[j / 64] >> (j % 64) & 1 == 1
    }
}

impl Slots for &mut Marks {
    type Value = ();
    /// Sets the bit of every item's position (one thread: a bit is not a slot of its own).
    fn place<T: Sync>(self, items: &[T], f: impl Fn(&T) -> (usize, ()) + Sync) {
        for x in items {
            let (j, ()) = f(x);
            assert!(j < self.len, "mark {j} out of range {}", self.len);
            self.words[j / 64] |= 1 << (j % 64);
        }
    }
}

/// The names after the first sort.
enum Names<I> {
    /// (name, position) pairs, in no particular order (the sort ran in one round).
    Sorted(Vec<[I; 2]>),
    /// The names of this pe's positions in text order (sent round by round).
    Text(Vec<I>),
}

/// Phases 3–4, one key range at a time ([`sort_in_rounds`]): sort the records, then name their
/// groups (runs of equal key and clamped length): a suffix's name is the global index of its
/// group's first record. With one round, every suffix becomes a (name, position) pair of the
/// run's index width (made in pieces from the end, each freeing its records); with several, each
/// round's names go to the owners of the positions at once ("names to text"). With
/// `keep_unresolved` the suffixes not alone in their group are kept ([`Tied`]) with the depth
/// their group shares (k), or 0 for those inside a run of one character (for the run step): as
/// records with one round; with several as marks at their positions' owners.
/// Collective.
fn first_sort<I: Index, R: FirstKey>(
    ctx: &Ctx,
    layout: &Layout,
    keys: &KeyGen<R>,
    held: Option<Vec<R>>,
    rounds: usize,
    keep_unresolved: bool,
) -> FirstNames<I> {
    let comm = &ctx.comm;
    let codes = keys.codes;
    let k = I::from_u64(codes.k as u64);
    let held = std::cell::RefCell::new(held);
    // With several ranges, the range of each position (a byte each, during the sort).
    let round_of = std::cell::RefCell::new(Vec::<u8>::new());
    let mut sorted_pairs: Option<Vec<[I; 2]>> = None;
    let mut name_of: Vec<I> = if rounds > 1 {
        vec![I::zeroed(); keys.len()]
    } else {
        Vec::new()
    };
    // One round: the tied suffixes as records; several: marked at their positions' owners.
    let mut list: Vec<Suffix<I>> = Vec::new();
    let marked = rounds > 1 && keep_unresolved;
    let mut marks = Marks::new(if marked { keys.len() } else { 0 });
    let mut in_runs = Marks::new(if marked { keys.len() } else { 0 });
    let (mut tied, mut tied_deep) = (0u64, 0u64);
    let mut carry = 0u64;
    let mut open = OpenEnd::default();
    sort_in_rounds(
        ctx,
        "sort keys",
        Ranges::new(rounds),
        keys.len(),
        |j| keys.at(j),
        |bounds, k| match held.borrow_mut().take() {
            Some(all) => all,
            None => ctx.phase("keys", || {
                if bounds.rounds() == 1 {
                    return keys.all();
                }
                // Keys of 64 bits (small alphabets: DNA's keys of 21 or 32 characters): a pass
                // rolling over every position per range, and no byte per position held (the
                // first sort is where such texts peak). Keys of 128 bits (16–24 characters):
                // every position's range found once costs less than a pass per range.
                if codes.word == 64 {
                    let (lo, hi) = bounds.range(k);
                    return keys.range(lo, hi);
                }
                // Every position's range found once (a byte each, the memory of a character),
                // then each range's records made from their characters, the others skipped.
                if k == 0 {
                    *round_of.borrow_mut() = keys.rounds(bounds);
                }
                let records = keys.in_round(&round_of.borrow(), k as u8);
                if k + 1 == bounds.rounds() {
                    *round_of.borrow_mut() = Vec::new();
                }
                records
            }),
        },
        |mut round| {
            let pairs = ctx.phase("names", || {
                let sorted = &round.sorted;
                let edges = Edges::of_round(&round, carry);
                let g = group_names::<I, _, _>(ctx, sorted, &edges, |a, b| a.same_group(*b));
                carry = g.carry;
                let in_run = |r: &R| codes.is_run(r.key());
                // Depth 0 marks a suffix inside a run; the others' depth (k) is not kept.
                let entry = |j: usize, r: &R| Suffix {
                    name: g.names[j],
                    pos: I::from_u64(r.pos()),
                    depth: if in_run(r) { I::zeroed() } else { k },
                };
                // Positions of the tied suffixes outside and inside runs (to be marked).
                let (mut tied_at, mut run_at): (Vec<I>, Vec<I>) = (Vec::new(), Vec::new());
                if let Some(s) = open.settle(comm, &round, &g, |j| entry(j, &sorted[j])) {
                    tied += 1;
                    tied_deep += u64::from(s.depth != I::zeroed());
                    if marked && s.depth != I::zeroed() {
                        tied_at.push(s.pos);
                    } else if marked {
                        run_at.push(s.pos);
                    } else if keep_unresolved {
                        list.push(s);
                    }
                }
                if marked {
                    let run: Vec<bool> = sorted.par_iter().map(in_run).collect();
                    let skip = |deep: bool| -> Vec<bool> {
                        g.alone
                            .par_iter()
                            .zip(&run[..])
                            .map(|(&a, &r)| a || r == deep)
                            .collect()
                    };
                    let pos = |_, r: &R| I::from_u64(r.pos());
                    let deep = collect_kept(sorted, &skip(true), pos);
                    let inside = collect_kept(sorted, &skip(false), pos);
                    tied += (deep.len() + inside.len()) as u64;
                    tied_deep += deep.len() as u64;
                    tied_at.extend_from_slice(&deep);
                    run_at.extend_from_slice(&inside);
                } else if keep_unresolved {
                    let kept = collect_kept(sorted, &g.alone, entry);
                    tied += kept.len() as u64;
                    tied_deep += kept.iter().filter(|s| s.depth != I::zeroed()).count() as u64;
                    if list.is_empty() {
                        list = kept;
                    } else {
                        list.reserve_exact(kept.len());
                        list.extend_from_slice(&kept);
                    }
                } else {
                    tied += g.alone.iter().filter(|&&a| !a).count() as u64;
                }
                drop(g.alone);
                // Pairs in any order: made from the end in pieces, each freeing its records.
                let names = g.names;
                let mut pairs: Vec<[I; 2]> = Vec::with_capacity(names.len());
                consume_from_end(std::mem::take(&mut round.sorted), |lo, rs| {
                    pairs.par_extend(
                        rs.par_iter()
                            .zip(&names[lo..])
                            .map(|(r, &nm)| [nm, I::from_u64(r.pos())]),
                    )
                });
                (pairs, tied_at, run_at)
            });
            drop(round);
            let (pairs, tied_at, run_at) = pairs;
            if rounds == 1 {
                sorted_pairs = Some(pairs);
            } else {
                ctx.phase("names to text", || {
                    names_to_text(comm, layout, pairs, &mut name_of);
                    if marked {
                        let at = |&i: &I| (i.to_u64() as usize, ());
                        send_to_owners(comm, layout, tied_at, &mut marks, at);
                        send_to_owners(comm, layout, run_at, &mut in_runs, at);
                    }
                });
            }
        },
    );
    // A group start that ends the last non-empty round is alone: what `open` holds is dropped.
    FirstNames {
        names: match sorted_pairs {
            Some(pairs) => Names::Sorted(pairs),
            None => Names::Text(name_of),
        },
        tied: Tied {
            list,
            marks: marked.then_some(marks),
            in_runs: marked.then_some(in_runs),
            total: comm.all_reduce_sum(tied),
            deep: comm.all_reduce_sum(tied_deep),
        },
    }
}

/// Writes the names of (name, position) pairs into `name_of` (this pe's positions, in text
/// order) at the owners of their positions. Collective.
fn names_to_text<I: Index>(comm: &Comm, layout: &Layout, pairs: Vec<[I; 2]>, name_of: &mut [I]) {
    send_to_owners(comm, layout, pairs, name_of, |x| {
        (x[1].to_u64() as usize, x[0])
    });
}

/// Sends each (SA index, position) pair to the pe owning that SA index and returns this pe's SA
/// slice in the run's index width (half of 8-byte entries below 2^32 characters, until written),
/// in up to 8 steps ([`pieces`]: the pairs not sent yet and two copies of one step's beside the
/// SA slice). Collective.
fn place<I: Index, P: Pair>(ctx: &Ctx, layout: &Layout, pairs: Vec<P>) -> Vec<I> {
    let comm = &ctx.comm;
    let mut sa: Vec<I> = bytemuck::allocation::zeroed_vec(layout.local_len(comm.rank()));
    let steps = pieces(ctx, std::mem::size_of_val(&pairs[..]));
    send_to_owners_in_pieces(comm, layout, pairs, &mut sa[..], steps, |x| {
        (x.a() as usize, I::from_u64(x.b()))
    });
    sa
}

/// Phase 7 for final names held in text order, and the SA slice to the sink: into a file
/// piece by piece ([`place_names_in_pieces`]), else placed whole ([`place_names`]).
/// Collective.
fn deliver_names<I: Index>(
    ctx: &Ctx,
    layout: &Layout,
    name_of: Vec<I>,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    if sink.file().is_some() {
        ctx.phase("place", || {
            place_names_in_pieces(ctx, layout, name_of, sink)
        });
        return None;
    }
    let sa = ctx.phase("place", || place_names(ctx, layout, name_of));
    sink.deliver_layout_of(ctx, sa, layout)
}

/// Phase 7 into the output file without holding the SA slice: in up to 8 steps ([`pieces`]),
/// step s sends the (name, position) pairs whose name (SA index) lies in the s-th of that many
/// equal pieces of its owner's slice, and each pe writes its piece once it is complete. Holds
/// the names (freed at the end), a step number per position (1 byte), and one step's pairs,
/// their exchange and SA piece (the run's index width). Collective.
fn place_names_in_pieces<I: Index>(ctx: &Ctx, layout: &Layout, name_of: Vec<I>, sink: &SaSink) {
    let comm = &ctx.comm;
    let me = comm.rank();
    let base = layout.start(me);
    let steps = pieces(ctx, name_of.len() * std::mem::size_of::<[I; 2]>());
    // The start of piece s of pe q's slice (s = steps: its end).
    let piece = |q: usize, s: usize| layout.start(q) + layout.local_len(q) * s / steps;
    let pieces = Pieces::new(
        layout.len(),
        (0..comm.size()).flat_map(|q| (0..steps).map(move |s| piece(q, s))),
        steps,
    );
    let step: Vec<u8> = collect_range(name_of.len(), |j| {
        pieces.step_of(name_of[j].to_u64() as usize)
    });
    for s in 0..steps {
        let pairs = with_step(&step, s as u8, |j| {
            [name_of[j], I::from_u64((base + j) as u64)]
        });
        let got = exchange(comm, pairs, |x| layout.owner(x[0].to_u64() as usize));
        let lo = piece(me, s);
        let mut sa: Vec<I> = bytemuck::allocation::zeroed_vec(piece(me, s + 1) - lo);
        scatter(&got, &mut sa[..], |x| (x[0].to_u64() as usize - lo, x[1]));
        drop(got);
        sink.write_narrow(ctx, lo as u64, &sa);
    }
}

/// Phase 7 for final names held in text order: [`place`] of (name, position) pairs, made and
/// sent in up to 8 steps from the end of `name_of`, each step's names freed once paired.
/// Collective.
fn place_names<I: Index>(ctx: &Ctx, layout: &Layout, mut name_of: Vec<I>) -> Vec<I> {
    let comm = &ctx.comm;
    let lo = layout.start(comm.rank());
    let mut sa: Vec<I> = bytemuck::allocation::zeroed_vec(layout.local_len(comm.rank()));
    let steps = pieces(ctx, name_of.len() * std::mem::size_of::<[I; 2]>());
    let piece = name_of.len().div_ceil(steps);
    for _ in 0..steps {
        let at = name_of.len().saturating_sub(piece);
        let pairs: Vec<[I; 2]> = name_of[at..]
            .par_iter()
            .enumerate()
            .map(|(j, &nm)| [nm, I::from_u64((lo + at + j) as u64)])
            .collect();
        name_of.truncate(at);
        name_of.shrink_to_fit();
        send_to_owners(comm, layout, pairs, &mut sa[..], |x| (x.a() as usize, x[1]));
    }
    sa
}

/// How the refinement ended, after how many doubling rounds.
enum Refined {
    /// Every name is final.
    Resolved { rounds: usize },
    /// [`hand_over`] chose the finish on the current prefix names.
    HandedOver { rounds: usize },
}

/// Phases 5–6: the run step, then doubling rounds until no suffix is unresolved or
/// [`hand_over`] chooses the finish. Entry: `name_of` holds the names of this pe's positions after
/// the first sort (their groups share k characters), `tied` the suffixes it left tied (as records,
/// or with several sort ranges marked). `depth_of` holds each position's group
/// depth, [`resolved`] once its suffix is alone. While more than n / [`LIST_BELOW`] suffixes
/// are unresolved and they were marked, a round finds them from the depths ([`Unresolved`]);
/// below, as records. Exit: `name_of` holds the final names (Resolved) or prefix names of
/// depth ≥ k (HandedOver). Collective.
fn refine<I: Index>(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    codes: &Codes,
    name_of: &mut [I],
    tied: Tied<I>,
    rounds: usize,
) -> Refined {
    let comm = &ctx.comm;
    let n = layout.len();
    let Tied {
        list: mut listed,
        marks,
        in_runs,
        total,
        deep,
    } = tied;
    let k = I::from_u64(codes.k as u64);
    let marked = marks.is_some();
    let mut depth_of = match (marks, in_runs) {
        (Some(marks), Some(in_runs)) => collect_range(marks.len, |j| {
            if in_runs.get(j) {
                Depth::IN_RUN
            } else if marks.get(j) {
                Depth::at_most(k.to_u64())
            } else {
                Depth::RESOLVED
            }
        }),
        _ => vec![Depth::at_most(k.to_u64()); name_of.len()],
    };
    // Suffixes inside runs of one character: ordered at once by (run length, next character),
    // found at their positions (listed, their positions are marked first).
    if total > deep {
        if !marked {
            let runs: Vec<I> = (listed.iter())
                .filter(|s| s.depth == I::zeroed())
                .map(|s| s.pos)
                .collect();
            listed.retain(|s| s.depth != I::zeroed());
            listed.shrink_to_fit();
            send_to_owners(comm, layout, runs, &mut depth_of[..], |&i| {
                (i.to_u64() as usize, Depth::IN_RUN)
            });
        }
        let names = (&mut *name_of, &mut depth_of[..]);
        let still = ctx.phase("runs", || {
            split_runs(ctx, text, layout, codes, names, rounds, !marked)
        });
        listed.extend_from_slice(&still);
    }
    let (mut unresolved, open) = if marked {
        drop(listed);
        let open = depth_of
            .par_iter()
            .filter(|&&d| d != Depth::RESOLVED)
            .count();
        (Unresolved::Marked, open)
    } else {
        let open = listed.len();
        (Unresolved::Listed(listed), open)
    };
    let mut remaining = comm.all_reduce_sum(open as u64);
    // Every round's ranges are as large as the first round's: later rounds, with fewer suffixes
    // left, take fewer ranges.
    let ranges = Ranges::sized(rounds, remaining);
    let (mut round, mut h, mut before) = (0, codes.k, None);
    while remaining > 0 {
        let at = Progress::Doubling {
            round,
            h,
            remaining,
            before,
        };
        if hand_over(ctx, n, at).is_some() {
            return Refined::HandedOver { rounds: round };
        }
        round += 1;
        let list = matches!(unresolved, Unresolved::Listed(_))
            || remaining <= (n as u64).div_ceil(LIST_BELOW);
        let (still, next) = ctx.phase("refine", || {
            refine_round(
                ctx,
                layout,
                unresolved,
                name_of,
                &mut depth_of,
                ranges,
                list,
            )
        });
        unresolved = next;
        before = Some(remaining);
        remaining = comm.all_reduce_sum(still);
        if comm.rank() == 0 {
            let how = if list { "listed" } else { "marked" };
            log::debug!(
                "css: round {round} (h = {h}, {how}): {remaining} suffixes still unresolved"
            );
        }
        h *= 2;
    }
    Refined::Resolved { rounds: round }
}

/// Doubling holds its unresolved suffixes as records ([`Suffix`], 3 indices each, spread evenly
/// over the pes by the last sort) once at most n / `LIST_BELOW` of them are left; above that,
/// when the first sort marked them, it finds them from the depths at their positions, at a bit
/// per position, and their records are made by their positions' owners (which is uneven where
/// they cluster, as in long repeats: the rounds with few left are the ones to balance).
const LIST_BELOW: u64 = 8;

/// The depth of a position's group as doubling keeps it in text order: 2 bytes instead of an
/// index (4, 5 or 8). Exact below 2^10; above, rounded down to its 10 leading bits (at most
/// 0.2 % below the depth). A depth below the characters a group shares is as good for doubling
/// as the exact one (the members still share it, and all of them store the same value, so all
/// query the same offset), and the depths pCSS makes, k · 2^j and sums of a few of them, mostly
/// keep all their bits. Code `u16::MAX` is [`Depth::RESOLVED`].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
struct Depth(u16);

impl Depth {
    /// The depth of a suffix alone in its group ([`resolved`]).
    const RESOLVED: Depth = Depth(u16::MAX);
    /// A suffix inside a run of one character, before the run step (every group's depth is at
    /// least k ≥ 1).
    const IN_RUN: Depth = Depth(0);
    const BITS: u32 = 10;

    /// The largest storable depth not above d.
    fn at_most(d: u64) -> Depth {
        if d < 1 << Self::BITS {
            return Depth(d as u16);
        }
        // d has 64 − lz bits; keep the top BITS of them (shift e ≥ 1, code below u16::MAX).
        let e = 64 - d.leading_zeros() - Self::BITS;
        Depth(((e as u16) << Self::BITS) | (d >> e) as u16)
    }

    /// A depth or [`resolved`] as stored.
    fn of<I: Index>(d: I) -> Depth {
        if d == resolved() {
            Depth::RESOLVED
        } else {
            Depth::at_most(d.to_u64())
        }
    }

    /// The stored depth (not for [`Depth::RESOLVED`]).
    fn get(self) -> u64 {
        u64::from(self.0 & ((1 << Self::BITS) - 1)) << (self.0 >> Self::BITS)
    }

    /// The stored depth as an index, [`resolved`] for [`Depth::RESOLVED`].
    fn index<I: Index>(self) -> I {
        if self == Depth::RESOLVED {
            resolved()
        } else {
            I::from_u64(self.get())
        }
    }
}

/// Where a doubling round finds the unresolved suffixes.
enum Unresolved<I> {
    /// At the positions whose depth is not [`resolved`] ([`OpenPositions`]).
    Marked,
    /// This pe's list of them, where the last sort left them.
    Listed(Vec<Suffix<I>>),
}

/// A suffix still tied with others, or an update of one: its position, the name of its group,
/// and the depth of the group (the number of characters its members share; 0 marks a suffix
/// inside a run for the run step, [`resolved`] in an update one alone in its new group). In the
/// run's index width: 12, 15 or 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Suffix<I> {
    name: I,
    pos: I,
    depth: I,
}

// SAFETY: repr(C) of three fields of one Pod type: no padding.
unsafe impl<I: Index> Zeroable for Suffix<I> {}
unsafe impl<I: Index> Pod for Suffix<I> {}

/// The answer about position i + d in a refinement round: the name of its group + 1 and the
/// group's depth ((0, 0) past the end: the empty suffix is the smallest).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ahead<I> {
    name: I,
    depth: I,
}

// SAFETY: repr(C) of two fields of one Pod type: no padding.
unsafe impl<I: Index> Zeroable for Ahead<I> {}
unsafe impl<I: Index> Pod for Ahead<I> {}

/// Estimates the fraction of suffixes whose key (first k characters and clamped length) some
/// other suffix shares, runs of one character not counted (the run step orders those): about
/// 2^12 positions drawn at random over all pes (at least one per pe), and every pe counts how often each drawn key
/// occurs among its own keys. O(n/p) hash probes per pe and one small all-gather and reduction.
/// Collective; every pe gets the same value.
fn shared_key_fraction(ctx: &Ctx, keys: &KeyGen<HiKey>, held: Option<&[HiKey]>, n: usize) -> f64 {
    let codes = keys.codes;
    // 2^12 draws: the estimate's standard error is below 0.01, and the filter and table stay in
    // the first cache levels, so counting costs a few ns per key even when nearly all keys hit.
    const SAMPLES: usize = 1 << 12;
    let comm = &ctx.comm;
    let me = comm.rank();
    // This pe's share of the draws, proportional to its slice.
    let len = keys.len();
    let want = (len as u128 * SAMPLES as u128).div_ceil(n.max(1) as u128) as usize;
    let mut rng = crate::dist::sample_sort::SplitMix::new(0x9e37_79b9 ^ ((me as u64) << 32));
    let local: Vec<u128> = if len == 0 {
        Vec::new()
    } else {
        (0..want.min(len))
            .map(|_| keys.at((rng.next() % len as u64) as usize).id())
            .collect()
    };
    let drawn = comm.all_gather_v(&local);
    if drawn.is_empty() {
        return 0.0;
    }
    let mut distinct = drawn.clone();
    distinct.sort_unstable();
    distinct.dedup();
    // A bit filter (64 bits per drawn key) in front of an open-addressing table (load ≤ 1/4) of
    // 44-bit fingerprints and 20-bit indices: keys of a text that is not repetitive mostly miss the
    // filter; a fingerprint shared by two different keys (odds about 2^-44 per pair) would only
    // nudge the estimate.
    let slots = (4 * distinct.len()).next_power_of_two();
    let filter_bits = (64 * distinct.len()).next_power_of_two().max(64);
    let mix = |x: u128| {
        let (hi, lo) = ((x >> 64) as u64, x as u64);
        (lo ^ hi.wrapping_mul(0xd1b5_4a32_d192_ed03)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    };
    let slot_of = |h: u64| (h >> (64 - slots.trailing_zeros())) as usize;
    let fslot = |h: u64| (h.rotate_left(21) >> (64 - filter_bits.trailing_zeros())) as usize;
    let fingerprint = |h: u64| h.wrapping_mul(0xff51_afd7_ed55_8ccd) >> 20 << 20;
    let mut filter = vec![0u64; filter_bits / 64];
    let mut table = vec![0u64; slots];
    for (j, &x) in distinct.iter().enumerate() {
        let h = mix(x);
        let f = fslot(h);
        filter[f / 64] |= 1 << (f % 64);
        let mut s = slot_of(h);
        while table[s] != 0 {
            s = (s + 1) & (slots - 1);
        }
        table[s] = fingerprint(h) | (j as u64 + 1);
    }
    let find = |x: u128| -> Option<usize> {
        let h = mix(x);
        let f = fslot(h);
        if filter[f / 64] & (1 << (f % 64)) == 0 {
            return None;
        }
        let fp = fingerprint(h);
        let mut s = slot_of(h);
        loop {
            let e = table[s];
            if e == 0 {
                return None;
            }
            if e >> 20 << 20 == fp {
                return Some((e & 0xfffff) as usize - 1);
            }
            s = (s + 1) & (slots - 1);
        }
    };
    let counts = keys.map_chunks(
        held,
        |chunk| {
            let mut c = vec![0u64; distinct.len()];
            for r in chunk {
                if let Some(j) = find(r.id()) {
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
            counts[j] >= 2 && !codes.is_run((x >> 8) as u64)
        })
        .count();
    shared as f64 / drawn.len() as f64
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
trait FirstKey: SortKey + std::fmt::Debug {
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
struct HiKey(u128);

impl HiKey {
    /// Key and clamped length: equal exactly for the suffixes of one group of the first sort.
    fn id(self) -> u128 {
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
struct WideKey([u64; 3]);

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

/// A refinement record: (group name, name of i+d + 1, i, new depth), ordered in that order (i
/// makes it unique; the depth rides along), in the run's index width: 16, 20 or 32 bytes. The
/// fields lie in memory from the least significant up, so with 32 bits a record read as a
/// little-endian `u128` has the same order, and the local sort is a radix sort of those.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Refine<I> {
    depth: I,
    pos: I,
    second: I,
    group: I,
}

// SAFETY: repr(C) of four fields of one Pod type: no padding.
unsafe impl<I: Index> Zeroable for Refine<I> {}
unsafe impl<I: Index> Pod for Refine<I> {}

impl<I: Index> Refine<I> {
    /// The record with only its group set: the smallest of the group (a round boundary).
    fn group_start(group: I) -> Self {
        Refine {
            group,
            ..Refine::zeroed()
        }
    }

    /// Group and second name equal.
    fn same_pair(&self, o: &Self) -> bool {
        (self.group, self.second) == (o.group, o.second)
    }
}

impl<I: Index> Ord for Refine<I> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.group, self.second, self.pos, self.depth).cmp(&(o.group, o.second, o.pos, o.depth))
    }
}

impl<I: Index> PartialOrd for Refine<I> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl<I: Index> SortKey for Refine<I> {
    /// With 32 bits (and records aligned as `u128`s, as the allocator gives them): the backend's
    /// sort of `u128`s; otherwise a comparison sort.
    fn sort_local(v: &mut [Self], sorter: &dyn LocalSort) {
        if cfg!(target_endian = "little") && I::BITS == 32 {
            if let Ok(keys) = bytemuck::try_cast_slice_mut::<Self, u128>(v) {
                sorter.sort_u128(keys);
                return;
            }
        }
        crate::dist::sample_sort::par_sort(v);
    }
}

/// One refinement round: every unresolved (name g, position i, depth d) — all members of group g
/// share their first d characters — is keyed by (g, name(i+d)); a new subgroup shares d plus the
/// depth of the group of i+d. Sorted in `ranges` of group names ([`sort_in_rounds`]; sized by
/// the first round's suffixes, so later rounds take fewer; the boundaries cut between groups, so
/// a round holds whole groups): per range, the suffixes whose
/// name lies in it are taken from the list or, when marked, from this pe's positions
/// ([`OpenPositions`]), the names of i+d fetched, the records sorted and renamed, and the updates
/// (depth [`resolved`] for a suffix alone in its new group) written to the owners of the
/// positions before the next range. A later range may thus see names already refined by an
/// earlier one: they are finer prefix names of the same order (a group's new names stay within
/// its old range, with the depths sent along), and all members of a group see the same ones; a
/// position refined by an earlier range is not taken again (its name stays in that range).
/// Returns how many of this pe's records are still unresolved and, with `list`, those suffixes
/// (else they are left marked). With one range a list is freed as its records are made.
/// Collective.
///
/// Memory per pe, u unresolved suffixes of s bytes ([`Suffix`], 12 with 32 bits), records r bytes
/// ([`Refine`], 16): the names (an index per position) and depths (2 bytes) throughout; the list (s per
/// suffix) or the marks (a bit per position); per range the range's suffixes (s), the queries
/// (1 index each) and their answers ([`Ahead`], 2), then the records (two copies in their
/// exchange), then their groups (8 + 8 + 2 bytes each) and updates (s, written over the records),
/// the still unresolved ones when listed (s) and the updates' exchange.
fn refine_round<I: Index>(
    ctx: &Ctx,
    layout: &Layout,
    unresolved: Unresolved<I>,
    name_of: &mut [I],
    depth_of: &mut [Depth],
    ranges: Ranges,
    list: bool,
) -> (u64, Unresolved<I>) {
    let comm = &ctx.comm;
    let n = layout.len() as u64;
    let base = layout.start(comm.rank()) as u64;
    let (listed, open) = match unresolved {
        Unresolved::Listed(l) => (Some(l), None),
        Unresolved::Marked => (
            None,
            Some(OpenPositions::of(depth_of, |d| d != Depth::RESOLVED)),
        ),
    };
    let len = listed.as_ref().map_or(0, Vec::len) + open.as_ref().map_or(0, |o| o.count);
    let listed = std::cell::RefCell::new(listed);
    let names = std::cell::RefCell::new((name_of, depth_of));
    // With several ranges and marked positions: how many of each piece's lie in each range.
    let per_range = std::cell::RefCell::new(Vec::new());
    let generate = |bounds: &RoundBounds<Refine<I>>, k: usize| -> Vec<Refine<I>> {
        let (lo, hi) = bounds.range(k);
        let inside = |g: I| lo.is_none_or(|l| g >= l.group) & hi.is_none_or(|h| g < h.group);
        let names = names.borrow();
        let (name_of, depth_of) = (&*names.0, &*names.1);
        let keep = |j: usize| (depth_of[j] != Depth::RESOLVED) & inside(name_of[j]);
        let make = |j: usize| Suffix {
            name: name_of[j],
            pos: I::from_u64(base + j as u64),
            depth: I::from_u64(depth_of[j].get()),
        };
        let mine: Vec<Suffix<I>> = match (&open, bounds.rounds()) {
            (Some(open), 1) => open.listed(keep, make),
            // Every position's range counted once, in the first range: a range's positions keep
            // their depths and names until the range itself is refined (an update stays inside
            // its group, so inside its range).
            (Some(open), rounds) => {
                if k == 0 {
                    *per_range.borrow_mut() = open.count_by_range(rounds, |j| {
                        (depth_of[j] != Depth::RESOLVED)
                            .then(|| bounds.round_of(&Refine::group_start(name_of[j])))
                    });
                }
                open.listed_counted(&per_range.borrow(), rounds, k, keep, make)
            }
            // One range: the list is dead once its records are made.
            (None, 1) => listed.borrow_mut().take().unwrap_or_default(),
            (None, _) => (listed.borrow().iter().flatten())
                .filter(|s| inside(s.name))
                .copied()
                .collect(),
        };
        // One answer per suffix (those with i + d past the end ask about position 0 and ignore
        // it).
        let past = |s: &Suffix<I>| s.pos.to_u64() + s.depth.to_u64() >= n;
        let queries: Vec<I> = (mine.par_iter())
            .map(|s| {
                if past(s) {
                    I::zeroed()
                } else {
                    I::from_u64(s.pos.to_u64() + s.depth.to_u64())
                }
            })
            .collect();
        let answers = fetch(comm, layout, &queries, |j| Ahead {
            name: I::from_u64(name_of[j].to_u64() + 1),
            depth: depth_of[j].index(),
        });
        drop(queries);
        let make = |s: &Suffix<I>, a: &Ahead<I>| {
            let ahead = if past(s) { Ahead::zeroed() } else { *a };
            Refine {
                group: s.name,
                second: ahead.name,
                pos: s.pos,
                // A resolved successor's depth is not kept: its pair is unique anyway.
                depth: I::from_u64(s.depth.to_u64().saturating_add(ahead.depth.to_u64()).min(n)),
            }
        };
        // Made from the end in pieces, each freeing its suffixes and answers.
        let mut records = Vec::with_capacity(mine.len());
        consume_from_end(mine, |lo, ss| {
            records.par_extend(ss.par_iter().zip(&answers[lo..]).map(|(s, a)| make(s, a)))
        });
        records
    };
    let mut still: Vec<Suffix<I>> = Vec::new();
    let mut count = 0u64;
    let (mut gcarry, mut scarry) = (0u64, 0u64);
    let mut open_end = OpenEnd::default();
    sort_in_rounds(
        ctx,
        "· sort",
        ranges,
        len,
        // Boundaries (g, 0, 0, 0): a round holds the records of the groups from one to the next.
        |j| {
            Refine::group_start(match &open {
                Some(open) => names.borrow().0[open.nth(j)],
                None => listed.borrow().as_ref().map_or(I::zeroed(), |l| l[j].name),
            })
        },
        generate,
        |mut round| {
            let sorted = &round.sorted;
            let gstart =
                group_names::<I, _, _>(ctx, sorted, &Edges::of_round(&round, gcarry), |a, b| {
                    a.group == b.group
                });
            gcarry = gstart.carry;
            let gstart = gstart.names;
            let sub =
                group_names::<I, _, _>(ctx, sorted, &Edges::of_round(&round, scarry), |a, b| {
                    a.same_pair(b)
                });
            scarry = sub.carry;
            // The new name: the group's name + the subgroup's offset in the group.
            let update = |j: usize, r: &Refine<I>| Suffix {
                name: I::from_u64(r.group.to_u64() + sub.names[j].to_u64() - gstart[j].to_u64()),
                pos: r.pos,
                depth: r.depth,
            };
            // A suffix an earlier round held open and this one's first record joins: its update
            // (sent as resolved) is sent again with its depth.
            let joined = open_end.settle(comm, &round, &sub, |j| update(j, &sorted[j]));
            let mut updates = updates_in_place(std::mem::take(&mut round.sorted), |j, r| {
                let u = update(j, r);
                if sub.alone[j] {
                    Suffix {
                        depth: resolved(),
                        ..u
                    }
                } else {
                    u
                }
            });
            drop(round);
            drop(gstart);
            count += sub.alone.iter().filter(|&&a| !a).count() as u64;
            if list {
                let kept = collect_kept(&updates, &sub.alone, |_, u| *u);
                if still.is_empty() {
                    still = kept;
                } else {
                    still.reserve_exact(kept.len());
                    still.extend_from_slice(&kept);
                }
            }
            drop(sub);
            if let Some(s) = joined {
                count += 1;
                if list {
                    still.push(s);
                }
                updates.push(s);
            }
            ctx.phase("update names", || {
                let mut names = names.borrow_mut();
                let (name_of, depth_of) = &mut *names;
                apply_updates(comm, layout, updates, name_of, depth_of)
            });
        },
    );
    let next = if list {
        Unresolved::Listed(still)
    } else {
        Unresolved::Marked
    };
    (count, next)
}

/// This pe's unresolved positions (depth not [`resolved`]) as one bit per position, with their
/// count before each block of [`OpenPositions::BLOCK_WORDS`] words: a range of a doubling round
/// finds its positions by skipping empty words (n/p/64 steps and one per unresolved position,
/// however few are left), and a splitter draw finds the j-th one without a list of them. Made
/// once per round (a later range's positions refined or resolved by an earlier one keep their
/// bit, but their names stay in the earlier range). Local; one pass over the depths; n/p/8 bytes.
struct OpenPositions {
    words: Vec<u64>,
    /// The unresolved positions before each block of words.
    before: Vec<usize>,
    count: usize,
}

impl OpenPositions {
    const BLOCK_WORDS: usize = 64;
    /// Words per piece of the parallel passes.
    const PIECE_WORDS: usize = 1 << 10;

    /// The positions whose depth is `open`.
    fn of(depth_of: &[Depth], open: impl Fn(Depth) -> bool + Sync) -> Self {
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
    fn nth(&self, j: usize) -> usize {
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
    fn each_in(&self, word: impl Fn(usize) -> bool, mut f: impl FnMut(usize)) {
        for c in 0..self.pieces() {
            self.each_of_piece(c, &word, &mut f);
        }
    }

    /// `make(j)` of the unresolved positions j with `keep(j)`, in increasing order of j. Two
    /// passes in parallel (count per piece, then fill), no copy of the result.
    fn listed<T: Pod + Send>(
        &self,
        keep: impl Fn(usize) -> bool + Sync,
        make: impl Fn(usize) -> T + Sync,
    ) -> Vec<T> {
        self.listed_in(|_| true, keep, make)
    }

    /// [`Self::listed`] of the positions in the words w with `word(w)` only.
    fn listed_in<T: Pod + Send>(
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
    fn count_by_range(
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
    fn listed_counted<T: Pod + Send>(
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

/// `update(j, r)` of every record j of a round, in order, written over the records themselves (an
/// update is three of a record's four indices), so a round never holds both. Local; one pass.
fn updates_in_place<I: Index>(
    records: Vec<Refine<I>>,
    update: impl Fn(usize, &Refine<I>) -> Suffix<I>,
) -> Vec<Suffix<I>> {
    let len = records.len();
    let mut words: Vec<I> = bytemuck::cast_vec(records);
    for j in 0..len {
        // Update j goes to words [3j, 3j + 3), at or before record j's [4j, 4j + 4): the records
        // after j are still unread and untouched.
        let r: Refine<I> = bytemuck::cast_slice(&words[4 * j..4 * j + 4])[0];
        let u = update(j, &r);
        words[3 * j..3 * j + 3].copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(&u)));
    }
    words.truncate(3 * len);
    words.shrink_to_fit();
    match bytemuck::allocation::try_cast_vec(words) {
        Ok(v) => v,
        Err((_, words)) => bytemuck::cast_slice(&words).to_vec(),
    }
}

/// A group start that ends a round of a sort in rounds ([`sort_in_rounds`]): it is alone unless
/// the first record of the next non-empty round continues its group. Held by the pe that holds
/// the record.
struct OpenEnd<I>(Option<Suffix<I>>);

impl<I> Default for OpenEnd<I> {
    fn default() -> Self {
        OpenEnd(None)
    }
}

impl<I: Index> OpenEnd<I> {
    /// After grouping a round into `g`: returns the suffix held open by an earlier round when this
    /// round's first record continues its group (so it is not alone after all), and holds this
    /// round's last record open when it may be alone only for want of a successor (`entry(j)`
    /// makes the suffix of record j). Collective (one reduction; none in a sort of one round).
    fn settle<T>(
        &mut self,
        comm: &Comm,
        round: &Round<T>,
        g: &Groups<I>,
        entry: impl FnOnce(usize) -> Suffix<I>,
    ) -> Option<Suffix<I>> {
        if round.rounds == 1 {
            return None;
        }
        // Does the round's first record continue a group (1) or begin one (2)? 0: empty round.
        let first = if round.holds_first() {
            1 + u64::from(g.first_starts == Some(true))
        } else {
            0
        };
        let joined = match (comm.all_reduce_max(first), self.0.take()) {
            (1, s) => s,
            (0, s) => {
                self.0 = s;
                None
            }
            _ => None,
        };
        let last = round.sorted.len().wrapping_sub(1);
        if round.open_end() && g.alone[last] {
            self.0 = Some(entry(last));
        }
        joined
    }
}

/// Sends (name, position, depth) updates to the owners of the positions (the depth stored as
/// [`Depth`]). Collective.
fn apply_updates<I: Index>(
    comm: &Comm,
    layout: &Layout,
    updates: Vec<Suffix<I>>,
    name_of: &mut [I],
    depth_of: &mut [Depth],
) {
    send_to_owners(comm, layout, updates, (name_of, depth_of), |s| {
        (s.pos.to_u64() as usize, (s.name, Depth::of(s.depth)))
    });
}

/// The run step. Suffixes whose key is one character c repeated k times lie inside a run of c of
/// length r ≥ k followed by a character x ≠ c (or the end): S_i = c^r x…. Among themselves they
/// are ordered by whether x < c (or the end; these come first, shorter runs first) or x > c
/// (longer runs first), and only suffixes with equal (x < c, r) need more: they share exactly r
/// characters, so their depth is r and the next round compares the suffixes after the runs.
/// Takes the tied suffixes inside runs at this pe's positions whose depth is [`Depth::IN_RUN`]
/// (`names`: this pe's names and depths) and writes the new name and depth of each (depth
/// [`resolved`] for those now alone) at the owner of its position. Sorted in up to `rounds` key
/// ranges ([`sort_in_rounds`]), as many as keep a range within n / `rounds` keys and each pe's
/// part of it within about n / p / `rounds` (aⁿ: all of them), each range's updates written
/// before the next; returns, with `list`, this pe's share of the suffixes still unresolved.
/// Collective.
///
/// Memory per pe beside the names and depths: a bit per position (where the run suffixes are)
/// and the long runs' ends (16 B per run of at least [`LONG_RUN`]), and per range its keys (16 B
/// each, two copies in their exchange), groups (two indices and two flags each) and updates (3
/// indices each). Cost per range: a scan of this pe's run positions, making the key of each.
fn split_runs<I: Index>(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    codes: &Codes,
    names: (&mut [I], &mut [Depth]),
    rounds: usize,
    list: bool,
) -> Vec<Suffix<I>> {
    let comm = &ctx.comm;
    let n = layout.len();
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let bi = bits(n as u64);
    let (name_of, depth_of) = names;
    if 3 * bi + 1 > 128 {
        // Too wide to pack (n ≥ 2^42): leave them to plain doubling (depth k).
        let k = codes.k as u64;
        let mut still = Vec::new();
        for (j, d) in depth_of.iter_mut().enumerate() {
            if *d == Depth::IN_RUN {
                *d = Depth::at_most(k);
                if list {
                    let (name, pos) = (name_of[j], I::from_u64((lo + j) as u64));
                    let depth = I::from_u64(k);
                    still.push(Suffix { name, pos, depth });
                }
            }
        }
        return still;
    }
    // Each pe's first run, for the runs that reach the end of a slice on the left (256: none).
    const END: u64 = 256;
    let edge = if text.is_empty() {
        RunEdge {
            first: END,
            prefix: 0,
            len: 0,
            after: END,
        }
    } else {
        let c0 = text[0];
        let pre = text.iter().take_while(|&&c| c == c0).count();
        RunEdge {
            first: c0 as u64,
            prefix: pre as u64,
            len: text.len() as u64,
            after: text.get(pre).map_or(END, |&c| c as u64),
        }
    };
    let all = comm.all_gather(edge);
    // The answer for a local position j: where the run through it ends (the first later position
    // with another character, or n) | whether that character is larger << 63. Runs that reach the
    // slice's end continue on the pes to the right (`tail`); the local runs of at least
    // LONG_RUN characters are listed, shorter ones found by a scan of fewer steps (no array of
    // one end per position).
    let code = &codes.code;
    let flag = |c: u64, x: u64| u64::from(x != END && code[x as usize] > code[c as usize]);
    let len = hi - lo;
    let tail = if len > 0 {
        let c = text[len - 1] as u64;
        let (mut e, mut x) = (n as u64, END);
        for (q, edge) in all.iter().enumerate().skip(me + 1) {
            if edge.len == 0 {
                continue;
            }
            let start = layout.start(q) as u64;
            if edge.first != c {
                (e, x) = (start, edge.first);
                break;
            }
            if edge.prefix < edge.len {
                (e, x) = (start + edge.prefix, edge.after);
                break;
            }
        }
        e | flag(c, x) << 63
    } else {
        0
    };
    let long = long_runs(text);
    let end_of = |j: usize| -> u64 {
        let c = text[j];
        let k = long.partition_point(|r| r[0] <= j);
        let b = match k.checked_sub(1).map(|k| long[k]) {
            Some([_, b]) if b > j => b,
            _ => (j + 1..len).find(|&b| text[b] != c).unwrap_or(len),
        };
        if b == len {
            tail
        } else {
            (lo + b) as u64 | flag(c as u64, text[b] as u64) << 63
        }
    };
    // Sort key (g, flag, s, i) of local position j in a group g, s = r for x < c, max − r for
    // x > c.
    let w = bi as u128;
    let max = (1u128 << w) - 1;
    let key = |g: I, j: usize| {
        let ans = end_of(j);
        let flag = (ans >> 63) as u128;
        let pos = (lo + j) as u64;
        let r = ((ans & !(1u64 << 63)) - pos) as u128;
        let s = if flag == 1 { max - r } else { r };
        ((g.to_u64() as u128) << (2 * w + 1)) | (flag << (2 * w)) | (s << w) | pos as u128
    };
    let open = OpenPositions::of(depth_of, |d| d == Depth::IN_RUN);
    // A range holds at most n / rounds keys (the suffixes outside runs are sorted in as many),
    // and at most about n / p / rounds of a pe's (runs cluster: a pe may own many more than its
    // share, and a long run's keys follow text order).
    let total = comm.all_reduce_sum(open.count as u64);
    let most = comm.all_reduce_max(open.count as u64);
    let share = (n as u64).div_ceil((comm.size() * rounds.max(1)) as u64);
    let rounds = if most > share {
        ((total as u128 * rounds as u128).div_ceil(n.max(1) as u128) as usize)
            .clamp(2, rounds.max(2))
    } else {
        1
    };
    // With several ranges, the first and last range of the keys in each word of positions (a
    // name changes only with an update, which takes its position out of the run step): a range
    // visits only the words that may hold its keys, so keys that follow text order (long runs),
    // which take many ranges, are each made about once. Found in the first range.
    let word_ranges: std::cell::RefCell<Vec<[u8; 2]>> = Default::default();
    let names = std::cell::RefCell::new((name_of, depth_of));
    let mut still: Vec<Suffix<I>> = Vec::new();
    let (mut gcarry, mut scarry) = (0u64, 0u64);
    let mut open_end = OpenEnd::default();
    sort_in_rounds(
        ctx,
        "· sort",
        Ranges {
            count: rounds,
            per_pe: Some(share),
            of: None,
        },
        open.count,
        |j| {
            let at = open.nth(j);
            key(names.borrow().0[at], at)
        },
        // The keys of the range's positions not yet updated by an earlier range (an update's
        // name may fall in a later range); none without a scan when the range misses this pe's
        // keys (clustered keys take many ranges, each pe's few of them).
        |bounds, k| {
            let (lo, hi) = bounds.range(k);
            let inside = |x: &u128| lo.is_none_or(|l| *x >= l) && hi.is_none_or(|h| *x < h);
            let names = names.borrow();
            let (name_of, depth_of) = (&*names.0, &*names.1);
            if rounds > 1 && k == 0 {
                *word_ranges.borrow_mut() = collect_range(open.words.len(), |w| {
                    let (mut a, mut b) = (u8::MAX, 0u8);
                    let mut x = open.words[w];
                    while x != 0 {
                        let j = 64 * w + x.trailing_zeros() as usize;
                        x &= x - 1;
                        let r = bounds.round_of(&key(name_of[j], j)) as u8;
                        (a, b) = (a.min(r), b.max(r));
                    }
                    [a, b]
                });
            }
            let word_ranges = word_ranges.borrow();
            let word_ranges: &[[u8; 2]] = &word_ranges;
            let here = |w: usize| {
                word_ranges
                    .get(w)
                    .is_none_or(|&[a, b]| (a as usize..=b as usize).contains(&k))
            };
            if rayon::current_num_threads() > 1 {
                return open.listed_in(
                    here,
                    |j| depth_of[j] == Depth::IN_RUN && inside(&key(name_of[j], j)),
                    |j| key(name_of[j], j),
                );
            }
            // One thread: each key made once.
            let mut keys = Vec::new();
            open.each_in(here, |j| {
                if depth_of[j] == Depth::IN_RUN {
                    let x = key(name_of[j], j);
                    if inside(&x) {
                        keys.push(x);
                    }
                }
            });
            keys.shrink_to_fit();
            keys
        },
        |mut round| {
            let sorted = &round.sorted;
            let g =
                group_names::<I, _, _>(ctx, sorted, &Edges::of_round(&round, gcarry), |a, b| {
                    a >> (2 * w + 1) == b >> (2 * w + 1)
                });
            gcarry = g.carry;
            let gstart = g.names;
            drop(g.alone);
            let sub =
                group_names::<I, _, _>(ctx, sorted, &Edges::of_round(&round, scarry), |a, b| {
                    a >> w == b >> w
                });
            scarry = sub.carry;
            let update = |j: usize, x: u128| {
                let g = (x >> (2 * w + 1)) as u64;
                let flag = (x >> (2 * w)) & 1;
                let s = (x >> w) & max;
                let r = if flag == 1 { max - s } else { s } as u64;
                Suffix {
                    name: I::from_u64(g + (sub.names[j].to_u64() - gstart[j].to_u64())),
                    pos: I::from_u64((x & max) as u64),
                    depth: I::from_u64(r),
                }
            };
            // A suffix an earlier range held open and this one's first key joins: its update
            // (sent as resolved) is sent again with its depth.
            let joined = open_end.settle(comm, &round, &sub, |j| update(j, sorted[j]));
            // Made from the end in pieces, each freeing its keys (the updates go out in any
            // order).
            let mut updates = Vec::with_capacity(sorted.len());
            consume_from_end(std::mem::take(&mut round.sorted), |lo, xs| {
                updates.par_extend(xs.par_iter().enumerate().map(|(j, &x)| {
                    let u = update(lo + j, x);
                    if sub.alone[lo + j] {
                        Suffix {
                            depth: resolved(),
                            ..u
                        }
                    } else {
                        u
                    }
                }))
            });
            drop(round);
            drop(gstart);
            drop(sub);
            if list {
                still.extend(updates.iter().filter(|u| u.depth != resolved()));
            }
            if let Some(s) = joined {
                if list {
                    still.push(s);
                }
                updates.push(s);
            }
            ctx.phase("update names", || {
                let mut names = names.borrow_mut();
                let (name_of, depth_of) = &mut *names;
                apply_updates(comm, layout, updates, name_of, depth_of)
            });
        },
    );
    still
}

/// Runs of one character at least this long are listed by [`long_runs`]; the end of a shorter
/// one is found by a scan.
const LONG_RUN: usize = 16;

/// The runs of one character of at least [`LONG_RUN`] characters in `text`, as (start, end)
/// offsets in increasing order: at most 1 byte per character. Local.
fn long_runs(text: &[u8]) -> Vec<[usize; 2]> {
    let mut out = Vec::new();
    let mut a = 0;
    while a < text.len() {
        let c = text[a];
        let b = text[a..]
            .iter()
            .position(|&x| x != c)
            .map_or(text.len(), |d| a + d);
        if b - a >= LONG_RUN {
            out.push([a, b]);
        }
        a = b;
    }
    out
}

/// What the run step needs to know of a pe's slice: its first character, how many characters
/// the run it starts with has there, the slice's length, and the character after that run (256
/// for none).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
struct RunEdge {
    first: u64,
    prefix: u64,
    len: u64,
    after: u64,
}

/// `(0..len).map(f).collect()`, on the pe's threads when it has several (a plain loop with one:
/// rayon's splitting would only add calls).
fn collect_range<T: Send>(len: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if rayon::current_num_threads() == 1 {
        (0..len).map(f).collect()
    } else {
        (0..len).into_par_iter().map(f).collect()
    }
}

/// Where a sorted run of records sits in the whole sorted sequence: the global index of its first
/// record, the records just before and after it (None at the sequence's ends, and `next` also
/// at the end of a round whose successor is not known yet), and the name of the group open
/// before it (the last group start of earlier rounds; 0 when there is none).
struct Edges<T> {
    offset: u64,
    prev: Option<T>,
    next: Option<T>,
    carry: u64,
}

impl<T: bytemuck::Pod> Edges<T> {
    /// For one round of [`sort_in_rounds`], with the group start carried from earlier rounds.
    fn of_round(round: &Round<T>, carry: u64) -> Self {
        Edges {
            offset: round.offset,
            prev: round.prev,
            next: round.next,
            carry,
        }
    }
}

/// The groups of a sorted run (see [`group_names`]), names in the run's index width.
struct Groups<I> {
    /// Per record: the global index of the first record of its group.
    names: Vec<I>,
    /// Per record: whether it is alone in its group (a record without a known successor counts
    /// as ending its group).
    alone: Vec<bool>,
    /// Whether this pe's first record begins a group (None without records).
    first_starts: Option<bool>,
    /// The group start open after the whole run on all pes (the carry for the next round).
    carry: u64,
}

/// Groups of a globally sorted run: for each record, its name (global index of the first record
/// of its group) and whether it is alone in its group; `same` tells whether two neighbouring
/// records are in one group. Collective (a max-scan and a max-reduction).
fn group_names<I: Index, T: bytemuck::Pod + Send + Sync, F: Fn(&T, &T) -> bool + Sync>(
    ctx: &Ctx,
    sorted: &[T],
    edges: &Edges<T>,
    same: F,
) -> Groups<I> {
    const CHUNK: usize = 1 << 16;
    let comm = &ctx.comm;
    let offset = edges.offset;
    let (prev, next) = (&edges.prev, &edges.next);
    let len = sorted.len();
    // alone[j]: does record j begin a group that the next record does not continue?
    let alone_of = |starts: &[bool]| -> Vec<bool> {
        collect_range(len, |j| {
            let ends = if j + 1 < len {
                starts[j + 1]
            } else {
                next.as_ref().is_none_or(|nx| !same(&sorted[j], nx))
            };
            starts[j] && ends
        })
    };
    // starts[j]: does record j begin a group?
    let starts: Vec<bool> = collect_range(len, |j| {
        let before = if j == 0 {
            prev.as_ref()
        } else {
            Some(&sorted[j - 1])
        };
        before.is_none_or(|b| !same(b, &sorted[j]))
    });
    let first_starts = starts.first().copied();
    if rayon::current_num_threads() == 1 {
        // One thread: a single pass (the chunked scan below costs an extra pass).
        let mut names = Vec::with_capacity(len);
        let mut cur = 0u64;
        let mut local_max = 0u64;
        for (j, &s) in starts.iter().enumerate() {
            if s {
                cur = offset + j as u64;
                local_max = cur;
            }
            names.push(I::from_u64(cur));
        }
        let carry = I::from_u64(comm.exscan_max(local_max).max(edges.carry));
        for (nm, &s) in names.iter_mut().zip(&starts) {
            if s {
                break;
            }
            *nm = carry;
        }
        let alone = alone_of(&starts);
        return Groups {
            names,
            alone,
            first_starts,
            carry: comm.all_reduce_max(local_max).max(edges.carry),
        };
    }
    // A max-scan of group starts: the last start of each chunk, carried across chunks and pes.
    let last_start: Vec<Option<u64>> = starts
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, ch)| {
            ch.iter()
                .rposition(|&s| s)
                .map(|j| offset + (c * CHUNK + j) as u64)
        })
        .collect();
    let local_max = last_start.iter().flatten().copied().max().unwrap_or(0);
    let mut carry = comm.exscan_max(local_max).max(edges.carry);
    let carries: Vec<u64> = last_start
        .iter()
        .map(|&l| {
            let c = carry;
            if let Some(l) = l {
                carry = l;
            }
            c
        })
        .collect();
    let mut names = vec![I::zeroed(); len];
    names
        .par_chunks_mut(CHUNK)
        .zip(starts.par_chunks(CHUNK))
        .zip(carries.into_par_iter())
        .enumerate()
        .for_each(|(c, ((nm, st), mut cur))| {
            for (j, (slot, &s)) in nm.iter_mut().zip(st).enumerate() {
                if s {
                    cur = offset + (c * CHUNK + j) as u64;
                }
                *slot = I::from_u64(cur);
            }
        });
    let alone = alone_of(&starts);
    Groups {
        names,
        alone,
        first_starts,
        carry: comm.all_reduce_max(local_max).max(edges.carry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::cpu::CpuSort;

    const POSITION_MASK: u64 = (1u64 << POSITION_BITS) - 1;

    #[test]
    fn records_take_their_index_width() {
        use std::mem::size_of;
        assert_eq!(
            [
                size_of::<Suffix<u32>>(),
                size_of::<Suffix<U40>>(),
                size_of::<Suffix<u64>>()
            ],
            [12, 15, 24]
        );
        assert_eq!(
            [
                size_of::<Ahead<u32>>(),
                size_of::<Ahead<U40>>(),
                size_of::<Ahead<u64>>()
            ],
            [8, 10, 16]
        );
        assert_eq!(
            [
                size_of::<Refine<u32>>(),
                size_of::<Refine<U40>>(),
                size_of::<Refine<u64>>()
            ],
            [16, 20, 32]
        );
    }

    /// A first-sort record gives back the position it was made with (the scrambling is a
    /// bijection of 56 bits), and its order is the key's, then the clamped length's.
    #[test]
    fn key_words_pack_and_push_as_integers() {
        let mut rng = crate::dist::sample_sort::SplitMix::new(3);
        let code: [u64; 256] = std::array::from_fn(|c| c as u64 % 37);
        for b in 1..=8u32 {
            let m = (1u64 << b) - 1;
            for _ in 0..200 {
                let x = (rng.next() as u128) << 64 | rng.next() as u128;
                let c = rng.next() & m;
                assert_eq!(x.push(b, c), (x << b) | c as u128);
                assert_eq!((x as u64).push(b, c), ((x as u64) << b) | c);
                for (bits, k) in [(64, 64 / b), (128, 2 * (64 / b))] {
                    let chars: Vec<u8> = (0..k).map(|_| rng.next() as u8).collect();
                    let want = chars.iter().fold(0u128, |key, &ch| {
                        (key << b) | (code[ch as usize] & m) as u128
                    });
                    let code_b: [u64; 256] = std::array::from_fn(|ch| code[ch] & m);
                    if bits == 64 {
                        assert_eq!(<u64 as KeyWord>::pack(&chars, &code_b, b) as u128, want);
                    } else {
                        assert_eq!(<u128 as KeyWord>::pack(&chars, &code_b, b), want);
                    }
                }
            }
        }
    }

    #[test]
    fn first_sort_records_keep_position_and_order() {
        let mut rng = crate::dist::sample_sort::SplitMix::new(5);
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

    /// The local sort of refinement records (the `u128` radix sort with 32 bits, a comparison
    /// sort otherwise) gives their order (group, second, position, depth).
    fn sorts_refinement_records<I: Index>() {
        let mut rng = crate::dist::sample_sort::SplitMix::new(11);
        let mut small = |m: u64| I::from_u64(rng.next() % m);
        let mut v: Vec<Refine<I>> = (0..5000u64)
            .map(|i| Refine {
                group: small(7),
                second: small(5),
                pos: I::from_u64(i * 7919 % 5003 + (I::MAX >> 1)),
                depth: small(I::MAX),
            })
            .collect();
        let mut want = v.clone();
        want.sort_by_key(|r| {
            let f = |x: I| x.to_u64();
            (f(r.group), f(r.second), f(r.pos), f(r.depth))
        });
        Refine::sort_local(&mut v, &CpuSort::new(2));
        assert_eq!(v, want, "{} bits", I::BITS);
    }

    #[test]
    fn refinement_records_sort_in_every_width() {
        sorts_refinement_records::<u32>();
        sorts_refinement_records::<U40>();
        sorts_refinement_records::<u64>();
    }

    /// A stored depth is exact below 2^10, never above the depth, at most 0.2 % below it, keeps
    /// the order of depths, and never reads as resolved; the index of a resolved one is
    /// [`resolved`].
    #[test]
    fn depths_are_stored_as_lower_bounds_within_a_fifth_of_a_percent() {
        let mut rng = crate::dist::sample_sort::SplitMix::new(3);
        let mut ds: Vec<u64> = (0..1 << 12).collect();
        ds.extend((10..64).flat_map(|b| [(1 << b) - 1, 1 << b, (1 << b) + 1, 21 << (b - 5)]));
        ds.extend((0..10_000).map(|_| rng.next() >> (rng.next() % 64)));
        ds.push(u64::MAX);
        ds.sort_unstable();
        let mut last = 0;
        for &d in &ds {
            let got = Depth::at_most(d);
            assert_ne!(got, Depth::RESOLVED, "{d}");
            let v = got.get();
            if d < 1 << 10 {
                assert_eq!(v, d);
            }
            assert!(
                v <= d && v as f64 >= d as f64 * (1.0 - 1.0 / 512.0),
                "{d} → {v}"
            );
            assert!(v >= last, "{d} → {v} below {last}");
            assert_eq!(Depth::at_most(v), got, "{v} is stored exactly");
            last = v;
        }
        assert_eq!(Depth::RESOLVED.index::<u32>(), resolved::<u32>());
        assert_eq!(Depth::of(resolved::<U40>()), Depth::RESOLVED);
        assert_eq!(Depth::of(1234u32).index::<u32>(), 1234);
    }

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
                let mut rng = crate::dist::sample_sort::SplitMix::new(5);
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
