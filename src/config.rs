//! Every setting of a run in one typed value: [`Config`].
//!
//! The library reads no environment: a program sets the fields it needs, and the `psa` binary sets
//! them from its command line (the same on every pe, so nothing needs broadcasting). The test and
//! tuning switches of [`Tunables`] and [`GpuOptions`] are hidden flags of the binary; every field is
//! written into `--stats` (`"config"`) and onto the `-v` log ([`Config::fields`]).

use std::path::PathBuf;

use crate::index::IndexWidth;

/// Which algorithm builds the suffix array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    /// Parallel DC3 (Kulla & Sanders).
    Dc3,
    /// Parallel CSS: 8-character keys, one sample sort, equal runs refined by prefix doubling.
    Css,
}

/// Which backend runs the local sorts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Voracious radix sort on the pe's threads ([`crate::local::cpu::CpuSort`]).
    Cpu,
    /// The GPU (build with `--features gpu`; pe r uses device r mod device count).
    Gpu,
}

/// Settings of a run. Every pe must pass the same values (they steer collective paths).
#[derive(Clone, Debug)]
pub struct Config {
    /// The algorithm (default: pCSS).
    pub algo: Algo,
    /// The local sort backend (default: the CPU).
    pub backend: Backend,
    /// Threads per pe for local work: the size of the rayon pool the library runs in, the local
    /// sorts' threads and the base case's. 0 (the default): the cores this process may use over
    /// the pes of its node, at least 1 — [`crate::Ctx::new`] resolves it.
    pub threads: usize,
    /// A (sub)problem with at most this many characters in total is gathered on pe 0 and solved
    /// sequentially (a recursion level only when also at most half the text's largest block, or
    /// 2^16: see [`crate::Ctx::gathers`]); larger ones recurse in parallel. At least 4.
    pub base_case: usize,
    /// Largest element count of one MPI call (MPI counts are `i32`; default `i32::MAX`). Tests
    /// lower it to run every all-to-all in rounds. Clamped to `1..=i32::MAX`, then raised to at
    /// least the number of pes.
    pub mpi_max_count: usize,
    /// Largest volume a pe sends in one round of an exchange, bytes; None: one round. In rounds,
    /// an exchange holds about one copy of its records instead of two (see
    /// [`crate::comm::Comm::all_to_all_rounds`]); tests set it small to run every exchange in many
    /// rounds (`--exchange-round-bytes N`).
    pub round_bytes: Option<usize>,
    /// The memory budget of every pe, bytes: a file job ([`crate::driver::run`]) plans its knobs
    /// so that each pe's predicted peak stays inside it, and is refused before its input is read
    /// when even its leanest plan does not fit (see [`crate::plan`]; a caller of
    /// [`crate::suffix_array`] can do the same with [`crate::plan::choose`]). None: no budget
    /// (the knobs as configured). The `psa` binary's default comes from Slurm or the node's
    /// memory (`--mem-per-pe SIZE`).
    pub mem_per_pe: Option<u64>,
    /// Where [`Self::mem_per_pe`] came from, for messages (`--mem-per-pe`, a Slurm variable, the
    /// node's memory).
    pub mem_per_pe_from: String,
    /// What the plan takes a pe to hold before the text, bytes (None: each pe's resident size
    /// when the plan is made, the most over pes, with [`crate::plan::BASE_MARGIN`]); tests set
    /// it so that the budgets they compute are the run's (`--plan-base N`).
    pub plan_base: Option<u64>,
    /// The plan may run the other algorithm when the configured one cannot fit the budget (both
    /// give the same output; default true). The `psa` binary clears it when `--algo` is given.
    pub plan_algo: bool,
    /// Decompressed bytes pe 0 reads at a time from a gzip input it streams (one that is not
    /// BGZF: the piece it parses and hands out; default 16 MiB); tests set it small to cut
    /// records and lines at every place (`--read-piece N`).
    pub read_piece: usize,
    /// Heap blocks of at least this many bytes are mapped from the kernel and given back to it
    /// when freed (glibc's `M_MMAP_THRESHOLD`, set by [`crate::Ctx::new`] for the whole process).
    /// Without it glibc raises its threshold to 32 MiB as large blocks are freed, and the blocks
    /// of one phase stay resident after they are freed, under the next phase's: tens of bytes
    /// per character on small slices. Default 1 MiB (`--map-threshold SIZE`); None (`0`): the
    /// allocator as it is.
    pub map_threshold: Option<usize>,
    /// Blocks mapped from the kernel (see [`Self::map_threshold`]) are asked for in 2 MiB pages
    /// (`madvise(MADV_HUGEPAGE)`, where the kernel's transparent huge pages allow it), those of
    /// at least 2 MiB starting on one: a block's first touch then costs one page fault per 2 MiB
    /// instead of per 4 KiB, and random access misses the TLB less. Default true
    /// (`--no-huge-pages` clears it).
    pub huge_pages: bool,
    /// Test and tuning switches of the algorithms (read as `ctx.tune`).
    pub tune: Tunables,
    /// Settings of the GPU backend.
    pub gpu: GpuOptions,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            algo: Algo::Css,
            backend: Backend::Cpu,
            threads: 0,
            base_case: 1 << 22,
            mpi_max_count: i32::MAX as usize,
            round_bytes: None,
            mem_per_pe: None,
            mem_per_pe_from: String::new(),
            plan_base: None,
            plan_algo: true,
            read_piece: 16 << 20,
            map_threshold: Some(1 << 20),
            huge_pages: true,
            tune: Tunables::default(),
            gpu: GpuOptions::default(),
        }
    }
}

/// Test and tuning switches of the algorithms. The defaults are what psa normally does; the other
/// values reach paths that tests must cover and measurements compare. `psa` flags in parentheses.
#[derive(Clone, Debug, PartialEq)]
pub struct Tunables {
    /// Use the wide-record paths (normally only for n ≥ 2^32..2^41) on any input, so tests reach
    /// them (`--force-wide`): in the difference covers and pCSS, 64-bit indices (unless
    /// `index_width` says otherwise), and the difference covers' paths of huge names (triples
    /// field by field, comparison sorts).
    pub force_wide: bool,
    /// The index width of the difference covers' and pCSS' records at least this (None: the
    /// narrowest that holds the level's positions and names, see [`IndexWidth::choose`]), so
    /// tests and measurements reach the 40- and 64-bit records on small inputs
    /// (`--index-bits 32|40|64`).
    pub index_width: Option<IndexWidth>,
    /// pDC3 names its samples by a sample sort of their triples even where the triples' codes fit
    /// a bitmap over all codes, whose set bits name them without a sort (default false; tests
    /// reach the sort on small alphabets and measurements compare) (`--name-by-sort`).
    pub name_by_sort: bool,
    /// The share of a level's samples that must be discardable before the difference covers
    /// discard them: a sample whose window no other sample has (its name, from the sort, is its
    /// rank) and that does not end a run of shared names in the recursion string leaves the
    /// recursion, which then solves only the rest (default 0.5: below it the kept samples' places
    /// and free ranks cost more memory than the shorter string saves; 0: whenever any is; more
    /// than 1: never, and names stay dense) (`--discard-share F`).
    pub discard_share: f64,
    /// Fraction of unresolved suffixes above which pCSS hands over to DC7 (or DC3) instead of
    /// doubling; 1 or more: never (default 0.85) (`--css-handover F`).
    pub css_handover: f64,
    /// pCSS predicts the hand-over from a sample of its keys and then skips its first sort
    /// (default true); false: it always runs its first sort, so tests reach the hand-over after
    /// the sort (`--no-css-predict`).
    pub css_predict: bool,
    /// pCSS's hand-over finishes with DC3 on the prefix names instead of DC7 (default false)
    /// (`--css-finish dc3`).
    pub css_finish_dc3: bool,
    /// What pCSS does when its sample predicts the hand-over (default [`Predicted::Dc7`])
    /// (`--css-predicted dc7|dc3|sort`).
    pub css_predicted: Predicted,
    /// With the GPU at p > 1, build a whole text that fits pe 0's device there (default true; see
    /// `algo::pooled`); false: the distributed algorithm with device sorts (its recursion
    /// levels still go to the device when they fit) (`--no-gpu-pool`).
    pub gpu_pool: bool,
    /// Records per message of that relay through pe 0 (default 2^24; at least 1;
    /// tests use tiny pieces) (`--pool-piece N`).
    pub pool_piece: usize,
    /// Key ranges that pCSS's sorts run in, one after the other (a range's records are made,
    /// sorted, named and freed before the next: less memory, see
    /// `plan::css_costs`); 0 (the default): one, unless the memory plan needs more
    /// (`--sort-rounds N`).
    pub sort_rounds: usize,
    /// Key ranges that the difference covers (pDC3, DC7) sort their samples and merge in, one
    /// after the other (a range's sample keys are made from the text, sorted, named and freed
    /// before the next; then a range's merge records are made, exchanged, sorted, merged and
    /// freed; its suffix array part goes straight to its place): this many at DC7's top level,
    /// three quarters at pDC3's, a recursion level's merge in proportion to its size and its
    /// naming in half its merge's (`ctx::merge_ranges`, `ctx::name_ranges`); 0 (the default):
    /// one, unless the memory plan needs more; at most 256 are used (`--merge-rounds N`).
    pub merge_rounds: usize,
    /// Characters of every suffix the LCP construction compares exactly before it searches with
    /// fingerprints (at most 16, default 16; see `algo::lcp`); 0 and 1 send almost every pair
    /// to the fingerprint search, so tests reach it on small inputs (`--lcp-prefix N`).
    pub lcp_prefix: usize,
    /// Queries a pe sends in one request round of the BWT and LCP constructions (more make
    /// more rounds, each with smaller buffers: about 40 bytes a query; default 2^20; at least
    /// 1; tests use tiny values) (`--request-piece N`).
    pub request_piece: usize,
    /// The sample step of the LCP search's first level (see `algo::lcp`; rounded up to a power
    /// of two; 0, the default: 1024); tests force 1, 2, 4 on small inputs (`--lcp-sample N`).
    pub lcp_sample: usize,
}

impl Tunables {
    /// The index width the difference covers must use at least: `index_width`, else 64 bits
    /// with `force_wide`.
    pub fn forced_index_width(&self) -> Option<IndexWidth> {
        self.index_width
            .or(self.force_wide.then_some(IndexWidth::W64))
    }
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            force_wide: false,
            index_width: None,
            name_by_sort: false,
            discard_share: 0.5,
            css_handover: 0.85,
            css_predict: true,
            css_finish_dc3: false,
            css_predicted: Predicted::Dc7,
            gpu_pool: true,
            pool_piece: 1 << 24,
            sort_rounds: 0,
            merge_rounds: 0,
            lcp_prefix: 16,
            request_piece: 1 << 20,
            lcp_sample: 0,
        }
    }
}

/// pCSS's path for inputs its sample predicts to be repetitive (see [`Tunables::css_predicted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predicted {
    /// DC7 on the text from the start (the default).
    Dc7,
    /// DC3 on the text from the start.
    Dc3,
    /// pCSS's first sort, then the DC7 finish on the prefix names.
    SortThenDc7,
}

impl Predicted {
    /// The name of the value on the command line and in `--stats`: "dc7", "dc3" or "sort".
    pub fn name(self) -> &'static str {
        match self {
            Predicted::Dc7 => "dc7",
            Predicted::Dc3 => "dc3",
            Predicted::SortThenDc7 => "sort",
        }
    }
}

/// Settings of the GPU backend (`local::gpu::GpuSort::open`, feature `gpu`); the defaults are what
/// measurements chose, the other values are there to measure again. `psa` flags in parentheses.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuOptions {
    /// Pinned staging buffers of a transfer between pageable memory and the device, used in turn
    /// (the CPU fills or drains one while the DMA engine moves the others); at least 2 (default 2)
    /// (`--gpu-stage NxM`: N).
    pub stage_buffers: usize,
    /// Bytes per staging buffer (default 64 MiB) (`--gpu-stage NxM`: M MiB).
    pub stage_buffer_bytes: usize,
    /// Bytes per task of the CPU's parallel copies into and out of the staging buffers (default
    /// 1 MiB; at least 4096) (`--gpu-copy-piece BYTES`).
    pub copy_piece: usize,
    /// How page-locked host memory ([`crate::local::HostBuf`]) is obtained (default
    /// [`PinMethod::Register`]) (`--gpu-pin register|alloc`).
    pub pin: PinMethod,
    /// Where compiled kernels (PTX) are kept between runs, so that NVRTC runs once per machine;
    /// None (the library's default): compiled in every process. The `psa` binary's default is
    /// `$XDG_CACHE_HOME/psa`, else `~/.cache/psa` (`--kernel-cache DIR`).
    pub kernel_cache: Option<PathBuf>,
    /// The device suffix array's sorts in at least this many pieces (key ranges of the first
    /// round, chunks of groups after it: sort buffers for n / N records); None (the default):
    /// as few as the free device memory allows. Tests force many pieces on small texts
    /// (`--gpu-sa-parts N`).
    pub sa_parts: Option<usize>,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            stage_buffers: 2,
            stage_buffer_bytes: 64 << 20,
            copy_piece: 1 << 20,
            pin: PinMethod::Register,
            kernel_cache: None,
            sa_parts: None,
        }
    }
}

/// How the GPU backend page-locks host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinMethod {
    /// An anonymous mapping asked for transparent huge pages, touched by the rayon pool, then
    /// `cuMemHostRegister`ed (the default: huge pages, touched in parallel, pin faster).
    Register,
    /// `cuMemHostAlloc`: the driver maps, zeroes and pins 4 KiB pages, on one thread.
    Alloc,
}

impl PinMethod {
    /// The name of the value on the command line and in `--stats`: "register" or "alloc".
    pub fn name(self) -> &'static str {
        match self {
            PinMethod::Register => "register",
            PinMethod::Alloc => "alloc",
        }
    }
}

impl Config {
    /// Every setting as (name, value as JSON), in one list so that `--stats` and the log show the
    /// same fields. The names are those of the `psa` flags with `_` for `-`.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let (t, g) = (&self.tune, &self.gpu);
        let s = |v: &str| json_str(v);
        vec![
            ("algo", s(&format!("{:?}", self.algo).to_lowercase())),
            ("backend", s(&format!("{:?}", self.backend).to_lowercase())),
            ("threads", self.threads.to_string()),
            ("base_case", self.base_case.to_string()),
            ("mpi_max_count", self.mpi_max_count.to_string()),
            (
                "exchange_round_bytes",
                self.round_bytes.map_or("null".into(), |b| b.to_string()),
            ),
            (
                "mem_per_pe",
                self.mem_per_pe.map_or("null".into(), |b| b.to_string()),
            ),
            ("mem_per_pe_from", s(&self.mem_per_pe_from)),
            (
                "plan_base",
                self.plan_base.map_or("null".into(), |b| b.to_string()),
            ),
            ("plan_algo", self.plan_algo.to_string()),
            ("read_piece", self.read_piece.to_string()),
            (
                "map_threshold",
                self.map_threshold.map_or("null".into(), |b| b.to_string()),
            ),
            ("huge_pages", self.huge_pages.to_string()),
            ("force_wide", t.force_wide.to_string()),
            (
                "index_bits",
                t.index_width
                    .map_or("null".into(), |w| w.bits().to_string()),
            ),
            ("name_by_sort", t.name_by_sort.to_string()),
            ("discard_share", format!("{:?}", t.discard_share)),
            ("css_handover", format!("{:?}", t.css_handover)),
            ("css_predict", t.css_predict.to_string()),
            (
                "css_finish",
                s(if t.css_finish_dc3 { "dc3" } else { "dc7" }),
            ),
            ("css_predicted", s(t.css_predicted.name())),
            ("gpu_pool", t.gpu_pool.to_string()),
            ("pool_piece", t.pool_piece.to_string()),
            ("sort_rounds", t.sort_rounds.to_string()),
            ("merge_rounds", t.merge_rounds.to_string()),
            ("lcp_prefix", t.lcp_prefix.to_string()),
            ("request_piece", t.request_piece.to_string()),
            ("lcp_sample", t.lcp_sample.to_string()),
            ("gpu_stage_buffers", g.stage_buffers.to_string()),
            ("gpu_stage_buffer_bytes", g.stage_buffer_bytes.to_string()),
            ("gpu_copy_piece", g.copy_piece.to_string()),
            ("gpu_pin", s(g.pin.name())),
            (
                "gpu_sa_parts",
                g.sa_parts.map_or("null".into(), |p| p.to_string()),
            ),
            (
                "kernel_cache",
                g.kernel_cache
                    .as_ref()
                    .map_or("null".into(), |d| s(&d.display().to_string())),
            ),
        ]
    }

    /// The settings as one JSON object (`{"algo": "css", …}`).
    pub fn to_json(&self) -> String {
        let body: Vec<String> = (self.fields().into_iter())
            .map(|(k, v)| format!("{}: {v}", json_str(k)))
            .collect();
        format!("{{{}}}", body.join(", "))
    }

    /// The settings on one line for the log (`algo="css" threads=4 …`).
    pub fn summary(&self) -> String {
        (self.fields().into_iter())
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A JSON string literal for `s`.
pub fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_listed_once() {
        let c = Config::default();
        let names: Vec<&str> = c.fields().iter().map(|(k, _)| *k).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a name twice in {names:?}");
        // One entry per field of Config (tune and gpu flattened): a new field must be added here.
        let Config {
            algo: _,
            backend: _,
            threads: _,
            base_case: _,
            mpi_max_count: _,
            round_bytes: _,
            mem_per_pe: _,
            mem_per_pe_from: _,
            plan_base: _,
            plan_algo: _,
            read_piece: _,
            map_threshold: _,
            huge_pages: _,
            tune:
                Tunables {
                    force_wide: _,
                    index_width: _,
                    name_by_sort: _,
                    discard_share: _,
                    css_handover: _,
                    css_predict: _,
                    css_finish_dc3: _,
                    css_predicted: _,
                    gpu_pool: _,
                    pool_piece: _,
                    sort_rounds: _,
                    merge_rounds: _,
                    lcp_prefix: _,
                    request_piece: _,
                    lcp_sample: _,
                },
            gpu:
                GpuOptions {
                    stage_buffers: _,
                    stage_buffer_bytes: _,
                    copy_piece: _,
                    pin: _,
                    kernel_cache: _,
                    sa_parts: _,
                },
        } = &c;
        assert_eq!(names.len(), 13 + 15 + 6);
    }

    #[test]
    fn json_and_summary_show_the_values() {
        let mut c = Config::default();
        c.tune.css_predicted = Predicted::SortThenDc7;
        c.tune.css_handover = 2.0;
        c.gpu.kernel_cache = Some(PathBuf::from("/tmp/k \"x\""));
        let j = c.to_json();
        assert!(j.starts_with("{\"algo\": \"css\", \"backend\": \"cpu\", \"threads\": 0,"));
        assert!(j.contains("\"css_predicted\": \"sort\""), "{j}");
        assert!(j.contains("\"css_handover\": 2.0"), "{j}");
        assert!(j.contains("\"kernel_cache\": \"/tmp/k \\\"x\\\"\"}"), "{j}");
        assert!(Config::default()
            .to_json()
            .contains("\"kernel_cache\": null"));
        let s = c.summary();
        assert!(s.contains(" gpu_pool=true pool_piece=16777216 "), "{s}");
        assert!(s.contains(" css_finish=\"dc7\" "), "{s}");
    }
}
