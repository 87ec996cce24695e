//! `gpu-sort-bench`: the GPU backend's local sort (transfers included) against voracious_mt_sort
//! on random u64 keys, (u64 key, u64 value) records and u128 keys. An example of the crate: build
//! with `cargo build --release --features gpu --example gpu-sort-bench` (the binary is
//! `target/release/examples/gpu-sort-bench`).
//!
//! Usage: gpu-sort-bench [--sizes 1e8,1e9] [--threads 16] [--reps 3] [--cpu-reps 1] [--pageable]
//!                       [--kinds u64,rec,u128] [--groups auto,1] [--passes onesweep,classic]
//!                       [--host pageable,pinned] [--stage NxM] [--copy-piece BYTES]
//!                       [--pin register|alloc] [--kernel-cache DIR]
//!
//! For every size and kind: one input (fixed seed), sorted by the CPU (voracious_mt_sort,
//! `--threads` threads) and by the GPU backend. u64, u128: random keys, the results must be
//! equal. rec: a random u64 key with its input index as the value, sorted by key (psa's
//! `sort_u128_by_high`; the CPU side is psa's CPU backend, voracious_mt_sort keyed by the u64);
//! the GPU result must be sorted, stable and a permutation of the input.
//! GPU time is the median of `--reps` sorts, each on a fresh copy of the input, the first sort of
//! the process (NVRTC compile, buffer allocation) excluded by a warm-up. `--groups` lists the
//! overlap settings to time on the same input (auto: by size as psa does; 1: the copy home
//! after the whole sort; N: N groups). `--host` lists where the keys live while they are sorted
//! (both sorts, each in its own buffer): `pageable`, ordinary memory (the GPU copies through its
//! pinned staging buffers; psa's algorithms sort such memory), or `pinned`, page-locked memory
//! from the GPU backend (`psa::local::HostBuf`; the DMA engine copies it directly), allocated
//! once per row: its allocation time is a column of its own, not part of the sorts. Prints a
//! markdown table. `--stage`, `--copy-piece`, `--pin` and `--kernel-cache` set the backend's
//! [`psa::GpuOptions`] (as psa's hidden `--gpu-stage`, `--gpu-copy-piece`, `--gpu-pin` and its
//! `--kernel-cache` do; default: none, the kernels are compiled by every run).

fn main() {
    bench::main()
}

mod bench {
    use std::time::Instant;

    use psa::local::cpu::CpuSort;
    use psa::local::gpu::{GpuSort, Profile};
    use psa::local::{HostBuf, LocalSort};
    use psa::{GpuOptions, PinMethod};
    use rayon::prelude::*;
    use voracious_radix_sort::RadixSort;

    struct Args {
        sizes: Vec<usize>,
        threads: usize,
        reps: usize,
        cpu_reps: usize,
        pageable: bool,
        bits128: Vec<u32>,
        /// Key kinds: "u64", "rec", "u128".
        kinds: Vec<String>,
        /// Overlap groups to time (None: by size).
        groups: Vec<Option<usize>>,
        /// Pass kinds to time: true for one-sweep.
        onesweep: Vec<bool>,
        /// Host memory kinds to time: true for page-locked memory from the backend.
        host_pinned: Vec<bool>,
        /// The backend's settings (staging shape, copy piece, pin method, kernel cache).
        opts: GpuOptions,
    }

    fn parse_size(s: &str) -> usize {
        if let Some((m, e)) = s.split_once('e') {
            let m: f64 = m.parse().expect("size mantissa");
            let e: i32 = e.parse().expect("size exponent");
            (m * 10f64.powi(e)) as usize
        } else {
            s.parse().expect("size")
        }
    }

    fn args() -> Args {
        let mut a = Args {
            sizes: vec![100_000_000, 1_000_000_000],
            threads: 16,
            reps: 3,
            cpu_reps: 1,
            pageable: false,
            bits128: vec![128],
            kinds: vec!["u64".into(), "rec".into(), "u128".into()],
            groups: vec![None],
            onesweep: vec![true],
            host_pinned: vec![false],
            opts: GpuOptions::default(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(x) = it.next() {
            let mut val = || it.next().unwrap_or_else(|| panic!("{x} needs a value"));
            match x.as_str() {
                "--sizes" => a.sizes = val().split(',').map(parse_size).collect(),
                "--threads" => a.threads = val().parse().expect("threads"),
                "--reps" => a.reps = val().parse().expect("reps"),
                "--cpu-reps" => a.cpu_reps = val().parse().expect("cpu reps"),
                "--pageable" => a.pageable = true,
                "--kinds" => {
                    a.kinds = val().split(',').map(String::from).collect();
                    for k in &a.kinds {
                        assert!(
                            ["u64", "rec", "u128"].contains(&k.as_str()),
                            "--kinds: u64, rec or u128, not {k}"
                        );
                    }
                }
                "--passes" => {
                    a.onesweep = val()
                        .split(',')
                        .map(|k| match k {
                            "onesweep" => true,
                            "classic" => false,
                            k => panic!("--passes: onesweep or classic, not {k}"),
                        })
                        .collect()
                }
                "--host" => {
                    a.host_pinned = val()
                        .split(',')
                        .map(|k| match k {
                            "pageable" => false,
                            "pinned" => true,
                            k => panic!("--host: pageable or pinned, not {k}"),
                        })
                        .collect()
                }
                "--groups" => {
                    a.groups = val()
                        .split(',')
                        .map(|g| match g {
                            "auto" => None,
                            g => Some(g.parse().expect("groups: auto or a number")),
                        })
                        .collect()
                }
                // Significant low bits of the u128 keys (psa's keys have constant high bits).
                "--u128-bits" => {
                    a.bits128 = val().split(',').map(|b| b.parse().expect("bits")).collect()
                }
                // N staging buffers (at least 2) of M MiB.
                "--stage" => {
                    let v = val();
                    let shape = v.split_once('x').and_then(|(n, m)| {
                        Some((n.parse::<usize>().ok()?, m.parse::<usize>().ok()?))
                    });
                    match shape {
                        Some((n, m)) if n >= 2 && m >= 1 => {
                            a.opts.stage_buffers = n;
                            a.opts.stage_buffer_bytes = m << 20;
                        }
                        _ => panic!("--stage: NxM, N buffers (at least 2) of M MiB, not {v}"),
                    }
                }
                "--copy-piece" => {
                    a.opts.copy_piece = val().parse().expect("copy piece: bytes");
                    assert!(
                        a.opts.copy_piece >= 4096,
                        "--copy-piece: at least 4096 bytes"
                    );
                }
                "--pin" => {
                    a.opts.pin = match val().as_str() {
                        "register" => PinMethod::Register,
                        "alloc" => PinMethod::Alloc,
                        p => panic!("--pin: register or alloc, not {p}"),
                    }
                }
                "--kernel-cache" => a.opts.kernel_cache = Some(val().into()),
                "-h" | "--help" => {
                    println!("usage: gpu-sort-bench [--sizes 1e8,1e9] [--threads 16] [--reps 3] [--cpu-reps 1] [--pageable] [--kinds u64,rec,u128] [--u128-bits 128,80] [--groups auto,1] [--passes onesweep,classic] [--host pageable,pinned] [--stage NxM] [--copy-piece BYTES] [--pin register|alloc] [--kernel-cache DIR]");
                    std::process::exit(0);
                }
                _ => panic!("unknown argument {x}"),
            }
        }
        a
    }

    fn splitmix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9e3779b97f4a7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }

    trait BenchKey: bytemuck::Pod + Send + Sync + PartialEq {
        const NAME: &'static str;
        /// Key `idx` of the input with seed `seed`.
        fn make(seed: u64, idx: u64, bits: u32) -> Self;
        fn cpu_sort(v: &mut [Self], threads: usize);
        fn gpu_sort(gpu: &GpuSort, v: &mut [Self]);
        /// Whether `out` (the GPU's) is right, given the CPU's result and the input.
        fn check(out: &[Self], cpu_out: &[Self], _input: &[Self]) -> bool {
            out.par_iter().zip(cpu_out.par_iter()).all(|(x, y)| x == y)
        }
    }
    impl BenchKey for u64 {
        const NAME: &'static str = "u64";
        fn make(seed: u64, idx: u64, _bits: u32) -> Self {
            splitmix(seed.wrapping_add(idx))
        }
        fn cpu_sort(v: &mut [Self], threads: usize) {
            v.voracious_mt_sort(threads);
        }
        fn gpu_sort(gpu: &GpuSort, v: &mut [Self]) {
            gpu.sort_u64(v);
        }
    }
    impl BenchKey for u128 {
        const NAME: &'static str = "u128";
        fn make(seed: u64, idx: u64, bits: u32) -> Self {
            let i = seed.wrapping_add(idx);
            let k = (splitmix(i) as u128) << 64 | splitmix(i ^ 0x5555_5555_5555_5555) as u128;
            if bits >= 128 {
                k
            } else {
                k & ((1u128 << bits) - 1)
            }
        }
        fn cpu_sort(v: &mut [Self], threads: usize) {
            v.voracious_mt_sort(threads);
        }
        fn gpu_sort(gpu: &GpuSort, v: &mut [Self]) {
            gpu.sort_u128(v);
        }
    }

    /// A record of a random u64 key (the high half) and its input index as the value (the low
    /// half), sorted by key only: psa's `sort_u128_by_high`. The CPU sort is psa's CPU backend,
    /// voracious_mt_sort of (value, key) structs keyed by the u64.
    #[derive(Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(transparent)]
    struct Rec(u128);
    impl BenchKey for Rec {
        const NAME: &'static str = "record (u64 key, u64 value)";
        fn make(seed: u64, idx: u64, _bits: u32) -> Self {
            Rec((splitmix(seed.wrapping_add(idx)) as u128) << 64 | idx as u128)
        }
        fn cpu_sort(v: &mut [Self], threads: usize) {
            CpuSort::new(threads).sort_u128_by_high(bytemuck::cast_slice_mut(v));
        }
        fn gpu_sort(gpu: &GpuSort, v: &mut [Self]) {
            gpu.sort_u128_by_high(bytemuck::cast_slice_mut(v));
        }
        /// Sorted by key, stable (the values, input indices, increase among equal keys) and a
        /// permutation of the input (every record is the input's record at its index, and
        /// strictly increasing (key, index) makes them distinct). The CPU sort need not be
        /// stable, so it is not compared record by record.
        fn check(out: &[Self], _cpu_out: &[Self], input: &[Self]) -> bool {
            out.len() == input.len()
                && out.par_iter().enumerate().all(|(j, r)| {
                    let idx = r.0 as u64 as usize;
                    idx < input.len() && input[idx] == *r && (j == 0 || out[j - 1].0 < r.0)
                })
        }
    }

    struct Row {
        what: String,
        n: usize,
        groups: Option<usize>,
        onesweep: bool,
        /// Page-locked host memory from the backend, and the seconds allocating (and zeroing) it.
        pinned: bool,
        host_alloc_s: f64,
        cpu_s: f64,
        gpu_s: f64,
        prof: Profile,
        equal: bool,
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    }

    fn run<K: BenchKey>(gpu: &mut GpuSort, a: &Args, n: usize, bits: u32) -> Vec<Row> {
        let seed = (n as u64).wrapping_mul(0x1000193)
            ^ (K::NAME.len() as u64) << 48
            ^ ((bits as u64) << 32);
        let t = Instant::now();
        let input: Vec<K> = (0..n as u64)
            .into_par_iter()
            .map(|i| K::make(seed, i, bits))
            .collect();
        eprintln!(
            "  generated {n} {} keys in {:.2}s",
            K::NAME,
            t.elapsed().as_secs_f64()
        );
        let what = if K::NAME == "u128" && bits < 128 {
            format!("u128 ({bits} bits)")
        } else {
            K::NAME.to_string()
        };
        let fill = |buf: &mut [K]| {
            buf.par_iter_mut()
                .zip(input.par_iter())
                .for_each(|(d, s)| *d = *s)
        };
        let mut cpu_out: Vec<K> = Vec::new();
        let mut rows = Vec::new();
        for &pinned in &a.host_pinned {
            let t = Instant::now();
            let mut buf: HostBuf<K> = match pinned {
                true => HostBuf::zeroed(&*gpu, n),
                false => HostBuf::zeroed(&CpuSort::new(1), n),
            };
            let host_alloc_s = t.elapsed().as_secs_f64();
            if pinned && !buf.is_backend_memory() {
                eprintln!(
                    "gpu-sort-bench: the GPU backend gave no page-locked memory for {n} keys"
                );
                std::process::exit(1);
            }
            let host = if pinned { "pinned" } else { "pageable" };
            let mut cpu_times = Vec::new();
            for _ in 0..a.cpu_reps.max(1) {
                fill(&mut buf);
                let t = Instant::now();
                K::cpu_sort(&mut buf, a.threads);
                cpu_times.push(t.elapsed().as_secs_f64());
            }
            eprintln!("  cpu ({host} memory): {cpu_times:?}");
            if cpu_out.is_empty() {
                cpu_out = buf.to_vec();
            }
            for (&groups, &onesweep) in a
                .groups
                .iter()
                .flat_map(|g| a.onesweep.iter().map(move |o| (g, o)))
            {
                gpu.set_overlap_groups(groups);
                gpu.set_onesweep(onesweep);
                let mut gpu_times = Vec::new();
                let mut equal = true;
                let mut profs = Vec::new();
                for r in 0..a.reps.max(1) {
                    fill(&mut buf);
                    let t = Instant::now();
                    K::gpu_sort(gpu, &mut buf);
                    gpu_times.push(t.elapsed().as_secs_f64());
                    let prof = gpu.last_profile();
                    let eq = K::check(&buf, &cpu_out, &input);
                    equal &= eq;
                    eprintln!(
                        "  gpu rep {r} ({host}, groups {groups:?}, onesweep {onesweep}): {:.4}s equal={eq} {:?}",
                        gpu_times[r], prof
                    );
                    profs.push(prof);
                }
                // The breakdown of the median sort.
                let mut order: Vec<usize> = (0..gpu_times.len()).collect();
                order.sort_by(|&x, &y| gpu_times[x].total_cmp(&gpu_times[y]));
                let prof = profs.swap_remove(order[order.len() / 2]);
                rows.push(Row {
                    what: what.clone(),
                    n,
                    groups,
                    onesweep,
                    pinned,
                    host_alloc_s,
                    cpu_s: median(cpu_times.clone()),
                    gpu_s: median(gpu_times),
                    prof,
                    equal,
                });
            }
        }
        gpu.set_overlap_groups(None);
        gpu.set_onesweep(true);
        rows
    }

    pub fn main() {
        let a = args();
        rayon::ThreadPoolBuilder::new()
            .num_threads(a.threads)
            .build_global()
            .ok();
        let mut gpu = match GpuSort::open(0, a.threads, a.opts.clone()) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("gpu-sort-bench: {e}");
                std::process::exit(1);
            }
        };
        gpu.set_pinned_staging(!a.pageable);
        let t = Instant::now();
        if let Err(e) = gpu.prepare() {
            eprintln!("gpu-sort-bench: {e}");
            std::process::exit(1);
        }
        eprintln!(
            "device: {}; kernels compiled and loaded in {:.3}s",
            gpu.device(),
            t.elapsed().as_secs_f64()
        );
        // Warm-up: first sort allocates buffers and pinned staging.
        let mut w: Vec<u64> = (0..1u64 << 20).map(splitmix).collect();
        gpu.sort_u64(&mut w);
        assert!(
            w.windows(2).all(|p| p[0] <= p[1]),
            "warm-up sort is not sorted"
        );

        let mut rows = Vec::new();
        for &n in &a.sizes {
            for kind in &a.kinds {
                match kind.as_str() {
                    "u64" => {
                        eprintln!("n = {n}: u64");
                        rows.extend(run::<u64>(&mut gpu, &a, n, 64));
                    }
                    "rec" => {
                        eprintln!("n = {n}: records");
                        rows.extend(run::<Rec>(&mut gpu, &a, n, 128));
                    }
                    _ => {
                        for &bits in &a.bits128 {
                            eprintln!("n = {n}: u128 ({bits} bits)");
                            rows.extend(run::<u128>(&mut gpu, &a, n, bits));
                        }
                    }
                }
            }
        }
        println!();
        println!(
            "device: {}; transfers from pageable memory: {}",
            gpu.device(),
            if a.pageable {
                "plain copies"
            } else {
                "through pinned staging buffers"
            }
        );
        println!();
        println!("*groups*: the sort split into groups, each copied home while the next is sorted");
        println!("(then *kernels* is the split and the group sorts by the device clock, and *D2H*");
        println!("what the copies added after them); 0: the copy follows the whole sort.");
        println!(
            "*(host copy)*: of the copy before it, the seconds the CPU spent copying into (H2D)"
        );
        println!(
            "or out of (D2H: all groups, also while the GPU sorted) the pinned staging buffers."
        );
        println!("GPU total is the median sort; the columns after it are that sort's breakdown.");
        println!("*host*: where both sorts find the keys; pageable: ordinary memory (as in psa's");
        println!(
            "algorithms); pinned: page-locked memory from the GPU backend (`HostBuf`), copied by"
        );
        println!(
            "DMA without staging. *pin alloc*: seconds allocating that buffer (once, not timed in"
        );
        println!("the sorts). The voracious time is measured on the same kind of memory.");
        println!();
        println!("| keys | n | host | pin alloc (s) | groups | passes | pass kind | voracious {}T (s) | GPU total (s) | H2D | (host copy) | kernels | D2H | (host copy) | alloc | CPU/GPU | GPU Mkeys/s | equal |", a.threads);
        println!("|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        let mut all = true;
        for r in &rows {
            all &= r.equal;
            println!(
                "| {} | {:.0e} | {} | {} | {}{} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1}x | {:.0} | {} |",
                r.what,
                r.n as f64,
                if r.pinned { "pinned" } else { "pageable" },
                if r.pinned { format!("{:.3}", r.host_alloc_s) } else { "-".into() },
                r.prof.groups,
                if r.groups.is_none() { " (auto)" } else { "" },
                r.prof.passes,
                if r.onesweep { "one-sweep" } else { "classic" },
                r.cpu_s,
                r.gpu_s,
                r.prof.h2d_s,
                r.prof.h2d_stage_s,
                r.prof.sort_s,
                r.prof.d2h_s,
                r.prof.d2h_stage_s,
                r.prof.alloc_s,
                r.cpu_s / r.gpu_s,
                r.n as f64 / r.gpu_s / 1e6,
                if r.equal { "yes" } else { "NO" }
            );
        }
        if !all {
            eprintln!("gpu-sort-bench: GPU RESULT DIFFERS FROM THE CPU SORT");
            std::process::exit(1);
        }
    }
}
