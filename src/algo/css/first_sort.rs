//! Phases 3–4, the first sort and its names: the keys sorted in `sort_rounds` key ranges, each
//! range named (a suffix's name is the global index of the first suffix with the same key, so a
//! suffix alone in its group has its final name) and its names sent to the owners of the
//! positions, then freed; the suffixes it leaves tied are kept for the run step and doubling
//! ([`Tied`]).
//!
//! Memory per pe: one range's records (16 or 24 B each, up to three copies during the exchange)
//! and per record a name and two flags while it is named; with one range every suffix's
//! (name, position) pair (two indices) and the tied suffixes as records (3 indices each); with
//! several the names in text order (an index per position) and two bits per position (tied
//! outside or inside a run).

use rayon::prelude::*;

use super::alphabet::Codes;
use super::groups::{sort_and_name, Grouping, Named, Sort};
use super::keys::{FirstKey, HiKey, KeyGen, RangeKeys};
use super::records::Suffix;
use crate::algo::consume_from_end;
use crate::comm::Comm;
use crate::dist::{collect_kept, send_to_owners, Layout, Ranges, Slots};
use crate::index::Index;
use crate::Ctx;

/// What phase 4 leaves: the names (every suffix's (name, position) pair after one round; the
/// names in text order after several) and the suffixes it left tied.
pub(super) struct FirstNames<I> {
    pub(super) names: Names<I>,
    pub(super) tied: Tied<I>,
}

/// The suffixes the first sort left tied: on this pe, as records where the sort left them
/// (`list`: depth 0 inside runs of one character, for the run step, k outside); with several
/// sort ranges as marks at this pe's positions instead ([`Marks`]: a bit per position, set where
/// the suffix there shares its key, instead of a record of 3 indices; `marks` outside runs,
/// `in_runs` inside). Empty when the suffixes are not kept. `total` and `deep` count them on all
/// pes (`deep`: those outside runs).
pub(super) struct Tied<I> {
    pub(super) list: Vec<Suffix<I>>,
    pub(super) marks: Option<Marks>,
    pub(super) in_runs: Option<Marks>,
    pub(super) total: u64,
    pub(super) deep: u64,
}

/// A bit per position of this pe, set by [`send_to_owners`] (the first sort's marks: the
/// suffixes that share their key, outside or inside runs). n/p/8 bytes.
pub(super) struct Marks {
    words: Vec<u64>,
    pub(super) len: usize,
}

impl Marks {
    /// `len` clear bits.
    fn new(len: usize) -> Self {
        Marks {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    pub(super) fn get(&self, j: usize) -> bool {
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
pub(super) enum Names<I> {
    /// (name, position) pairs, in no particular order (the sort ran in one round).
    Sorted(Vec<[I; 2]>),
    /// The names of this pe's positions in text order (sent round by round).
    Text(Vec<I>),
}

impl<I: Index> Names<I> {
    /// The names of this pe's positions in text order: sorted pairs written there ("names to
    /// text"). Collective.
    pub(super) fn into_text(self, ctx: &Ctx, layout: &Layout) -> Vec<I> {
        match self {
            Names::Sorted(pairs) => ctx.phase("names to text", || {
                let mut name_of = vec![I::zeroed(); layout.local_len(ctx.comm.rank())];
                names_to_text(&ctx.comm, layout, pairs, &mut name_of);
                name_of
            }),
            Names::Text(name_of) => name_of,
        }
    }
}

/// The first sort's groups: records of equal key and clamped length ([`FirstKey::same_group`]);
/// a tied suffix's depth is k, or 0 inside a run of one character (for the run step).
struct FirstGroups<'c, I> {
    codes: &'c Codes,
    k: I,
}

impl<R: FirstKey, I: Index> Grouping<R, I> for FirstGroups<'_, I> {
    const SPLITS: bool = false;

    #[inline]
    fn same(&self, a: &R, b: &R) -> bool {
        a.same_group(*b)
    }

    #[inline]
    fn entry(&self, r: &R, name: I) -> Suffix<I> {
        let in_run = self.codes.is_run(r.key());
        Suffix {
            name,
            pos: I::from_u64(r.pos()),
            depth: if in_run { I::zeroed() } else { self.k },
        }
    }
}

/// Phases 3–4, one key range at a time ([`sort_and_name`]): sort the records, then name their
/// groups (runs of equal key and clamped length): a suffix's name is the global index of its
/// group's first record. With one round, every suffix becomes a (name, position) pair of the
/// run's index width (made in pieces from the end, each freeing its records); with several, each
/// round's names go to the owners of the positions at once ("names to text"). With
/// `keep_unresolved` the suffixes not alone in their group are kept ([`Tied`]) with the depth
/// their group shares (k), or 0 for those inside a run of one character (for the run step): as
/// records with one round; with several as marks at their positions' owners. `sort_rounds`
/// ranges of 16-byte records: a range holds as many bytes of records as one of those would (so
/// 24-byte records take 1.5 times the ranges), where the first sort's peak is what the memory
/// plan's model measured. Collective.
pub(super) fn first_sort<I: Index, R: FirstKey, C: crate::token::Token>(
    ctx: &Ctx,
    layout: &Layout,
    keys: &KeyGen<R, C>,
    held: Option<Vec<R>>,
    sort_rounds: usize,
    keep_unresolved: bool,
) -> FirstNames<I> {
    let comm = &ctx.comm;
    let rounds = match sort_rounds {
        1 => 1,
        r => (r * std::mem::size_of::<R>()).div_ceil(std::mem::size_of::<HiKey>()),
    };
    let grouping = FirstGroups {
        codes: keys.codes,
        k: I::from_u64(keys.codes.k as u64),
    };
    let source = RangeKeys::new(keys, held);
    let mut ties = Ties::new(rounds > 1 && keep_unresolved, keep_unresolved);
    let marked = ties.marked;
    let mut marks = Marked::new(if marked { keys.len() } else { 0 });
    let mut sorted_pairs: Option<Vec<[I; 2]>> = None;
    let mut name_of: Vec<I> = vec![I::zeroed(); if rounds > 1 { keys.len() } else { 0 }];
    let sort = Sort {
        phase: "sort keys",
        ranges: Ranges::new(rounds),
        len: keys.len(),
        record: |j| keys.at(j),
        generate: |bounds: &_, k| source.of_range(ctx, bounds, k),
    };
    let take = |named: Named<R, I>| {
        let at = ties.of_range(
            &named.round.sorted,
            &named.names,
            &named.alone,
            named.joined,
            &grouping,
        );
        drop(named.alone);
        // Pairs in any order: made from the end in pieces, each freeing its records.
        (pairs_from_end(named.round.sorted, named.names), at)
    };
    let send = |(pairs, at): (Vec<[I; 2]>, [Vec<I>; 2])| {
        if rounds == 1 {
            sorted_pairs = Some(pairs);
            return;
        }
        ctx.phase("names to text", || {
            names_to_text(comm, layout, pairs, &mut name_of);
            if marked {
                marks.set(comm, layout, at);
            }
        });
    };
    sort_and_name(ctx, sort, &grouping, Some("names"), take, send);
    // A group start that ends the last non-empty round is alone: what `open` holds is dropped.
    FirstNames {
        names: match sorted_pairs {
            Some(pairs) => Names::Sorted(pairs),
            None => Names::Text(name_of),
        },
        tied: ties.done(comm, marks),
    }
}

/// The (name, position) pairs of a range's sorted records, in any order: made from the end in
/// pieces, each freeing its records. Local.
fn pairs_from_end<I: Index, R: FirstKey>(sorted: Vec<R>, names: Vec<I>) -> Vec<[I; 2]> {
    let mut pairs: Vec<[I; 2]> = Vec::with_capacity(names.len());
    consume_from_end(sorted, |lo, rs| {
        pairs.par_extend(
            rs.par_iter()
                .zip(&names[lo..])
                .map(|(r, &nm)| [nm, I::from_u64(r.pos())]),
        )
    });
    pairs
}

/// The first sort's tied suffixes as its ranges find them: counted, and kept as records
/// (`keep`, one range) or as positions to mark (`marked`, several).
struct Ties<I> {
    marked: bool,
    keep: bool,
    list: Vec<Suffix<I>>,
    total: u64,
    deep: u64,
}

impl<I: Index> Ties<I> {
    fn new(marked: bool, keep: bool) -> Self {
        Ties {
            marked,
            keep: keep && !marked,
            list: Vec::new(),
            total: 0,
            deep: 0,
        }
    }

    /// The ties of one range (records `sorted` with their `names` and `alone` flags), after the
    /// suffix an earlier range held open that this one `joined`. Returns, when marked, the
    /// positions of the tied suffixes outside runs and inside runs (to be marked). Local.
    fn of_range<R: FirstKey>(
        &mut self,
        sorted: &[R],
        names: &[I],
        alone: &[bool],
        joined: Option<Suffix<I>>,
        grouping: &FirstGroups<I>,
    ) -> [Vec<I>; 2] {
        let (mut tied_at, mut run_at): (Vec<I>, Vec<I>) = (Vec::new(), Vec::new());
        let deep = |s: &Suffix<I>| s.depth != I::zeroed();
        if let Some(s) = joined {
            self.total += 1;
            self.deep += u64::from(deep(&s));
            if self.marked && deep(&s) {
                tied_at.push(s.pos);
            } else if self.marked {
                run_at.push(s.pos);
            } else if self.keep {
                self.list.push(s);
            }
        }
        if self.marked {
            let [deep, inside] = tied_positions(sorted, alone, grouping.codes);
            self.total += (deep.len() + inside.len()) as u64;
            self.deep += deep.len() as u64;
            tied_at.extend_from_slice(&deep);
            run_at.extend_from_slice(&inside);
        } else if self.keep {
            let kept = collect_kept(sorted, alone, |j, r| grouping.entry(r, names[j]));
            self.total += kept.len() as u64;
            self.deep += kept.iter().filter(|s| deep(s)).count() as u64;
            if self.list.is_empty() {
                self.list = kept;
            } else {
                self.list.reserve_exact(kept.len());
                self.list.extend_from_slice(&kept);
            }
        } else {
            self.total += alone.iter().filter(|&&a| !a).count() as u64;
        }
        [tied_at, run_at]
    }

    /// The ties of all ranges, counted over all pes. Collective.
    fn done(self, comm: &Comm, marks: Marked) -> Tied<I> {
        Tied {
            list: self.list,
            marks: self.marked.then_some(marks.outside),
            in_runs: self.marked.then_some(marks.inside),
            total: comm.all_reduce_sum(self.total),
            deep: comm.all_reduce_sum(self.deep),
        }
    }
}

/// The positions of the tied records of a range (not `alone`) outside runs of one character and
/// inside. Local.
fn tied_positions<I: Index, R: FirstKey>(
    sorted: &[R],
    alone: &[bool],
    codes: &Codes,
) -> [Vec<I>; 2] {
    let run: Vec<bool> = sorted.par_iter().map(|r| codes.is_run(r.key())).collect();
    let skip = |deep: bool| -> Vec<bool> {
        alone
            .par_iter()
            .zip(&run[..])
            .map(|(&a, &r)| a || r == deep)
            .collect()
    };
    let pos = |_, r: &R| I::from_u64(r.pos());
    [
        collect_kept(sorted, &skip(true), pos),
        collect_kept(sorted, &skip(false), pos),
    ]
}

/// The first sort's marks with several ranges: a bit per position outside runs, one inside.
struct Marked {
    outside: Marks,
    inside: Marks,
}

impl Marked {
    fn new(len: usize) -> Self {
        Marked {
            outside: Marks::new(len),
            inside: Marks::new(len),
        }
    }

    /// Marks the positions `at` (outside runs, inside) at their owners. Collective.
    fn set<I: Index>(&mut self, comm: &Comm, layout: &Layout, at: [Vec<I>; 2]) {
        let [outside, inside] = at;
        let at = |&i: &I| (i.to_u64() as usize, ());
        send_to_owners(comm, layout, outside, &mut self.outside, at);
        send_to_owners(comm, layout, inside, &mut self.inside, at);
    }
}

/// Writes the names of (name, position) pairs into `name_of` (this pe's positions, in text
/// order) at the owners of their positions. Collective.
fn names_to_text<I: Index>(comm: &Comm, layout: &Layout, pairs: Vec<[I; 2]>, name_of: &mut [I]) {
    send_to_owners(comm, layout, pairs, name_of, |x| {
        (x[1].to_u64() as usize, x[0])
    });
}
