//! pCSS: one sample sort of k-character keys, then prefix doubling on the unresolved suffixes.
//! This file is the driver ([`css`]); each phase lives in a file of its own, named below, and the
//! three sorts (first sort, run step, doubling round) share one skeleton: sort in key ranges →
//! name the groups across ranges → send the updates to the owners (`groups.rs`).
//!
//! Phases:
//! 0. **ranks** (`ranks.rs`, 32-bit tokens only): every value replaced by its rank among the
//!    text's values, which keeps the order and makes the alphabet's table σ entries long.
//! 1. **alphabet** (`alphabet.rs`): the set of byte (or token) values in the whole text (one reduction); b = bits per
//!    character (2 for DNA), k = ⌊64/b⌋ characters per 64-bit key for alphabets of at most 16
//!    letters (32 for DNA), else 2·⌊64/b⌋ per 128-bit key (18 for English's 7-bit codes, 16 for
//!    bytes): a 64-bit key of 8–12 characters left most suffixes of text and code for a first
//!    doubling round.
//! 2. **keys** (`keys.rs`): for each position i, the next k characters packed big-endian (so integer order is
//!    lexicographic order), padded with the smallest code, plus the clamped length min(n−i, k) so
//!    that a suffix shorter than k sorts before the longer ones it is a prefix of, plus i itself.
//!    Then **predict** (`predict.rs`): a sample of 2^12 keys of ⌊64/b⌋ characters, counted over all such keys,
//!    estimates how many suffixes share their key with another one (runs of one character not
//!    counted); above the hand-over
//!    fraction (85 %) doubling would take log(longest repeat) rounds over nearly all suffixes, and
//!    DC7 ([`crate::algo::dc7::dc7`]) builds the suffix array from the start instead of after a wasted
//!    sort (`--css-predicted dc3`: pDC3; `sort`: the first sort, then the DC7 finish). The
//!    fraction sits below the 88 % that source code shows, whose runs (indentation) the run step
//!    leaves tied, so that more than 90 % stay unresolved after the first sort; English text
//!    (about 80 %) is resolved by doubling in a few rounds.
//! 3. **sort keys** (`first_sort.rs`): one distributed sample sort of these 16- or 24-byte records (the position
//!    makes them unique, so runs of equal keys spread over all pes: aⁿ stays balanced), in
//!    `sort_rounds` ranges of keys one after the other ([`crate::dist::sort_in_rounds`]): the records of a
//!    range are made from the text again (128-bit keys: every position's range found once, a
//!    byte per position, and only its range's records made), sorted, named (phase 4) and their
//!    names sent to the owners of the positions, then freed.
//! 4. **names** (`first_sort.rs`, [`crate::dist::GroupNames`]): the name of a suffix is the global index of the first suffix with the same key
//!    (a max-scan across pes). A suffix alone in its group is final: its name is its SA index.
//! 5. **runs** (`runs.rs`): a suffix whose key is one character c repeated k times lies in a run c^r x…; one
//!    sort orders these by (x < c or the end before x > c, then r ascending resp. descending), and
//!    only equal (x < c, r) stay tied, with depth r. Their keys are made by the owners of their
//!    positions (who know r and x) and sorted in as many key ranges as keep a range within the
//!    first sort's.
//! 6. **refine** (`refine.rs`; prefix doubling over the unresolved suffixes only): every group has a depth d,
//!    the number of characters its members share (k after the first sort); the key of unresolved
//!    i is (name(i), name(i+d)), name(i+d) and the depth of its group fetched from the pe owning
//!    i+d. Sorting these keys splits each group; new names are group start + offset of the
//!    subgroup, new depths d + depth(i+d). Resolved suffixes drop out of later rounds (a round
//!    lists the positions whose depth is not resolved, `open.rs`: no list of unresolved suffixes is
//!    held between rounds); when most
//!    stay unresolved, DC7 finishes from the names ([`crate::algo::dc7::finish_from_names`]; with
//!    `--css-finish dc3`, [`crate::algo::dc3::finish_from_names`]).
//! 7. **place** (`place.rs`): every suffix's final name is its SA index: (name, i) goes to the owner of that
//!    index.
//!
//! Whether pCSS hands the work to a difference cover, and to which, is decided in one place
//! (`handover.rs`), asked by the driver alone: before anything (tiny texts, or positions too wide
//! for the keys: pDC3), after the prediction, after the first sort, and before every doubling
//! round (the refinement returns after each). The settings (`--css-*`, `--sort-rounds`) are read
//! once, here ([`Knobs`]), and passed down as values.
//!
//! No pe ever holds more than its share of the text, the names, or the records; runs of equal
//! keys are never compared character by character (pSFFX's O(n²) trap).
//!
//! Every name, position and depth of a run is stored in one index width ([`Index`]: 32 bits
//! below 2^32 characters, 40, or 64; [`index_width`], forced by `--index-bits`), and each record
//! is one generic definition (`records.rs`): `Suffix` (an unresolved suffix or an update), `Ahead`
//! (the answer about i + d), `Refine` (a doubling round's key), and (name, position) pairs
//! `[I; 2]`. Only the first sort's keys (`keys.rs`, `FirstKey`: `HiKey`, `WideKey`) have their own
//! form: 64 or 128 bits of characters beside a 56-bit position.
//!
//! Memory per pe, w bytes per index (4 below 2^32 characters): text n/p, names w per position
//! (only when some key repeats) and depths 2 B (`Depth`) while doubling, sort records 16 B
//! each (first sort of 64-bit keys, run step), 24 B (first sort of 128-bit keys, in 1.5× the
//! ranges) or 4w (doubling) with up to three copies during an exchange, of one range at a time,
//! the tied suffixes as records (3w each) after a sort in one range, or two bits per position
//! (tied outside or inside a run) after several; into a file the SA slice is never held whole
//! (`place.rs`). The memory plan's measured model of the peak against the ranges
//! is `plan::css_costs`.

mod alphabet;
mod first_sort;
mod groups;
mod handover;
mod keys;
mod open;
mod place;
mod predict;
mod ranks;
mod records;
mod refine;
mod runs;

use crate::algo::sink::SaSink;
use crate::ctx::Settings;
use crate::dist::Layout;
use crate::index::{Index, IndexWidth, U40};
use crate::token::Token;
use crate::{Ctx, Predicted};
use alphabet::Codes;
use first_sort::{first_sort, Names};
use handover::{finish, hand_over, HandOver, Progress};
use keys::{FirstKey, HiKey, KeyGen, WideKey};
use place::{deliver_names, place};
use predict::{predict, predicts};
use ranks::{ranked, Ranked};
use refine::Doubling;

/// Builds the suffix array with pCSS, the build's setting `set`. Collective; same contract as
/// [`super::dc3::dc3`] (a `sink` that writes gets every entry written where it belongs, and every
/// pe gets None). Returns beside it the doubling rounds it ran (0 where it handed over before
/// doubling or needed none).
#[must_use]
pub fn css<C: Token>(
    ctx: &Ctx,
    set: &Settings,
    text: &[C],
    layout: &Layout,
    sink: &SaSink,
) -> (Option<Vec<u64>>, usize) {
    let knobs = Knobs::of(ctx, set);
    let n = layout.len();
    if let Some(build) = hand_over(ctx, n, Progress::Start, &knobs).and_then(HandOver::whole) {
        return (build.build(ctx, set, text, layout, sink), 0);
    }
    if C::BITS <= 16 {
        return ranked_css(ctx, text, layout, sink, &knobs);
    }
    // 0. ranks: 32-bit tokens take their ranks among the text's values, or go to pDC3.
    match ctx.phase("ranks", || ranked(ctx, text, knobs.alphabet)) {
        Ranked::Text(ranks) => ranked_css(ctx, &ranks, layout, sink, &knobs),
        Ranked::TooMany(distinct) => {
            let at = Progress::Alphabet { distinct };
            let build = hand_over(ctx, n, at, &knobs).and_then(HandOver::whole);
            let build = build.expect("too many distinct values hand over whole");
            (build.build(ctx, set, text, layout, sink), 0)
        }
    }
}

/// Phases 1–7 on a text whose values index a code table: bytes, 16-bit tokens, or ranks.
fn ranked_css<C: Token>(
    ctx: &Ctx,
    text: &[C],
    layout: &Layout,
    sink: &SaSink,
    knobs: &Knobs,
) -> (Option<Vec<u64>>, usize) {
    let n = layout.len();
    let codes = ctx.phase("alphabet", || Codes::of(ctx, text));
    let run = Run {
        ctx,
        text,
        layout,
        sink,
        codes: &codes,
        knobs,
    };
    match (index_width(ctx, n), codes.word) {
        (IndexWidth::W32, 64) => run.build::<u32, HiKey>(),
        (IndexWidth::W32, _) => run.build::<u32, WideKey>(),
        (IndexWidth::W40, 64) => run.build::<U40, HiKey>(),
        (IndexWidth::W40, _) => run.build::<U40, WideKey>(),
        (IndexWidth::W64, 64) => run.build::<u64, HiKey>(),
        (IndexWidth::W64, _) => run.build::<u64, WideKey>(),
    }
}

/// pCSS' settings, read from the configuration and the build's setting once, here, and passed
/// down as values.
pub(super) struct Knobs {
    /// The build's setting (for the hand-over's gathering test and the difference covers it
    /// hands to).
    set: Settings,
    /// The hand-over fraction (`--css-handover`, [`handover::hand_over`]).
    handover: f64,
    /// Whether to predict before the first sort (`--css-predict`, and a hand-over fraction
    /// below 1).
    predict: bool,
    /// Where a predicted hand-over goes (`--css-predicted`).
    predicted: Predicted,
    /// The finish on the prefix names by DC3 instead of DC7 (`--css-finish dc3`).
    finish_dc3: bool,
    /// The most distinct 32-bit token values ranked (`--css-alphabet`, `ranks.rs`).
    alphabet: usize,
    /// The key ranges of the sorts (the build's: `--sort-rounds`; 0, auto: one, the fastest; a
    /// memory budget makes the plan, [`crate::plan`], choose more).
    sort_rounds: usize,
}

impl Knobs {
    /// Local (every pe has the same settings).
    fn of(ctx: &Ctx, set: &Settings) -> Self {
        let c = &ctx.config.css;
        Knobs {
            set: *set,
            handover: c.handover,
            predict: c.handover < 1.0 && c.predict,
            predicted: c.predicted,
            finish_dc3: c.finish_dc3,
            alphabet: c.alphabet,
            sort_rounds: set.knobs.sort_rounds.max(1),
        }
    }
}

/// One build: its inputs, the alphabet and the settings.
struct Run<'a, C: Token> {
    ctx: &'a Ctx,
    text: &'a [C],
    layout: &'a Layout,
    sink: &'a SaSink<'a>,
    codes: &'a Codes,
    knobs: &'a Knobs,
}

impl<C: Token> Run<'_, C> {
    /// Phases 2–7 with names, positions and depths in `I` and first-sort records `R`; the suffix
    /// array (as [`css`]) and the doubling rounds run.
    fn build<I: Index, R: FirstKey>(&self) -> (Option<Vec<u64>>, usize) {
        let Run {
            ctx,
            text,
            layout,
            sink,
            codes,
            knobs,
        } = *self;
        let (n, rounds) = (layout.len(), knobs.sort_rounds);
        // 2. keys, and the prediction: a repetitive text goes to a difference cover at once.
        let (keys, held) = ctx.phase("keys", || {
            KeyGen::<R, C>::made(ctx, text, layout, codes, rounds)
        });
        let predicted = (knobs.predict && predicts(codes))
            .then(|| predict(ctx, text, layout, codes, held.as_deref()));
        let decided = predicted
            .and_then(|(shared, k)| hand_over(ctx, n, Progress::Predicted { shared, k }, knobs));
        if let Some(build) = decided.and_then(HandOver::whole) {
            // The difference cover makes its own records: the keys go first.
            drop((keys, held));
            return (build.build(ctx, &knobs.set, text, layout, sink), 0);
        }
        // 3–4. sort keys, names (with the finish decided, only the number of tied suffixes matters).
        let first = first_sort::<I, R, C>(ctx, layout, &keys, held, rounds, decided.is_none());
        drop(keys);
        let (tied, deep) = (first.tied.total, first.tied.deep);
        self.say::<I>(rounds, tied);
        let name_of = match first.names {
            // Every name is final: it is the suffix's index in the SA.
            Names::Sorted(pairs) if tied == 0 => {
                let sa = ctx.phase("place", || place::<I, _>(ctx, layout, pairs));
                return (sink.deliver_layout_of(ctx, sa, layout), 0);
            }
            names => names.into_text(ctx, layout),
        };
        if tied == 0 {
            return (deliver_names(ctx, layout, name_of, sink), 0);
        }
        // Predicted to crawl, or too many tied suffixes outside runs (the run step cannot
        // resolve them): the finish on the first sort's names (depth k ≥ 8).
        let at = Progress::Tied {
            h: codes.k,
            tied,
            deep,
        };
        if decided.is_some() || hand_over(ctx, n, at, knobs).is_some() {
            return (finish(ctx, text, layout, name_of, sink, knobs), 0);
        }
        self.refine(first.tied, name_of, rounds)
    }

    /// Phases 5–7 from the first sort's tied suffixes and names: the run step, doubling rounds
    /// until every suffix is alone — unless the hand-over, asked before each round, finishes —
    /// and the placing. Returns the suffix array (as [`css`]) and the doubling rounds run.
    fn refine<I: Index>(
        &self,
        tied: first_sort::Tied<I>,
        mut name_of: Vec<I>,
        rounds: usize,
    ) -> (Option<Vec<u64>>, usize) {
        let (ctx, text, layout, knobs) = (self.ctx, self.text, self.layout, self.knobs);
        let n = layout.len();
        let mut doubling = Doubling::new(&ctx.comm, layout, self.codes.k, tied, name_of.len());
        // 5. runs
        if doubling.has_runs() {
            ctx.phase("runs", || {
                doubling.split_runs(ctx, text, layout, self.codes, &mut name_of, rounds)
            });
        }
        doubling.count(&ctx.comm, rounds);
        // 6. refine
        while doubling.remaining > 0 {
            if hand_over(ctx, n, doubling.progress(), knobs).is_some() {
                let done = doubling.round;
                drop(doubling); // the depths and the list, before the finish's peak
                return (finish(ctx, text, layout, name_of, self.sink, knobs), done);
            }
            doubling.round(ctx, layout, &mut name_of);
        }
        let done = doubling.round;
        drop(doubling);
        // 7. place
        (deliver_names(ctx, layout, name_of, self.sink), done)
    }

    /// Pe 0 logs the keys, the ranges and the suffixes the first sort left tied.
    fn say<I: Index>(&self, rounds: usize, tied: u64) {
        if self.ctx.comm.rank() == 0 {
            log::info!(
                "css: {} characters per key ({} bits each), {rounds} sort round(s), {}-bit records; {tied} of {} suffixes need refinement",
                self.codes.k,
                self.codes.b,
                I::BITS,
                self.layout.len(),
            );
        }
    }
}

/// The index width of pCSS' records for a text of n characters: names (+ 1), positions and
/// depths are at most n, and one value above them marks a resolved suffix
/// ([`records::resolved`]). The narrowest that holds n + 1, or the forced one
/// ([`crate::Config::forced_index_width`]). Local.
fn index_width(ctx: &Ctx, n: usize) -> IndexWidth {
    IndexWidth::choose(n as u64 + 1, ctx.config.forced_index_width())
}
