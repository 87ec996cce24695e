//! Phase 5, the run step: the suffixes whose key is one character c repeated k times lie inside
//! a run c^r x…; one sort orders them by (x < c or the end before x > c, then r ascending resp.
//! descending), and only equal (x < c, r) stay tied, with depth r. Their keys are made by the
//! owners of their positions, who know where each run ends, and sorted in as many key ranges as
//! keep a range within the first sort's.
//!
//! Memory per pe beside the names and depths: a bit per position (where the run suffixes are)
//! and the long runs' ends (16 B per run of at least [`LONG_RUN`]), with several ranges the first
//! and last range of each word of 64 positions (2 B), and per range its keys (16 B each, two
//! copies in their exchange), groups (two indices and two flags each) and updates (3 indices
//! each).

use std::cell::RefCell;

use bytemuck::{Pod, Zeroable};

use super::alphabet::Codes;
use super::groups::{sort_name_update, Grouping, Sort};
use super::open::OpenPositions;
use super::records::{Depth, Suffix};
use crate::comm::Comm;
use crate::dist::{collect_range, Layout, Ranges, RoundBounds};
use crate::index::Index;
use crate::token::Token;
use crate::util::bits;
use crate::Ctx;

/// The run step. Suffixes whose key is one character c repeated k times lie inside a run of c of
/// length r ≥ k followed by a character x ≠ c (or the end): S_i = c^r x…. Among themselves they
/// are ordered by whether x < c (or the end; these come first, shorter runs first) or x > c
/// (longer runs first), and only suffixes with equal (x < c, r) need more: they share exactly r
/// characters, so their depth is r and the next round compares the suffixes after the runs.
/// Takes the tied suffixes inside runs at this pe's positions whose depth is [`Depth::IN_RUN`]
/// (`names`: this pe's names and depths) and writes the new name and depth of each (depth
/// [`super::records::resolved`] for those now alone) at the owner of its position. Sorted in up
/// to `rounds` key ranges ([`sort_name_update`]), as many as keep a range within n / `rounds`
/// keys and each pe's part of it within about n / p / `rounds` (aⁿ: all of them), each range's
/// updates written before the next; returns, with `list`, this pe's share of the suffixes still
/// unresolved. Collective.
///
/// Cost per range: a scan of this pe's run positions in the words that hold the range's keys,
/// making the key of each.
pub(super) fn split_runs<I: Index, C: Token>(
    ctx: &Ctx,
    text: &[C],
    layout: &Layout,
    codes: &Codes,
    names: (&mut [I], &mut [Depth]),
    rounds: usize,
    list: bool,
) -> Vec<Suffix<I>> {
    let n = layout.len();
    let w = bits(n as u64);
    let (name_of, depth_of) = names;
    if 3 * w + 1 > 128 {
        let lo = layout.start(ctx.comm.rank());
        return leave_to_doubling(name_of, depth_of, codes.k as u64, lo, list);
    }
    let keys = RunKeys {
        ends: RunEnds::of(&ctx.comm, text, layout, codes),
        w,
        max: (1u128 << w) - 1,
    };
    let open = OpenPositions::of(depth_of, |d| d == Depth::IN_RUN);
    let (rounds, share) = run_ranges(&ctx.comm, n, open.count, rounds);
    let names = RefCell::new((name_of, depth_of));
    let source = RangeRuns {
        keys: &keys,
        open: &open,
        rounds,
        word_ranges: RefCell::default(),
    };
    let sort = Sort {
        phase: "· sort",
        ranges: Ranges {
            count: rounds,
            per_pe: Some(share),
            of: None,
        },
        len: open.count,
        record: |j| {
            let at = open.nth(j);
            keys.key(names.borrow().0[at], at)
        },
        generate: |bounds: &RoundBounds<u128>, k| {
            let names = names.borrow();
            source.of_range(bounds, k, &names.0[..], &names.1[..])
        },
    };
    sort_name_update(ctx, layout, sort, &keys, &names, list).1
}

/// The run suffixes of a text too long to pack their keys (n ≥ 2^42): left to plain doubling
/// with depth k; with `list`, returned as records (`lo`: this pe's first position). Local.
fn leave_to_doubling<I: Index>(
    name_of: &[I],
    depth_of: &mut [Depth],
    k: u64,
    lo: usize,
    list: bool,
) -> Vec<Suffix<I>> {
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
    still
}

/// The run step's key ranges, and the most of one pe's keys in a range: a range holds at most
/// n / `rounds` keys (the suffixes outside runs are sorted in as many), and at most about
/// n / p / `rounds` of a pe's (runs cluster: a pe may own many more than its share, and a long
/// run's keys follow text order). `count`: this pe's run suffixes. Collective.
fn run_ranges(comm: &Comm, n: usize, count: usize, rounds: usize) -> (usize, u64) {
    let total = comm.all_reduce_sum(count as u64);
    let most = comm.all_reduce_max(count as u64);
    let share = (n as u64).div_ceil((comm.size() * rounds.max(1)) as u64);
    let rounds = if most > share {
        ((total as u128 * rounds as u128).div_ceil(n.max(1) as u128) as usize)
            .clamp(2, rounds.max(2))
    } else {
        1
    };
    (rounds, share)
}

/// The sort key (g, flag, s, i) of a run suffix at position i in a group g, in `w` bits each
/// (one for the flag): flag = whether the character x after the run is larger than the run's c,
/// s = r for x < c, `max` − r for x > c.
struct RunKeys<'t, C: Token> {
    ends: RunEnds<'t, C>,
    w: u32,
    max: u128,
}

impl<C: Token> RunKeys<'_, C> {
    /// The key of local position j in the group named g.
    #[inline]
    fn key<I: Index>(&self, g: I, j: usize) -> u128 {
        let w = self.w;
        let ans = self.ends.end_of(j);
        let flag = (ans >> 63) as u128;
        let pos = (self.ends.lo + j) as u64;
        let r = ((ans & !(1u64 << 63)) - pos) as u128;
        let s = if flag == 1 { self.max - r } else { r };
        ((g.to_u64() as u128) << (2 * w + 1)) | (flag << (2 * w)) | (s << w) | pos as u128
    }
}

impl<I: Index, C: Token> Grouping<u128, I> for RunKeys<'_, C> {
    const SPLITS: bool = true;

    /// Group, flag and s equal: the suffixes share exactly r characters.
    #[inline]
    fn same(&self, a: &u128, b: &u128) -> bool {
        a >> self.w == b >> self.w
    }

    #[inline]
    fn old(&self, x: &u128) -> u64 {
        (x >> (2 * self.w + 1)) as u64
    }

    /// The suffix at the key's position, with depth r.
    #[inline]
    fn entry(&self, x: &u128, name: I) -> Suffix<I> {
        let flag = (x >> (2 * self.w)) & 1;
        let s = (x >> self.w) & self.max;
        let r = if flag == 1 { self.max - s } else { s } as u64;
        Suffix {
            name,
            pos: I::from_u64((x & self.max) as u64),
            depth: I::from_u64(r),
        }
    }
}

/// The run step's keys range by range, as [`crate::dist::sort_in_rounds`] asks for them: those
/// of the range's positions not yet updated by an earlier range (an update's name may fall in a
/// later range); none without a scan when the range misses this pe's keys (clustered keys take
/// many ranges, each pe's few of them).
struct RangeRuns<'a, 't, C: Token> {
    keys: &'a RunKeys<'t, C>,
    open: &'a OpenPositions,
    rounds: usize,
    /// With several ranges, the first and last range of the keys in each word of positions (a
    /// name changes only with an update, which takes its position out of the run step): a range
    /// visits only the words that may hold its keys, so keys that follow text order (long runs),
    /// which take many ranges, are each made about once. Found in the first range.
    word_ranges: RefCell<Vec<[u8; 2]>>,
}

impl<C: Token> RangeRuns<'_, '_, C> {
    /// The keys of range k of `bounds` on this pe. Local.
    fn of_range<I: Index>(
        &self,
        bounds: &RoundBounds<u128>,
        k: usize,
        name_of: &[I],
        depth_of: &[Depth],
    ) -> Vec<u128> {
        let (lo, hi) = bounds.range(k);
        let inside = |x: &u128| lo.is_none_or(|l| *x >= l) && hi.is_none_or(|h| *x < h);
        let key = |j: usize| self.keys.key(name_of[j], j);
        if self.rounds > 1 && k == 0 {
            *self.word_ranges.borrow_mut() = self.find_word_ranges(bounds, &key);
        }
        let word_ranges = self.word_ranges.borrow();
        let word_ranges: &[[u8; 2]] = &word_ranges;
        let here = |w: usize| {
            word_ranges
                .get(w)
                .is_none_or(|&[a, b]| (a as usize..=b as usize).contains(&k))
        };
        if rayon::current_num_threads() > 1 {
            let take = |j: usize| depth_of[j] == Depth::IN_RUN && inside(&key(j));
            return self.open.listed_in(here, take, key);
        }
        // One thread: each key made once.
        let mut keys = Vec::new();
        self.open.each_in(here, |j| {
            if depth_of[j] == Depth::IN_RUN {
                let x = key(j);
                if inside(&x) {
                    keys.push(x);
                }
            }
        });
        keys.shrink_to_fit();
        keys
    }

    /// The first and last range of the keys (`key(j)`) in each word of run positions. Local.
    fn find_word_ranges(
        &self,
        bounds: &RoundBounds<u128>,
        key: &(impl Fn(usize) -> u128 + Sync),
    ) -> Vec<[u8; 2]> {
        let words = &self.open.words;
        collect_range(words.len(), |w| {
            let (mut a, mut b) = (u8::MAX, 0u8);
            let mut x = words[w];
            while x != 0 {
                let j = 64 * w + x.trailing_zeros() as usize;
                x &= x - 1;
                let r = bounds.round_of(&key(j)) as u8;
                (a, b) = (a.min(r), b.max(r));
            }
            [a, b]
        })
    }
}

/// Where the run through each local position ends: the answer for local position j is the first
/// later position with another character, or n, | whether that character is larger << 63. Runs
/// that reach the slice's end continue on the pes to the right (`tail`); the local runs of at
/// least [`LONG_RUN`] characters are listed, shorter ones found by a scan of fewer steps (no
/// array of one end per position).
struct RunEnds<'t, C: Token> {
    text: &'t [C],
    code: &'t [u64],
    /// This pe's first position.
    lo: usize,
    /// The answer for the run that reaches the end of this pe's slice.
    tail: u64,
    long: Vec<[usize; 2]>,
}

/// The character value past the end of the text (and of a pe without characters): above every
/// byte and 16-bit token.
const END: u64 = 1 << 32;

impl<'t, C: Token> RunEnds<'t, C> {
    /// Collective: an all-gather of each pe's first run ([`RunEdge`]).
    fn of(comm: &Comm, text: &'t [C], layout: &Layout, codes: &'t Codes) -> Self {
        let all = comm.all_gather(RunEdge::of(text));
        let me = comm.rank();
        let lo = layout.start(me);
        let mut ends = RunEnds {
            text,
            code: &codes.code,
            lo,
            tail: 0,
            long: Vec::new(),
        };
        let len = layout.end(me) - lo;
        if len > 0 {
            ends.tail = ends.tail_of(&all, me, layout, text[len - 1].to_u64());
        }
        ends.long = long_runs(text);
        ends
    }

    /// The answer for a run of character c that reaches the end of pe `me`'s slice: it ends on
    /// the first pe to the right whose slice does not start with c or does not end in it (`all`:
    /// every pe's first run), or at n.
    fn tail_of(&self, all: &[RunEdge], me: usize, layout: &Layout, c: u64) -> u64 {
        let (mut e, mut x) = (layout.len() as u64, END);
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
        e | self.flag(c, x) << 63
    }

    /// Whether character x (or [`END`]) is larger than c.
    #[inline]
    fn flag(&self, c: u64, x: u64) -> u64 {
        u64::from(x != END && self.code[x as usize] > self.code[c as usize])
    }

    /// The answer for local position j.
    #[inline]
    fn end_of(&self, j: usize) -> u64 {
        let (text, len) = (self.text, self.text.len());
        let c = text[j];
        let k = self.long.partition_point(|r| r[0] <= j);
        let b = match k.checked_sub(1).map(|k| self.long[k]) {
            Some([_, b]) if b > j => b,
            _ => (j + 1..len).find(|&b| text[b] != c).unwrap_or(len),
        };
        if b == len {
            self.tail
        } else {
            (self.lo + b) as u64 | self.flag(c.to_u64(), text[b].to_u64()) << 63
        }
    }
}

/// Runs of one character at least this long are listed by [`long_runs`]; the end of a shorter
/// one is found by a scan.
const LONG_RUN: usize = 16;

/// The runs of one character of at least [`LONG_RUN`] characters in `text`, as (start, end)
/// offsets in increasing order: at most 1 byte per character. Local.
fn long_runs<C: Token>(text: &[C]) -> Vec<[usize; 2]> {
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
/// the run it starts with has there, the slice's length, and the character after that run
/// ([`END`] for none).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
struct RunEdge {
    first: u64,
    prefix: u64,
    len: u64,
    after: u64,
}

impl RunEdge {
    /// Of this pe's slice.
    fn of<C: Token>(text: &[C]) -> Self {
        let Some(&c0) = text.first() else {
            return RunEdge {
                first: END,
                prefix: 0,
                len: 0,
                after: END,
            };
        };
        let pre = text.iter().take_while(|&&c| c == c0).count();
        RunEdge {
            first: c0.to_u64(),
            prefix: pre as u64,
            len: text.len() as u64,
            after: text.get(pre).map_or(END, |&c| c.to_u64()),
        }
    }
}
