//! Difference covers as tables.
//!
//! A difference cover D of Z_X is a set of residues such that every residue d has a pair
//! a, b ∈ D with a − b ≡ d (mod X). For any two positions i and j there is then an offset
//! l < X with i + l and j + l both sample positions (residue in D): once their first l characters
//! are equal, the ranks of i + l and j + l among the samples decide between the suffixes
//! (Kärkkäinen, Sanders & Burkhardt's DCX). A cover is written down as its period and its set
//! (`cover!`); everything the merge looks up is derived from that at compile time by
//! [`Table::new`], so a larger cover is one more line, not new code.

use bytemuck::Pod;

use crate::index::Index;

/// The lookups of one difference cover (see [`Cover`] for what each one means).
pub struct Table<const X: usize, const S: usize> {
    set: [usize; S],
    slot: [u8; X],
    decide: [[(u8, u8, u8); X]; X],
    kind: [u8; X],
    group_key: [(u8, u8); X],
    to_slot: [[u8; S]; X],
    kinds: usize,
}

impl<const X: usize, const S: usize> Table<X, S> {
    /// The table of the cover `set` (ascending residues below X). Fails to compile when `set`
    /// is not a difference cover of Z_X.
    pub const fn new(set: [usize; S]) -> Self {
        assert!(X <= 255 && S > 0 && S < X, "a cover of Z_X, X < 256");
        let mut slot = [S as u8; X];
        let mut s = 0;
        while s < S {
            assert!(
                set[s] < X && (s == 0 || set[s - 1] < set[s]),
                "ascending residues"
            );
            slot[set[s]] = s as u8;
            s += 1;
        }
        // The smallest offset that reaches a sample position from both residues.
        let mut decide = [[(0u8, 0u8, 0u8); X]; X];
        let mut a = 0;
        while a < X {
            let mut b = 0;
            while b < X {
                let mut l = 0;
                while l < X && !(in_set::<X, S>(&slot, a + l) && in_set::<X, S>(&slot, b + l)) {
                    l += 1;
                }
                assert!(l < X, "the set is not a difference cover of Z_X");
                decide[a][b] = (l as u8, slot[(a + l) % X], slot[(b + l) % X]);
                b += 1;
            }
            a += 1;
        }
        let mut to_slot = [[0u8; S]; X];
        let mut a = 0;
        while a < X {
            let mut s = 0;
            while s < S {
                to_slot[a][s] = ((set[s] + X - a) % X) as u8;
                s += 1;
            }
            a += 1;
        }
        // Groups of the other residues: greedily, the offset that reaches a sample position from
        // the most residues not yet grouped (the smallest such offset on ties) makes a group.
        let mut kind = [0u8; X];
        let mut group_key = [(0u8, 0u8); X];
        let mut kinds = 1;
        loop {
            let (mut best, mut best_count) = (0, 0);
            let mut l = 1;
            while l < X {
                let mut count = 0;
                let mut r = 0;
                while r < X {
                    if !in_set::<X, S>(&slot, r) && kind[r] == 0 && in_set::<X, S>(&slot, r + l) {
                        count += 1;
                    }
                    r += 1;
                }
                if count > best_count {
                    (best, best_count) = (l, count);
                }
                l += 1;
            }
            if best_count == 0 {
                break;
            }
            let mut r = 0;
            while r < X {
                if !in_set::<X, S>(&slot, r) && kind[r] == 0 && in_set::<X, S>(&slot, r + best) {
                    kind[r] = kinds as u8;
                    group_key[r] = (best as u8, slot[(r + best) % X]);
                }
                r += 1;
            }
            kinds += 1;
        }
        Table {
            set,
            slot,
            decide,
            kind,
            group_key,
            to_slot,
            kinds,
        }
    }

    /// The group key shared by all the other residues when they form one group.
    const fn one_group(&self) -> Option<(usize, usize)> {
        if self.kinds != 2 {
            return None;
        }
        let mut r = 0;
        while self.kind[r] == 0 {
            r += 1;
        }
        Some((self.group_key[r].0 as usize, self.group_key[r].1 as usize))
    }
}

/// Whether residue r mod X is in the set whose slots are `slot`.
const fn in_set<const X: usize, const S: usize>(slot: &[u8; X], r: usize) -> bool {
    (slot[r % X] as usize) < S
}

/// A difference cover and the lookups the merge needs. Implemented by `cover!` from the
/// period and the set.
pub trait Cover: Send + Sync + 'static {
    /// The period X.
    const X: usize;
    /// |D|: the sample positions among any X consecutive positions (ranks per merge record).
    const S: usize;
    /// The ranks of a merge record, one per slot: `[I; S]`.
    type Ranks<I: Index>: Pod + AsRef<[I]> + Send + Sync;
    /// Kinds of merge records: the samples (kind 0) and each group of the other residues that
    /// share one deciding offset (kinds 1..KINDS).
    const KINDS: usize;
    /// `D[s]`, the residue of slot s.
    fn residue(s: usize) -> usize;
    /// The slot of residue r in D, or S when r is not a sample residue.
    fn slot(r: usize) -> usize;
    /// For suffixes at residues a and b: (l, slot of a + l, slot of b + l) for the smallest
    /// l ≥ 0 with a + l and b + l both in D. Suffixes i and j with equal first l characters are
    /// ordered by the ranks of i + l and j + l.
    fn decide(a: usize, b: usize) -> (usize, usize, usize);
    /// The kind of a merge record at residue r: 0 for a sample, 1 + its group otherwise.
    fn kind(r: usize) -> usize;
    /// For a residue r outside D: (l, slot of r + l), the offset its whole group shares. Within a
    /// group, (first l characters, rank of i + l) orders as the merge comparison does.
    fn group_key(r: usize) -> (usize, usize);
    /// [`Cover::group_key`] of every residue outside D when they form one group (DC3: the mod-0
    /// suffixes by (t[i], rank of i + 1)), known without the residue.
    const ONE_GROUP: Option<(usize, usize)>;
    /// The offset from a position at residue a to the sample position of slot s among the next
    /// X positions: (`D[s]` − a) mod X.
    fn to_slot(a: usize, s: usize) -> usize;
    /// The ranks `[f(0), …, f(S − 1)]`.
    fn ranks<I: Index>(f: impl FnMut(usize) -> I) -> Self::Ranks<I>;

    /// The number of sample positions below x: where the samples from x on start in a sequence
    /// of all samples in position order (the residues ascend, so that order is by slot within
    /// a period).
    #[inline]
    fn samples_below(x: usize) -> usize {
        let r = x % Self::X;
        (x / Self::X) * Self::S + (0..Self::S).take_while(|&s| Self::residue(s) < r).count()
    }

    /// The index of sample position x among all sample positions, in position order.
    #[inline]
    fn sample_index(x: usize) -> usize {
        (x / Self::X) * Self::S + Self::slot(x % Self::X)
    }
}

/// Declares a difference cover: `cover!(Name = X, [d0, d1, …])` with the residues ascending.
macro_rules! cover {
    ($(#[$doc:meta])* $name:ident = $x:literal, [$($d:literal),+]) => {
        $(#[$doc])*
        pub struct $name;

        impl $name {
            const S: usize = [$($d),+].len();
            const TABLE: Table<$x, { $name::S }> = Table::new([$($d),+]);
        }

        impl Cover for $name {
            const X: usize = $x;
            const S: usize = $name::S;
            const KINDS: usize = Self::TABLE.kinds;
            const ONE_GROUP: Option<(usize, usize)> = Self::TABLE.one_group();
            type Ranks<I: Index> = [I; $name::S];
            #[inline]
            fn residue(s: usize) -> usize {
                Self::TABLE.set[s]
            }
            #[inline]
            fn slot(r: usize) -> usize {
                Self::TABLE.slot[r] as usize
            }
            #[inline]
            fn decide(a: usize, b: usize) -> (usize, usize, usize) {
                let (l, x, y) = Self::TABLE.decide[a][b];
                (l as usize, x as usize, y as usize)
            }
            #[inline]
            fn kind(r: usize) -> usize {
                Self::TABLE.kind[r] as usize
            }
            #[inline]
            fn group_key(r: usize) -> (usize, usize) {
                let (l, s) = Self::TABLE.group_key[r];
                (l as usize, s as usize)
            }
            #[inline]
            fn to_slot(a: usize, s: usize) -> usize {
                Self::TABLE.to_slot[a][s] as usize
            }
            #[inline]
            fn ranks<I: Index>(f: impl FnMut(usize) -> I) -> Self::Ranks<I> {
                std::array::from_fn(f)
            }
        }
    };
}

cover!(
    /// D = {1, 2} mod 3: pDC3 (Kärkkäinen & Sanders; Kulla & Sanders distributed).
    Dc3 = 3, [1, 2]
);

cover!(
    /// D = {1, 2, 4} mod 7: DC7 (as in Distributed DCX by Haag, Kurpicz, Sanders and Schimek).
    Dc7 = 7, [1, 2, 4]
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every lookup agrees with its definition, for every cover declared here.
    fn check<C: Cover>() {
        let x = C::X;
        let in_d = |r: usize| C::slot(r % x) < C::S;
        assert_eq!((0..x).filter(|&r| in_d(r)).count(), C::S);
        for s in 0..C::S {
            assert_eq!(C::slot(C::residue(s)), s);
        }
        for a in 0..x {
            for b in 0..x {
                let (l, sa, sb) = C::decide(a, b);
                assert!(in_d(a + l) && in_d(b + l), "{a}, {b}: offset {l}");
                assert!(
                    (0..l).all(|m| !in_d(a + m) || !in_d(b + m)),
                    "smallest offset"
                );
                assert_eq!((sa, sb), (C::slot((a + l) % x), C::slot((b + l) % x)));
                assert_eq!(C::to_slot(a, sa), l);
                assert_eq!(C::to_slot(b, sb), l);
                for s in 0..C::S {
                    assert_eq!(C::to_slot(a, s), (C::residue(s) + x - a) % x);
                }
            }
        }
        // Samples are kind 0; every other residue is in a group whose members share an offset
        // to a sample position.
        for r in 0..x {
            assert_eq!(C::kind(r) == 0, in_d(r), "residue {r}");
            assert!(C::kind(r) < C::KINDS);
            if !in_d(r) {
                let (l, s) = C::group_key(r);
                assert_eq!(C::residue(s), (r + l) % x);
                for q in (0..x).filter(|&q| C::kind(q) == C::kind(r)) {
                    assert_eq!(C::group_key(q).0, l, "residues {r} and {q} share an offset");
                }
            }
        }
    }

    #[test]
    fn tables_match_their_definitions() {
        check::<Dc3>();
        check::<Dc7>();
    }

    #[test]
    fn known_groups() {
        // DC3: the mod-0 suffixes by (t[i], rank[i+1]).
        assert_eq!(Dc3::KINDS, 2);
        assert_eq!(Dc3::group_key(0), (1, 0));
        assert_eq!(Dc3::ONE_GROUP, Some((1, 0)));
        assert_eq!(Dc7::ONE_GROUP, None);
        // DC7: residues 0 and 3 by (name, rank(i + 1)), 5 and 6 by (name, rank(i + 3)).
        assert_eq!(Dc7::KINDS, 3);
        assert_eq!(
            (Dc7::kind(0), Dc7::kind(3), Dc7::kind(5), Dc7::kind(6)),
            (1, 1, 2, 2)
        );
        assert_eq!((Dc7::group_key(0), Dc7::group_key(3)), ((1, 0), (1, 2)));
        assert_eq!((Dc7::group_key(5), Dc7::group_key(6)), ((3, 0), (3, 1)));
    }

    /// A cover that is not one fails to build (checked here at run time).
    #[test]
    #[should_panic(expected = "not a difference cover")]
    fn not_a_cover() {
        let _ = Table::<7, 3>::new([1, 2, 3]);
    }
}
