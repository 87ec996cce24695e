//! Records sent in steps by a byte per position: [`Pieces`] names the step of an SA index,
//! [`with_step`] makes the records of one step.

use rayon::prelude::*;

use crate::dist::{count_equal, each_equal};
use crate::util::{parallel, CHUNK};

/// `make(j)` for every j with `step[j] == s`, in increasing order ([`each_equal`]: 64 steps
/// compared at once, the matching ones taken from the mask's bits), on the pe's threads in
/// chunks. Local.
pub(crate) fn with_step<T: Send>(step: &[u8], s: u8, make: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let mut out = Vec::new();
    with_step_into(step, s, make, &mut out);
    out
}

/// [`with_step`] into `out` (its old contents replaced), reusing its capacity: a caller that
/// goes through the steps one after the other keeps one buffer. Local.
pub(crate) fn with_step_into<T: Send>(
    step: &[u8],
    s: u8,
    make: impl Fn(usize) -> T + Sync,
    out: &mut Vec<T>,
) {
    out.clear();
    let scan = |at: usize, bytes: &[u8], out: &mut Vec<T>| {
        each_equal(bytes, s, |j| out.push(make(at + j)));
    };
    if !parallel() {
        out.reserve(count_equal(step, s));
        scan(0, step, out);
        return;
    }
    let parts: Vec<Vec<T>> = (step.par_chunks(CHUNK).enumerate())
        .map(|(c, bytes)| {
            let mut out = Vec::new();
            scan(c * CHUNK, bytes, &mut out);
            out
        })
        .collect();
    out.reserve(parts.iter().map(Vec::len).sum());
    for part in parts {
        out.extend(part);
    }
}

/// Pieces of a layout's indices sent in steps (pCSS' placing of names into a file, the checker's
/// keys): for an SA index, the step that sends it, in O(1)
/// (a table over the index's top bits, then the few boundaries inside its cell) instead of a
/// search for the owner and a division per name.
pub(crate) struct Pieces {
    /// Every piece's first index, in increasing order, then n.
    starts: Vec<usize>,
    /// Per piece, its step.
    step: Vec<u8>,
    /// Per table cell (indices `c << shift ..`): the last piece starting at or before the cell.
    cell: Vec<u32>,
    shift: u32,
}

impl Pieces {
    /// The pieces starting at `starts` (increasing; piece i is step i mod `steps`) of n indices.
    pub(crate) fn new(n: usize, starts: impl Iterator<Item = usize>, steps: usize) -> Self {
        let mut starts: Vec<usize> = starts.collect();
        starts.push(n);
        // About four cells per piece.
        let shift = (n / (4 * starts.len()).max(1)).max(1).ilog2();
        let cell = (0..=n >> shift)
            .map(|c| (starts.partition_point(|&a| a <= c << shift) - 1) as u32)
            .collect();
        let step = (0..starts.len()).map(|i| (i % steps) as u8).collect();
        Pieces {
            starts,
            step,
            cell,
            shift,
        }
    }

    /// The step of SA index x < n: s of the piece s of its owner's slice that holds it.
    pub(crate) fn step_of(&self, x: usize) -> u8 {
        self.step[self.piece_of(x)]
    }

    /// The piece that holds SA index x < n: with pieces listed pe by pe, `steps` each (as the
    /// checker lists them), piece q · steps + s is step s of pe q.
    pub(crate) fn piece_of(&self, x: usize) -> usize {
        let mut i = self.cell[x >> self.shift] as usize;
        while self.starts[i + 1] <= x {
            i += 1;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The positions of one step, found 64 bytes at a time, are those a plain filter finds, at
    /// lengths around the block and chunk sizes, on 1 and 3 threads.
    #[test]
    fn with_step_finds_the_positions_of_a_step() {
        for threads in [1, 3] {
            crate::dist::test_pool(threads).install(|| {
                let mut rng = crate::util::SplitMix::new(9);
                for len in [
                    0,
                    1,
                    7,
                    8,
                    9,
                    63,
                    65,
                    (1 << 16) - 3,
                    (1 << 16) + 17,
                    200_003,
                ] {
                    let step: Vec<u8> = (0..len).map(|_| (rng.next() % 9) as u8).collect();
                    for s in 0..10u8 {
                        let want: Vec<usize> = (0..len).filter(|&j| step[j] == s).collect();
                        assert_eq!(with_step(&step, s, |j| j), want, "len {len}, step {s}");
                    }
                }
            });
        }
    }
}
