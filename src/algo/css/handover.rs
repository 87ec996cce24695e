use super::*;

/// Doubling is slow when a round leaves more than this fraction of the suffixes it started with
/// unresolved…
pub(super) const SLOW_ROUND: f64 = 0.6;

/// …while more than n / `LARGE_REMAINDER` of them are left: then pCSS hands over.
pub(super) const LARGE_REMAINDER: usize = 8;

/// Where pCSS stands when it asks [`hand_over`].
pub(super) enum Progress {
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
pub(super) enum HandOver {
    /// pDC3 on the text, from the start.
    Dc3,
    /// DC7 on the text, from the start.
    Dc7,
    /// The difference-cover finish on the prefix names ([`finish`]): at once, or (decided before
    /// there are names) right after the first sort.
    Finish,
}

/// An algorithm that builds the whole suffix array (same contract as [`css`]).
pub(super) type Build = fn(&Ctx, &[u8], &Layout, &SaSink) -> Option<Vec<u64>>;

impl HandOver {
    /// The algorithm that builds the whole suffix array instead, if this hand-over is one.
    pub(super) fn whole(self) -> Option<Build> {
        match self {
            HandOver::Dc3 => Some(crate::algo::dc3::dc3),
            HandOver::Dc7 => Some(crate::algo::dc7::dc7),
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
pub(super) fn hand_over(ctx: &Ctx, n: usize, at: Progress) -> Option<HandOver> {
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
/// at least k ≥ 8), by DC7 ([`crate::algo::dc7::finish_from_names`]) or, with `--css-finish dc3`, by
/// DC3. Collective.
pub(super) fn finish<I: Index>(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    name_of: Vec<I>,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    if ctx.tune.css_finish_dc3 {
        crate::algo::dc3::finish_from_names(ctx, text, layout, name_of, sink)
    } else {
        crate::algo::dc7::finish_from_names(ctx, layout, name_of, sink)
    }
}
