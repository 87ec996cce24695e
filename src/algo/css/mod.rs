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

mod alphabet;
mod first_sort;
mod groups;
mod handover;
mod keys;
mod open;
mod place;
mod predict;
mod records;
mod refine;
mod runs;
#[cfg(test)]
mod tests;

use alphabet::*;
use first_sort::*;
use groups::*;
use handover::*;
use keys::*;
use open::*;
use place::*;
use predict::*;
use records::*;
use refine::*;
use runs::*;

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

/// The number of rounds of pCSS's sorts: `ctx.tune.sort_rounds`, or with 0 (auto) one — the
/// fastest; a memory budget makes the plan ([`crate::plan`]) choose more. Local (every pe has the
/// same settings).
fn sort_rounds(ctx: &Ctx, _layout: &Layout) -> usize {
    ctx.tune.sort_rounds.max(1)
}
