//! The hand-over: whether pCSS gives the work to a difference cover, and to which
//! ([`hand_over`], asked by the driver at each point where it may), and the finish on the prefix
//! names ([`finish`]). Holds nothing.

use super::keys::POSITION_BITS;
use super::Knobs;
use crate::algo::sink::SaSink;
use crate::ctx::Settings;
use crate::dist::Layout;
use crate::index::Index;
use crate::token::Token;
use crate::util::bits;
use crate::{Ctx, Predicted};

/// Doubling is slow when a round leaves more than this fraction of the suffixes it started with
/// unresolved…
const SLOW_ROUND: f64 = 0.6;

/// …while more than n / `LARGE_REMAINDER` of them are left: then pCSS hands over.
const LARGE_REMAINDER: usize = 8;

/// Where pCSS stands when it asks [`hand_over`].
pub(super) enum Progress {
    /// Before anything.
    Start,
    /// A text of 32-bit tokens with more distinct values than pCSS ranks (`ranks.rs`).
    Alphabet { distinct: u64 },
    /// After the keys: the predicted fraction of suffixes that share their first k characters
    /// with another suffix.
    Predicted { shared: f64, k: usize },
    /// After the first sort (h = k characters known): the suffixes it left tied, and those of
    /// them outside runs of one character (which the run step cannot resolve).
    Tied { h: usize, tied: u64, deep: u64 },
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
pub(super) enum HandOver {
    /// pDC3 on the text, from the start.
    Dc3,
    /// DC7 on the text, from the start.
    Dc7,
    /// The difference-cover finish on the prefix names ([`finish`]): at once, or (decided before
    /// there are names) right after the first sort.
    Finish,
}

/// An algorithm that builds the whole suffix array (same contract as [`super::css`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Whole {
    /// pDC3.
    Dc3,
    /// DC7 (bytes; a text of tokens goes to pDC3, which takes them).
    Dc7,
}

impl HandOver {
    /// The algorithm that builds the whole suffix array instead, if this hand-over is one.
    pub(super) fn whole(self) -> Option<Whole> {
        match self {
            HandOver::Dc3 => Some(Whole::Dc3),
            HandOver::Dc7 => Some(Whole::Dc7),
            HandOver::Finish => None,
        }
    }
}

impl Whole {
    /// Builds the suffix array of `text` (same contract as [`super::css`]). Collective.
    pub(super) fn build<C: Token>(
        self,
        ctx: &Ctx,
        set: &Settings,
        text: &[C],
        layout: &Layout,
        sink: &SaSink,
    ) -> Option<Vec<u64>> {
        match (self, bytes_of(text)) {
            (Whole::Dc7, Some(bytes)) => crate::algo::dc7::dc7(ctx, set, bytes, layout, sink),
            _ => crate::algo::dc3::dc3(ctx, set, text, layout, sink),
        }
    }
}

/// `text` as bytes, when its characters are bytes.
fn bytes_of<C: Token>(text: &[C]) -> Option<&[u8]> {
    (C::WIDTH == crate::token::TokenWidth::W1).then(|| bytemuck::cast_slice(text))
}

/// The one place that decides whether pCSS hands over to a difference cover, and to which:
/// - at the start, a text of at most `base_case` characters (gathering is cheaper than a
///   distributed sort) or of ≥ 2^[`POSITION_BITS`] (positions do not fit the key records) goes to
///   pDC3;
/// - a text of 32-bit tokens with more distinct values than [`Knobs::alphabet`] goes to pDC3;
/// - after the prediction, when more than the hand-over fraction ([`Knobs::handover`]) of the
///   suffixes share their key: DC7 from the start (or what [`Knobs::predicted`] says);
/// - after the first sort, when more than that fraction of all suffixes is tied outside runs;
/// - before a doubling round, when more than that fraction of all suffixes is unresolved, or
///   the last round was slow ([`SLOW_ROUND`], [`LARGE_REMAINDER`]): the finish on the current
///   names.
///
/// Every input is global, so every pe gets the same answer. Pe 0 logs the reason.
pub(super) fn hand_over(ctx: &Ctx, n: usize, at: Progress, knobs: &Knobs) -> Option<HandOver> {
    let limit = knobs.handover;
    let say = ctx.comm.rank() == 0;
    let unresolved = |remaining: u64, round: usize, h: usize| {
        if say {
            log::info!("css: {remaining} of {n} suffixes unresolved after {round} rounds (h = {h}); finishing with a difference cover on the prefix names");
        }
        HandOver::Finish
    };
    match at {
        Progress::Start => {
            (knobs.set.gathers(ctx, n) || bits(n as u64) > POSITION_BITS).then_some(HandOver::Dc3)
        }
        Progress::Alphabet { distinct } => (distinct > knobs.alphabet as u64).then(|| {
            if say {
                log::info!("css: more than {} distinct token values ({distinct} or more); building with pDC3", knobs.alphabet);
            }
            HandOver::Dc3
        }),
        Progress::Predicted { shared, k } => {
            (shared > limit).then(|| predicted(shared, k, knobs.predicted, say))
        }
        // Every tied suffix is unresolved, so this is the first doubling round's test on the
        // deep ones alone, made before their list exists.
        Progress::Tied { h, tied, deep } => {
            (deep as f64 > limit * n as f64).then(|| unresolved(tied, 0, h))
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
            // Most suffixes share long prefixes (aⁿ, long repeats): doubling would take about
            // log(longest repeat) rounds over nearly all of them.
            (remaining as f64 > limit * n as f64).then(|| unresolved(remaining, round, h))
        }
    }
}

/// The hand-over after the prediction that `shared` of the suffixes share their first k
/// characters: to what `--css-predicted` names (`to`).
fn predicted(shared: f64, k: usize, to: Predicted, say: bool) -> HandOver {
    let (to, how) = match to {
        Predicted::Dc7 => (HandOver::Dc7, "building with DC7"),
        Predicted::Dc3 => (HandOver::Dc3, "building with DC3"),
        Predicted::SortThenDc7 => (HandOver::Finish, "no doubling, DC7 after the first sort"),
    };
    if say {
        log::info!(
            "css: about {:.0} % of the suffixes share their first {k} characters with another suffix; {how}",
            100.0 * shared
        );
    }
    to
}

/// The hand-over's finish: the suffix array from the current prefix names (every group's depth is
/// at least k ≥ 8), by DC7 ([`crate::algo::dc7::finish_from_names`]) or, with
/// [`Knobs::finish_dc3`] (`--css-finish dc3`) on a text of bytes, by DC3. Collective.
pub(super) fn finish<I: Index, C: Token>(
    ctx: &Ctx,
    text: &[C],
    layout: &Layout,
    name_of: Vec<I>,
    sink: &SaSink,
    knobs: &Knobs,
) -> Option<Vec<u64>> {
    match (knobs.finish_dc3, bytes_of(text)) {
        (true, Some(text)) => {
            crate::algo::dc3::finish_from_names(ctx, &knobs.set, text, layout, name_of, sink)
        }
        _ => crate::algo::dc7::finish_from_names(ctx, &knobs.set, layout, name_of, sink),
    }
}
