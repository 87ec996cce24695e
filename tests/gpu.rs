//! The GPU backend sorts exactly like the CPU backend. Needs `--features gpu` and a GPU; without a
//! GPU every test prints "skipped: no GPU" (straight to stderr, past the test harness's capture)
//! and returns. Run on a GPU machine: scripts/gpu-test.sh.
#![cfg(feature = "gpu")]

use std::io::Write;
use std::sync::OnceLock;

use psa::local::cpu::CpuSort;
use psa::local::gpu::{GpuError, GpuSort, MIN_GPU_KEYS};
use psa::local::{HostBuf, LocalSort};
use psa::GpuOptions;

const SIZES: [usize; 8] = [0, 1, 2, 1000, 65535, 65537, 1_000_000, 10_000_000];

fn say(msg: &str) {
    // Direct writes to stderr are not captured by the test harness.
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// The shared GPU backend, or None (after saying why) when this machine has none: no CUDA
/// driver, or a driver that sees no device. Any other failure to open one (NVRTC missing, an old
/// device, a driver error) fails the test.
fn gpu(test: &str) -> Option<&'static GpuSort> {
    static GPU: OnceLock<Result<GpuSort, String>> = OnceLock::new();
    let open = || match GpuSort::open(0, 4, GpuOptions::default()) {
        Ok(g) => Ok(g),
        Err(e @ (GpuError::NoDriver | GpuError::NoDevice)) => Err(e.to_string()),
        Err(e) => panic!("{test}: a CUDA driver and device are present but cannot be used: {e}"),
    };
    match GPU.get_or_init(open) {
        Ok(g) => {
            // A GPU is there: the kernels must compile (a failure here is a real failure).
            g.prepare()
                .expect("GPU present but the kernels do not compile/load");
            Some(g)
        }
        Err(e) => {
            say(&format!("{test}: skipped: no GPU ({e})"));
            None
        }
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

#[derive(Clone, Copy, Debug)]
enum Pattern {
    Random,
    /// High half constant, low half random (psa's keys often look like this).
    EqualHigh,
    Sorted,
    Reverse,
    /// Few distinct values (duplicates; psa's keys are unique, the sort must not care).
    FewDistinct,
    /// Only one middle byte varies.
    OneDigit,
}

const PATTERNS: [Pattern; 6] = [
    Pattern::Random,
    Pattern::EqualHigh,
    Pattern::Sorted,
    Pattern::Reverse,
    Pattern::FewDistinct,
    Pattern::OneDigit,
];

fn keys_u64(n: usize, p: Pattern, seed: u64) -> Vec<u64> {
    let r = |i: usize| splitmix(seed ^ (i as u64).wrapping_mul(0x2545f4914f6cdd1d));
    (0..n)
        .map(|i| match p {
            Pattern::Random => r(i),
            Pattern::EqualHigh => 0xdead_beef_0000_0000 | (r(i) & 0xffff_ffff),
            Pattern::Sorted => (i as u64) * 977 + 5,
            Pattern::Reverse => u64::MAX - (i as u64) * 13,
            Pattern::FewDistinct => r(i) % 7 * 0x0101_0101_0101,
            Pattern::OneDigit => 0x1234_0000_0000_5678 | ((r(i) & 0xff) << 24),
        })
        .collect()
}

fn keys_u128(n: usize, p: Pattern, seed: u64) -> Vec<u128> {
    let r = |i: usize| {
        let a = splitmix(seed ^ (i as u64).wrapping_mul(0x2545f4914f6cdd1d));
        (a as u128) << 64 | splitmix(a) as u128
    };
    (0..n)
        .map(|i| match p {
            Pattern::Random => r(i),
            Pattern::EqualHigh => 0x0123_4567_89ab_cdef_u128 << 64 | (r(i) & u64::MAX as u128),
            Pattern::Sorted => (i as u128) << 70 | (i as u128 * 3),
            Pattern::Reverse => u128::MAX - (i as u128) * 0x1_0000_0001,
            Pattern::FewDistinct => ((r(i) % 5) << 100) | 77,
            Pattern::OneDigit => 0xffff_u128 << 112 | ((r(i) & 0xff) << 72) | 1,
        })
        .collect()
}

/// Fails when any GPU sort fell back to the CPU (the GPU path must really have run).
fn assert_no_fallback(g: &GpuSort, test: &str) {
    let (gpu_sorts, fallbacks) = g.counters();
    assert_eq!(
        fallbacks, 0,
        "{test}: {fallbacks} GPU sorts failed and were redone on the CPU"
    );
    assert!(gpu_sorts > 0, "{test}: no sort ran on the GPU");
}

fn check_u64(g: &GpuSort, n: usize, p: Pattern) {
    let mut a = keys_u64(n, p, n as u64 + 1);
    let mut b = a.clone();
    CpuSort::new(4).sort_u64(&mut a);
    g.sort_u64(&mut b);
    if let Some(i) = (0..n).find(|&i| a[i] != b[i]) {
        panic!(
            "u64 n={n} {p:?}: gpu differs from cpu at {i}: cpu {:#x} gpu {:#x}",
            a[i], b[i]
        );
    }
}

fn check_u128(g: &GpuSort, n: usize, p: Pattern) {
    let mut a = keys_u128(n, p, n as u64 + 2);
    let mut b = a.clone();
    CpuSort::new(4).sort_u128(&mut a);
    g.sort_u128(&mut b);
    if let Some(i) = (0..n).find(|&i| a[i] != b[i]) {
        panic!(
            "u128 n={n} {p:?}: gpu differs from cpu at {i}: cpu {:#x} gpu {:#x}",
            a[i], b[i]
        );
    }
}

#[test]
fn u64_equals_cpu() {
    let Some(g) = gpu("u64_equals_cpu") else {
        return;
    };
    for n in SIZES {
        for p in PATTERNS {
            check_u64(g, n, p);
        }
    }
    assert_no_fallback(g, "u64_equals_cpu");
    say(&format!(
        "u64_equals_cpu: ran on {}: sizes {SIZES:?} × {} patterns",
        g.device(),
        PATTERNS.len()
    ));
}

#[test]
fn u128_equals_cpu() {
    let Some(g) = gpu("u128_equals_cpu") else {
        return;
    };
    for n in SIZES {
        for p in PATTERNS {
            check_u128(g, n, p);
        }
    }
    assert_no_fallback(g, "u128_equals_cpu");
    say(&format!(
        "u128_equals_cpu: ran on {}: sizes {SIZES:?} × {} patterns",
        g.device(),
        PATTERNS.len()
    ));
}

#[test]
fn fresh_inputs_every_size() {
    // Sizes around tile and block boundaries, random data with a new seed each.
    let Some(g) = gpu("fresh_inputs_every_size") else {
        return;
    };
    let sizes = [
        MIN_GPU_KEYS,
        MIN_GPU_KEYS + 1,
        4096 * 37 + 1,
        2048 * 101 - 1,
        3_333_333,
    ];
    for (s, n) in sizes.into_iter().enumerate() {
        for rep in 0..3u64 {
            let mut a = keys_u64(n, Pattern::Random, 1000 * s as u64 + rep);
            let mut b = a.clone();
            CpuSort::new(4).sort_u64(&mut a);
            g.sort_u64(&mut b);
            assert!(a == b, "u64 n={n} rep={rep} differs");
            let mut a = keys_u128(n, Pattern::Random, 7000 * s as u64 + rep);
            let mut b = a.clone();
            CpuSort::new(4).sort_u128(&mut a);
            g.sort_u128(&mut b);
            assert!(a == b, "u128 n={n} rep={rep} differs");
        }
    }
    assert_no_fallback(g, "fresh_inputs_every_size");
    say(&format!("fresh_inputs_every_size: ran on {}", g.device()));
}

#[test]
fn chunked_sort_merges_on_cpu() {
    // A chunk cap far below the input: sorted in device chunks, merged on the CPU.
    let Some(shared) = gpu("chunked_sort_merges_on_cpu") else {
        return;
    };
    let mut g =
        GpuSort::open(0, 4, GpuOptions::default()).expect("a second handle on the same device");
    for (cap, n) in [
        (MIN_GPU_KEYS, 1_000_000),
        (300_000, 1_000_000),
        (1 << 20, 3_000_001),
    ] {
        g.set_max_chunk(Some(cap));
        for p in [Pattern::Random, Pattern::FewDistinct, Pattern::Reverse] {
            check_u64(&g, n, p);
            check_u128(&g, n, p);
            let prof = g.last_profile();
            assert_eq!(
                prof.chunks,
                n.div_ceil(cap),
                "u128 n={n} cap={cap}: expected chunks"
            );
        }
    }
    assert_no_fallback(&g, "chunked_sort_merges_on_cpu");
    say(&format!(
        "chunked_sort_merges_on_cpu: ran on {}",
        shared.device()
    ));
}

#[test]
fn grouped_sort_equals_cpu() {
    // The grouped sort (split by the top varying digit, each group's copy home overlapping the
    // next group's sort) forced on inputs that would not use it by size, down to the minimum.
    let Some(shared) = gpu("grouped_sort_equals_cpu") else {
        return;
    };
    let mut g =
        GpuSort::open(0, 4, GpuOptions::default()).expect("a second handle on the same device");
    let mut ran = 0;
    for groups in [2, 5, 16] {
        g.set_overlap_groups(Some(groups));
        for n in [MIN_GPU_KEYS, 1_000_003, 3_000_001] {
            for p in PATTERNS {
                check_u64(&g, n, p);
                let u64_groups = g.last_profile().groups;
                check_u128(&g, n, p);
                let prof = g.last_profile();
                assert!(
                    prof.groups <= groups && u64_groups <= groups,
                    "n={n} {p:?}: {} / {u64_groups} groups, at most {groups} asked",
                    prof.groups
                );
                ran += usize::from(prof.groups > 1);
            }
            // By the high word: sorted by it, and stable (the low word holds the input index).
            let mut a = keys_u128(n, Pattern::Random, n as u64 + 5);
            for (i, x) in a.iter_mut().enumerate() {
                *x = (((*x >> 64) % 3000) << 64) | i as u128;
            }
            g.sort_u128_by_high(&mut a);
            assert!(
                a.windows(2).all(|w| w[0] >> 64 < w[1] >> 64
                    || (w[0] >> 64 == w[1] >> 64 && w[0] as u64 <= w[1] as u64)),
                "u128 by high n={n} groups={groups}: not sorted by high, stably"
            );
            let mut idx: Vec<u64> = a.iter().map(|&x| x as u64).collect();
            idx.sort_unstable();
            assert!(
                idx.iter().enumerate().all(|(i, &x)| x == i as u64),
                "u128 by high n={n} groups={groups}: not a permutation of the input"
            );
        }
    }
    // A skewed top digit: a few small keys before one bucket holding all the others, which gets
    // a group of its own (and leaves out the split digit's pass).
    g.set_overlap_groups(Some(16));
    for n in [MIN_GPU_KEYS, 2_000_001] {
        let mut a: Vec<u64> = keys_u64(n, Pattern::Random, 11)
            .into_iter()
            .enumerate()
            .map(|(i, x)| {
                if i % 100_000 == 7 {
                    x >> 60
                } else {
                    x | 0xff << 56
                }
            })
            .collect();
        let mut b = a.clone();
        CpuSort::new(4).sort_u64(&mut a);
        g.sort_u64(&mut b);
        assert!(a == b, "skewed u64 n={n}: gpu differs from cpu");
        assert_eq!(g.last_profile().groups, 2, "skewed u64 n={n}: groups");
        let mut a: Vec<u128> = keys_u128(n, Pattern::Random, 12)
            .into_iter()
            .enumerate()
            .map(|(i, x)| {
                if i % 100_000 == 7 {
                    x >> 124
                } else {
                    x | 0xff << 120
                }
            })
            .collect();
        let mut b = a.clone();
        CpuSort::new(4).sort_u128(&mut a);
        g.sort_u128(&mut b);
        assert!(a == b, "skewed u128 n={n}: gpu differs from cpu");
        assert_eq!(g.last_profile().groups, 2, "skewed u128 n={n}: groups");
    }
    // Random and the other multi-digit patterns must really have been split.
    assert!(ran >= 3 * 3 * 3, "the grouped sort ran only {ran} times");
    assert_no_fallback(&g, "grouped_sort_equals_cpu");
    say(&format!(
        "grouped_sort_equals_cpu: ran on {}",
        shared.device()
    ));
}

#[test]
fn classic_passes_equal_cpu() {
    // The classic passes (histogram, scan, scatter per digit): the fallback when the one-sweep
    // pass state cannot be allocated; one-sweep is the default that the other tests run.
    let Some(shared) = gpu("classic_passes_equal_cpu") else {
        return;
    };
    let mut g =
        GpuSort::open(0, 4, GpuOptions::default()).expect("a second handle on the same device");
    g.set_onesweep(false);
    for groups in [None, Some(1), Some(5)] {
        g.set_overlap_groups(groups);
        for n in [MIN_GPU_KEYS, 1_000_003, 10_000_000] {
            for p in PATTERNS {
                check_u64(&g, n, p);
                check_u128(&g, n, p);
            }
        }
    }
    assert_no_fallback(&g, "classic_passes_equal_cpu");
    say(&format!(
        "classic_passes_equal_cpu: ran on {}",
        shared.device()
    ));
}

#[test]
fn u128_by_high_sorts_by_high_half() {
    let Some(g) = gpu("u128_by_high_sorts_by_high_half") else {
        return;
    };
    for n in SIZES {
        for p in PATTERNS {
            let mut a = keys_u128(n, p, n as u64 + 3);
            // Many equal high halves: the low half must travel with its record.
            for (i, x) in a.iter_mut().enumerate() {
                *x = (((*x >> 64) % 1000) << 64) | i as u128;
            }
            let mut b = a.clone();
            g.sort_u128_by_high(&mut b);
            assert!(
                b.windows(2).all(|w| w[0] >> 64 <= w[1] >> 64),
                "u128 by high n={n} {p:?}: not sorted by high"
            );
            a.sort_unstable();
            b.sort_unstable();
            assert!(
                a == b,
                "u128 by high n={n} {p:?}: not a permutation of the input"
            );
        }
    }
    assert_no_fallback(g, "u128_by_high_sorts_by_high_half");
    say(&format!(
        "u128_by_high_sorts_by_high_half: ran on {}",
        g.device()
    ));
}

#[test]
fn page_locked_buffers_sort_like_the_cpu() {
    // Keys in page-locked memory from the backend (HostBuf) are copied by DMA without the
    // staging buffers: one chunk, grouped (copies home per group), chunked (the runs come home
    // through staging, the merge writes the page-locked buffer), and the SA download.
    let Some(shared) = gpu("page_locked_buffers_sort_like_the_cpu") else {
        return;
    };
    let mut g =
        GpuSort::open(0, 4, GpuOptions::default()).expect("a second handle on the same device");
    for (groups, cap, n) in [
        (Some(1), None, 1_000_000),
        (None, None, 10_000_000),
        (Some(5), None, 3_000_001),
        (Some(1), Some(300_000), 1_000_000),
        (Some(1), None, MIN_GPU_KEYS + 1),
    ] {
        g.set_overlap_groups(groups);
        g.set_max_chunk(cap);
        for p in [Pattern::Random, Pattern::EqualHigh, Pattern::FewDistinct] {
            let what = format!("n={n} groups={groups:?} cap={cap:?} {p:?}");
            let input = keys_u64(n, p, n as u64 + 7);
            let mut buf: HostBuf<u64> = HostBuf::zeroed(&g, n);
            assert!(buf.is_backend_memory(), "{what}: no page-locked memory");
            assert!(buf.iter().all(|&x| x == 0), "{what}: not zeroed");
            buf.copy_from_slice(&input);
            g.sort_u64(&mut buf);
            let prof = g.last_profile();
            assert!(
                prof.direct,
                "{what}: the sort did not see page-locked memory"
            );
            // The chunk runs come home into an ordinary vector (through staging) for the merge.
            let d2h_stage = if cap.is_some() { 0.0 } else { prof.d2h_stage_s };
            assert_eq!((prof.h2d_stage_s, d2h_stage), (0.0, 0.0), "{what}: staged");
            let mut want = input.clone();
            CpuSort::new(4).sort_u64(&mut want);
            assert!(*buf == *want, "u64 {what}: gpu differs from cpu");

            let input: Vec<u128> = keys_u128(n, p, n as u64 + 8);
            let mut buf: HostBuf<u128> = HostBuf::zeroed(&g, n);
            buf.copy_from_slice(&input);
            g.sort_u128(&mut buf);
            assert!(g.last_profile().direct, "{what}: u128 not direct");
            let mut want = input.clone();
            CpuSort::new(4).sort_u128(&mut want);
            assert!(*buf == *want, "u128 {what}: gpu differs from cpu");
            // Records by key, the index as value: sorted by key and a permutation.
            buf.iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = (((*x >> 64) % 1000) << 64) | i as u128);
            let mut want = buf.to_vec();
            g.sort_u128_by_high(&mut buf);
            assert!(
                buf.windows(2).all(|w| w[0] >> 64 <= w[1] >> 64),
                "records {what}: not sorted by key"
            );
            let mut got = buf.to_vec();
            got.sort_unstable();
            want.sort_unstable();
            assert!(
                got == want,
                "records {what}: not a permutation of the input"
            );
        }
    }
    // An ordinary vector next to page-locked buffers still goes through staging.
    g.set_overlap_groups(None);
    g.set_max_chunk(None);
    let _held: HostBuf<u64> = HostBuf::zeroed(&g, 1 << 20);
    let mut v = keys_u64(1_000_000, Pattern::Random, 11);
    g.sort_u64(&mut v);
    assert!(
        !g.last_profile().direct,
        "a Vec was taken for page-locked memory"
    );
    assert!(
        v.windows(2).all(|w| w[0] <= w[1]),
        "Vec next to HostBuf: not sorted"
    );
    assert_no_fallback(&g, "page_locked_buffers_sort_like_the_cpu");
    say(&format!(
        "page_locked_buffers_sort_like_the_cpu: ran on {}",
        shared.device()
    ));
}

/// Texts for the device suffix array: the hard inputs of the CPU tests (tests/algorithms.rs).
fn sa_texts(n: usize, seed: u64) -> Vec<(&'static str, Vec<u8>)> {
    let r = |i: usize| splitmix(seed ^ (i as u64).wrapping_mul(0x9e37_79b9));
    let mut fib = vec![b'a'];
    let mut prev = vec![b'b'];
    while fib.len() < n {
        let next = [fib.clone(), prev].concat();
        prev = fib;
        fib = next;
    }
    fib.truncate(n);
    let block: Vec<u8> = (0..(n / 5).max(1)).map(|i| r(i) as u8).collect();
    vec![
        ("random bytes", (0..n).map(|i| r(i) as u8).collect()),
        (
            "random ACGT",
            (0..n).map(|i| b"ACGT"[(r(i) % 4) as usize]).collect(),
        ),
        (
            "DNA with N runs",
            (0..n)
                .map(|i| {
                    if (i / 1000) % 7 == 3 {
                        b'N'
                    } else {
                        b"ACGT"[(r(i) % 4) as usize]
                    }
                })
                .collect(),
        ),
        ("a^n", vec![b'a'; n]),
        ("(ab)^n", (0..n).map(|i| b"ab"[i % 2]).collect()),
        ("(abc)^n", (0..n).map(|i| b"abc"[i % 3]).collect()),
        ("Fibonacci", fib),
        (
            "repeated block",
            (0..n).map(|i| block[i % block.len()]).collect(),
        ),
        ("0x00", vec![0u8; n]),
        ("0xFF", vec![0xffu8; n]),
        (
            "0x00/0xFF random",
            (0..n)
                .map(|i| if r(i) % 3 == 0 { 0xff } else { 0 })
                .collect(),
        ),
        (
            "ends in zeros",
            (0..n)
                .map(|i| {
                    if i + 20 >= n {
                        0
                    } else {
                        b"ab"[(r(i) % 2) as usize]
                    }
                })
                .collect(),
        ),
        (
            "two letters",
            (0..n).map(|i| b"xy"[(r(i) % 2) as usize]).collect(),
        ),
    ]
}

#[test]
fn device_suffix_array_equals_libsais() {
    use psa::internals::{naive_sa, sa_bytes, sa_ints};
    use psa::local::gpu::SacaText;
    let Some(g) = gpu("device_suffix_array_equals_libsais") else {
        return;
    };
    let mut cases = 0;
    for n in [
        1usize, 2, 3, 7, 8, 9, 22, 100, 1000, 4097, 300_000, 2_000_003,
    ] {
        for (name, t) in sa_texts(n, n as u64) {
            let want = if n <= 1000 {
                naive_sa(&t)
            } else {
                sa_bytes(&t, 4)
            };
            let got = g
                .suffix_array_on_device(SacaText::Bytes(&t))
                .unwrap_or_else(|e| panic!("bytes {name} n={n}: device failed: {e}"));
            if let Some(i) = (0..n).find(|&i| want[i] != got[i]) {
                panic!(
                    "bytes {name} n={n}: device SA differs at {i}: want {} got {}",
                    want[i], got[i]
                );
            }
            // The same text as integers (values ≥ 1, as psa's names are).
            let ints: Vec<u32> = t.iter().map(|&c| c as u32 * 3 + 1).collect();
            let got = g
                .suffix_array_on_device(SacaText::Ints(&ints))
                .unwrap_or_else(|e| panic!("ints {name} n={n}: device failed: {e}"));
            assert!(want == got, "ints {name} n={n}: device SA differs");
            cases += 2;
        }
    }
    // Integer texts with large alphabets (recursion names up to n).
    for n in [5000usize, 1_000_000] {
        for m in [2u64, 1000, n as u64] {
            let ints: Vec<u32> = (0..n)
                .map(|i| 1 + (splitmix(i as u64 ^ m) % m) as u32)
                .collect();
            let want = sa_ints(&ints, 4);
            let got = g
                .suffix_array_on_device(SacaText::Ints(&ints))
                .unwrap_or_else(|e| panic!("ints n={n} m={m}: device failed: {e}"));
            assert!(want == got, "ints n={n} values 1..={m}: device SA differs");
            cases += 1;
        }
    }
    // Through the trait, as the algorithms call it (above the size where the device is used).
    let t = &sa_texts(1 << 20, 99)[2].1;
    let got = g
        .device_suffix_array()
        .expect("the GPU backend builds suffix arrays")
        .suffix_array_bytes(t)
        .expect("2^20 characters go to the device");
    assert!(got == sa_bytes(t, 4), "trait path differs");
    let (_, fallbacks) = g.counters();
    assert_eq!(fallbacks, 0, "a device suffix array fell back to the CPU");
    say(&format!(
        "device_suffix_array_equals_libsais: ran on {}: {cases} texts",
        g.device()
    ));
}

/// The device suffix array with its sorts forced into pieces (the path of texts larger than the
/// device's sort buffers): first-round key ranges (refined histograms, one-key ranges that do
/// not fit), chunks of whole groups and groups sorted in key ranges, on every hard input.
#[test]
fn device_suffix_array_in_pieces_equals_libsais() {
    use psa::internals::{naive_sa, sa_bytes};
    use psa::local::gpu::SacaText;
    if gpu("device_suffix_array_in_pieces_equals_libsais").is_none() {
        return;
    }
    let mut cases = 0;
    for parts in [2usize, 7, 64, 1000] {
        let opts = GpuOptions {
            sa_parts: Some(parts),
            ..GpuOptions::default()
        };
        let g = GpuSort::open(0, 4, opts).expect("a second handle on the same device");
        for n in [1usize, 2, 3, 9, 100, 1000, 4097, 300_000] {
            for (name, t) in sa_texts(n, n as u64 ^ parts as u64) {
                let want = if n <= 1000 {
                    naive_sa(&t)
                } else {
                    sa_bytes(&t, 4)
                };
                let got = g
                    .suffix_array_on_device(SacaText::Bytes(&t))
                    .unwrap_or_else(|e| {
                        panic!("bytes {name} n={n} parts={parts}: device failed: {e}")
                    });
                if let Some(i) = (0..n).find(|&i| want[i] != got[i]) {
                    panic!(
                        "bytes {name} n={n} parts={parts}: device SA differs at {i}: want {} got {}",
                        want[i], got[i]
                    );
                }
                let ints: Vec<u32> = t.iter().map(|&c| c as u32 * 3 + 1).collect();
                let got = g
                    .suffix_array_on_device(SacaText::Ints(&ints))
                    .unwrap_or_else(|e| {
                        panic!("ints {name} n={n} parts={parts}: device failed: {e}")
                    });
                assert!(
                    want == got,
                    "ints {name} n={n} parts={parts}: device SA differs"
                );
                cases += 2;
            }
        }
    }
    say(&format!(
        "device_suffix_array_in_pieces_equals_libsais: {cases} texts"
    ));
}
