//! `psa::comm::Comm`, the one layer over rsmpi: reductions, scans, gathers, broadcast, agreeing on
//! errors, the streams to and from one pe, and the all-to-all (also chunked by a small MPI count
//! limit), on every pe at p = 1, 2, 3, 4, 7 (see `common::harness`).

mod common;

use common::harness::{length_patterns, mpi_test, offsets};
use mpi::topology::SimpleCommunicator;
use psa::comm::Comm;
use psa::Error;

/// all_reduce_{sum,max,min,f64} and any, values above 2^32 included.
#[test]
fn reductions() {
    mpi_test(|comm| {
        let p = comm.size() as u64;
        let r = comm.rank() as u64;
        assert_eq!(
            comm.all_reduce_sum(r + 1),
            p * (p + 1) / 2,
            "all_reduce_sum"
        );
        assert_eq!(comm.all_reduce_max(r * 3), (p - 1) * 3, "all_reduce_max");
        assert_eq!(comm.all_reduce_min(r + 10), 10, "all_reduce_min");
        assert!(comm.any(r == p - 1), "any(true on the last pe)");
        assert!(!comm.any(false), "any(false)");
        let big = 1u64 << 40;
        assert_eq!(
            comm.all_reduce_sum(big),
            big * p,
            "all_reduce_sum of values above 2^32"
        );
        let (mx, sum) = comm.all_reduce_f64(&[r as f64, 1.0]);
        assert_eq!(mx, vec![(p - 1) as f64, 1.0], "all_reduce_f64 max");
        assert_eq!(
            sum,
            vec![(p * (p - 1) / 2) as f64, p as f64],
            "all_reduce_f64 sum"
        );
        let (mx, sum) = comm.all_reduce_f64(&[]);
        assert!(mx.is_empty() && sum.is_empty(), "all_reduce_f64 of nothing");
    });
}

/// exscan_sum: pe r gets the sum over the pes before it (0 on pe 0), with zeros in between and
/// values above 2^32.
#[test]
fn exscan_sum() {
    mpi_test(|comm| {
        let r = comm.rank() as u64;
        assert_eq!(
            comm.exscan_sum(r + 1),
            r * (r + 1) / 2,
            "exscan_sum(rank + 1)"
        );
        assert_eq!(comm.exscan_sum(0), 0, "exscan_sum(0)");
        let x = if r.is_multiple_of(2) { 5u64 << 33 } else { 0 };
        let want = (0..r).filter(|q| q.is_multiple_of(2)).count() as u64 * (5u64 << 33);
        assert_eq!(comm.exscan_sum(x), want, "exscan_sum with zeros");
    });
}

/// all_gather of u64 and [u8; 3], all_gather_v of u64 and u8 over uneven lengths with empty
/// pes, and broadcast from the first, last and a middle pe.
#[test]
fn gathers_and_broadcast() {
    mpi_test(|comm| {
        let p = comm.size();
        let me = comm.rank();
        let g = comm.all_gather(me as u64 * 10 + 1);
        assert_eq!(
            g,
            (0..p).map(|r| r as u64 * 10 + 1).collect::<Vec<_>>(),
            "all_gather(u64)"
        );
        let g = comm.all_gather([me as u8, 0xff, 7]);
        assert_eq!(
            g,
            (0..p).map(|r| [r as u8, 0xff, 7]).collect::<Vec<_>>(),
            "all_gather([u8; 3])"
        );
        for (name, lens) in length_patterns(p) {
            let o = offsets(&lens);
            let local: Vec<u64> = (o[me]..o[me + 1]).map(|i| i as u64 * 3).collect();
            let want: Vec<u64> = (0..o[p]).map(|i| i as u64 * 3).collect();
            assert_eq!(comm.all_gather_v(&local), want, "all_gather_v(u64), {name}");
            let local: Vec<u8> = (o[me]..o[me + 1]).map(|i| i as u8 ^ 0x5a).collect();
            let want: Vec<u8> = (0..o[p]).map(|i| i as u8 ^ 0x5a).collect();
            assert_eq!(comm.all_gather_v(&local), want, "all_gather_v(u8), {name}");
        }
        for root in [0, p - 1, p / 2] {
            let mut x: u64 = if me == root {
                0xdead_beef_0000 + root as u64
            } else {
                me as u64
            };
            comm.broadcast(&mut x, root);
            assert_eq!(x, 0xdead_beef_0000 + root as u64, "broadcast from {root}");
        }
    });
}

/// agree: Ok everywhere stays Ok; with errors on some pes, the lowest failing pe keeps its own
/// error and every other pe gets Remote naming it.
#[test]
fn agree() {
    mpi_test(|comm| {
        let p = comm.size();
        let me = comm.rank();
        let ok: psa::Result<u32> = Ok(5);
        assert!(
            matches!(comm.agree(ok), Ok(5)),
            "agree(Ok) on every pe must stay Ok"
        );
        let failing = [p - 1, p / 2];
        let lowest = *failing.iter().min().unwrap();
        let mine: psa::Result<u32> = if failing.contains(&me) {
            Err(Error::Invalid(format!("boom on {me}")))
        } else {
            Ok(1)
        };
        match comm.agree(mine) {
            Err(Error::Invalid(m)) if me == lowest => {
                assert_eq!(m, format!("boom on {me}"), "the own error changed")
            }
            Err(Error::Remote { pe, .. }) if me != lowest => {
                assert_eq!(pe, lowest, "Remote names the wrong pe")
            }
            other => panic!("agree with errors on {failing:?}: pe {me} got {other:?}"),
        }
    });
}

/// stream_to_root and stream_from_root: every record arrives once, in pe order and in pieces of
/// at most the given size, for every root, for empty pes and pieces of 1 record up to whole
/// slices; with the root's own buffer, a buffer given by the caller, and a given buffer too
/// short to use.
#[test]
fn streams() {
    mpi_test(|comm| {
        let p = comm.size();
        let me = comm.rank();
        let value = |i: usize| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xff;
        for (shape, lens) in length_patterns(p) {
            let offs = offsets(&lens);
            let mine: Vec<u64> = (offs[me]..offs[me + 1]).map(value).collect();
            for root in [0, p - 1, p / 2] {
                for (piece, given) in [
                    (1usize, None),
                    (3, Some(3)),
                    (64, None),
                    (64, Some(64)),
                    (64, Some(2)),
                ] {
                    let case = format!("{shape}, root {root}, piece {piece}, stage {given:?}");
                    let mut stage = given.map(|g| vec![0u64; g]);
                    let mut got: Vec<(usize, u64)> = Vec::new();
                    let mut longest = 0;
                    comm.stream_to_root(&mine, root, piece, stage.as_deref_mut(), |src, c| {
                        longest = longest.max(c.len());
                        got.extend(c.iter().map(|&v| (src, v)));
                    });
                    if me == root {
                        let want: Vec<(usize, u64)> = (0..p)
                            .flat_map(|r| (offs[r]..offs[r + 1]).map(move |i| (r, value(i))))
                            .collect();
                        assert!(
                            got == want,
                            "{case}: stream_to_root delivered {} records, {} expected, or out of order",
                            got.len(),
                            want.len()
                        );
                        assert!(longest <= piece, "{case}: a piece of {longest} > {piece}");
                    } else {
                        assert!(
                            got.is_empty(),
                            "{case}: a pe other than the root was handed records"
                        );
                    }
                    let mut back = vec![u64::MAX; lens[me]];
                    comm.stream_from_root(
                        &mut back,
                        root,
                        piece,
                        stage.as_deref_mut(),
                        |dst, off, out| {
                            for (j, o) in out.iter_mut().enumerate() {
                                *o = value(offs[dst] + off + j) ^ 1;
                            }
                        },
                    );
                    let want: Vec<u64> = mine.iter().map(|v| v ^ 1).collect();
                    assert!(
                        back == want,
                        "{case}: stream_from_root gave pe {me} the wrong records"
                    );
                }
            }
        }
    });
}

// ------------------------------------------------------------------------------------------------
// all-to-all

/// How many records pe `s` sends to pe `d` in pattern `pat` (0..8).
fn a2a_count(pat: usize, s: usize, d: usize, p: usize) -> usize {
    match pat {
        0 => 0,                                            // nothing at all
        1 => (s * 7 + d * 3) % 5,                          // dense, some zeros
        2 => usize::from(s == d) * 4,                      // only to itself
        3 => usize::from(s == 0) * (20 + d),               // only pe 0 sends
        4 => usize::from(d == p - 1) * (9 + s),            // only the last pe receives
        5 => usize::from(!(s + d).is_multiple_of(2)) * 13, // a checkerboard of empty parts
        _ => (s * 31 + d * 17 + pat) % 23,                 // larger, uneven
    }
}

fn a2a_value(s: usize, d: usize, k: usize) -> u64 {
    ((s as u64) << 40) | ((d as u64) << 20) | k as u64
}

/// Sends pattern `pat` as records of type T (built by `mk` from the u64 value) and checks the
/// receive side: grouped by source pe, in order within each source; and `bytes_sent`.
fn a2a_pattern<T, F>(comm: &Comm, pat: usize, mk: F)
where
    T: bytemuck::Pod + PartialEq + std::fmt::Debug,
    F: Fn(u64) -> T,
{
    let p = comm.size();
    let me = comm.rank();
    let what = std::any::type_name::<T>();
    let counts: Vec<usize> = (0..p).map(|d| a2a_count(pat, me, d, p)).collect();
    let mut send = Vec::new();
    for (d, &c) in counts.iter().enumerate() {
        send.extend((0..c).map(|k| mk(a2a_value(me, d, k))));
    }
    let mut want = Vec::new();
    for s in 0..p {
        want.extend((0..a2a_count(pat, s, me, p)).map(|k| mk(a2a_value(s, me, k))));
    }
    let before = comm.bytes_sent();
    let got = comm.all_to_all_v(&send, &counts);
    let sent = comm.bytes_sent() - before;
    assert_eq!(
        got.len(),
        want.len(),
        "pattern {pat} of {what}: records received"
    );
    if let Some(j) = got.iter().zip(&want).position(|(a, b)| a != b) {
        panic!(
            "pattern {pat} of {what}: record {j} is {:?}, want {:?}",
            got[j], want[j]
        );
    }
    let want_sent = ((send.len() - counts[me]) * std::mem::size_of::<T>()) as u64;
    assert_eq!(
        sent, want_sent,
        "pattern {pat} of {what}: growth of bytes_sent"
    );
}

/// Every pattern as u64, [u8; 3], u8 and u128 records.
fn all_to_all_patterns(comm: &Comm) {
    for pat in 0..8 {
        a2a_pattern(comm, pat, |v| v);
        a2a_pattern(comm, pat, |v| [(v >> 40) as u8, (v >> 20) as u8, v as u8]);
        a2a_pattern(comm, pat, |v| {
            (v as u8) ^ ((v >> 20) as u8) ^ ((v >> 40) as u8).rotate_left(3)
        });
        a2a_pattern(comm, pat, |v| (v as u128) << 64 | (v as u128 ^ 0xffff));
    }
}

/// all_to_all_v with empty parts, of u8, [u8; 3], u64 and u128.
#[test]
fn all_to_all_v() {
    mpi_test(|comm| {
        all_to_all_patterns(comm);
    });
}

/// all_to_all_v split into MPI calls of at most 1 element.
#[test]
fn all_to_all_v_chunked_max_count_1() {
    mpi_test(|_comm| {
        all_to_all_patterns(&Comm::with_max_count(SimpleCommunicator::world(), 1));
    });
}

/// all_to_all_v split into MPI calls of at most 3 elements.
#[test]
fn all_to_all_v_chunked_max_count_3() {
    mpi_test(|_comm| {
        all_to_all_patterns(&Comm::with_max_count(SimpleCommunicator::world(), 3));
    });
}

/// all_to_all_v split into MPI calls of at most 7 elements.
#[test]
fn all_to_all_v_chunked_max_count_7() {
    mpi_test(|_comm| {
        all_to_all_patterns(&Comm::with_max_count(SimpleCommunicator::world(), 7));
    });
}

/// An all-to-all of bytes in which a pe sends or receives nothing (an empty `Vec<u8>`): every
/// pe sends its bytes to pe 0 (the shape of gathering a byte text for a sequential base case),
/// then nothing at all.
#[test]
fn all_to_all_v_bytes_to_one_pe() {
    mpi_test(|comm| {
        let p = comm.size();
        let me = comm.rank();
        let send: Vec<u8> = vec![me as u8; me % 3];
        let mut counts = vec![0usize; p];
        counts[0] = send.len();
        let got = comm.all_to_all_v(&send, &counts);
        let want: Vec<u8> = if me == 0 {
            (0..p).flat_map(|s| vec![s as u8; s % 3]).collect()
        } else {
            Vec::new()
        };
        assert_eq!(got, want, "bytes gathered on pe 0");
        let got = comm.all_to_all_v::<u8>(&[], &vec![0; p]);
        assert!(got.is_empty(), "an empty byte exchange returned {got:?}");
    });
}
