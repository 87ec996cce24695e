//! The records every phase after the first sort shares, each one generic definition in the
//! run's index width `I` ([`Index`]: 32, 40 or 64 bits): a suffix still tied or an update of one
//! ([`Suffix`], 3 indices), the answer about position i + d ([`Ahead`], 2), a doubling round's
//! key ([`Refine`], 4), and the depth a position's group shares as doubling keeps it ([`Depth`],
//! 2 bytes). Memory per pe: as the phases that hold them say.

use bytemuck::{Pod, Zeroable};

use crate::dist::SortKey;
use crate::index::Index;
use crate::local::LocalSort;

/// The depth of a position whose suffix is alone in its group (its name is final): above every
/// depth (at most n; [`super::index_width`] leaves room). Doubling never needs such a suffix's
/// depth: a suffix whose successor's name is unique is alone in its new group.
pub(super) fn resolved<I: Index>() -> I {
    I::from_u64(I::MAX)
}

/// The depth of a position's group as doubling keeps it in text order: 2 bytes instead of an
/// index (4, 5 or 8). Exact below 2^10; above, rounded down to its 10 leading bits (at most
/// 0.2 % below the depth). A depth below the characters a group shares is as good for doubling
/// as the exact one (the members still share it, and all of them store the same value, so all
/// query the same offset), and the depths pCSS makes, k · 2^j and sums of a few of them, mostly
/// keep all their bits. Code `u16::MAX` is [`Depth::RESOLVED`].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub(super) struct Depth(u16);

impl Depth {
    /// The depth of a suffix alone in its group ([`resolved`]).
    pub(super) const RESOLVED: Depth = Depth(u16::MAX);
    /// A suffix inside a run of one character, before the run step (every group's depth is at
    /// least k ≥ 1).
    pub(super) const IN_RUN: Depth = Depth(0);
    const BITS: u32 = 10;

    /// The largest storable depth not above d.
    pub(super) fn at_most(d: u64) -> Depth {
        if d < 1 << Self::BITS {
            return Depth(d as u16);
        }
        // d has 64 − lz bits; keep the top BITS of them (shift e ≥ 1, code below u16::MAX).
        let e = 64 - d.leading_zeros() - Self::BITS;
        Depth(((e as u16) << Self::BITS) | (d >> e) as u16)
    }

    /// A depth or [`resolved`] as stored.
    pub(super) fn of<I: Index>(d: I) -> Depth {
        if d == resolved() {
            Depth::RESOLVED
        } else {
            Depth::at_most(d.to_u64())
        }
    }

    /// The stored depth (not for [`Depth::RESOLVED`]).
    pub(super) fn get(self) -> u64 {
        u64::from(self.0 & ((1 << Self::BITS) - 1)) << (self.0 >> Self::BITS)
    }

    /// The stored depth as an index, [`resolved`] for [`Depth::RESOLVED`].
    pub(super) fn index<I: Index>(self) -> I {
        if self == Depth::RESOLVED {
            resolved()
        } else {
            I::from_u64(self.get())
        }
    }
}

/// A suffix still tied with others, or an update of one: its position, the name of its group,
/// and the depth of the group (the number of characters its members share; 0 marks a suffix
/// inside a run for the run step, [`resolved`] in an update one alone in its new group). In the
/// run's index width: 12, 15 or 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Suffix<I> {
    pub(super) name: I,
    pub(super) pos: I,
    pub(super) depth: I,
}

/// The answer about position i + d in a refinement round: the name of its group + 1 and the
/// group's depth ((0, 0) past the end: the empty suffix is the smallest).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ahead<I> {
    pub(super) name: I,
    pub(super) depth: I,
}

/// A refinement record: (group name, name of i+d + 1, i, new depth), ordered in that order (i
/// makes it unique; the depth rides along), in the run's index width: 16, 20 or 32 bytes. The
/// fields lie in memory from the least significant up, so with 32 bits a record read as a
/// little-endian `u128` has the same order, and the local sort is a radix sort of those.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Refine<I> {
    pub(super) depth: I,
    pub(super) pos: I,
    pub(super) second: I,
    pub(super) group: I,
}

/// `Zeroable` and `Pod` for the records above: each is `repr(C)` of fields of one `Index` type,
/// so it has no padding.
macro_rules! index_records {
    ($($record:ident),*) => {$(
        // SAFETY: repr(C) of fields of one Pod type: no padding.
        unsafe impl<I: Index> Zeroable for $record<I> {}
        unsafe impl<I: Index> Pod for $record<I> {}
    )*};
}
index_records!(Suffix, Ahead, Refine);

impl<I: Index> Refine<I> {
    /// The record with only its group set: the smallest of the group (a round boundary).
    pub(super) fn group_start(group: I) -> Self {
        Refine {
            group,
            ..Refine::zeroed()
        }
    }

    /// Group and second name equal.
    pub(super) fn same_pair(&self, o: &Self) -> bool {
        (self.group, self.second) == (o.group, o.second)
    }
}

impl<I: Index> Ord for Refine<I> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.group, self.second, self.pos, self.depth).cmp(&(o.group, o.second, o.pos, o.depth))
    }
}

impl<I: Index> PartialOrd for Refine<I> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl<I: Index> SortKey for Refine<I> {
    /// With 32 bits (and records aligned as `u128`s, as the allocator gives them): the backend's
    /// sort of `u128`s; otherwise a comparison sort.
    fn sort_local(v: &mut [Self], sorter: &dyn LocalSort) {
        if cfg!(target_endian = "little") && I::BITS == 32 {
            if let Ok(keys) = bytemuck::try_cast_slice_mut::<Self, u128>(v) {
                sorter.sort_u128(keys);
                return;
            }
        }
        crate::dist::sample_sort::par_sort(v);
    }
}

/// `update(j, r)` of every record j of a round, in order, written over the records themselves (an
/// update is three of a record's four indices), so a round never holds both. Local; one pass.
pub(super) fn updates_in_place<I: Index>(
    records: Vec<Refine<I>>,
    update: impl Fn(usize, &Refine<I>) -> Suffix<I>,
) -> Vec<Suffix<I>> {
    let len = records.len();
    let mut words: Vec<I> = bytemuck::cast_vec(records);
    for j in 0..len {
        // Update j goes to words [3j, 3j + 3), at or before record j's [4j, 4j + 4): the records
        // after j are still unread and untouched.
        let r: Refine<I> = bytemuck::cast_slice(&words[4 * j..4 * j + 4])[0];
        let u = update(j, &r);
        words[3 * j..3 * j + 3].copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(&u)));
    }
    words.truncate(3 * len);
    words.shrink_to_fit();
    match bytemuck::allocation::try_cast_vec(words) {
        Ok(v) => v,
        Err((_, words)) => bytemuck::cast_slice(&words).to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::U40;
    use crate::local::cpu::CpuSort;

    #[test]
    fn records_take_their_index_width() {
        use std::mem::size_of;
        assert_eq!(
            [
                size_of::<Suffix<u32>>(),
                size_of::<Suffix<U40>>(),
                size_of::<Suffix<u64>>()
            ],
            [12, 15, 24]
        );
        assert_eq!(
            [
                size_of::<Ahead<u32>>(),
                size_of::<Ahead<U40>>(),
                size_of::<Ahead<u64>>()
            ],
            [8, 10, 16]
        );
        assert_eq!(
            [
                size_of::<Refine<u32>>(),
                size_of::<Refine<U40>>(),
                size_of::<Refine<u64>>()
            ],
            [16, 20, 32]
        );
    }

    /// The local sort of refinement records (the `u128` radix sort with 32 bits, a comparison
    /// sort otherwise) gives their order (group, second, position, depth).
    fn sorts_refinement_records<I: Index>() {
        let mut rng = crate::util::SplitMix::new(11);
        let mut small = |m: u64| I::from_u64(rng.next() % m);
        let mut v: Vec<Refine<I>> = (0..5000u64)
            .map(|i| Refine {
                group: small(7),
                second: small(5),
                pos: I::from_u64(i * 7919 % 5003 + (I::MAX >> 1)),
                depth: small(I::MAX),
            })
            .collect();
        let mut want = v.clone();
        want.sort_by_key(|r| {
            let f = |x: I| x.to_u64();
            (f(r.group), f(r.second), f(r.pos), f(r.depth))
        });
        Refine::sort_local(&mut v, &CpuSort::new(2));
        assert_eq!(v, want, "{} bits", I::BITS);
    }

    #[test]
    fn refinement_records_sort_in_every_width() {
        sorts_refinement_records::<u32>();
        sorts_refinement_records::<U40>();
        sorts_refinement_records::<u64>();
    }

    /// A stored depth is exact below 2^10, never above the depth, at most 0.2 % below it, keeps
    /// the order of depths, and never reads as resolved; the index of a resolved one is
    /// [`resolved`].
    #[test]
    fn depths_are_stored_as_lower_bounds_within_a_fifth_of_a_percent() {
        let mut rng = crate::util::SplitMix::new(3);
        let mut ds: Vec<u64> = (0..1 << 12).collect();
        ds.extend((10..64).flat_map(|b| [(1 << b) - 1, 1 << b, (1 << b) + 1, 21 << (b - 5)]));
        ds.extend((0..10_000).map(|_| rng.next() >> (rng.next() % 64)));
        ds.push(u64::MAX);
        ds.sort_unstable();
        let mut last = 0;
        for &d in &ds {
            let got = Depth::at_most(d);
            assert_ne!(got, Depth::RESOLVED, "{d}");
            let v = got.get();
            if d < 1 << 10 {
                assert_eq!(v, d);
            }
            assert!(
                v <= d && v as f64 >= d as f64 * (1.0 - 1.0 / 512.0),
                "{d} → {v}"
            );
            assert!(v >= last, "{d} → {v} below {last}");
            assert_eq!(Depth::at_most(v), got, "{v} is stored exactly");
            last = v;
        }
        assert_eq!(Depth::RESOLVED.index::<u32>(), resolved::<u32>());
        assert_eq!(Depth::of(resolved::<U40>()), Depth::RESOLVED);
        assert_eq!(Depth::of(1234u32).index::<u32>(), 1234);
    }
}
