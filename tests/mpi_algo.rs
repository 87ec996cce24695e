//! The library's entry points on every pe (see `common::harness`): the distributed checker, the
//! suffix array of small fixed texts on uneven splits with empty pes, random texts split at
//! random, and the library on the calling thread or on a pool of its own. The `psa` binary's runs
//! of the same algorithms are in tests/algorithms.rs.

mod common;

use common::harness::{ctx_with, length_patterns, mpi_test, mpi_test_at, scaled_cuts};
use common::Rng;
use psa::internals::sa_bytes;
use psa::{check, Algo, Layout};

/// The distributed checker accepts the right suffix array and rejects wrong ones: two neighbours
/// swapped, a duplicate entry, an entry equal to n, the whole array reversed; in one piece and in
/// pieces of two records (exchanges limited to 40 bytes per pe), its inverse in 32, 40 and 64
/// bits, its keys packed in one word and (`force_wide`) in two; the array held in memory and read back from an output file of 5 and 8 bytes per entry
/// (a rejected file is never committed: nothing is left under its name).
#[test]
fn checker_accepts_right_rejects_wrong() {
    mpi_test(|comm| {
        use psa::IndexWidth;
        for (round_bytes, width, force_wide) in [
            (None, None, false),
            (Some(40), Some(IndexWidth::W40), false),
            (None, Some(IndexWidth::W64), false),
            (None, None, true),
            (Some(40), None, true),
        ] {
            let ctx = ctx_with(Algo::Dc3, 1 << 20, |c| {
                c.comm.round_bytes = round_bytes;
                c.index_width = width;
                c.force_wide = force_wide;
            });
            check_the_checker(&ctx, comm);
        }
    });
}

fn check_the_checker(ctx: &psa::Ctx, comm: &psa::comm::Comm) {
    let p = comm.size();
    let me = comm.rank();
    let mut tag = std::process::id() as u64;
    comm.broadcast(&mut tag, 0);
    let path = std::env::temp_dir().join(format!("psa-checker-{tag}-p{p}.sa"));
    // The checker's verdict on the whole array `sa` (this pe's part under `l`), from memory and
    // from an output file of each width: all the same, or a panic.
    let check = |ctx: &psa::Ctx, t: &[u8], sa: &[u64], l: &Layout| -> psa::Result<()> {
        let (lo, hi) = (l.start(me), l.end(me));
        let held = check(ctx, t, &sa[lo..hi], l);
        for width in [5usize, 8] {
            let out = psa::io::OutputFile::create(comm, &path, &[], false, sa.len(), width)
                .expect("create the output");
            let wide = sa.iter().any(|&x| x >> (8 * width) != 0);
            if wide {
                continue;
            }
            out.write(comm, lo, &sa[lo..hi]).expect("write the output");
            let from_file = check(ctx, t, &out, l);
            assert_eq!(
                held.is_ok(),
                from_file.is_ok(),
                "width {width}: from memory {held:?}, from the file {from_file:?}"
            );
            if let (Err(a), Err(b)) = (&held, &from_file) {
                assert_eq!(a.to_string(), b.to_string(), "width {width}");
            }
            if from_file.is_ok() {
                out.commit(comm).expect("commit");
                comm.barrier();
                if me == 0 {
                    std::fs::remove_file(&path).expect("remove the committed file");
                }
            } else {
                drop(out);
                comm.barrier();
                let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
                    .unwrap()
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|f| f.contains(&format!("psa-checker-{tag}-p{p}.sa")))
                    .collect();
                assert!(left.is_empty(), "a rejected output left {left:?}");
            }
            comm.barrier();
        }
        held
    };
    for (tname, text) in [
        (
            "0x00 and 0xff",
            (0..3000u32)
                .map(|i| {
                    if (i.wrapping_mul(2_654_435_761) >> 7) % 3 == 0 {
                        0xff
                    } else {
                        0
                    }
                })
                .collect::<Vec<u8>>(),
        ),
        (
            "random",
            (0..5000u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 % 4)
                .collect::<Vec<u8>>(),
        ),
        ("a^n", vec![b'a'; 777]),
        ("3 bytes", b"cab".to_vec()),
    ] {
        let n = text.len();
        let sa = sa_bytes(&text, 1);
        let l = Layout::block(n, p);
        let (lo, hi) = (l.start(me), l.end(me));
        let t = &text[lo..hi];
        let r = check(ctx, t, &sa, &l);
        assert!(
            r.is_ok(),
            "{tname}: check rejects the right suffix array: {:?}",
            r.err()
        );
        let mut bad = sa.clone();
        bad.swap(n / 2, n / 2 - 1);
        assert!(
            check(ctx, t, &bad, &l).is_err(),
            "{tname}: check accepts a suffix array with SA[{}] and SA[{}] swapped",
            n / 2 - 1,
            n / 2
        );
        let mut bad = sa.clone();
        bad[n - 1] = bad[0];
        assert!(
            check(ctx, t, &bad, &l).is_err(),
            "{tname}: check accepts a suffix array with a duplicate entry"
        );
        let mut bad = sa.clone();
        bad[n / 3] = n as u64;
        assert!(
            check(ctx, t, &bad, &l).is_err(),
            "{tname}: check accepts an entry equal to n"
        );
        let rev: Vec<u64> = sa.iter().rev().copied().collect();
        assert!(
            check(ctx, t, &rev, &l).is_err(),
            "{tname}: check accepts the reversed suffix array"
        );
    }
}

/// psa::suffix_array with both algorithms and base cases 4, 5 and 2^20 on a text with 0x00 and
/// 0xff bytes, split by every length pattern (empty pes in many places); a base case below 4 is an
/// error on every pe, not a hang.
#[test]
fn suffix_array_uneven_splits() {
    mpi_test(|comm| {
        let p = comm.size();
        let me = comm.rank();
        let text: Vec<u8> = b"mississippi\0\xff\0\xffmississippi$banana".to_vec();
        let want = sa_bytes(&text, 1);
        for (name, lens) in length_patterns(p) {
            let cuts = scaled_cuts(&lens, text.len());
            let want_mine = &want[cuts[me]..cuts[me + 1]];
            for algo in [Algo::Dc3, Algo::Css] {
                for base in [4usize, 5, 1 << 20] {
                    let ctx = ctx_with(algo, base, |_| {});
                    let case = format!("{algo:?}, base case {base}, split {name} {cuts:?}");
                    let got = psa::suffix_array(&ctx, &text[cuts[me]..cuts[me + 1]])
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    assert_eq!(got, want_mine, "{case}: pe {me}'s part");
                }
            }
        }
        let ctx = ctx_with(Algo::Dc3, 3, |_| {});
        assert!(
            psa::suffix_array(&ctx, b"abc").is_err(),
            "base_case = 3 must be rejected"
        );
    });
}

/// A context whose thread count is that of the calling thread's pool (1 here, as `psa --threads 1`
/// sizes the global pool) runs the library on the calling thread; one with another count runs it
/// on a pool of its own of that size (calling MPI from there: the job asks for
/// `Threading::Serialized`). Both give the right suffix array.
#[test]
fn ctx_calling_thread_or_own_pool() {
    mpi_test(|comm| {
        let me = comm.rank();
        let text: Vec<u8> = b"abracadabra\0cadabra".repeat(23);
        let want = sa_bytes(&text, 1);
        let cuts = Layout::block(text.len(), comm.size()).offsets().to_vec();
        let caller = std::thread::current().id();
        for threads in [1usize, 3] {
            for algo in [Algo::Dc3, Algo::Css] {
                let ctx = ctx_with(algo, 16, |c| c.threads = threads);
                let (pool, on) =
                    ctx.install(|_| (rayon::current_num_threads(), std::thread::current().id()));
                assert_eq!(
                    pool, threads,
                    "threads = {threads}: the library's pool size"
                );
                assert_eq!(
                    on == caller,
                    threads == 1,
                    "threads = {threads}: whether it ran on the calling thread"
                );
                let got = psa::suffix_array(&ctx, &text[cuts[me]..cuts[me + 1]])
                    .unwrap_or_else(|e| panic!("threads = {threads}, {algo:?}: {e}"));
                assert_eq!(
                    got,
                    want[cuts[me]..cuts[me + 1]],
                    "threads = {threads}, {algo:?}: pe {me}'s part"
                );
            }
        }
    });
}

/// Many random texts through the library: every pe generates each text (seeded by p), splits it
/// in the block layout or at random cuts (empty pes included), runs both algorithms with a random
/// base case (4, 5..=64 or the default-sized 2^20) and compares its slice with libsais.
#[test]
fn random_texts_uneven_splits() {
    const COUNT: usize = 150;
    const MAX_LEN: usize = 3000;
    mpi_test_at(&[1, 2, 3, 4, 5], |comm| {
        let p = comm.size();
        let me = comm.rank();
        let mut rng = Rng::new(1000 + p as u64);
        for k in 0..COUNT {
            let n = if rng.below(10) == 0 {
                rng.range(0, 12)
            } else {
                rng.range(0, MAX_LEN)
            };
            let sigma = rng.range(1, 256);
            let first = rng.below(256) as u8;
            let text: Vec<u8> = (0..n)
                .map(|_| first.wrapping_add(rng.below(sigma as u64) as u8))
                .collect();
            let cuts: Vec<usize> = if rng.below(3) == 0 {
                Layout::block(n, p).offsets().to_vec()
            } else {
                let mut c: Vec<usize> = (0..p - 1).map(|_| rng.range(0, n)).collect();
                c.sort_unstable();
                let mut v = vec![0];
                v.extend(c);
                v.push(n);
                v
            };
            let want = sa_bytes(&text, 1);
            let want_mine = &want[cuts[me]..cuts[me + 1]];
            for algo in [Algo::Dc3, Algo::Css] {
                let base = match rng.below(3) {
                    0 => 4,
                    1 => rng.range(5, 64),
                    _ => 1 << 20,
                };
                let ctx = ctx_with(algo, base, |_| {});
                let case = format!(
                    "text #{k} (n = {n}, sigma = {sigma}, first byte {first}, cuts {cuts:?}), {algo:?}, base case {base}"
                );
                let got = psa::suffix_array(&ctx, &text[cuts[me]..cuts[me + 1]])
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                if let Some(j) = got.iter().zip(want_mine).position(|(a, b)| a != b) {
                    panic!(
                        "{case}: pe {me}'s part differs first at SA[{}]: {} instead of {}",
                        cuts[me] + j,
                        got[j],
                        want_mine[j]
                    );
                }
                assert_eq!(
                    got.len(),
                    want_mine.len(),
                    "{case}: pe {me}'s part's length"
                );
            }
        }
    });
}

/// The hard inputs of the difference covers' tests: empty, one byte, n < p, 0x00/0xFF, aⁿ,
/// periodic, Fibonacci, long repeated blocks (n = 1 and 2 mod 7: DC7's dummy samples), DNA,
/// random.
fn hard_inputs() -> Vec<(&'static str, Vec<u8>)> {
    use common::gen;
    vec![
        ("empty", Vec::new()),
        ("one byte", b"x".to_vec()),
        ("n < p", b"aab".to_vec()),
        ("0x00/0xFF", gen::zero_ff(1, 2000)),
        ("a^n", gen::a_n(3001)),
        ("(ab)^n a", gen::ab_n_a(1000)),
        ("(abc)^n", gen::abc_n(1000)),
        ("Fibonacci", gen::fibonacci(4181)),
        (
            "repeated block, n = 1 mod 7",
            gen::repeated_block(12, 64, 7 * 300 + 1, 26),
        ),
        (
            "repeated block, n = 2 mod 7",
            gen::repeated_block(13, 64, 7 * 300 + 2, 26),
        ),
        ("DNA", gen::dna(9, 5000)),
        ("random, sigma 4", gen::random(6, 4999, 4, b'a')),
        ("random, sigma 256", gen::random(7, 5000, 256, 0)),
    ]
}

/// The records of every algorithm in every index width on the hard inputs: 32 bits (what these
/// texts get by default), 40 and 64 forced (`Config::index_width`), and 64 with the paths of
/// huge names (`force_wide`: triples field by field, comparison sorts). Each through pDC3, DC7 from
/// the text, pCSS handing over to both (DC7 when its sample predicts it, DC7 and DC3 from the
/// prefix names), and pCSS' own records (names, depths, unresolved suffixes, refinement keys)
/// doubling to the end without a hand-over, in one key range and in three; with base case 4
/// (the distributed recursion down to tiny levels, empty pes). Every pe compares its slice with
/// libsais.
#[test]
fn index_widths_on_hard_inputs() {
    use psa::IndexWidth;
    use psa::Predicted;
    let inputs = hard_inputs();
    let widths: [(&str, Option<IndexWidth>, bool); 4] = [
        ("32 bits", None, false),
        ("40 bits", Some(IndexWidth::W40), false),
        ("64 bits", Some(IndexWidth::W64), false),
        ("--force-wide", None, true),
    ];
    mpi_test(|comm| {
        let (p, me) = (comm.size(), comm.rank());
        for (name, text) in &inputs {
            let want = sa_bytes(text, 1);
            let layout = Layout::block(text.len(), p);
            let (lo, hi) = (layout.start(me), layout.end(me));
            for (wname, width, force_wide) in widths {
                let tuned = |algo, edit: fn(&mut psa::CssOptions)| {
                    ctx_with(algo, 4, |c| {
                        c.index_width = width;
                        c.force_wide = force_wide;
                        edit(&mut c.css);
                    })
                };
                // pCSS hands over on the inputs that its first sort leaves unresolved (Fibonacci,
                // repeated blocks, DNA); the others it finishes itself.
                let runs: [(&str, psa::Ctx); 7] = [
                    ("dc3", tuned(Algo::Dc3, |_| {})),
                    (
                        "css, DC7 from the text when predicted",
                        tuned(Algo::Css, |_| {}),
                    ),
                    ("css, DC7 from names after the first sort when predicted", {
                        tuned(Algo::Css, |t| t.predicted = Predicted::SortThenDc7)
                    }),
                    ("css, DC7 from names", {
                        tuned(Algo::Css, |t| {
                            t.predict = false;
                            t.handover = 0.0;
                        })
                    }),
                    ("css, DC3 from names", {
                        tuned(Algo::Css, |t| {
                            t.predict = false;
                            t.handover = 0.0;
                            t.finish_dc3 = true;
                        })
                    }),
                    ("css, doubling to the end", {
                        tuned(Algo::Css, |t| {
                            t.predict = false;
                            t.handover = 2.0;
                        })
                    }),
                    ("css, doubling to the end in 3 key ranges", {
                        tuned(Algo::Css, |t| {
                            t.predict = false;
                            t.handover = 2.0;
                            t.sort_rounds = 3;
                        })
                    }),
                ];
                for (algo, ctx) in &runs {
                    let case = format!("{name} (n = {}), {wname}, {algo}", text.len());
                    let got = psa::suffix_array(ctx, &text[lo..hi])
                        .unwrap_or_else(|e| panic!("{case}: {e}"));
                    assert_eq!(got, want[lo..hi], "{case}: pe {me}'s part");
                }
                let ctx = &runs[0].1;
                let got = ctx.install(|ctx| psa::internals::dc7(ctx, &text[lo..hi], &layout));
                assert_eq!(
                    got,
                    want[lo..hi],
                    "{name}, {wname}, DC7 from the text: pe {me}'s part"
                );
            }
        }
    });
}

/// The difference covers' merge in key ranges (`DcxOptions::merge_rounds`, as a memory budget
/// makes it run) on the hard inputs: 2 ranges in 32-bit records and 7 in 40-bit ones through
/// pDC3, DC7 from the text, and pCSS handing over to DC7 (from the text when predicted, from the
/// prefix names after its first sort), with base case 4 (the recursion levels merge in ranges
/// too, in proportion to their size, and name their samples in half as many, at least 4:
/// `ctx::merge_ranges`, `ctx::name_ranges`; pDC3's top level merges in three quarters of them;
/// with 7 ranges down to the sixth level; `internals::dc7`, which starts no text, at the top's
/// count); 64 ranges (more than
/// records at most levels: empty rounds and
/// pes) in 64-bit records through pDC3 and DC7 from the text, with base case 300 (fewer levels:
/// every round costs a few collectives, slow on oversubscribed pes). Every pe compares its slice
/// with libsais.
#[test]
fn merge_rounds_on_hard_inputs() {
    use psa::IndexWidth;
    use psa::Predicted;
    let inputs = hard_inputs();
    // (width, merge rounds, base case, also through pCSS)
    let settings = [
        ("32 bits", IndexWidth::W32, 2, 4, true),
        ("40 bits", IndexWidth::W40, 7, 4, true),
        ("64 bits", IndexWidth::W64, 64, 300, false),
    ];
    mpi_test(|comm| {
        let (p, me) = (comm.size(), comm.rank());
        for (name, text) in &inputs {
            let want = sa_bytes(text, 1);
            let layout = Layout::block(text.len(), p);
            let (lo, hi) = (layout.start(me), layout.end(me));
            for (wname, width, rounds, base, with_css) in settings {
                let tuned = |algo, edit: fn(&mut psa::CssOptions)| {
                    ctx_with(algo, base, |c| {
                        c.index_width = Some(width);
                        c.dcx.merge_rounds = rounds;
                        edit(&mut c.css);
                    })
                };
                let mut runs: Vec<(&str, psa::Ctx)> = vec![("dc3", tuned(Algo::Dc3, |_| {}))];
                if with_css {
                    runs.push((
                        "css, DC7 from the text when predicted",
                        tuned(Algo::Css, |_| {}),
                    ));
                    runs.push((
                        "css, DC7 from names after the first sort when predicted",
                        tuned(Algo::Css, |t| t.predicted = Predicted::SortThenDc7),
                    ));
                }
                let case = |algo: &str| {
                    format!(
                        "{name} (n = {}), {wname}, {rounds} merge rounds, base case {base}, {algo}",
                        text.len()
                    )
                };
                for (algo, ctx) in &runs {
                    let got = psa::suffix_array(ctx, &text[lo..hi])
                        .unwrap_or_else(|e| panic!("{}: {e}", case(algo)));
                    assert_eq!(got, want[lo..hi], "{}: pe {me}'s part", case(algo));
                }
                let ctx = &runs[0].1;
                let got = ctx.install(|ctx| psa::internals::dc7(ctx, &text[lo..hi], &layout));
                assert_eq!(
                    got,
                    want[lo..hi],
                    "{}: pe {me}'s part",
                    case("DC7 from the text")
                );
            }
        }
    });
}

/// The difference covers' merge in key ranges stays balanced on a text of period 3, (abc)^k,
/// whose mod-0 suffixes all start with `a` and so sort apart from every sample (a third of the
/// records in one block of the final order): its round bounds and splitters prefer sample
/// records, and must still fall inside that block. pDC3 and DC7 from the text, 8 merge rounds,
/// 32- and 40-bit records; every pe compares its slice with libsais, and no pe's part of any
/// sort or merge round exceeds 1.5 times the mean (`PhaseLog::max_imbalance`).
#[test]
fn merge_rounds_balance_a_text_of_period_3() {
    use psa::IndexWidth;
    let text = common::gen::abc_n(40_000);
    let want = sa_bytes(&text, 1);
    mpi_test(|comm| {
        let (p, me) = (comm.size(), comm.rank());
        let layout = Layout::block(text.len(), p);
        let (lo, hi) = (layout.start(me), layout.end(me));
        for width in [IndexWidth::W32, IndexWidth::W40] {
            let ctx = |algo| {
                ctx_with(algo, 1000, |c| {
                    c.index_width = Some(width);
                    c.dcx.merge_rounds = 8;
                })
            };
            let case = format!("(abc)^40000 at p = {p}, {width:?}, 8 merge rounds");
            let dc3 = ctx(Algo::Dc3);
            let got = psa::suffix_array(&dc3, &text[lo..hi])
                .unwrap_or_else(|e| panic!("{case}, dc3: {e}"));
            assert_eq!(got, want[lo..hi], "{case}, dc3: pe {me}'s part");
            let dc7 = ctx(Algo::Dc3); // a log of its own
            let got = dc7.install(|ctx| psa::internals::dc7(ctx, &text[lo..hi], &layout));
            assert_eq!(got, want[lo..hi], "{case}, DC7: pe {me}'s part");
            for (algo, ctx) in [("dc3", &dc3), ("DC7", &dc7)] {
                let share = comm.all_reduce_f64(&[ctx.log.max_imbalance()]).0[0];
                assert!(
                    share <= 1.5,
                    "{case}, {algo}: a pe holds {share:.2} times the mean share of a sort"
                );
            }
        }
    });
}

/// Discarding (`DcxOptions::discard_share`): with the samples named by their sort on every level
/// (`name_by_sort`), samples with a window of their own leave the recursion whenever there is
/// one (share 0), or never (share 2: plain names), on the hard inputs through pDC3 and DC7 from
/// the text, in 32- and 40-bit records, in one key range and in three, with base case 4 (the
/// kept strings recurse down to tiny levels, empty pes). Every pe compares its slice with
/// libsais.
#[test]
fn discarding_on_hard_inputs() {
    use psa::IndexWidth;
    let inputs = hard_inputs();
    // (share, width, merge rounds)
    let settings = [
        (0.0, IndexWidth::W32, 1),
        (0.0, IndexWidth::W40, 3),
        (2.0, IndexWidth::W32, 3),
    ];
    mpi_test(|comm| {
        let (p, me) = (comm.size(), comm.rank());
        for (name, text) in &inputs {
            let want = sa_bytes(text, 1);
            let layout = Layout::block(text.len(), p);
            let (lo, hi) = (layout.start(me), layout.end(me));
            for (share, width, rounds) in settings {
                let ctx = ctx_with(Algo::Dc3, 4, |c| {
                    c.index_width = Some(width);
                    c.dcx.merge_rounds = rounds;
                    c.dcx.name_by_sort = true;
                    c.dcx.discard_share = share;
                });
                let case = format!(
                    "{name} (n = {}), discard share {share}, {width:?}, {rounds} merge rounds",
                    text.len()
                );
                let got = psa::suffix_array(&ctx, &text[lo..hi])
                    .unwrap_or_else(|e| panic!("{case}, dc3: {e}"));
                assert_eq!(got, want[lo..hi], "{case}, dc3: pe {me}'s part");
                let got = ctx.install(|ctx| psa::internals::dc7(ctx, &text[lo..hi], &layout));
                assert_eq!(
                    got,
                    want[lo..hi],
                    "{case}, DC7 from the text: pe {me}'s part"
                );
            }
        }
    });
}
