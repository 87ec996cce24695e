//! The distributed primitives of `psa::dist`: layouts, exchange_by and rebalance (also through a
//! small MPI count limit), right_halo and last_of_left across empty pes, name_sorted, and
//! sample_sort, sort_in_rounds, name_round, rank_round and GroupNames, on every pe at p = 1, 2, 3, 4, 7 (see `common::harness`).

mod common;

use common::harness::{ctx_with, length_patterns, mpi_test, offsets};
use common::Rng;
use mpi::topology::SimpleCommunicator;
use psa::comm::Comm;
use psa::internals::{
    exchange, exchange_by, exchange_tail, fetch, last_of_left, name_round, name_sorted, rank_round,
    rebalance, right_halo, sample_sort, send_to_owners, send_to_owners_in_pieces, sort_in_rounds,
    GroupNames, Groups, Layout, OwnerCursor, Ranges, SortKey,
};
use psa::{Algo, Ctx};

// ------------------------------------------------------------------------------------------------
// Layout

/// Layout::block for n up to 1001 over 1 to 9 pes: contiguous, balanced ranges; owner and
/// OwnerCursor agree with the ranges. (Local: no MPI job.)
#[test]
fn layout_block() {
    for n in [0usize, 1, 2, 3, 5, 7, 100, 1001] {
        for p in 1..=9 {
            let l = Layout::block(n, p);
            let case = format!("block({n}, {p})");
            assert_eq!((l.len(), l.pes()), (n, p), "{case}: len, pes");
            assert_eq!(l.is_empty(), n == 0, "{case}: is_empty");
            assert_eq!(l.offsets().len(), p + 1, "{case}: offsets");
            assert_eq!(l.offsets()[0], 0, "{case}: offsets");
            for r in 0..p {
                assert!(l.start(r) <= l.end(r), "{case}: pe {r}'s range reversed");
                assert_eq!(
                    l.local_len(r),
                    l.end(r) - l.start(r),
                    "{case}: local_len({r})"
                );
                let lo = n / p;
                assert!(
                    l.local_len(r) == lo || l.local_len(r) == lo + 1,
                    "{case}: pe {r} holds {} (not balanced)",
                    l.local_len(r)
                );
                if r + 1 < p {
                    assert_eq!(
                        l.end(r),
                        l.start(r + 1),
                        "{case}: ranges not contiguous at {r}"
                    );
                }
            }
            let mut cur = OwnerCursor::new(&l);
            for i in 0..n {
                let o = l.owner(i);
                assert!(l.start(o) <= i && i < l.end(o), "{case}: owner({i}) = {o}");
                assert_eq!(cur.owner(i), o, "{case}: OwnerCursor and owner at {i}");
            }
        }
    }
}

/// Layout::from_local_len with empty pes: the offsets, owner and OwnerCursor.
#[test]
fn layout_from_local_len() {
    mpi_test(|comm| {
        let p = comm.size();
        let me = comm.rank();
        for (name, lens) in length_patterns(p) {
            let l = Layout::from_local_len(comm, lens[me]);
            let o = offsets(&lens);
            assert_eq!(l.offsets(), &o[..], "{name}: offsets");
            assert_eq!(l.len(), o[p], "{name}: len");
            let mut cur = OwnerCursor::new(&l);
            for i in 0..l.len() {
                let ow = l.owner(i);
                assert!(
                    l.start(ow) <= i && i < l.end(ow),
                    "{name}: owner({i}) = {ow} with offsets {o:?}"
                );
                assert_eq!(cur.owner(i), ow, "{name}: OwnerCursor({i}), offsets {o:?}");
            }
        }
    });
}

// ------------------------------------------------------------------------------------------------
// exchange_by, rebalance

/// exchange_by sends each record to the pe its function names; the receiver gets them by source
/// pe, then in their original order.
fn check_exchange_by(comm: &Comm) {
    let p = comm.size();
    let me = comm.rank();
    let dest = |x: &u64| ((x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize) % p;
    for (name, lens) in length_patterns(p) {
        let o = offsets(&lens);
        let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64).collect();
        let got = exchange_by(comm, &local, dest);
        // Ids ascend with the source pe and within it, so "by source, then original order" is
        // simply ascending here.
        let want: Vec<u64> = (0..o[p] as u64).filter(|x| dest(x) == me).collect();
        assert_eq!(got, want, "{name}: exchange_by");
    }
}

/// rebalance from every length pattern into the block layout and into every other pattern of the
/// same total.
fn check_rebalance(comm: &Comm) {
    let p = comm.size();
    let me = comm.rank();
    let pats = length_patterns(p);
    for (name, lens) in &pats {
        let o = offsets(lens);
        let n = o[p];
        let mut targets = vec![("block".to_string(), Layout::block(n, p))];
        for (tn, tl) in &pats {
            if offsets(tl)[p] == n && tn != name {
                targets.push((tn.clone(), Layout::from_local_len(comm, tl[me])));
            }
        }
        for (tname, target) in targets {
            let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64 + 1000).collect();
            let got = rebalance(comm, local, &target);
            let want: Vec<u64> = (target.start(me)..target.end(me))
                .map(|i| i as u64 + 1000)
                .collect();
            assert_eq!(got, want, "rebalance from '{name}' to '{tname}'");
        }
    }
}

/// The world communicator with MPI calls of at most `max_count` elements (chunked all-to-alls).
fn with_max_count(max_count: usize) -> Comm {
    Comm::with_max_count(SimpleCommunicator::world(), max_count)
}

#[test]
fn exchange_by_uneven() {
    mpi_test(check_exchange_by);
}

#[test]
fn exchange_by_max_count_1() {
    mpi_test(|_| check_exchange_by(&with_max_count(1)));
}

#[test]
fn exchange_by_max_count_3() {
    mpi_test(|_| check_exchange_by(&with_max_count(3)));
}

#[test]
fn exchange_by_max_count_7() {
    mpi_test(|_| check_exchange_by(&with_max_count(7)));
}

#[test]
fn rebalance_between_uneven_layouts() {
    mpi_test(check_rebalance);
}

#[test]
fn rebalance_max_count_1() {
    mpi_test(|_| check_rebalance(&with_max_count(1)));
}

#[test]
fn rebalance_max_count_3() {
    mpi_test(|_| check_rebalance(&with_max_count(3)));
}

#[test]
fn rebalance_max_count_7() {
    mpi_test(|_| check_rebalance(&with_max_count(7)));
}

/// Records held in one layout (each pe its pattern's share) go to the owners of a reversed index
/// in another layout (the block layout, and every pattern of the same total), into one slice and
/// into two at once.
fn check_send_to_owners(comm: &Comm) {
    let p = comm.size();
    let me = comm.rank();
    let pats = length_patterns(p);
    for (name, lens) in &pats {
        let o = offsets(lens);
        let n = o[p];
        let mut targets = vec![("block".to_string(), Layout::block(n, p))];
        for (tn, tl) in &pats {
            if offsets(tl)[p] == n {
                targets.push((tn.clone(), Layout::from_local_len(comm, tl[me])));
            }
        }
        for (tname, target) in targets {
            // Record j holds index n − 1 − j and value 3j + 1.
            let recs: Vec<[u64; 2]> = (o[me]..o[me + 1])
                .map(|j| [(n - 1 - j) as u64, 3 * j as u64 + 1])
                .collect();
            let want: Vec<u64> = (target.start(me)..target.end(me))
                .map(|i| 3 * (n - 1 - i) as u64 + 1)
                .collect();
            let mut got = vec![0u64; target.local_len(me)];
            send_to_owners(comm, &target, recs.clone(), &mut got[..], |r| {
                (r[0] as usize, r[1])
            });
            assert_eq!(got, want, "{name} into {tname}: send_to_owners");
            let (mut a, mut b) = (vec![0u64; got.len()], vec![0u32; got.len()]);
            send_to_owners(comm, &target, recs.clone(), (&mut a[..], &mut b[..]), |r| {
                (r[0] as usize, (r[1], r[1] as u32 + 1))
            });
            let want_b: Vec<u32> = want.iter().map(|&v| v as u32 + 1).collect();
            assert!(
                a == want && b == want_b,
                "{name} into {tname}: send_to_owners into two slices got {a:?}, {b:?}"
            );
            // In pieces: every count of steps, more steps than records included.
            for pieces in [1, 2, 3, 7, 64] {
                let mut got = vec![0u64; target.local_len(me)];
                send_to_owners_in_pieces(comm, &target, recs.clone(), &mut got[..], pieces, |r| {
                    (r[0] as usize, r[1])
                });
                assert_eq!(got, want, "{name} into {tname}: {pieces} pieces");
            }
        }
    }
}

/// `fetch` answers every query with the owner's value, in query order: queries mostly this pe's
/// own (i + d for small d, crossing into the next pes near the end: prefix doubling), mostly
/// others' (a random index), and every other one of each; on every length pattern and on a
/// block of 3 × 2^16 + 5 positions per pe (the chunked loops), with one and three threads.
fn check_fetch() {
    for threads in [1, 3] {
        let ctx = ctx_with(Algo::Dc3, 64, |c| c.threads = threads);
        ctx.install(|ctx| {
            let comm = &ctx.comm;
            let p = comm.size();
            let me = comm.rank();
            let mut pats = length_patterns(p);
            pats.push(("large".into(), vec![3 * (1 << 16) + 5; p]));
            for (name, lens) in &pats {
                let o = offsets(lens);
                let n = o[p];
                if n == 0 {
                    continue;
                }
                let layout = Layout::from_local_len(comm, lens[me]);
                let value = |i: usize| 3 * i as u64 + 1;
                let mut rng = Rng::new((me * 1000 + n) as u64);
                let near: Vec<u64> = (o[me]..o[me + 1])
                    .map(|i| ((i + i % 5) % n) as u64)
                    .collect();
                let random: Vec<u64> = (o[me]..o[me + 1]).map(|_| rng.below(n as u64)).collect();
                let mixed: Vec<u64> = near
                    .iter()
                    .zip(&random)
                    .map(|(&a, &b)| if a % 2 == 0 { a } else { b })
                    .collect();
                for (kind, queries) in [("near", near), ("random", random), ("mixed", mixed)] {
                    let got: Vec<u64> = fetch(comm, &layout, &queries, |j| value(o[me] + j));
                    let want: Vec<u64> = queries.iter().map(|&q| value(q as usize)).collect();
                    assert!(
                        got == want,
                        "{name}, {kind} queries, {threads} threads: fetch answered wrongly"
                    );
                }
            }
        });
    }
}

#[test]
fn fetch_answers_own_and_others_queries() {
    mpi_test(|_| check_fetch());
}

#[test]
fn send_to_owners_between_uneven_layouts() {
    mpi_test(check_send_to_owners);
}

#[test]
fn send_to_owners_max_count_1() {
    mpi_test(|_| check_send_to_owners(&with_max_count(1)));
}

#[test]
fn send_to_owners_max_count_7() {
    mpi_test(|_| check_send_to_owners(&with_max_count(7)));
}

#[test]
fn send_to_owners_in_exchange_rounds() {
    mpi_test(|_| {
        let comm = with_max_count(i32::MAX as usize);
        comm.set_round_bytes(24);
        check_send_to_owners(&comm)
    });
}

/// `exchange` in rounds (a small round volume, as under a memory budget; also with chunked MPI
/// calls inside the rounds) delivers what `exchange_by` delivers, in the same order: by source,
/// within a source in the original order; so does `exchange_tail` for the tail it takes, in
/// rounds and in one, leaving the records before it.
#[test]
fn exchange_in_rounds_equals_one_round() {
    mpi_test(|world| {
        let p = world.size();
        let me = world.rank();
        for (bytes, max_count) in [
            (8, usize::MAX),
            (24, usize::MAX),
            (1000, usize::MAX),
            (40, 3),
        ] {
            let comm = with_max_count(max_count.min(i32::MAX as usize));
            comm.set_round_bytes(bytes);
            for (name, lens) in length_patterns(p) {
                let o = offsets(&lens);
                let local: Vec<u64> = (o[me]..o[me + 1])
                    .map(|i| (i as u64) * 7919 % 1009)
                    .collect();
                let dest = |x: &u64| (*x as usize * 31) % p;
                let want = exchange_by(world, &local, dest);
                // The tail from a third of the records (none, or all of them, on short pes).
                let from = local.len() / 3;
                let (records, want_rest) = (local.clone(), local[..from].to_vec());
                let want_tail = exchange_by(world, &local[from..], dest);
                let got = exchange(&comm, local, dest);
                assert_eq!(
                    got, want,
                    "{name}: rounds of {bytes} bytes, max count {max_count}"
                );
                for (label, c) in [("rounds", &comm), ("one round", world)] {
                    let mut rest = records.clone();
                    let got = exchange_tail(c, &mut rest, from, dest);
                    assert!(
                        got == want_tail && rest == want_rest,
                        "{name}: exchange_tail in {label} of {bytes} bytes, max count {max_count}"
                    );
                }
            }
        }
    });
}

// ------------------------------------------------------------------------------------------------
// shift: right_halo, last_of_left

/// right_halo(k) of u64 and u8 records: the next k records of the global sequence after this pe's
/// (fewer at the end), across empty pes.
#[test]
fn right_halo_across_empty_pes() {
    mpi_test(|comm| {
        let p = comm.size();
        let me = comm.rank();
        for (name, lens) in length_patterns(p) {
            let o = offsets(&lens);
            let n = o[p];
            for k in [0usize, 1, 2, 3, 5, 60] {
                let after = o[me + 1]..(o[me + 1] + k).min(n);
                let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64 * 2 + 1).collect();
                let want: Vec<u64> = after.clone().map(|i| i as u64 * 2 + 1).collect();
                assert_eq!(
                    right_halo(comm, &local, k),
                    want,
                    "right_halo(k = {k}) of u64, {name} {lens:?}"
                );
                let local: Vec<u8> = (o[me]..o[me + 1]).map(|i| (i * 5 + 1) as u8).collect();
                let want: Vec<u8> = after.map(|i| (i * 5 + 1) as u8).collect();
                assert_eq!(
                    right_halo(comm, &local, k),
                    want,
                    "right_halo(k = {k}) of u8, {name} {lens:?}"
                );
            }
        }
    });
}

/// last_of_left of u64 and u8 records: the global sequence's record just before this pe's (None
/// on pe 0 and behind only empty pes).
#[test]
fn last_of_left_across_empty_pes() {
    mpi_test(|comm| {
        let p = comm.size();
        let me = comm.rank();
        for (name, lens) in length_patterns(p) {
            let o = offsets(&lens);
            let before = o[me].checked_sub(1);
            let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64 + 7).collect();
            assert_eq!(
                last_of_left(comm, &local),
                before.map(|i| i as u64 + 7),
                "last_of_left of u64, {name} {lens:?}"
            );
            let local: Vec<u8> = (o[me]..o[me + 1]).map(|i| i as u8 ^ 0xa5).collect();
            assert_eq!(
                last_of_left(comm, &local),
                before.map(|i| i as u8 ^ 0xa5),
                "last_of_left of u8, {name} {lens:?}"
            );
        }
    });
}

// ------------------------------------------------------------------------------------------------
// naming

/// name_sorted over sorted sequences with runs of equal keys crossing pe boundaries (keys not
/// consecutive numbers), and with `same` looking at one field of a record only.
#[test]
fn name_sorted_runs() {
    mpi_test(|comm| {
        let p = comm.size();
        let me = comm.rank();
        let mut pats = length_patterns(p);
        pats.push(("long".into(), (0..p).map(|r| 100 + r * 13).collect()));
        for (name, lens) in pats {
            let o = offsets(&lens);
            let n = o[p];
            for run in [1usize, 2, 3, 7, 1000] {
                let key = |i: usize| (i / run) as u64 * 10 + 3;
                let local: Vec<u64> = (o[me]..o[me + 1]).map(key).collect();
                let (names, distinct) = name_sorted(comm, &local, |a, b| a == b);
                let want: Vec<u64> = (o[me]..o[me + 1]).map(|i| (i / run) as u64 + 1).collect();
                assert_eq!(names, want, "name_sorted {name} {lens:?}, runs of {run}");
                assert_eq!(
                    distinct,
                    n.div_ceil(run) as u64,
                    "name_sorted {name}, runs of {run}: distinct names"
                );
            }
            let local: Vec<[u64; 2]> = (o[me]..o[me + 1])
                .map(|i| [(i / 4) as u64, i as u64])
                .collect();
            let (names, _) = name_sorted(comm, &local, |a, b| a[0] == b[0]);
            let want: Vec<u64> = (o[me]..o[me + 1]).map(|i| (i / 4) as u64 + 1).collect();
            assert_eq!(names, want, "name_sorted on a record field, {name}");
        }
    });
}

// ------------------------------------------------------------------------------------------------
// sample sort

/// Checks a sample-sort result: each pe's run is sorted, runs are in pe order, every input record
/// is there exactly once (records carry their global index in the low 32 bits), and, when
/// `check_balance`, the fullest pe holds at most 1.5·n/p + 64 records. Collective.
fn assert_sorted<T: SortKey + std::fmt::Debug>(
    comm: &Comm,
    what: &str,
    out: &[T],
    n: usize,
    index_of: impl Fn(&T) -> u64,
    check_balance: bool,
) {
    let p = comm.size();
    let me = comm.rank();
    if let Some(j) = out.windows(2).position(|w| w[0] >= w[1]) {
        panic!(
            "{what}: pe {me} is not sorted at {j}: {:?} >= {:?}",
            out[j],
            out[j + 1]
        );
    }
    if let (Some(prev), Some(first)) = (last_of_left(comm, out), out.first()) {
        assert!(
            prev < *first,
            "{what}: pe {me}'s first record {first:?} is not above its left neighbour's last {prev:?}"
        );
    }
    let total = comm.all_reduce_sum(out.len() as u64) as usize;
    assert_eq!(total, n, "{what}: records after the sort");
    // Every index exactly once: send each to the owner of its index in a block layout.
    let l = Layout::block(n, p);
    let idx: Vec<u64> = out.iter().map(&index_of).collect();
    assert!(
        idx.iter().all(|&i| (i as usize) < n),
        "{what}: an index is out of range"
    );
    let got = exchange_by(comm, &idx, |&i| l.owner(i as usize));
    let mut seen = vec![false; l.local_len(me)];
    for i in got {
        let s = &mut seen[i as usize - l.start(me)];
        assert!(!*s, "{what}: the record with index {i} appears twice");
        *s = true;
    }
    assert!(seen.iter().all(|&s| s), "{what}: some record went missing");
    if check_balance {
        let max = comm.all_reduce_max(out.len() as u64) as f64;
        let bound = 1.5 * n as f64 / p as f64 + 64.0;
        assert!(
            max <= bound,
            "{what}: the fullest pe holds {max} records of {n} (bound {bound:.0} = 1.5·n/p + 64)"
        );
    }
}

/// sample_sort of equal u64 keys, few distinct u64 keys, random u128 keys and equal u128 keys, for
/// n from 0 (and n < p) to 60 000, from the block layout and with everything on the first or the
/// last pe; equal keys must still come out balanced.
fn check_sample_sort(ctx: &Ctx, label: &str) {
    let comm = &ctx.comm;
    let p = comm.size();
    let me = comm.rank();
    let mut rng = Rng::new(42 + me as u64);
    type Shape = Box<dyn Fn(usize) -> Vec<usize>>;
    let shapes: Vec<(&str, Shape)> = vec![
        (
            "block",
            Box::new(move |n| (0..p).map(|r| Layout::block(n, p).local_len(r)).collect()),
        ),
        (
            "all on pe 0",
            Box::new(move |n| (0..p).map(|r| if r == 0 { n } else { 0 }).collect()),
        ),
        (
            "all on the last pe",
            Box::new(move |n| (0..p).map(|r| if r == p - 1 { n } else { 0 }).collect()),
        ),
    ];
    for n in [0usize, 1, 3, 1000, 60_000] {
        for (shape, lens_of) in &shapes {
            let o = offsets(&lens_of(n));
            let mine = o[me]..o[me + 1];
            let big = n >= 1000;
            let low32 = |x: &u64| x & 0xffff_ffff;
            let low32_128 = |x: &u128| (*x as u64) & 0xffff_ffff;
            // All keys equal: (7 << 32) | global index.
            let data: Vec<u64> = mine.clone().map(|i| (7u64 << 32) | i as u64).collect();
            let what = format!("{label}: equal u64 keys, n = {n}, {shape}");
            assert_sorted(comm, &what, &sample_sort(ctx, data), n, low32, big);
            // Few distinct keys in random order.
            let data: Vec<u64> = mine
                .clone()
                .map(|i| (rng.below(3) << 32) | i as u64)
                .collect();
            let what = format!("{label}: 3 distinct u64 keys, n = {n}, {shape}");
            assert_sorted(comm, &what, &sample_sort(ctx, data), n, low32, big);
            // Random 128-bit keys, index in the low bits.
            let data: Vec<u128> = mine
                .clone()
                .map(|i| {
                    ((rng.next_u64() as u128) << 64) | (rng.below(2) as u128) << 32 | i as u128
                })
                .collect();
            let what = format!("{label}: random u128 keys, n = {n}, {shape}");
            assert_sorted(comm, &what, &sample_sort(ctx, data), n, low32_128, big);
            // All u128 keys equal.
            let data: Vec<u128> = mine.map(|i| (u128::MAX << 32) | i as u128).collect();
            let what = format!("{label}: equal u128 keys, n = {n}, {shape}");
            assert_sorted(comm, &what, &sample_sort(ctx, data), n, low32_128, big);
        }
    }
}

/// sample_sort: equal keys balanced, uneven input, n < p.
#[test]
fn sample_sort_keys_and_shapes() {
    mpi_test(|_| {
        let ctx = ctx_with(Algo::Dc3, 1 << 20, |_| {});
        check_sample_sort(&ctx, "sample_sort");
    });
}

/// sample_sort with MPI calls of at most 7 elements.
#[test]
fn sample_sort_max_count_7() {
    mpi_test(|_| {
        let ctx = ctx_with(Algo::Dc3, 1 << 20, |c| c.comm.mpi_max_count = 7);
        check_sample_sort(&ctx, "sample_sort (max count 7)");
    });
}

// ------------------------------------------------------------------------------------------------
// sort in rounds

/// The key of global record i: one of `classes` values (a hash of i) above the index, so keys are
/// unique and every pe can compute the whole sorted sequence.
fn round_key(i: u64, classes: u64) -> u64 {
    let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
    ((h % classes) << 32) | i
}

/// sort_in_rounds for 1, 2, 7 and 64 rounds, n from 0 (and n < p) to 20 000, 1, 3 and 2^20 key
/// classes, from the block layout and with every record on one pe: each round's part is the
/// slice of the whole sorted sequence at `offset`; rounds come in order, every pe sees each once,
/// `before` counts the earlier rounds' records, `prev`/`next` are the neighbours in the whole
/// sequence (`next` only within the round), `generate` is asked for key ranges that cover the
/// keys once, and rounds hold about n / rounds records when n is large.
fn check_sort_in_rounds(ctx: &Ctx) {
    let comm = &ctx.comm;
    let p = comm.size();
    let me = comm.rank();
    for n in [0usize, 1, 3, 1000, 20_000] {
        for classes in [1u64, 3, 1 << 20] {
            for all_on_one in [false, true] {
                let lens: Vec<usize> = if all_on_one {
                    (0..p).map(|r| if r == p - 1 { n } else { 0 }).collect()
                } else {
                    (0..p).map(|r| Layout::block(n, p).local_len(r)).collect()
                };
                let o = offsets(&lens);
                let mine: Vec<u64> = (o[me]..o[me + 1])
                    .map(|i| round_key(i as u64, classes))
                    .collect();
                let mut whole: Vec<u64> = (0..n as u64).map(|i| round_key(i, classes)).collect();
                whole.sort_unstable();
                for rounds in [1usize, 2, 7, 64] {
                    let what = format!(
                        "n = {n}, {classes} classes, {rounds} rounds, {}",
                        if all_on_one {
                            "all on the last pe"
                        } else {
                            "block"
                        }
                    );
                    let asked = std::cell::RefCell::new(Vec::new());
                    let mut seen = 0usize; // rounds consumed
                    let mut got = 0u64; // records of this pe over all rounds
                    let mut biggest = 0u64; // records of the largest round
                    let mut made = 0usize; // ranges there are
                    let most = std::cell::Cell::new(0usize); // this pe's most for one range
                    sort_in_rounds(
                        ctx,
                        "sort",
                        Ranges::new(rounds),
                        mine.len(),
                        |j| mine[j],
                        |bounds, k| {
                            let (lo, hi) = bounds.range(k);
                            asked.borrow_mut().push((lo, hi));
                            let part: Vec<u64> = mine
                                .iter()
                                .copied()
                                .filter(|&x| lo.is_none_or(|l| l <= x) && hi.is_none_or(|h| x < h))
                                .collect();
                            most.set(most.get().max(part.len()));
                            part
                        },
                        |r| {
                            assert_eq!(r.index, seen, "{what}: rounds out of order");
                            if r.index == 0 {
                                made = r.rounds;
                            }
                            assert_eq!(r.rounds, made, "{what}: round count changed");
                            seen += 1;
                            let at = r.offset as usize;
                            let len = r.sorted.len();
                            assert!(at + len <= n, "{what}: round {} past the end", r.index);
                            assert_eq!(
                                r.sorted[..],
                                whole[at..at + len],
                                "{what}: round {} on pe {me} at offset {at}",
                                r.index
                            );
                            assert!(r.offset >= r.before, "{what}: offset before the round");
                            assert_eq!(
                                r.prev,
                                at.checked_sub(1).map(|k| whole[k]),
                                "{what}: prev of round {} on pe {me}",
                                r.index
                            );
                            let round_total = comm.all_reduce_sum(len as u64);
                            let round_end = (r.before + round_total) as usize;
                            let want_next = (at + len < round_end).then(|| whole[at + len]);
                            assert_eq!(
                                r.next, want_next,
                                "{what}: next of round {} on pe {me}",
                                r.index
                            );
                            biggest = biggest.max(round_total);
                            got += len as u64;
                        },
                    );
                    assert_eq!(seen, made, "{what}: rounds consumed");
                    assert_eq!(comm.all_reduce_sum(got), n as u64, "{what}: records in all");
                    // The ranges asked for are consecutive and cover every key once.
                    let asked = asked.into_inner();
                    assert_eq!(asked.len(), made, "{what}: generate calls");
                    assert!(
                        asked[0].0.is_none() && asked[made - 1].1.is_none(),
                        "{what}: open ends"
                    );
                    // Each pe's part of a range stays near its share (n / p / rounds), even
                    // with every record on one pe: then there are more ranges (up to 256).
                    if n >= 20_000 && classes > 3 {
                        assert!(made >= rounds, "{what}: {made} ranges");
                    }
                    if n >= 20_000 && classes > 1 && rounds > 1 && made < 256 {
                        let most = most.get();
                        let bound = 3 * n / (p * rounds) + 64;
                        assert!(
                            most <= bound,
                            "{what}: pe {me} made {most} records of one range (bound {bound})"
                        );
                    }
                    for w in asked.windows(2) {
                        assert_eq!(w[0].1, w[1].0, "{what}: ranges not consecutive");
                    }
                    if n >= 20_000 && classes > 1 && rounds > 1 {
                        let bound = 2 * n / rounds + 64;
                        assert!(
                            biggest as usize <= bound,
                            "{what}: a round holds {biggest} of {n} records (bound {bound})"
                        );
                    }
                }
            }
        }
    }
}

/// sort_in_rounds: rounds in order, each the right slice of the whole sorted sequence.
#[test]
fn sort_in_rounds_slices_and_neighbours() {
    mpi_test(|_| {
        let ctx = ctx_with(Algo::Dc3, 1 << 20, |_| {});
        check_sort_in_rounds(&ctx);
    });
}

/// name_round over sort_in_rounds for 1, 2, 7 and 64 rounds, n from 0 to 20 000, 1, 3, 50 and
/// 2^20 key classes (records of one class straddle rounds and pes): every record's name is 1 +
/// the number of smaller classes, and the rounds' new names add up to the classes present.
#[test]
fn name_round_continues_across_rounds() {
    mpi_test(|_| {
        let ctx = ctx_with(Algo::Dc3, 1 << 20, |_| {});
        let comm = &ctx.comm;
        let (p, me) = (comm.size(), comm.rank());
        for n in [0usize, 1, 3, 1000, 20_000] {
            for classes in [1u64, 3, 50, 1 << 20] {
                let l = Layout::block(n, p);
                let mine: Vec<u64> = (l.start(me)..l.end(me))
                    .map(|i| round_key(i as u64, classes))
                    .collect();
                let mut whole: Vec<u64> = (0..n as u64).map(|i| round_key(i, classes)).collect();
                whole.sort_unstable();
                // The oracle: 1 + the classes smaller than each record's.
                let mut want = Vec::with_capacity(n);
                for (k, &x) in whole.iter().enumerate() {
                    let new = k == 0 || whole[k - 1] >> 32 != x >> 32;
                    want.push(want.last().copied().unwrap_or(0) + u64::from(new));
                }
                let present = want.last().copied().unwrap_or(0);
                for rounds in [1usize, 2, 7, 64] {
                    let what = format!("n = {n}, {classes} classes, {rounds} rounds");
                    let mut distinct = 0u64;
                    sort_in_rounds(
                        &ctx,
                        "sort",
                        Ranges::new(rounds),
                        mine.len(),
                        |j| mine[j],
                        |bounds, k| {
                            let (lo, hi) = bounds.range(k);
                            mine.iter()
                                .copied()
                                .filter(|&x| lo.is_none_or(|l| l <= x) && hi.is_none_or(|h| x < h))
                                .collect()
                        },
                        |r| {
                            let (names, new) =
                                name_round(comm, &r, distinct, |a, b| a >> 32 == b >> 32);
                            distinct += new;
                            let at = r.offset as usize;
                            assert_eq!(
                                names[..],
                                want[at..at + names.len()],
                                "{what}: names of round {} on pe {me}",
                                r.index
                            );
                        },
                    );
                    assert_eq!(distinct, present, "{what}: distinct names");
                }
            }
        }
    });
}

/// GroupNames over sort_in_rounds for 1, 2, 7 and 64 rounds, n from 0 to 20 000, 1, 3, 50 and
/// 2^20 key classes, names counted from 0 in 32 bits: every record's name is the number of
/// records of smaller classes; a record is called alone exactly when it is alone in its class,
/// except a round's last record while later rounds follow, which is called alone when it starts
/// its class (whether the next round continues it is the caller's to settle); `first_starts`
/// tells whether a pe's first record starts its class.
#[test]
fn group_names_start_at_their_first_record() {
    mpi_test(|_| {
        let ctx = ctx_with(Algo::Dc3, 1 << 20, |_| {});
        let comm = &ctx.comm;
        let (p, me) = (comm.size(), comm.rank());
        for n in [0usize, 1, 3, 1000, 20_000] {
            for classes in [1u64, 3, 50, 1 << 20] {
                let l = Layout::block(n, p);
                let mine: Vec<u64> = (l.start(me)..l.end(me))
                    .map(|i| round_key(i as u64, classes))
                    .collect();
                let mut whole: Vec<u64> = (0..n as u64).map(|i| round_key(i, classes)).collect();
                whole.sort_unstable();
                let class = |k: usize| whole[k] >> 32;
                let starts = |k: usize| k == 0 || class(k - 1) != class(k);
                let ends = |k: usize| k + 1 == n || class(k + 1) != class(k);
                let mut want = Vec::with_capacity(n);
                for k in 0..n {
                    want.push(if starts(k) { k as u32 } else { want[k - 1] });
                }
                for rounds in [1usize, 2, 7, 64] {
                    let what = format!("n = {n}, {classes} classes, {rounds} rounds");
                    let mut names = GroupNames::new(0);
                    sort_in_rounds(
                        &ctx,
                        "sort",
                        Ranges::new(rounds),
                        mine.len(),
                        |j| mine[j],
                        |bounds, k| {
                            let (lo, hi) = bounds.range(k);
                            mine.iter()
                                .copied()
                                .filter(|&x| lo.is_none_or(|l| l <= x) && hi.is_none_or(|h| x < h))
                                .collect()
                        },
                        |r| {
                            let got: Groups<u32> = names.round(comm, &r, |a, b| a >> 32 == b >> 32);
                            let at = r.offset as usize;
                            let len = r.sorted.len();
                            let round = r.index;
                            assert_eq!(
                                got.names[..],
                                want[at..at + len],
                                "{what}: names of round {round} on pe {me}"
                            );
                            assert_eq!(got.first_starts, (len > 0).then(|| starts(at)), "{what}");
                            for (j, &a) in got.alone.iter().enumerate() {
                                let k = at + j;
                                let open = r.open_end() && j + 1 == len;
                                let truth = starts(k) && (ends(k) || open);
                                assert_eq!(a, truth, "{what}: record {k} alone");
                            }
                        },
                    );
                }
            }
        }
    });
}

/// rank_round over sort_in_rounds for 1, 2, 7 and 64 rounds, n from 0 to 20 000, 1, 3, 50 and
/// 2^20 key classes (many classes of one record; records of one class straddle rounds and pes):
/// every record's name is 1 + the number of records of smaller classes, a record reported
/// unique is alone in its class, and in one round every record alone in its class is reported
/// unique (across rounds a round's last record may be reported shared); the rounds' new keys
/// add up to the classes present.
#[test]
fn rank_round_names_by_rank_and_tells_unique_keys() {
    mpi_test(|_| {
        let ctx = ctx_with(Algo::Dc3, 1 << 20, |_| {});
        let comm = &ctx.comm;
        let (p, me) = (comm.size(), comm.rank());
        for n in [0usize, 1, 3, 1000, 20_000] {
            for classes in [1u64, 3, 50, 1 << 20] {
                let l = Layout::block(n, p);
                let mine: Vec<u64> = (l.start(me)..l.end(me))
                    .map(|i| round_key(i as u64, classes))
                    .collect();
                let mut whole: Vec<u64> = (0..n as u64).map(|i| round_key(i, classes)).collect();
                whole.sort_unstable();
                // The oracle: where each record's class starts, and whether it is alone.
                let class = |k: usize| whole[k] >> 32;
                let mut want = Vec::with_capacity(n);
                let mut alone = Vec::with_capacity(n);
                for k in 0..n {
                    let start = if k > 0 && class(k - 1) == class(k) {
                        want[k - 1]
                    } else {
                        k as u64 + 1
                    };
                    want.push(start);
                    alone.push(
                        (k == 0 || class(k - 1) != class(k))
                            && (k + 1 == n || class(k + 1) != class(k)),
                    );
                }
                let present = (0..n)
                    .filter(|&k| k == 0 || class(k - 1) != class(k))
                    .count();
                for rounds in [1usize, 2, 7, 64] {
                    let what = format!("n = {n}, {classes} classes, {rounds} rounds");
                    let (mut distinct, mut last) = (0u64, 0u64);
                    sort_in_rounds(
                        &ctx,
                        "sort",
                        Ranges::new(rounds),
                        mine.len(),
                        |j| mine[j],
                        |bounds, k| {
                            let (lo, hi) = bounds.range(k);
                            mine.iter()
                                .copied()
                                .filter(|&x| lo.is_none_or(|l| l <= x) && hi.is_none_or(|h| x < h))
                                .collect()
                        },
                        |r| {
                            let got = rank_round(comm, &r, last, |a, b| a >> 32 == b >> 32);
                            (distinct, last) = (distinct + got.new, got.last);
                            let at = r.offset as usize;
                            let len = got.names.len();
                            let round = r.index;
                            assert_eq!(
                                got.names[..],
                                want[at..at + len],
                                "{what}: names of round {round} on pe {me}"
                            );
                            for (j, &u) in got.unique.iter().enumerate() {
                                let truth = alone[at + j];
                                assert!(!u || truth, "{what}: record {} called unique", at + j);
                                assert!(
                                    u || !truth || rounds > 1,
                                    "{what}: record {} called shared",
                                    at + j
                                );
                            }
                        },
                    );
                    assert_eq!(distinct as usize, present, "{what}: distinct keys");
                }
            }
        }
    });
}
