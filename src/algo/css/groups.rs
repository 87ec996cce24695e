//! The skeleton of pCSS' three sorts — the first sort, the run step and each doubling round:
//! records sorted in key ranges one after the other ([`sort_in_rounds`]), each range's groups
//! named across ranges and pes ([`GroupNames`]; a group that a range ends is settled against the
//! next range's first record, [`OpenEnd`]), and what the records stand for handed on
//! ([`sort_and_name`]); for the two sorts that split groups, their updates written to the owners
//! of the positions ([`sort_name_update`]).
//!
//! Memory per pe beside the caller's: one range's records (two copies during its exchange), per
//! record a name (an index) and two flags while it is named (and, splitting groups, the name of
//! its old group's start while the new names are made), then its update (3 indices) and the
//! updates' exchange.

use std::cell::RefCell;

use rayon::prelude::*;

use super::records::{resolved, Depth, Suffix};
use crate::algo::consume_from_end;
use crate::comm::Comm;
use crate::dist::{
    collect_where, send_to_owners, sort_in_rounds, GroupNames, Groups, Layout, Ranges, Round,
    RoundBounds, SortKey,
};
use crate::index::Index;
use crate::Ctx;

/// What one of pCSS' sorts groups its records by, and the suffix each record stands for.
pub(super) trait Grouping<T, I: Index>: Sync {
    /// Whether the sort splits the groups of an earlier one (the run step, a doubling round):
    /// then a new group's name is its old group's name ([`Grouping::old`]) + the offset of the
    /// new group's first record in the old group. Otherwise (the first sort) it is the global
    /// index of its first record.
    const SPLITS: bool;

    /// Whether two neighbours of the sorted sequence share their (new) group.
    fn same(&self, a: &T, b: &T) -> bool;

    /// The name of the group a record comes from (a sort that splits groups).
    fn old(&self, _r: &T) -> u64 {
        0
    }

    /// The suffix a record stands for, named `name`.
    fn entry(&self, r: &T, name: I) -> Suffix<I>;

    /// `f(j, r)` of every record j of a round, in any order, freeing the records as they are used
    /// (made from the end in pieces, [`consume_from_end`]). Local.
    fn updates(&self, records: Vec<T>, f: impl Fn(usize, &T) -> Suffix<I> + Sync) -> Vec<Suffix<I>>
    where
        T: Sync,
    {
        let mut out = Vec::with_capacity(records.len());
        consume_from_end(records, |lo, xs| {
            out.par_extend(xs.par_iter().enumerate().map(|(j, x)| f(lo + j, x)))
        });
        out
    }
}

/// A sort in key ranges as [`sort_in_rounds`] takes it: its phase, ranges, this pe's number of
/// records, its j-th record (for the sample) and the records of range k of the bounds.
pub(super) struct Sort<R, G> {
    pub(super) phase: &'static str,
    pub(super) ranges: Ranges,
    pub(super) len: usize,
    pub(super) record: R,
    pub(super) generate: G,
}

/// One range of a sort, named: the range, each record's name and whether it is alone in its
/// group, and the suffix an earlier range held open that this range's first record joins (so it
/// is not alone after all).
pub(super) struct Named<T, I> {
    pub(super) round: Round<T>,
    pub(super) names: Vec<I>,
    pub(super) alone: Vec<bool>,
    pub(super) joined: Option<Suffix<I>>,
}

/// The step the three sorts share: records sorted in key ranges, each range named as it comes
/// ([`Grouping`]) and handed to `take` — both in the phase `name_phase`, if any — and then what
/// `take` made to `send`, after the range's records are freed. Collective.
pub(super) fn sort_and_name<T, I, G, U>(
    ctx: &Ctx,
    sort: Sort<impl Fn(usize) -> T, impl Fn(&RoundBounds<T>, usize) -> Vec<T>>,
    grouping: &G,
    name_phase: Option<&str>,
    mut take: impl FnMut(Named<T, I>) -> U,
    mut send: impl FnMut(U),
) where
    T: SortKey,
    I: Index,
    G: Grouping<T, I>,
{
    let (mut new, mut old) = (GroupNames::new(0), GroupNames::new(0));
    let mut open = OpenEnd::default();
    let Sort {
        phase,
        ranges,
        len,
        record,
        generate,
    } = sort;
    sort_in_rounds(ctx, phase, ranges, len, record, generate, |round| {
        let named = || {
            let start = G::SPLITS.then(|| {
                old.round::<I, T>(&ctx.comm, &round, |a, b| grouping.old(a) == grouping.old(b))
            });
            let g = new.round::<I, T>(&ctx.comm, &round, |a, b| grouping.same(a, b));
            let Groups { mut names, .. } = g;
            if let Some(start) = start {
                within_old(&mut names, &start.names, &round.sorted, grouping);
            }
            let sorted = &round.sorted;
            let entry = |j: usize| grouping.entry(&sorted[j], names[j]);
            let joined = open.settle(&ctx.comm, &round, g.first_starts, &g.alone, entry);
            take(Named {
                round,
                names,
                alone: g.alone,
                joined,
            })
        };
        let out = match name_phase {
            Some(p) => ctx.phase(p, named),
            None => named(),
        };
        send(out);
    });
}

/// Splitting groups: the new name of record j is its old group's name + the offset of its new
/// group in the old one (`names[j]` − `start[j]`, the global indices of their first records).
/// Local; one pass.
fn within_old<T: Sync, I: Index>(
    names: &mut [I],
    start: &[I],
    sorted: &[T],
    grouping: &impl Grouping<T, I>,
) {
    let name = |(nm, (s, r)): (&mut I, (&I, &T))| {
        *nm = I::from_u64(grouping.old(r) + nm.to_u64() - s.to_u64());
    };
    if !crate::util::parallel() {
        names
            .iter_mut()
            .zip(start.iter().zip(sorted))
            .for_each(name);
    } else {
        (names.par_iter_mut().zip(start.par_iter().zip(sorted))).for_each(name);
    }
}

/// [`sort_and_name`] for a sort that splits groups (the run step, a doubling round): every
/// record's update — its suffix with its new name, and depth [`resolved`] where it is alone —
/// is written to the owner of its position (`names`: this pe's names and depths, which
/// `sort.generate` may read) before the next range is sorted. Returns how many of this pe's
/// records are still tied and, with `list`, those suffixes. Collective.
pub(super) fn sort_name_update<T, I, G>(
    ctx: &Ctx,
    layout: &Layout,
    sort: Sort<impl Fn(usize) -> T, impl Fn(&RoundBounds<T>, usize) -> Vec<T>>,
    grouping: &G,
    names: &RefCell<(&mut [I], &mut [Depth])>,
    list: bool,
) -> (u64, Vec<Suffix<I>>)
where
    T: SortKey,
    I: Index,
    G: Grouping<T, I>,
{
    let mut still: Vec<Suffix<I>> = Vec::new();
    let mut count = 0u64;
    let take = |named: Named<T, I>| {
        let Named {
            mut round,
            names,
            alone,
            joined,
        } = named;
        let records = std::mem::take(&mut round.sorted);
        let mut updates = grouping.updates(records, |j, r| {
            let u = grouping.entry(r, names[j]);
            let depth = if alone[j] { resolved() } else { u.depth };
            Suffix { depth, ..u }
        });
        drop((round, names));
        count += alone.iter().filter(|&&a| !a).count() as u64;
        if list {
            // By their depth, not by `alone`: the updates need not be in the records' order.
            let kept = collect_where(&updates, |_, u| u.depth != resolved(), |_, u| *u);
            if still.is_empty() {
                still = kept;
            } else {
                still.reserve_exact(kept.len());
                still.extend_from_slice(&kept);
            }
        }
        drop(alone);
        // A suffix an earlier range held open and this one's first record joins: its update
        // (sent as resolved) is sent again with its depth.
        if let Some(s) = joined {
            count += 1;
            if list {
                still.push(s);
            }
            updates.push(s);
        }
        updates
    };
    let send = |updates: Vec<Suffix<I>>| {
        ctx.phase("update names", || {
            let mut names = names.borrow_mut();
            let (name_of, depth_of) = &mut *names;
            apply_updates(&ctx.comm, layout, updates, name_of, depth_of)
        })
    };
    sort_and_name(ctx, sort, grouping, None, take, send);
    (count, still)
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
    /// After grouping a round (`first_starts`, `alone`: [`Groups`]): returns the suffix held open
    /// by an earlier round when this round's first record continues its group (so it is not
    /// alone after all), and holds this round's last record open when it may be alone only for
    /// want of a successor (`entry(j)` makes the suffix of record j). Collective (one reduction;
    /// none in a sort of one round).
    fn settle<T>(
        &mut self,
        comm: &Comm,
        round: &Round<T>,
        first_starts: Option<bool>,
        alone: &[bool],
        entry: impl FnOnce(usize) -> Suffix<I>,
    ) -> Option<Suffix<I>> {
        if round.rounds == 1 {
            return None;
        }
        // Does the round's first record continue a group (1) or begin one (2)? 0: empty round.
        let first = if round.holds_first() {
            1 + u64::from(first_starts == Some(true))
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
        if round.open_end() && alone[last] {
            self.0 = Some(entry(last));
        }
        joined
    }
}
