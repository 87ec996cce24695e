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
//! R(y) ≥ K. Memory per pe beside the text, the SA and LCP parts: one word per SA entry for
//! the forward scan and a record (16 bytes) per target entry with R ≥ K.

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use crate::comm::Comm;
use crate::dist::{exchange, Layout};
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
#[must_use]
pub fn spans<T: Token>(
    ctx: &Ctx,
    text: &[T],
    layout: &Layout,
    sa: Vec<u64>,
    lcp: Vec<u64>,
    rules: &Rules,
) -> Vec<[u64; 2]> {
    let comm = &ctx.comm;
    let records = ctx.phase("repeats scan", || {
        repeat_records(comm, &sa, &lcp, layout.len() as u64, rules)
    });
    drop((sa, lcp));
    let mut records = ctx.phase("repeats place", || {
        exchange(comm, records, |r| layout.owner(r[0] as usize))
    });
    ctx.phase("repeats spans", || {
        records.par_sort_unstable_by_key(|r| r[0]);
        let first = layout.start(comm.rank()) as u64;
        let intervals = cut_at_separators(comm, text, first, &records, rules);
        drop(records);
        merge_across_pes(comm, merge_local(&intervals))
    })
}

/// Step 1: (x, R(x)) for every target suffix x of this pe's SA entries with R(x) ≥ K. Collective.
fn repeat_records(comm: &Comm, sa: &[u64], lcp: &[u64], n: u64, rules: &Rules) -> Vec<[u64; 2]> {
    let src = &rules.sources;
    let reach = |i: usize| src.reach(sa[i], n);
    let forward_step = |i: usize| Clamp {
        hi: lcp[i],
        lo: reach(i),
    };
    let backward_step = |i: usize| Clamp {
        hi: lcp[i],
        lo: reach(i).min(lcp[i]),
    };
    // Each pe's steps composed, forward and backward; the pes before and after this one folded.
    let forward = (0..sa.len()).fold(Clamp::IDENTITY, |c, i| c.then(forward_step(i)));
    let backward = (0..sa.len())
        .rev()
        .fold(Clamp::IDENTITY, |c, i| c.then(backward_step(i)));
    let all = comm.all_gather([forward, backward]);
    let me = comm.rank();
    let fold = |acc: Clamp, c: &[Clamp; 2], k: usize| acc.then(c[k]);
    let mut carry = (all[..me].iter())
        .fold(Clamp::IDENTITY, |a, c| fold(a, c, 0))
        .apply(0);
    // F[i]: the best over the sources before i.
    let before: Vec<u64> = (0..sa.len())
        .map(|i| {
            let f = carry.min(lcp[i]);
            carry = forward_step(i).apply(carry);
            f
        })
        .collect();
    let mut after = all[me + 1..]
        .iter()
        .rev()
        .fold(Clamp::IDENTITY, |a, c| fold(a, c, 1))
        .apply(0);
    let (k, first_target) = (rules.min_len, src.first_target());
    let mut records = Vec::new();
    for i in (0..sa.len()).rev() {
        let r = before[i].max(after);
        if r >= k && sa[i] >= first_target {
            records.push([sa[i], r]);
        }
        after = backward_step(i).apply(after);
    }
    records
}

/// Step 3's first half: each record's R cut at the next separator at or after its position;
/// the intervals [x, x + R) still of K tokens, in text order. `records` are sorted by position,
/// all within this pe's slice, which starts at `first`. Collective.
fn cut_at_separators<T: Token>(
    comm: &Comm,
    text: &[T],
    first: u64,
    records: &[[u64; 2]],
    rules: &Rules,
) -> Vec<[u64; 2]> {
    let k = rules.min_len;
    let Some(sep) = rules.doc_sep else {
        return records.iter().map(|&[x, r]| [x, x + r]).collect();
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
    let mut out = Vec::with_capacity(records.len());
    for &[x, r] in records {
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
            out.push([x, x + len]);
        }
    }
    out
}

/// This pe's intervals (sorted by start) merged where they overlap or touch.
fn merge_local(intervals: &[[u64; 2]]) -> Vec<[u64; 2]> {
    let mut out: Vec<[u64; 2]> = Vec::with_capacity(intervals.len().min(1 << 16));
    for &[b, e] in intervals {
        match out.last_mut() {
            Some(last) if b <= last[1] => last[1] = last[1].max(e),
            _ => out.push([b, e]),
        }
    }
    out
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
        let got = merge_local(&[[0, 3], [2, 5], [5, 7], [8, 9], [8, 12], [9, 10]]);
        assert_eq!(got, vec![[0, 7], [8, 12]]);
        assert!(merge_local(&[]).is_empty());
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
