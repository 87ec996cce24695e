//! Phase 6, refine: prefix doubling over the unresolved suffixes only ([`Doubling`], one round
//! per call, so the driver decides the hand-over before each). Every group has a depth d, the
//! number of characters its members share (k after the first sort, r after the run step); the
//! key of unresolved i is (name(i), name(i+d)), name(i+d) and the depth of its group fetched from
//! the pe owning i+d. Sorting these keys splits each group; new names are group start + offset of
//! the subgroup, new depths d + depth(i+d). Resolved suffixes drop out of later rounds.
//!
//! Memory per pe, u unresolved suffixes of s bytes ([`Suffix`], 12 with 32 bits), records r bytes
//! ([`Refine`], 16): the names (an index per position) and depths (2 bytes, [`Depth`])
//! throughout; the list (s per suffix) or the marks (a bit per position, [`OpenPositions`]); per
//! range the range's suffixes (s), the queries (1 index each) and their answers ([`Ahead`], 2),
//! then the records (r, two copies in their exchange), then their names (the old group's start
//! and the new group's: two indices and two flags each, the first freed once the new names are
//! made) and updates (s, written over the records), the still unresolved ones when listed (s)
//! and the updates' exchange.

use std::cell::RefCell;

use bytemuck::Zeroable;
use rayon::prelude::*;

use super::alphabet::Codes;
use super::first_sort::Tied;
use super::groups::{sort_name_update, Grouping, Sort};
use super::handover::Progress;
use super::open::OpenPositions;
use super::records::{updates_in_place, Ahead, Depth, Refine, Suffix};
use super::runs;
use crate::algo::consume_from_end;
use crate::comm::Comm;
use crate::dist::{collect_range, fetch, send_to_owners, Layout, Ranges, RoundBounds};
use crate::index::Index;
use crate::Ctx;

/// Doubling holds its unresolved suffixes as records ([`Suffix`], 3 indices each, spread evenly
/// over the pes by the last sort) once at most n / `LIST_BELOW` of them are left; above that,
/// when the first sort marked them, it finds them from the depths at their positions, at a bit
/// per position, and their records are made by their positions' owners (which is uneven where
/// they cluster, as in long repeats: the rounds with few left are the ones to balance).
const LIST_BELOW: u64 = 8;

/// Where a doubling round finds the unresolved suffixes.
enum Unresolved<I> {
    /// At the positions whose depth is not [`super::records::resolved`] ([`OpenPositions`]).
    Marked,
    /// This pe's list of them, where the last sort left them.
    Listed(Vec<Suffix<I>>),
}

/// Prefix doubling between the first sort and the end or the hand-over. `depth_of` holds each
/// of this pe's positions' group depth, [`Depth::RESOLVED`] once its suffix is alone, and
/// [`Depth::IN_RUN`] inside a run until the run step. While more than n / [`LIST_BELOW`]
/// suffixes are unresolved and the first sort marked them, a round finds them from the depths
/// ([`Unresolved`]); below, as records. The names (`name_of`, this pe's positions) are the
/// caller's: prefix names of depth ≥ k throughout, final once no suffix is unresolved.
pub(super) struct Doubling<I> {
    depth_of: Vec<Depth>,
    unresolved: Unresolved<I>,
    /// Whether some tied suffixes lie inside runs of one character (for the run step).
    runs: bool,
    /// Doubling rounds done.
    pub(super) round: usize,
    /// The suffixes unresolved on all pes, now and before the last round.
    pub(super) remaining: u64,
    before: Option<u64>,
    /// The characters every group is known to share at least.
    h: usize,
    /// Every round's ranges are as large as the first round's: later rounds, with fewer
    /// suffixes left, take fewer ranges.
    ranges: Ranges,
}

impl<I: Index> Doubling<I> {
    /// From the first sort's ties (`len`: this pe's positions; their groups share k characters):
    /// depth k for the tied suffixes outside runs, [`Depth::IN_RUN`] inside (a listed one's sent
    /// to its position's owner), resolved for the others. Collective.
    pub(super) fn new(comm: &Comm, layout: &Layout, k: usize, tied: Tied<I>, len: usize) -> Self {
        let Tied {
            mut list,
            marks,
            in_runs,
            total,
            deep,
        } = tied;
        let marked = marks.is_some();
        let mut depth_of = match (marks, in_runs) {
            (Some(marks), Some(in_runs)) => collect_range(marks.len, |j| {
                if in_runs.get(j) {
                    Depth::IN_RUN
                } else if marks.get(j) {
                    Depth::at_most(k as u64)
                } else {
                    Depth::RESOLVED
                }
            }),
            _ => vec![Depth::at_most(k as u64); len],
        };
        // Suffixes inside runs of one character are found at their positions (listed, their
        // positions are marked first).
        let runs = total > deep;
        if runs && !marked {
            let at: Vec<I> = (list.iter())
                .filter(|s| s.depth == I::zeroed())
                .map(|s| s.pos)
                .collect();
            list.retain(|s| s.depth != I::zeroed());
            list.shrink_to_fit();
            send_to_owners(comm, layout, at, &mut depth_of[..], |&i| {
                (i.to_u64() as usize, Depth::IN_RUN)
            });
        }
        Doubling {
            depth_of,
            unresolved: if marked {
                Unresolved::Marked
            } else {
                Unresolved::Listed(list)
            },
            runs,
            round: 0,
            remaining: 0,
            before: None,
            h: k,
            ranges: Ranges::new(1),
        }
    }

    /// Whether some tied suffixes lie inside runs of one character.
    pub(super) fn has_runs(&self) -> bool {
        self.runs
    }

    /// Phase 5: the run step ([`runs::split_runs`]) on the suffixes inside runs, in up to
    /// `sort_rounds` key ranges; those it leaves tied join the list. Collective.
    pub(super) fn split_runs<C: crate::token::Token>(
        &mut self,
        ctx: &Ctx,
        text: &[C],
        layout: &Layout,
        codes: &Codes,
        name_of: &mut [I],
        sort_rounds: usize,
    ) {
        let names = (name_of, &mut self.depth_of[..]);
        let listed = match &mut self.unresolved {
            Unresolved::Listed(list) => Some(list),
            Unresolved::Marked => None,
        };
        let still = runs::split_runs(
            ctx,
            text,
            layout,
            codes,
            names,
            sort_rounds,
            listed.is_some(),
        );
        if let Some(list) = listed {
            list.extend_from_slice(&still);
        }
    }

    /// Counts the suffixes the first sort and the run step left unresolved, and sizes the
    /// rounds' key ranges by them (`sort_rounds` for that many). Collective.
    pub(super) fn count(&mut self, comm: &Comm, sort_rounds: usize) {
        let open = match &self.unresolved {
            Unresolved::Marked => (self.depth_of.par_iter())
                .filter(|&&d| d != Depth::RESOLVED)
                .count(),
            Unresolved::Listed(list) => list.len(),
        };
        self.remaining = comm.all_reduce_sum(open as u64);
        self.ranges = Ranges::sized(sort_rounds, self.remaining);
    }

    /// Where doubling stands, for the hand-over before the next round.
    pub(super) fn progress(&self) -> Progress {
        Progress::Doubling {
            round: self.round,
            h: self.h,
            remaining: self.remaining,
            before: self.before,
        }
    }

    /// One doubling round ([`refine_round`], the phase "refine"), listed once few suffixes are
    /// left. Collective.
    pub(super) fn round(&mut self, ctx: &Ctx, layout: &Layout, name_of: &mut [I]) {
        let comm = &ctx.comm;
        self.round += 1;
        let list = matches!(self.unresolved, Unresolved::Listed(_))
            || self.remaining <= (layout.len() as u64).div_ceil(LIST_BELOW);
        let unresolved = std::mem::replace(&mut self.unresolved, Unresolved::Marked);
        let depth_of = &mut self.depth_of[..];
        let ranges = self.ranges;
        let (still, next) = ctx.phase("refine", || {
            refine_round(ctx, layout, unresolved, name_of, depth_of, ranges, list)
        });
        self.unresolved = next;
        self.before = Some(self.remaining);
        self.remaining = comm.all_reduce_sum(still);
        if comm.rank() == 0 {
            let (round, h, remaining) = (self.round, self.h, self.remaining);
            let how = if list { "listed" } else { "marked" };
            log::debug!(
                "css: round {round} (h = {h}, {how}): {remaining} suffixes still unresolved"
            );
        }
        self.h *= 2;
    }
}

/// One refinement round: every unresolved (name g, position i, depth d) — all members of group g
/// share their first d characters — is keyed by (g, name(i+d)); a new subgroup shares d plus the
/// depth of the group of i+d. Sorted in `ranges` of group names ([`sort_name_update`]; sized by
/// the first round's suffixes, so later rounds take fewer; the boundaries cut between groups, so
/// a round holds whole groups): per range, the suffixes whose name lies in it are taken from the
/// list or, when marked, from this pe's positions ([`OpenPositions`]), the names of i+d fetched,
/// the records sorted and renamed, and the updates (depth [`super::records::resolved`] for a
/// suffix alone in its new group) written to the owners of the positions before the next range.
/// A later range may thus see names already refined by an earlier one: they are finer prefix
/// names of the same order (a group's new names stay within its old range, with the depths sent
/// along), and all members of a group see the same ones; a position refined by an earlier range
/// is not taken again (its name stays in that range). Returns how many of this pe's records are
/// still unresolved and, with `list`, those suffixes (else they are left marked). With one range
/// a list is freed as its records are made. Collective.
fn refine_round<I: Index>(
    ctx: &Ctx,
    layout: &Layout,
    unresolved: Unresolved<I>,
    name_of: &mut [I],
    depth_of: &mut [Depth],
    ranges: Ranges,
    list: bool,
) -> (u64, Unresolved<I>) {
    let source = RoundSuffixes::new(unresolved, depth_of, layout.start(ctx.comm.rank()));
    let names = RefCell::new((name_of, depth_of));
    let sort = Sort {
        phase: "· sort",
        ranges,
        len: source.len(),
        // Boundaries (g, 0, 0, 0): a round holds the records of the groups from one to the next.
        record: |j| Refine::group_start(source.name(j, &names.borrow().0[..])),
        generate: |bounds: &RoundBounds<Refine<I>>, k| {
            let names = names.borrow();
            let (name_of, depth_of) = (&names.0[..], &names.1[..]);
            let mine = source.of_range(bounds, k, name_of, depth_of);
            records(&ctx.comm, layout, mine, name_of, depth_of)
        },
    };
    let (count, still) = sort_name_update(ctx, layout, sort, &Pairs, &names, list);
    let next = if list {
        Unresolved::Listed(still)
    } else {
        Unresolved::Marked
    };
    (count, next)
}

/// A doubling round's groups: records of equal (group, name of i + d); the old group is the
/// record's group.
struct Pairs;

impl<I: Index> Grouping<Refine<I>, I> for Pairs {
    const SPLITS: bool = true;

    #[inline]
    fn same(&self, a: &Refine<I>, b: &Refine<I>) -> bool {
        a.same_pair(b)
    }

    #[inline]
    fn old(&self, r: &Refine<I>) -> u64 {
        r.group.to_u64()
    }

    #[inline]
    fn entry(&self, r: &Refine<I>, name: I) -> Suffix<I> {
        Suffix {
            name,
            pos: r.pos,
            depth: r.depth,
        }
    }

    /// Written over the records themselves ([`updates_in_place`]).
    fn updates(
        &self,
        records: Vec<Refine<I>>,
        f: impl Fn(usize, &Refine<I>) -> Suffix<I> + Sync,
    ) -> Vec<Suffix<I>>
    where
        Refine<I>: Sync,
    {
        updates_in_place(records, f)
    }
}

/// The unresolved suffixes of a doubling round on this pe, range by range: from the list, or
/// from the marked positions.
struct RoundSuffixes<I> {
    listed: RefCell<Option<Vec<Suffix<I>>>>,
    open: Option<OpenPositions>,
    /// With several ranges and marked positions: how many of each piece's lie in each range.
    per_range: RefCell<Vec<usize>>,
    /// This pe's first position.
    base: u64,
}

impl<I: Index> RoundSuffixes<I> {
    fn new(unresolved: Unresolved<I>, depth_of: &[Depth], base: usize) -> Self {
        let (listed, open) = match unresolved {
            Unresolved::Listed(l) => (Some(l), None),
            Unresolved::Marked => (
                None,
                Some(OpenPositions::of(depth_of, |d| d != Depth::RESOLVED)),
            ),
        };
        RoundSuffixes {
            listed: RefCell::new(listed),
            open,
            per_range: RefCell::new(Vec::new()),
            base: base as u64,
        }
    }

    /// How many there are.
    fn len(&self) -> usize {
        self.listed.borrow().as_ref().map_or(0, Vec::len)
            + self.open.as_ref().map_or(0, |o| o.count)
    }

    /// The name of the j-th.
    fn name(&self, j: usize, name_of: &[I]) -> I {
        match &self.open {
            Some(open) => name_of[open.nth(j)],
            None => self
                .listed
                .borrow()
                .as_ref()
                .map_or(I::zeroed(), |l| l[j].name),
        }
    }

    /// Those whose name lies in range k of `bounds`. Local.
    fn of_range(
        &self,
        bounds: &RoundBounds<Refine<I>>,
        k: usize,
        name_of: &[I],
        depth_of: &[Depth],
    ) -> Vec<Suffix<I>> {
        let (lo, hi) = bounds.range(k);
        let inside = |g: I| lo.is_none_or(|l| g >= l.group) & hi.is_none_or(|h| g < h.group);
        let keep = |j: usize| (depth_of[j] != Depth::RESOLVED) & inside(name_of[j]);
        let base = self.base;
        let make = |j: usize| Suffix {
            name: name_of[j],
            pos: I::from_u64(base + j as u64),
            depth: I::from_u64(depth_of[j].get()),
        };
        match (&self.open, bounds.rounds()) {
            (Some(open), 1) => open.listed(keep, make),
            // Every position's range counted once, in the first range: a range's positions keep
            // their depths and names until the range itself is refined (an update stays inside
            // its group, so inside its range).
            (Some(open), rounds) => {
                if k == 0 {
                    *self.per_range.borrow_mut() = open.count_by_range(rounds, |j| {
                        (depth_of[j] != Depth::RESOLVED)
                            .then(|| bounds.round_of(&Refine::group_start(name_of[j])))
                    });
                }
                open.listed_counted(&self.per_range.borrow(), rounds, k, keep, make)
            }
            // One range: the list is dead once its records are made.
            (None, 1) => self.listed.borrow_mut().take().unwrap_or_default(),
            (None, _) => (self.listed.borrow().iter().flatten())
                .filter(|s| inside(s.name))
                .copied()
                .collect(),
        }
    }
}

/// The doubling records of suffixes `mine`: the name of i + d and its group's depth fetched
/// from the pe owning i + d (one answer per suffix: those with i + d past the end ask about
/// position 0 and ignore it). Made from the end in pieces, each freeing its suffixes and answers.
/// Collective.
fn records<I: Index>(
    comm: &Comm,
    layout: &Layout,
    mine: Vec<Suffix<I>>,
    name_of: &[I],
    depth_of: &[Depth],
) -> Vec<Refine<I>> {
    let n = layout.len() as u64;
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
    let mut records = Vec::with_capacity(mine.len());
    consume_from_end(mine, |lo, ss| {
        records.par_extend(ss.par_iter().zip(&answers[lo..]).map(|(s, a)| make(s, a)))
    });
    records
}
