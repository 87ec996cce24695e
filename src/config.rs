//! Every setting of a run in one typed value: [`Config`].
//!
//! The library reads no environment: a program sets the fields it needs, and the `psa` binary sets
//! them from its command line (the same on every pe, so nothing needs broadcasting). The test and
//! tuning switches, one typed part per layer or algorithm that reads them ([`CommOptions`],
//! [`AllocOptions`], [`CssOptions`], [`DcxOptions`], [`LcpOptions`], [`GpuOptions`]), are hidden
//! flags of the binary; every field is written into `--stats` (`"config"`) and onto the `-v` log
//! ([`Config::fields`]), the knobs a plan chose as the run kept them ([`Config::fields_with`]).
//!
//! The settings flow one way: a [`Config`] in, the memory plan's pure choice of [`Knobs`]
//! (`plan::choose`), then each build's setting made once from both (`ctx::Settings`); nothing
//! is written back into the configuration.

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

/// Whether a build may relay the whole text to pe 0, where libsais builds the suffix array with
/// every CPU of pe 0's node (`algo::offload`, [`crate::local::host`]): on one node the fastest
/// way, at 5 bytes per character on pe 0. Byte texts below 2^31 characters only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relay {
    /// The memory plan takes it where every pe runs on one node, the text has more than
    /// [`crate::plan::RELAY_MIN`] characters (fewer are gathered on pe 0 anyway) and pe 0's
    /// budget holds it (the `psa` binary without `--algo`).
    Auto,
    /// Never: the distributed algorithm (`--algo css`, `--algo dc3`; the library's default).
    Off,
    /// Always (`--algo node`): a text it cannot take, or a budget that cannot hold it, is
    /// refused.
    On,
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
///
/// The configuration is what a run is asked to do; it is never changed by the run. The knobs the
/// memory plan may choose ([`Knobs`]: the algorithm, exchange rounds, key ranges) are read from
/// it by [`Knobs::configured`] or chosen by [`crate::plan::choose`], and each build gets them as
/// a value of its own. The algorithms' switches are grouped by what reads them: [`Self::comm`],
/// [`Self::alloc`], [`Self::css`], [`Self::dcx`], [`Self::lcp`], [`Self::gpu`].
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
    /// 2^16: see `ctx::Settings::gathers`); larger ones recurse in parallel. At least 4.
    pub base_case: usize,
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
    /// Whether the whole text may go to libsais on pe 0 ([`Relay`]; default [`Relay::Off`], the
    /// `psa` binary's [`Relay::Auto`] without `--algo`).
    pub relay: Relay,
    /// Decompressed bytes pe 0 reads at a time from a gzip input it streams (one that is not
    /// BGZF: the piece it parses and hands out; default 16 MiB); tests set it small to cut
    /// records and lines at every place (`--read-piece N`).
    pub read_piece: usize,
    /// Use the wide-record paths (normally only for n ≥ 2^32..2^41) on any input, so tests reach
    /// them (`--force-wide`): in the difference covers, pCSS, the checker and the LCP, 64-bit
    /// indices (unless `index_width` says otherwise), and the difference covers' paths of huge
    /// names (triples field by field, comparison sorts).
    pub force_wide: bool,
    /// The index width of the difference covers', pCSS' and the LCP's records at least this
    /// (None: the narrowest that holds the level's positions and names, see
    /// [`IndexWidth::choose`]), so tests and measurements reach the 40- and 64-bit records on
    /// small inputs (`--index-bits 32|40|64`).
    pub index_width: Option<IndexWidth>,
    /// The communication layer's settings (`crate::comm::Comm`).
    pub comm: CommOptions,
    /// The allocator's settings (`crate::alloc`, set by [`crate::Ctx::new`]).
    pub alloc: AllocOptions,
    /// pCSS' switches.
    pub css: CssOptions,
    /// The difference covers' (pDC3, DC7) switches.
    pub dcx: DcxOptions,
    /// The LCP and BWT constructions' switches.
    pub lcp: LcpOptions,
    /// Settings of the GPU backend and of the relay through pe 0's device.
    pub gpu: GpuOptions,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            algo: Algo::Css,
            backend: Backend::Cpu,
            threads: 0,
            base_case: 1 << 22,
            mem_per_pe: None,
            mem_per_pe_from: String::new(),
            plan_base: None,
            plan_algo: true,
            relay: Relay::Off,
            read_piece: 16 << 20,
            force_wide: false,
            index_width: None,
            comm: CommOptions::default(),
            alloc: AllocOptions::default(),
            css: CssOptions::default(),
            dcx: DcxOptions::default(),
            lcp: LcpOptions::default(),
            gpu: GpuOptions::default(),
        }
    }
}

impl Config {
    /// The index width the records must use at least: `index_width`, else 64 bits with
    /// `force_wide`.
    pub fn forced_index_width(&self) -> Option<IndexWidth> {
        self.index_width
            .or(self.force_wide.then_some(IndexWidth::W64))
    }
}

/// How one build offloads whole suffix arrays (`algo::offload` has its table and its work). The same on every pe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offload {
    /// No device: the CPU builds everything.
    None,
    /// One pe with a device. `pool`: a whole text into a file is streamed to it as the device
    /// gives it (else built in one piece and written after).
    Device { pool: bool },
    /// Several pes, pe 0 with a device, every text relayed through pe 0. `pool`: the whole text
    /// too (else only the recursion levels; [`crate::GpuOptions::pool`]).
    Relay { pool: bool },
    /// No device; the whole text relayed through pe 0 to libsais with its node's CPUs
    /// ([`Knobs::relay`]).
    Host,
}

impl Offload {
    /// The strategy the configuration and the build's knobs ask for on `pes` pes. Pure.
    pub fn of(config: &Config, pes: usize, knobs: &Knobs) -> Offload {
        let pool = config.gpu.pool;
        match (config.backend, pes) {
            (Backend::Cpu, _) if knobs.relay => Offload::Host,
            (Backend::Cpu, _) => Offload::None,
            (Backend::Gpu, 1) => Offload::Device { pool },
            (Backend::Gpu, _) => Offload::Relay { pool },
        }
    }
}

/// The knobs the memory plan chooses ([`crate::plan::choose`]): a build runs with these, the
/// plan's or, without a plan, the configuration's ([`Knobs::configured`]). A new knob of the
/// algorithms goes here, into its algorithm's cost function (`plan::costs`) and into `choose`'s
/// list of candidates, leanest last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// The algorithm ([`Config::algo`]).
    pub algo: Algo,
    /// Largest volume a pe sends in one exchange round ([`CommOptions::round_bytes`]); None: one
    /// round.
    pub round_bytes: Option<usize>,
    /// Key ranges pCSS sorts one after the other ([`CssOptions::sort_rounds`]; 0: one).
    /// Ignored by pDC3.
    pub sort_rounds: usize,
    /// Key ranges the difference covers merge in, one after the other
    /// ([`DcxOptions::merge_rounds`]; 0: one): pDC3's, and DC7's when pCSS hands over.
    pub merge_rounds: usize,
    /// The whole text to libsais on pe 0 with its node's CPUs ([`Relay`]; `Offload::Host`);
    /// `algo` builds what it does not take.
    pub relay: bool,
}

impl Knobs {
    /// The knobs as `config` sets them (what a build runs with when nothing plans it).
    pub fn configured(config: &Config) -> Knobs {
        Knobs {
            algo: config.algo,
            round_bytes: config.comm.round_bytes,
            sort_rounds: config.css.sort_rounds,
            merge_rounds: config.dcx.merge_rounds,
            relay: config.relay == Relay::On,
        }
    }

    /// How the suffix array is built, as `--algo` names it: "node" for the relay to libsais,
    /// else the algorithm.
    pub fn name(&self) -> &'static str {
        match (self.relay, self.algo) {
            (true, _) => "node",
            (false, Algo::Css) => "css",
            (false, Algo::Dc3) => "dc3",
        }
    }
}

/// The communication layer's settings. `psa` flags in parentheses.
#[derive(Clone, Debug, PartialEq)]
pub struct CommOptions {
    /// Largest element count of one MPI call (MPI counts are `i32`; default `i32::MAX`). Tests
    /// lower it to run every all-to-all in rounds. Clamped to `1..=i32::MAX`, then raised to at
    /// least the number of pes (`--mpi-max-count N`).
    pub mpi_max_count: usize,
    /// Largest volume a pe sends in one round of an exchange, bytes; None: one round. In rounds,
    /// an exchange holds about one copy of its records instead of two (see
    /// [`crate::comm::Comm::all_to_all_rounds`]); tests set it small to run every exchange in many
    /// rounds (`--exchange-round-bytes N`). A memory plan may lower it for its run ([`Knobs`]).
    pub round_bytes: Option<usize>,
}

impl Default for CommOptions {
    fn default() -> Self {
        CommOptions {
            mpi_max_count: i32::MAX as usize,
            round_bytes: None,
        }
    }
}

/// The allocator's settings, set for the whole process by [`crate::Ctx::new`]. `psa` flags in
/// parentheses.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocOptions {
    /// Heap blocks of at least this many bytes are mapped from the kernel and given back to it
    /// when freed (glibc's `M_MMAP_THRESHOLD`).
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
}

impl Default for AllocOptions {
    fn default() -> Self {
        AllocOptions {
            map_threshold: Some(1 << 20),
            huge_pages: true,
        }
    }
}

/// pCSS' switches. The defaults are what psa normally does; the other values reach paths that
/// tests must cover and measurements compare. `psa` flags in parentheses.
#[derive(Clone, Debug, PartialEq)]
pub struct CssOptions {
    /// Fraction of unresolved suffixes above which pCSS hands over to DC7 (or DC3) instead of
    /// doubling; 1 or more: never (default 0.85) (`--css-handover F`).
    pub handover: f64,
    /// pCSS predicts the hand-over from a sample of its keys and then skips its first sort
    /// (default true); false: it always runs its first sort, so tests reach the hand-over after
    /// the sort (`--no-css-predict`).
    pub predict: bool,
    /// pCSS's hand-over finishes with DC3 on the prefix names instead of DC7 (default false)
    /// (`--css-finish dc3`).
    pub finish_dc3: bool,
    /// What pCSS does when its sample predicts the hand-over (default [`Predicted::Dc7`])
    /// (`--css-predicted dc7|dc3|sort`).
    pub predicted: Predicted,
    /// Key ranges that pCSS's sorts run in, one after the other (a range's records are made,
    /// sorted, named and freed before the next: less memory, see
    /// `plan::css_costs`); 0 (the default): one, unless the memory plan needs more
    /// (`--sort-rounds N`). A build reads the plan's ([`Knobs::sort_rounds`]).
    pub sort_rounds: usize,
    /// The most distinct values a text of 32-bit tokens may use for pCSS, which ranks them and
    /// holds a code table of that many entries on every pe; a text of more goes to pDC3 whole
    /// (default 2^20) (`--css-alphabet N`).
    pub alphabet: usize,
}

impl Default for CssOptions {
    fn default() -> Self {
        CssOptions {
            handover: 0.85,
            predict: true,
            finish_dc3: false,
            predicted: Predicted::Dc7,
            sort_rounds: 0,
            alphabet: 1 << 20,
        }
    }
}

/// The difference covers' (pDC3, DC7) switches. `psa` flags in parentheses.
#[derive(Clone, Debug, PartialEq)]
pub struct DcxOptions {
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
    /// Key ranges that the difference covers (pDC3, DC7) sort their samples and merge in, one
    /// after the other (a range's sample keys are made from the text, sorted, named and freed
    /// before the next; then a range's merge records are made, exchanged, sorted, merged and
    /// freed; its suffix array part goes straight to its place): this many at DC7's top level,
    /// three quarters at pDC3's, a recursion level's merge in proportion to its size and its
    /// naming in half its merge's (`ctx::merge_ranges`, `ctx::name_ranges`); 0 (the default):
    /// one, unless the memory plan needs more; at most 256 are used (`--merge-rounds N`). A
    /// build reads the plan's ([`Knobs::merge_rounds`]).
    pub merge_rounds: usize,
}

impl Default for DcxOptions {
    fn default() -> Self {
        DcxOptions {
            name_by_sort: false,
            discard_share: 0.5,
            merge_rounds: 0,
        }
    }
}

/// The LCP and BWT constructions' switches. `psa` flags in parentheses.
#[derive(Clone, Debug, PartialEq)]
pub struct LcpOptions {
    /// Characters of every suffix the LCP construction compares exactly before it searches with
    /// fingerprints (at most 16, default 16; see `algo::lcp`); 0 and 1 send almost every pair
    /// to the fingerprint search, so tests reach it on small inputs (`--lcp-prefix N`).
    pub prefix: usize,
    /// Queries a pe sends in one request round of the BWT and LCP constructions (more make
    /// more rounds, each with smaller buffers: about 40 bytes a query; default 2^20; at least
    /// 1; tests use tiny values) (`--request-piece N`).
    pub request_piece: usize,
    /// The sample step of the LCP search's first level (see `algo::lcp`; rounded up to a power
    /// of two; 0, the default: 1024); tests force 1, 2, 4 on small inputs (`--lcp-sample N`).
    pub sample: usize,
}

impl Default for LcpOptions {
    fn default() -> Self {
        LcpOptions {
            prefix: 16,
            request_piece: 1 << 20,
            sample: 0,
        }
    }
}

/// pCSS's path for inputs its sample predicts to be repetitive (see [`CssOptions::predicted`]).
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

/// Settings of the GPU backend (`local::gpu::GpuSort::open`, feature `gpu`) and of the relay of
/// whole texts through pe 0's device (`algo::offload::relay`); the defaults are what measurements chose,
/// the other values are there to measure again. `psa` flags in parentheses.
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
    /// With the GPU at p > 1, build a whole text that fits pe 0's device there (default true; see
    /// `algo::offload::relay`); false: the distributed algorithm with device sorts (its recursion
    /// levels still go to the device when they fit) (`--no-gpu-pool`).
    pub pool: bool,
    /// Records per message of that relay through pe 0 (default 2^24; at least 1;
    /// tests use tiny pieces) (`--pool-piece N`).
    pub pool_piece: usize,
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
            pool: true,
            pool_piece: 1 << 24,
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
        self.fields_with(&Knobs::configured(self))
    }

    /// [`Self::fields`] as a run kept them: the algorithm, the exchange rounds and the key
    /// ranges from `knobs` (a plan's), every other setting from the configuration.
    pub fn fields_with(&self, knobs: &Knobs) -> Vec<(&'static str, String)> {
        let s = |v: &str| json_str(v);
        let opt = |v: Option<u64>| v.map_or("null".into(), |b| b.to_string());
        let mut v = vec![
            ("algo", s(knobs.name())),
            ("backend", s(&format!("{:?}", self.backend).to_lowercase())),
            ("threads", self.threads.to_string()),
            ("base_case", self.base_case.to_string()),
            ("mpi_max_count", self.comm.mpi_max_count.to_string()),
            (
                "exchange_round_bytes",
                opt(knobs.round_bytes.map(|b| b as u64)),
            ),
            ("mem_per_pe", opt(self.mem_per_pe)),
            ("mem_per_pe_from", s(&self.mem_per_pe_from)),
            ("plan_base", opt(self.plan_base)),
            ("plan_algo", self.plan_algo.to_string()),
            ("relay", s(&format!("{:?}", self.relay).to_lowercase())),
            ("read_piece", self.read_piece.to_string()),
            (
                "map_threshold",
                opt(self.alloc.map_threshold.map(|b| b as u64)),
            ),
            ("huge_pages", self.alloc.huge_pages.to_string()),
            ("force_wide", self.force_wide.to_string()),
            (
                "index_bits",
                opt(self.index_width.map(|w| u64::from(w.bits()))),
            ),
        ];
        v.extend(self.algo_fields(knobs));
        v.extend(self.gpu_fields());
        v
    }

    /// [`Self::fields_with`]'s part of the difference covers', pCSS', the relay's and the LCP's
    /// switches (in the order `--stats` has always shown them).
    fn algo_fields(&self, knobs: &Knobs) -> Vec<(&'static str, String)> {
        let (d, c, g, l) = (&self.dcx, &self.css, &self.gpu, &self.lcp);
        let s = |v: &str| json_str(v);
        vec![
            ("name_by_sort", d.name_by_sort.to_string()),
            ("discard_share", format!("{:?}", d.discard_share)),
            ("css_handover", format!("{:?}", c.handover)),
            ("css_predict", c.predict.to_string()),
            ("css_finish", s(if c.finish_dc3 { "dc3" } else { "dc7" })),
            ("css_predicted", s(c.predicted.name())),
            ("css_alphabet", c.alphabet.to_string()),
            ("gpu_pool", g.pool.to_string()),
            ("pool_piece", g.pool_piece.to_string()),
            ("sort_rounds", knobs.sort_rounds.to_string()),
            ("merge_rounds", knobs.merge_rounds.to_string()),
            ("lcp_prefix", l.prefix.to_string()),
            ("request_piece", l.request_piece.to_string()),
            ("lcp_sample", l.sample.to_string()),
        ]
    }

    /// [`Self::fields_with`]'s part of the GPU backend's settings.
    fn gpu_fields(&self) -> Vec<(&'static str, String)> {
        let g = &self.gpu;
        let s = |v: &str| json_str(v);
        vec![
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
        self.to_json_with(&Knobs::configured(self))
    }

    /// [`Self::to_json`] as a run kept them ([`Self::fields_with`]).
    pub fn to_json_with(&self, knobs: &Knobs) -> String {
        let body: Vec<String> = (self.fields_with(knobs).into_iter())
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
        // One entry per field of Config (its parts flattened): a new field must be added here.
        let Config {
            algo: _,
            backend: _,
            threads: _,
            base_case: _,
            mem_per_pe: _,
            mem_per_pe_from: _,
            plan_base: _,
            plan_algo: _,
            relay: _,
            read_piece: _,
            force_wide: _,
            index_width: _,
            comm:
                CommOptions {
                    mpi_max_count: _,
                    round_bytes: _,
                },
            alloc:
                AllocOptions {
                    map_threshold: _,
                    huge_pages: _,
                },
            css:
                CssOptions {
                    handover: _,
                    predict: _,
                    finish_dc3: _,
                    predicted: _,
                    sort_rounds: _,
                    alphabet: _,
                },
            dcx:
                DcxOptions {
                    name_by_sort: _,
                    discard_share: _,
                    merge_rounds: _,
                },
            lcp:
                LcpOptions {
                    prefix: _,
                    request_piece: _,
                    sample: _,
                },
            gpu:
                GpuOptions {
                    stage_buffers: _,
                    stage_buffer_bytes: _,
                    copy_piece: _,
                    pin: _,
                    kernel_cache: _,
                    sa_parts: _,
                    pool: _,
                    pool_piece: _,
                },
        } = &c;
        assert_eq!(names.len(), 12 + 2 + 2 + 6 + 3 + 3 + 8);
    }

    /// The knobs a run kept replace the configured ones in what `--stats` shows, and nothing else.
    #[test]
    fn fields_with_shows_the_knobs() {
        let mut c = Config::default();
        c.css.sort_rounds = 2;
        let k = Knobs {
            algo: Algo::Dc3,
            round_bytes: Some(4096),
            sort_rounds: 8,
            merge_rounds: 16,
            relay: false,
        };
        let (configured, kept) = (c.fields(), c.fields_with(&k));
        let changed: Vec<&str> = (configured.iter().zip(&kept))
            .filter(|(a, b)| a != b)
            .map(|(a, _)| a.0)
            .collect();
        assert_eq!(
            changed,
            [
                "algo",
                "exchange_round_bytes",
                "sort_rounds",
                "merge_rounds"
            ]
        );
        assert!(c.to_json().contains("\"sort_rounds\": 2,"));
        assert!(c.to_json_with(&k).contains("\"algo\": \"dc3\","));
    }

    #[test]
    fn json_and_summary_show_the_values() {
        let mut c = Config::default();
        c.css.predicted = Predicted::SortThenDc7;
        c.css.handover = 2.0;
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
