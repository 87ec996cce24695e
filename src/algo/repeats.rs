//! Duplicate spans (`psa repeats`): the maximal spans `[b, e)` of the text covered by substrings
//! of at least K tokens that occur at least twice, from the distributed suffix and LCP arrays.
//!
//! # What counts
//!
//! A substring counts when it has at least K tokens, occurs at least twice in T (occurrences may
//! overlap), and holds no separator token (`--doc-sep`). With [`Sources::Across`] only the
//! occurrences in the last input are reported, and only where the substring also occurs inside
//! one of the other inputs (an occurrence that runs over the end of its input does not count).
//! The answer is the union of the counted occurrences, with overlapping and touching ones merged
//! (`[0, 5)` and `[5, 9)` give `[0, 9)`), as deduplicate-text-datasets' `collect` merges them.
//!
//! # Method
//!
//! For suffix x let R(x) be the longest prefix of x that occurs again (in a source suffix, and
//! within that source's input, with `--across`). In SA order the longest common prefix of the
//! suffixes at i and j > i is min LCP[i+1..=j], so R(SA[i]) = max(F[i], D[i+1]) where F[i] is the
//! best over the sources before i and D[i+1] the best over those after it. Both are
//! running scans of clamps `v ↦ max(min(v, hi), lo)` ([`Clamp`]), which compose, so the scan
//! runs over the pes as one all-gather of a clamp per pe (p pairs, nothing of size n):
//!
//! 1. `repeats scan`: each pe's SA entries scanned forward and backward (the pes before and
//!    after it folded in first); every target suffix x with R(x) ≥ K gives a record (x, R(x)).
//! 2. `repeats place`: the records go to the owner of position x in the text's layout.
//! 3. `repeats spans`: each owner cuts R(x) at the next separator at or after x (a separator
//!    inside a shared prefix lies at the same offset in both suffixes, so one cut serves both),
//!    keeps [x, x + R) when still ≥ K tokens, and merges its intervals in text order; an
//!    exclusive maximum scan of the intervals' ends and an all-gather of what each pe adds to
//!    the span entering it from the left merge the spans that cross pe boundaries. Each span
//!    ends up on the pe that holds its start.
//!
//! The union of [x, x + R(x)) over the x with R(x) ≥ K is the union of [y, y + K) over the y
//! whose K tokens occur twice: every y in [x, x + R(x) − K] is such a start, and each such y has
//! R(y) ≥ K.
//!
//! # Memory
//!
//! Per pe, beside the text: the SA and LCP parts (8 bytes an entry each) and a record of two
//! index words (8 bytes below 2^32 characters, 10 to 2^40, 16 beyond) per target entry with
//! R ≥ K, counted before it is written so that the vector is exactly that long; the scans hold
//! one word per entry of the pieces in progress only. While the records move to their owners,
//! the records, their send buffer and a bucket word each; the cut and the merges work in place.
//! `plan::SPANS` charges the most of these, every entry a record (aⁿ).

use std::ops::Range;

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use crate::comm::Comm;
use crate::dist::{exchange, Layout};
use crate::index::{Index, IndexWidth, U40};
use crate::token::Token;
use crate::Ctx;

/// What `psa repeats` counts: the shortest repeat, the separator, which suffixes are sources
/// and which report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// K: the fewest tokens a counted substring has (at least 1).
    pub min_len: u64,
    /// A token that no counted substring contains (`--doc-sep`).
    pub doc_sep: Option<u64>,
    /// Where repeats are looked for and reported.
    pub sources: Sources,
}

/// Which occurrences count and which are reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sources {
    /// Every occurrence is a source and is reported: repeats within the whole text (the inputs
    /// concatenated, as the build sees them).
    All,
    /// `--across`: the inputs' ends in T (tokens, ascending; the last is n). Occurrences in the
    /// last input are reported where the substring also occurs within one of the others.
    Across { ends: Vec<u64> },
}

impl Sources {
    /// How far a source occurrence at `pos` may reach (0: `pos` is no source), in a text of
    /// `n` tokens.
    fn reach(&self, pos: u64, n: u64) -> u64 {
        match self {
            Sources::All => n - pos,
            Sources::Across { ends } => match pos < self.first_target() {
                true => ends[ends.partition_point(|&e| e <= pos)] - pos,
                false => 0,
            },
        }
    }

    /// The first position that is reported.
    pub fn first_target(&self) -> u64 {
        match self {
            Sources::All => 0,
            Sources::Across { ends } if ends.len() >= 2 => ends[ends.len() - 2],
            Sources::Across { ends } => ends.last().copied().unwrap_or(0),
        }
    }
}

/// A clamp `v ↦ max(min(v, hi), lo)`: one step of the scans, or a run of steps composed.
#[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq, Eq)]
#[repr(C)]
struct Clamp {
    hi: u64,
    lo: u64,
}

impl Clamp {
    const IDENTITY: Clamp = Clamp {
        hi: u64::MAX,
        lo: 0,
    };

    fn apply(self, v: u64) -> u64 {
        v.min(self.hi).max(self.lo)
    }

    /// `self`, then `next`.
    fn then(self, next: Clamp) -> Clamp {
        Clamp {
            hi: self.hi.min(next.hi),
            lo: self.lo.min(next.hi).max(next.lo),
        }
    }
}

/// This pe's duplicate spans: every maximal span whose start this pe holds, in text order, as
/// global token positions `[b, e)`. Collective.
///
/// Entry: `text` is this pe's slice of T under `layout`, `sa` and `lcp` this pe's parts of its
/// suffix and LCP arrays under the same layout (consumed). Exit: the spans, each on the pe that
/// holds its start; the pes' lists in pe order are the whole answer.
///
/// The records (x, R(x)) take the narrowest index width that holds n
/// ([`crate::index::IndexWidth::choose`], or the forced one): 8 bytes a record below 2^32.
#[must_use]
pub fn spans<T: Token>(
    ctx: &Ctx,
    text: &[T],
    layout: &Layout,
    sa: Vec<u64>,
    lcp: Vec<u64>,
    rules: &Rules,
) -> Vec<[u64; 2]> {
    let n = layout.len() as u64;
    match IndexWidth::choose(n, ctx.config.forced_index_width()) {
        IndexWidth::W32 => spans_with::<T, u32>(ctx, text, layout, sa, lcp, rules),
        IndexWidth::W40 => spans_with::<T, U40>(ctx, text, layout, sa, lcp, rules),
        IndexWidth::W64 => spans_with::<T, u64>(ctx, text, layout, sa, lcp, rules),
    }
}

/// [`spans`] with records of index type `I`: the three phases.
fn spans_with<T: Token, I: Index>(
    ctx: &Ctx,
    text: &[T],
    layout: &Layout,
    sa: Vec<u64>,
    lcp: Vec<u64>,
    rules: &Rules,
) -> Vec<[u64; 2]> {
    let comm = &ctx.comm;
    let records = ctx.phase("repeats scan", || {
        repeat_records::<I>(comm, &sa, &lcp, layout.len() as u64, rules)
    });
    drop((sa, lcp));
    let mut records = ctx.phase("repeats place", || {
        exchange(comm, records, |r| layout.owner(r[0].to_u64() as usize))
    });
    ctx.phase("repeats spans", || {
        records.par_sort_unstable_by_key(|r| r[0]);
        let first = layout.start(comm.rank()) as u64;
        cut_at_separators(comm, text, first, &mut records, rules);
        merge_local(&mut records);
        let own = records.iter().map(|r| r.map(I::to_u64)).collect();
        drop(records);
        merge_across_pes(comm, own)
    })
}

/// The most entries of the SA that one task of step 1 scans: the tasks run in parallel, each
/// holding its piece's F values (8 bytes an entry) while it runs.
const SCAN_PIECE: usize = 1 << 16;

/// The fewest pieces a pe's entries are cut into where it has that many: enough for the threads
/// to share, and on small texts pieces of a few entries, so tests cross piece boundaries.
const SCAN_PIECES: usize = 64;

/// The steps of the scans over this pe's SA entries: entry i's forward clamp (F: the sources
/// before it) and backward clamp (D: the sources after it).
struct Steps<'a> {
    sa: &'a [u64],
    lcp: &'a [u64],
    n: u64,
    sources: &'a Sources,
}

impl Steps<'_> {
    fn reach(&self, i: usize) -> u64 {
        self.sources.reach(self.sa[i], self.n)
    }

    fn forward(&self, i: usize) -> Clamp {
        Clamp {
            hi: self.lcp[i],
            lo: self.reach(i),
        }
    }

    fn backward(&self, i: usize) -> Clamp {
        Clamp {
            hi: self.lcp[i],
            lo: self.reach(i).min(self.lcp[i]),
        }
    }

    /// The piece's steps composed: forward in SA order, backward in reverse.
    fn composed(&self, piece: Range<usize>) -> [Clamp; 2] {
        let forward = piece
            .clone()
            .fold(Clamp::IDENTITY, |c, i| c.then(self.forward(i)));
        let backward = (piece.rev()).fold(Clamp::IDENTITY, |c, i| c.then(self.backward(i)));
        [forward, backward]
    }

    /// Hands (x, R(x)) to `emit` for every target suffix x of the piece with R(x) ≥ K, given
    /// F entering the piece from the left and D entering it from the right.
    fn records(
        &self,
        piece: Range<usize>,
        [f_in, d_in]: [u64; 2],
        rules: &Rules,
        emit: &mut impl FnMut([u64; 2]),
    ) {
        let (k, first_target) = (rules.min_len, rules.sources.first_target());
        let mut carry = f_in;
        // F[i]: the best over the sources before i.
        let before: Vec<u64> = (piece.clone())
            .map(|i| {
                let f = carry.min(self.lcp[i]);
                carry = self.forward(i).apply(carry);
                f
            })
            .collect();
        let mut after = d_in;
        for i in piece.clone().rev() {
            let r = before[i - piece.start].max(after);
            if r >= k && self.sa[i] >= first_target {
                emit([self.sa[i], r]);
            }
            after = self.backward(i).apply(after);
        }
    }
}

/// Step 1: (x, R(x)) for every target suffix x of this pe's SA entries with R(x) ≥ K. Collective.
///
/// The entries are cut into pieces of at most [`SCAN_PIECE`], [`SCAN_PIECES`] at least. Each
/// piece's steps are composed (in parallel), the pes' compositions all-gathered, and F and D
/// entering every piece follow from them; the pieces are then scanned twice in parallel, once
/// to count their records and once to write them into a vector of exactly that size.
fn repeat_records<I: Index>(
    comm: &Comm,
    sa: &[u64],
    lcp: &[u64],
    n: u64,
    rules: &Rules,
) -> Vec<[I; 2]> {
    let steps = Steps {
        sa,
        lcp,
        n,
        sources: &rules.sources,
    };
    let piece = sa.len().div_ceil(SCAN_PIECES).clamp(1, SCAN_PIECE);
    let pieces: Vec<Range<usize>> = (0..sa.len())
        .step_by(piece)
        .map(|b| b..(b + piece).min(sa.len()))
        .collect();
    let composed: Vec<[Clamp; 2]> = pieces
        .par_iter()
        .map(|r| steps.composed(r.clone()))
        .collect();
    // This pe's steps composed, forward and backward; the pes before and after it folded in.
    let forward = (composed.iter()).fold(Clamp::IDENTITY, |f, c| f.then(c[0]));
    let backward = (composed.iter().rev()).fold(Clamp::IDENTITY, |b, c| b.then(c[1]));
    let all = comm.all_gather([forward, backward]);
    let me = comm.rank();
    let f_in = (all[..me].iter())
        .fold(Clamp::IDENTITY, |a, c| a.then(c[0]))
        .apply(0);
    let d_in = (all[me + 1..].iter().rev())
        .fold(Clamp::IDENTITY, |a, c| a.then(c[1]))
        .apply(0);
    // F entering each piece from the left, D from the right.
    let mut entering = vec![[0u64; 2]; pieces.len()];
    let mut f = f_in;
    for (e, c) in entering.iter_mut().zip(&composed) {
        e[0] = f;
        f = c[0].apply(f);
    }
    let mut d = d_in;
    for (e, c) in entering.iter_mut().zip(&composed).rev() {
        e[1] = d;
        d = c[1].apply(d);
    }
    let counts: Vec<usize> = (pieces.par_iter().zip(&entering))
        .map(|(r, &e)| {
            let mut count = 0;
            steps.records(r.clone(), e, rules, &mut |_| count += 1);
            count
        })
        .collect();
    let mut records = vec![[I::from_u64(0); 2]; counts.iter().sum()];
    let mut parts = Vec::with_capacity(pieces.len());
    let mut rest = records.as_mut_slice();
    for &c in &counts {
        let (part, tail) = rest.split_at_mut(c);
        parts.push(part);
        rest = tail;
    }
    (pieces.into_par_iter().zip(entering).zip(parts)).for_each(|((r, e), part)| {
        let mut at = 0;
        steps.records(r, e, rules, &mut |rec| {
            part[at] = rec.map(I::from_u64);
            at += 1;
        });
    });
    records
}

/// Step 3's first half: each record's R cut at the next separator at or after its position;
/// the intervals [x, x + R) still of K tokens, in text order. `records` are sorted by position,
/// all within this pe's slice, which starts at `first`. Collective.
fn cut_at_separators<T: Token, I: Index>(
    comm: &Comm,
    text: &[T],
    first: u64,
    records: &mut Vec<[I; 2]>,
    rules: &Rules,
) {
    let k = rules.min_len;
    let Some(sep) = rules.doc_sep else {
        for rec in records.iter_mut() {
            rec[1] = I::from_u64(rec[0].to_u64() + rec[1].to_u64());
        }
        return;
    };
    let is_sep = |t: &T| (*t).into() == sep;
    // The first separator after this slice (u64::MAX: none).
    let own_first = text
        .iter()
        .position(is_sep)
        .map_or(u64::MAX, |j| first + j as u64);
    let firsts = comm.all_gather(own_first);
    let after = firsts[comm.rank() + 1..]
        .iter()
        .copied()
        .min()
        .unwrap_or(u64::MAX);
    // The next separator at or after the last record's position: each search starts past the
    // last one found, so the slice is read once.
    let mut next: Option<u64> = None;
    let mut kept = 0;
    for i in 0..records.len() {
        let [x, r] = records[i].map(I::to_u64);
        let sep_at = match next {
            Some(s) if s >= x => s,
            _ => {
                let from = (x - first) as usize;
                let s = (text[from..].iter().position(is_sep)).map_or(after, |j| x + j as u64);
                *next.insert(s)
            }
        };
        let len = r.min(sep_at.saturating_sub(x));
        if len >= k {
            records[kept] = [x, x + len].map(I::from_u64);
            kept += 1;
        }
    }
    records.truncate(kept);
}

/// This pe's intervals (sorted by start) merged where they overlap or touch, in place.
fn merge_local<I: Index>(intervals: &mut Vec<[I; 2]>) {
    let mut kept = 0;
    for i in 0..intervals.len() {
        let [b, e] = intervals[i];
        if kept > 0 && b <= intervals[kept - 1][1] {
            intervals[kept - 1][1] = intervals[kept - 1][1].max(e);
        } else {
            intervals[kept] = [b, e];
            kept += 1;
        }
    }
    intervals.truncate(kept);
}

/// Step 3's second half: every pe's merged spans (sorted, with starts in its slice, pes in text
/// order) merged across pe boundaries: a span that starts at or before the end of the spans of
/// the pes before it joins the last of them, and the pe that holds that span's start takes the
/// joined end. Collective; an exclusive maximum scan and an all-gather of two words per pe.
fn merge_across_pes(comm: &Comm, mut own: Vec<[u64; 2]>) -> Vec<[u64; 2]> {
    // Every end is ≥ K ≥ 1, so 0 means "no span before".
    let reach_in = comm.exscan_max(own.iter().map(|s| s[1]).max().unwrap_or(0));
    // The spans that join the one entering from the left, and how far they carry it.
    let joined = own
        .iter()
        .take_while(|s| reach_in > 0 && s[0] <= reach_in)
        .count();
    let carried = own[..joined].iter().map(|s| s[1]).max().unwrap_or(0);
    own.drain(..joined);
    let all = comm.all_gather([carried, u64::from(!own.is_empty())]);
    if let Some(last) = own.last_mut() {
        for &[carried, has_own] in &all[comm.rank() + 1..] {
            last[1] = last[1].max(carried);
            if has_own == 1 {
                break;
            }
        }
    }
    own
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamps_compose_as_applied_in_turn() {
        let steps = [(5, 0), (3, 2), (9, 7), (1, 0), (4, 4), (0, 0), (6, 1)];
        let steps: Vec<Clamp> = steps.iter().map(|&(hi, lo)| Clamp { hi, lo }).collect();
        for a in 0..steps.len() {
            for b in a..=steps.len() {
                let run = &steps[a..b];
                let composed = run.iter().fold(Clamp::IDENTITY, |c, &s| c.then(s));
                for v in 0..12 {
                    let stepped = run.iter().fold(v, |x, s| s.apply(x));
                    assert_eq!(composed.apply(v), stepped, "steps {a}..{b} from {v}");
                }
            }
        }
    }

    #[test]
    fn local_merge_joins_overlapping_and_touching_intervals() {
        let mut got: Vec<[u32; 2]> = vec![[0, 3], [2, 5], [5, 7], [8, 9], [8, 12], [9, 10]];
        merge_local(&mut got);
        assert_eq!(got, vec![[0, 7], [8, 12]]);
        let mut none: Vec<[u64; 2]> = vec![];
        merge_local(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn sources_reach_the_end_of_their_input() {
        let across = Sources::Across {
            ends: vec![4, 10, 15],
        };
        assert_eq!(across.reach(0, 15), 4);
        assert_eq!(across.reach(3, 15), 1);
        assert_eq!(across.reach(4, 15), 6);
        assert_eq!(across.reach(9, 15), 1);
        assert_eq!(across.reach(10, 15), 0);
        assert_eq!(across.first_target(), 10);
        assert_eq!(Sources::All.reach(3, 15), 12);
        assert_eq!(Sources::All.first_target(), 0);
    }
}
