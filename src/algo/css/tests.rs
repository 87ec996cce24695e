use super::*;
use crate::local::cpu::CpuSort;

const POSITION_MASK: u64 = (1u64 << POSITION_BITS) - 1;

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

/// A first-sort record gives back the position it was made with (the scrambling is a
/// bijection of 56 bits), and its order is the key's, then the clamped length's.
#[test]
fn key_words_pack_and_push_as_integers() {
    let mut rng = crate::dist::sample_sort::SplitMix::new(3);
    let code: [u64; 256] = std::array::from_fn(|c| c as u64 % 37);
    for b in 1..=8u32 {
        let m = (1u64 << b) - 1;
        for _ in 0..200 {
            let x = (rng.next() as u128) << 64 | rng.next() as u128;
            let c = rng.next() & m;
            assert_eq!(x.push(b, c), (x << b) | c as u128);
            assert_eq!((x as u64).push(b, c), ((x as u64) << b) | c);
            for (bits, k) in [(64, 64 / b), (128, 2 * (64 / b))] {
                let chars: Vec<u8> = (0..k).map(|_| rng.next() as u8).collect();
                let want = chars.iter().fold(0u128, |key, &ch| {
                    (key << b) | (code[ch as usize] & m) as u128
                });
                let code_b: [u64; 256] = std::array::from_fn(|ch| code[ch] & m);
                if bits == 64 {
                    assert_eq!(<u64 as KeyWord>::pack(&chars, &code_b, b) as u128, want);
                } else {
                    assert_eq!(<u128 as KeyWord>::pack(&chars, &code_b, b), want);
                }
            }
        }
    }
}

#[test]
fn first_sort_records_keep_position_and_order() {
    let mut rng = crate::dist::sample_sort::SplitMix::new(5);
    let edges = [0, 1, 2, 3, (1 << 32) - 1, 1 << 32, (1 << POSITION_BITS) - 1];
    let positions: Vec<u64> = edges
        .into_iter()
        .chain((0..10_000).map(|_| rng.next() & POSITION_MASK))
        .collect();
    let wide_key = 7u128 << 100 | 3 << 64 | 1;
    for &i in &positions {
        let r = HiKey::new(7 << 40, 9, i as usize);
        assert_eq!((r.pos(), r.key(), r.clamped_len()), (i, 7 << 40, 9));
        let w = WideKey::new(wide_key, 18, i as usize);
        assert_eq!((w.pos(), w.key(), w.clamped_len()), (i, wide_key, 18));
    }
    let a = HiKey::new(5, 3, (1 << POSITION_BITS) - 1);
    let b = HiKey::new(5, 4, 0);
    let c = HiKey::new(6, 1, 12345);
    assert!(a < b && b < c);
    assert!(a.same_group(HiKey::new(5, 3, 0)) && !a.same_group(b));
    // Wide keys order by both words of the key (the high one first), then the length.
    let w = |key: u128, len, pos| WideKey::new(key, len, pos);
    let order = [
        w(5, 3, (1 << POSITION_BITS) - 1),
        w(5, 4, 0),
        w(6, 1, 12345),
        w(1 << 64, 1, 0),
        w(1 << 64 | 1, 1, 0),
        w(u128::MAX, 25, 0),
    ];
    assert!(order.windows(2).all(|x| x[0] < x[1]), "{order:?}");
    assert!(order[0].same_group(w(5, 3, 7)) && !order[0].same_group(order[1]));
    // The local sort orders 24-byte records by key and puts shorter suffixes first.
    let mut v: Vec<WideKey> = (0..3000u64)
        .map(|i| {
            w(
                ((i % 7) as u128) << 90 | (i % 3) as u128,
                18 - (i % 2) as usize,
                i as usize,
            )
        })
        .collect();
    WideKey::sort_local(&mut v, &CpuSort::new(1));
    assert!(v
        .windows(2)
        .all(|x| (x[0].key(), x[0].clamped_len()) <= (x[1].key(), x[1].clamped_len())));
    // Consecutive positions of one group are spread over the 56 bits (no range of the
    // splitters takes one pe's block of positions whole).
    let mut low: Vec<u64> = (0..1000)
        .map(|i| HiKey::new(0, 8, i).0 as u64 & POSITION_MASK)
        .collect();
    low.sort_unstable();
    assert!(low[500] > 1 << (POSITION_BITS - 3) && low[499] < 7 << (POSITION_BITS - 3));
}

/// The local sort of refinement records (the `u128` radix sort with 32 bits, a comparison
/// sort otherwise) gives their order (group, second, position, depth).
fn sorts_refinement_records<I: Index>() {
    let mut rng = crate::dist::sample_sort::SplitMix::new(11);
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
    let mut rng = crate::dist::sample_sort::SplitMix::new(3);
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

/// The unresolved positions' bits list and count what a plain filter of the depths does (all,
/// by key range from one count, in the words taken), at lengths around the word, block and
/// piece sizes, dense and sparse, on 1 and 3 threads.
#[test]
fn open_positions_list_and_count_the_unresolved() {
    let words = OpenPositions::PIECE_WORDS;
    let lens = [
        0,
        1,
        63,
        64,
        65,
        4095,
        4097,
        64 * words - 1,
        64 * words + 70,
        3 * 64 * words,
    ];
    for threads in [1, 3] {
        let pool = crate::dist::test_pool(threads);
        pool.install(|| {
            let mut rng = crate::dist::sample_sort::SplitMix::new(5);
            for len in lens {
                for every in [1, 2, 97, 100_000] {
                    let depth_of: Vec<Depth> = (0..len)
                        .map(|_| {
                            if rng.next().is_multiple_of(every) {
                                Depth::at_most(8)
                            } else {
                                Depth::RESOLVED
                            }
                        })
                        .collect();
                    let open: Vec<usize> = (0..len)
                        .filter(|&j| depth_of[j] != Depth::RESOLVED)
                        .collect();
                    let o = OpenPositions::of(&depth_of, |d| d != Depth::RESOLVED);
                    assert_eq!(o.count, open.len());
                    for (j, &at) in open.iter().enumerate() {
                        assert_eq!(o.nth(j), at, "len {len}, every {every}, j {j}");
                    }
                    let odd: Vec<u32> = o.listed(|j| j % 2 == 1, |j| j as u32);
                    let want: Vec<u32> = open
                        .iter()
                        .filter(|&&j| j % 2 == 1)
                        .map(|&j| j as u32)
                        .collect();
                    assert_eq!(odd, want, "len {len}, every {every}");
                    // Ranges counted in one pass, each filled in one more: position j in
                    // range j mod 5, every third position in none.
                    let range_of = |j: usize| (!j.is_multiple_of(3)).then_some(j % 5);
                    let counts = o.count_by_range(5, range_of);
                    for r in 0..5 {
                        let got: Vec<u32> = o.listed_counted(
                            &counts,
                            5,
                            r,
                            |j| range_of(j) == Some(r),
                            |j| j as u32,
                        );
                        let want: Vec<u32> = open
                            .iter()
                            .filter(|&&j| range_of(j) == Some(r))
                            .map(|&j| j as u32)
                            .collect();
                        assert_eq!(got, want, "len {len}, every {every}, range {r}");
                    }
                    let mut each = Vec::new();
                    o.each_in(|w| w % 3 != 1, |j| each.push(j));
                    let want: Vec<usize> = open
                        .iter()
                        .copied()
                        .filter(|&j| (j / 64) % 3 != 1)
                        .collect();
                    assert_eq!(each, want, "len {len}, every {every}: each_in");
                }
            }
        });
    }
}
