//! Which pe owns global index i, and which range pe r holds.

use crate::comm::Comm;

/// A distribution of a global sequence of `len()` elements over the pes in contiguous ranges:
/// pe r holds `[offsets[r], offsets[r+1])`. Ranges may be empty (when n < p, say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    offsets: Vec<usize>,
    /// Per cell of indices (`c << shift ..`), the pe holding the cell's first index: [`owner`]
    /// starts there and walks the few ranges inside the cell (about four cells per pe).
    ///
    /// [`owner`]: Layout::owner
    cell: Vec<u32>,
    shift: u32,
}

impl Layout {
    /// The balanced block layout of `n` elements over `p` pes: pe r holds `[r*n/p, (r+1)*n/p)`.
    /// Local; no communication.
    pub fn block(n: usize, p: usize) -> Self {
        assert!(p > 0, "a layout needs at least one pe");
        let offsets = (0..=p)
            .map(|r| ((r as u128 * n as u128) / p as u128) as usize)
            .collect();
        Self::indexed(offsets)
    }

    /// The layout in which each pe holds `local_len` elements, in pe order. Collective.
    pub fn from_local_len(comm: &Comm, local_len: usize) -> Self {
        let lens = comm.all_gather(local_len as u64);
        let mut offsets = Vec::with_capacity(lens.len() + 1);
        let mut acc = 0usize;
        offsets.push(0);
        for l in lens {
            acc += l as usize;
            offsets.push(acc);
        }
        Self::indexed(offsets)
    }

    /// The layout in which pe r holds `[offsets[r], offsets[r+1])`: `offsets` starts at 0, ends
    /// at the length, does not descend and has one entry more than there are pes. Local.
    pub fn from_offsets(offsets: Vec<usize>) -> Self {
        assert!(
            offsets.len() >= 2 && offsets[0] == 0 && offsets.windows(2).all(|w| w[0] <= w[1]),
            "layout offsets must start at 0 and not descend"
        );
        Self::indexed(offsets)
    }

    /// The layout of `offsets` with its table of cells for [`Layout::owner`]. Local; O(p log p).
    fn indexed(offsets: Vec<usize>) -> Self {
        let n = offsets.last().copied().unwrap_or(0);
        let p = offsets.len() - 1;
        let shift = (n / (4 * p)).max(1).ilog2();
        let cell = (0..=n >> shift)
            .map(|c| (offsets.partition_point(|&o| o <= c << shift) - 1).min(p - 1) as u32)
            .collect();
        Layout {
            offsets,
            cell,
            shift,
        }
    }

    /// Global number of elements.
    pub fn len(&self) -> usize {
        *self.offsets.last().expect("offsets is never empty")
    }

    /// True when there are no elements at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of pes.
    pub fn pes(&self) -> usize {
        self.offsets.len() - 1
    }

    /// First global index held by pe `r`.
    pub fn start(&self, r: usize) -> usize {
        self.offsets[r]
    }

    /// One past the last global index held by pe `r`.
    pub fn end(&self, r: usize) -> usize {
        self.offsets[r + 1]
    }

    /// Number of elements held by pe `r`.
    pub fn local_len(&self, r: usize) -> usize {
        self.end(r) - self.start(r)
    }

    /// The pe holding global index `i` (`i < len()`); with empty ranges, the one pe whose range
    /// contains i.
    /// O(1) on a balanced layout: a table lookup, then a walk over the ranges that start inside
    /// i's cell.
    #[inline]
    pub fn owner(&self, i: usize) -> usize {
        debug_assert!(i < self.len(), "index {i} out of layout of {}", self.len());
        let mut q = self.cell[i >> self.shift] as usize;
        while self.offsets[q + 1] <= i {
            q += 1;
        }
        q
    }

    /// The prefix-sum vector (length p+1).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }
}

/// Assigns owners to a stream of ascending global indices without a binary search per element.
/// [`OwnerCursor::owner`] must be called with non-decreasing indices.
pub struct OwnerCursor<'a> {
    layout: &'a Layout,
    pe: usize,
}

impl<'a> OwnerCursor<'a> {
    /// A cursor at pe 0.
    pub fn new(layout: &'a Layout) -> Self {
        OwnerCursor { layout, pe: 0 }
    }

    /// The pe that owns global index `i` (at least the previous call's `i`).
    pub fn owner(&mut self, i: usize) -> usize {
        while self.layout.end(self.pe) <= i {
            self.pe += 1;
        }
        self.pe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_covers_everything_once() {
        for n in [0usize, 1, 2, 3, 7, 100] {
            for p in 1..9 {
                let l = Layout::block(n, p);
                assert_eq!(l.len(), n);
                let sum: usize = (0..p).map(|r| l.local_len(r)).sum();
                assert_eq!(sum, n);
                for i in 0..n {
                    let o = l.owner(i);
                    assert!(l.start(o) <= i && i < l.end(o));
                }
                let mut c = OwnerCursor::new(&l);
                for i in 0..n {
                    assert_eq!(c.owner(i), l.owner(i));
                }
            }
        }
    }

    /// The owner found through the cells is the pe whose range holds the index, on uneven
    /// layouts with empty ranges (first, last, in runs) and ranges much larger than the rest.
    #[test]
    fn owner_by_cells_on_uneven_layouts() {
        let layouts = [
            vec![0, 0, 0, 5],
            vec![0, 3, 3, 5, 5],
            vec![0, 1, 1000, 1001, 1001, 1001, 4096],
            vec![0, 4095, 4096, 4096],
            vec![0, 0, 17, 17, 17, 33, 1 << 14, (1 << 14) + 1],
        ];
        for offsets in layouts {
            let l = Layout::from_offsets(offsets.clone());
            for i in 0..l.len() {
                let want = offsets.partition_point(|&o| o <= i) - 1;
                assert_eq!(l.owner(i), want, "index {i} of {offsets:?}");
            }
        }
    }
}
