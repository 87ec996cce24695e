//! The interleaved kernel: up to [`LANES`] patterns' searches on one thread, advanced in
//! turns. A turn has two passes over the lanes: the first reads each lane's SA entry (its cache
//! line asked for a turn before) and asks for the bytes of T that entry points to; the second
//! compares them with the pattern, moves the lane's bounds and asks for its next SA entry. A
//! lane that finishes takes the next pattern, so the turns stay full.
//!
//! A lane finds the lower bound `lo` (the first entry not before the pattern) by bisection, then
//! the upper bound `hi` (the first entry after it) by galloping from `lo` (1, 2, 4, … entries:
//! a pattern that occurs a few times costs a few comparisons) and bisection. What the lower
//! search learnt bounds the upper one: an entry found after the pattern bounds `hi` from above,
//! one that starts with the pattern from below.

use std::cmp::Ordering;

use super::{prefetch, Sa, Text, Top};
use crate::error::Result;

/// Searches in flight on one thread: enough to cover a memory access's latency with other
/// lanes' work.
const LANES: usize = 32;

/// What a lane does in its next turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Count its keys in the top level's blocks (asked for when it started).
    Top,
    /// Bisect for the lower bound.
    Lo,
    /// Gallop and bisect for the upper bound.
    Hi,
}

/// One pattern's search in flight.
struct Lane<'p> {
    pat: &'p [u8],
    /// Its place in the answers.
    slot: usize,
    stage: Stage,
    /// Entries before `lo` sort before the pattern; those from `lo_end` on do not.
    lo: usize,
    lo_end: usize,
    /// Entries before `hi` do not sort after the pattern; those from `hi_end` on do.
    hi: usize,
    hi_end: usize,
    /// Bytes the pattern shares with the entries that bound the current bisection on the left
    /// and on the right (0 where not compared): every entry between shares at least the fewer.
    left: usize,
    right: usize,
    /// Bytes it shares with entry `hi_end`, where compared (else 0).
    hi_end_shared: usize,
    /// The upper bound's next gallop, entries past `hi` (0: bisect).
    gallop: usize,
    /// The entry compared this turn, and where its suffix starts in T (bytes).
    probe: usize,
    at: u64,
    /// Top stage: the pattern's keys (padded with 0, with ones) and their blocks.
    keys: (u64, u64),
    blocks: (usize, usize),
}

/// What every lane reads.
struct Search<'a> {
    sa: &'a Sa<'a>,
    text: &'a Text,
    top: Option<&'a Top>,
    token: u64,
}

/// Finds the SA interval `out[i] = (lo, hi)` of every `pats[i]` (already in the index's terms:
/// folded, token ids as bytes), whose suffixes `SA[lo..hi)` start with it, on the calling thread;
/// `top` narrows the searches where given. A pattern holding a byte T does not gets `(0, 0)`.
/// Errors where an SA entry read is not below n (a damaged file).
pub fn ranges(
    sa: &Sa,
    text: &Text,
    top: Option<&Top>,
    pats: &[&[u8]],
    out: &mut [(usize, usize)],
) -> Result<()> {
    let search = Search {
        sa,
        text,
        top,
        token: text.token() as u64,
    };
    let mut lanes: Vec<Lane> = Vec::with_capacity(LANES);
    let mut next = 0;
    loop {
        while lanes.len() < LANES && next < pats.len() {
            match search.start(pats[next], next) {
                Some(lane) => lanes.push(lane),
                None => out[next] = (0, 0),
            }
            next += 1;
        }
        if lanes.is_empty() {
            return Ok(());
        }
        for lane in lanes.iter_mut() {
            search.read(lane)?;
        }
        let mut i = 0;
        while i < lanes.len() {
            match search.step(&mut lanes[i]) {
                true => {
                    let done = lanes.swap_remove(i);
                    out[done.slot] = (done.lo, done.hi);
                }
                false => i += 1,
            }
        }
    }
}

impl Search<'_> {
    /// A lane for `pat` (answer `slot`): with a top level, its keys' blocks asked for; else its
    /// first entry. None where the answer is known at once (an empty SA, a byte T lacks).
    fn start<'p>(&self, pat: &'p [u8], slot: usize) -> Option<Lane<'p>> {
        let n = self.sa.len();
        if n == 0 || self.top.is_some_and(|t| t.code().absent(pat)) {
            return None;
        }
        let mut lane = Lane {
            pat,
            slot,
            stage: Stage::Lo,
            lo: 0,
            lo_end: n,
            hi: 0,
            hi_end: n,
            left: 0,
            right: 0,
            hi_end_shared: 0,
            gallop: 0,
            probe: 0,
            at: 0,
            keys: (0, 0),
            blocks: (0, 0),
        };
        match self.top {
            Some(top) => {
                lane.stage = Stage::Top;
                lane.keys = top.code().keys(pat);
                lane.blocks = (
                    top.block_of(lane.keys.0, false),
                    top.block_of(lane.keys.1, true),
                );
                top.prefetch_block(lane.blocks.0);
                top.prefetch_block(lane.blocks.1);
            }
            None => self.aim(&mut lane),
        }
        Some(lane)
    }

    /// The first pass of a turn: reads the lane's entry and asks for T's bytes it compares.
    #[inline]
    fn read(&self, lane: &mut Lane) -> Result<()> {
        if lane.stage == Stage::Top {
            return Ok(());
        }
        lane.at = self.sa.get(lane.probe)? * self.token;
        let skip = lane.left.min(lane.right);
        prefetch(self.text.addr(lane.at + skip as u64));
        Ok(())
    }

    /// The second pass of a turn: the lane's comparison and its bounds moved, the next entry
    /// asked for. True once both bounds are found.
    #[inline]
    fn step(&self, lane: &mut Lane) -> bool {
        match lane.stage {
            Stage::Top => self.windows(lane),
            Stage::Lo => {
                let (o, shared) = self.compare(lane);
                match o {
                    Ordering::Less => (lane.lo, lane.left) = (lane.probe + 1, shared),
                    _ => (lane.lo_end, lane.right) = (lane.probe, shared),
                }
                match o {
                    Ordering::Greater if lane.probe < lane.hi_end => {
                        (lane.hi_end, lane.hi_end_shared) = (lane.probe, shared)
                    }
                    Ordering::Equal => lane.hi = lane.hi.max(lane.probe + 1),
                    _ => {}
                }
            }
            Stage::Hi => {
                let (o, shared) = self.compare(lane);
                match o {
                    Ordering::Greater => {
                        (lane.hi_end, lane.right, lane.gallop) = (lane.probe, shared, 0)
                    }
                    _ => {
                        (lane.hi, lane.left, lane.gallop) =
                            (lane.probe + 1, shared, lane.gallop * 2)
                    }
                }
            }
        }
        if lane.stage == Stage::Lo && lane.lo == lane.lo_end {
            self.begin_hi(lane);
        }
        if lane.stage == Stage::Hi && lane.hi == lane.hi_end {
            return true;
        }
        self.aim(lane);
        false
    }

    /// The pattern against the suffix at the lane's entry, skipping what both bounds share.
    #[inline]
    fn compare(&self, lane: &Lane) -> (Ordering, usize) {
        (self.text).cmp_from(lane.at, lane.pat, lane.left.min(lane.right))
    }

    /// The Top stage's turn: both bounds' windows from the keys counted in the top level.
    fn windows(&self, lane: &mut Lane) {
        let Some(top) = self.top else { return };
        let (k0, k1) = lane.keys;
        let below = top.count_in(lane.blocks.0, k0, false);
        let upto = top.count_in(lane.blocks.1, k1, true);
        let (upto0, below1) = match k0 == k1 {
            true => (upto, below),
            false => (top.rank(k0, true), top.rank(k1, false)),
        };
        (lane.lo, lane.lo_end) = top.window(below, upto0);
        (lane.hi, lane.hi_end) = top.window(below1, upto);
        lane.stage = Stage::Lo;
    }

    /// From the lower bound to the upper one: entries from `lo` to `hi` start with the pattern
    /// (the left bound then shares all of it), and galloping starts at `hi`.
    fn begin_hi(&self, lane: &mut Lane) {
        lane.hi = lane.hi.max(lane.lo);
        if lane.hi > lane.lo {
            lane.left = lane.pat.len();
        }
        lane.right = lane.hi_end_shared;
        lane.gallop = 1;
        lane.stage = Stage::Hi;
    }

    /// Picks the lane's next entry (a gallop from `hi` while it stays below `hi_end`, else the
    /// middle of its bounds) and asks for its cache line.
    #[inline]
    fn aim(&self, lane: &mut Lane) {
        lane.probe = match lane.stage {
            Stage::Hi if lane.gallop > 0 && lane.hi + lane.gallop - 1 < lane.hi_end => {
                lane.hi + lane.gallop - 1
            }
            Stage::Hi => {
                lane.gallop = 0;
                lane.hi + (lane.hi_end - lane.hi) / 2
            }
            _ => lane.lo + (lane.lo_end - lane.lo) / 2,
        };
        prefetch(self.sa.addr(lane.probe));
    }
}
