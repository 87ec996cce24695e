//! The command line of `psa` and the [`Config`] it makes. Every setting of the library is a flag
//! here; the test and tuning switches are hidden from `--help` (README, Tests, lists them) and, like
//! every other setting, written into `--stats` and onto the `-v` log.

use std::path::PathBuf;

use clap::{ArgAction, ArgGroup, Args, Parser, ValueEnum};
use psa::io::seq::{Format, SeqOptions};
use psa::io::Width;
use psa::IndexWidth;
use psa::TokenWidth;
use psa::{Algo, Backend, Config, PinMethod, Predicted, Relay};

/// `--format`: [`Format`].
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormatArg {
    /// the bytes as they are
    Raw,
    /// FASTA (plain or gzip)
    Fasta,
    /// FASTQ (plain or gzip)
    Fastq,
}

/// `psa query --patterns-format`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PatternsFormatArg {
    /// one pattern a line (blank lines skipped)
    Lines,
    /// the reads of a FASTA file
    Fasta,
    /// the reads of a FASTQ file
    Fastq,
}

/// `--algo`: [`Algo`].
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AlgoArg {
    /// parallel DC3 (Kulla & Sanders): sample sorts, prefix-sum naming, distributed recursion
    Dc3,
    /// parallel CSS: 8-character keys, one sample sort, prefix doubling on equal runs; texts
    /// that a sample shows to be repetitive go to DC7 (difference cover mod 7)
    Css,
    /// the whole text to pe 0, where libsais builds the suffix array with every CPU of its node
    /// (5 bytes per character on pe 0; byte texts below 2^31 characters): the fastest on one
    /// node, where it is the default when pe 0's memory holds it
    Node,
}

const AFTER_HELP: &str = "\
Examples:
  psa small.txt                                   one process; writes small.txt.sa
  mpirun -n 64 psa genome.txt                     64 processes (pes), each reads 1/64 of the input
  mpirun -n 16 psa --algo dc3 --width 5 -o /scratch/web.sa web.txt
  mpirun -n 2 --bind-to none psa --threads 8 x.txt  without --bind-to none, Open MPI pins each of
                                                  up to 2 processes to one core
  srun --mpi=pmix psa --check corpus.txt          in a Slurm job (Open MPI; see slurm/psa.sbatch)
  mpirun -n 16 psa -o chrX.sa chrX.fa.gz          a FASTA (by its name; gzip too): writes chrX.sa,
                                                  chrX.sa.text, chrX.sa.records.tsv, chrX.sa.meta
  psa query chrX.sa ACGTTGCA --locate             counts and places of patterns (no mpirun; see
                                                  psa query --help)
  mpirun -n 16 psa repeats --min-len 100 -o dups.tsv corpus.txt
                                                  spans covered by repeats of 100 bytes or more
                                                  (see psa repeats --help)
  mpirun -n 64 psa --bwt g.bwt --lcp g.lcp g.fa.gz  SA, BWT (and g.bwt.primary) and LCP in one run
  mpirun -n 64 psa --bwt g.bwt --no-sa g.txt      only the BWT: no SA file is created
  mpirun -n 16 psa --infini-gram --token-width 2 index/
                                                  infini-gram's table.N for each index/tokenized.N
                                                  that has none (u16 tokens; offset.N from the
                                                  tokenizer)

Sequence input (FASTA .fa .fasta .fna .ffn .faa .fas, FASTQ .fq .fastq, each optionally .gz, or
--format): the text T is each record's sequence without line breaks and whitespace, upper-cased
(--keep-case keeps case), followed by '$', records in file order, files in the order given;
--revcomp appends the reverse complement of T up to its last '$', then '$'. Raw inputs add their
bytes as they are. Beside OUTPUT: OUTPUT.text (T; sequence input), OUTPUT.records.tsv (name,
start in T, length) and OUTPUT.meta (what psa query reads). A bgzip file (BGZF) is read by every
pe at once; any other gzip file is decompressed by pe 0 alone (bgzip it once to read it faster).

Output: SA[0..n) as little-endian unsigned integers of --width bytes each (n × width bytes).
The file is written under a temporary name beside OUTPUT, its space reserved at the start, and
renamed when complete, so OUTPUT never holds a partial result. A device or FIFO (-o /dev/null) is
written through. psa refuses to overwrite its input, a directory or special file, and (without
--force) a read-only file.

Exit status (an error is reported once, by the lowest pe that failed; every pe leaves with it):
  0      success
  1      any other error (a failed --check, --gpu where this build or machine has none)
  2      bad arguments, or an output psa refuses to write (found before the input is read)
  3      bad input: not a regular file, malformed FASTA/FASTQ, a damaged gzip stream or index,
         a file that changed while being read
  4      memory: a budget too small for the leanest plan (refused before the input is read;
         FASTA/FASTQ after a first scan that counts its characters), or an allocation failed
  5      I/O: a file that cannot be read, written, created or renamed (missing, no permission,
         a full disk, a directory some node cannot see), or MPI not starting
  101    internal error (a bug: the message says \"internal error\"; please report it)
  128+N  ended by signal N (130 for SIGINT, 143 for SIGTERM)

Test and tuning switches (--force-wide, --index-bits, --css-*, --no-gpu-pool, --mpi-max-count, --gpu-*, …) are
not listed here (see README, Tests); --stats and -v show every setting of a run.
Environment: RUST_LOG overrides -v/-q (e.g. RUST_LOG=debug shows every pe's phases).";

/// Distributed suffix array construction on MPI.
#[derive(Parser, Debug)]
#[command(name = "psa", version, about, after_help = AFTER_HELP)]
#[command(group(ArgGroup::new("beside_sa").args(["bwt", "lcp"]).multiple(true)))]
pub struct Cli {
    /// Input files, one suffix array over all of them in this order (raw bytes, or FASTA/FASTQ
    /// by name or --format; every pe reads only its own slice)
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Output file [default: the first INPUT.sa]
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Also write the BWT to PATH (libsais' convention: the BWT of T$ without the $, n bytes) and
    /// its primary index to PATH.primary (a decimal number; also in --stats and the log, which
    /// alone hold it when PATH is a device or FIFO); with --token-width, n tokens of that width
    #[arg(long, value_name = "PATH")]
    pub bwt: Option<PathBuf>,
    /// Also write the LCP array to PATH: LCP[0] = 0, LCP[i] = longest common prefix of the
    /// suffixes SA[i-1] and SA[i] in characters of T (tokens with --token-width), n entries of
    /// --width bytes, little-endian
    #[arg(long, value_name = "PATH")]
    pub lcp: Option<PathBuf>,
    /// Write no suffix array (nor the index files beside it), only --bwt and/or --lcp
    #[arg(long, requires = "beside_sa", conflicts_with = "output")]
    pub no_sa: bool,
    /// Format of every input [default: each file's by its name; raw for other names]
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Keep the case of sequence letters (default: upper-case them)
    #[arg(long)]
    pub keep_case: bool,
    /// Append the reverse complement of every record (sequence input)
    #[arg(long)]
    pub revcomp: bool,
    /// Algorithm (all give the same output) [default: node where every pe runs on one node, the
    /// text has more than 4 Mi characters and pe 0's --mem-per-pe holds 5 bytes per character;
    /// else css, or dc3 when only dc3 fits --mem-per-pe]
    #[arg(long, value_enum)]
    pub algo: Option<AlgoArg>,
    /// Read every input as little-endian unsigned tokens of this many bytes (1, 2 or 4: nanoGPT's
    /// train.bin, infini-gram's tokenized.N); the SA holds token positions, --bwt writes tokens of
    /// this width, --lcp counts tokens. Raw input only; an input whose size is not a multiple of
    /// the width is refused. Wider than 1 builds with dc3
    /// [default: 1, a text of characters]
    #[arg(long, value_parser = TokenWidth::parse, value_name = "BYTES")]
    pub token_width: Option<TokenWidth>,
    /// The token (or byte) that begins each document, in decimal or 0x hex (infini-gram's:
    /// 0xFFFF for u16). The index gets a document table (OUT.docs, written by every pe for its
    /// part), and psa query --locate reports the document and the offset in it. Raw input only
    #[arg(long, value_parser = parse_token, value_name = "TOKEN", conflicts_with = "no_sa")]
    pub doc_sep: Option<u32>,
    /// Build infini-gram's index: INPUT is its directory DIR, and for every DIR/tokenized.N
    /// without a DIR/table.N (with --force: every one) psa writes table.N as infini-gram's
    /// engine reads it: the byte offsets of the token starts, sorted by the file's bytes from
    /// there, in entries of ceil(log2(size of tokenized.N) / 8) bytes (or --width). Needs
    /// --token-width (infini-gram's u8, u16, u32: 1, 2, 4). The engine also needs offset.N (the
    /// documents' starts), which the tokenizer writes with tokenized.N; psa does not
    #[arg(
        long,
        requires = "token_width",
        conflicts_with_all = ["output", "bwt", "lcp", "no_sa", "format", "keep_case", "revcomp", "stats", "doc_sep"]
    )]
    pub infini_gram: bool,
    /// Bytes per SA entry: auto (4 when every index fits 32 bits, else 5, 8 past 40 bits), 4, 5 or 8
    #[arg(long, default_value = "auto", value_parser = Width::parse)]
    pub width: Width,
    /// Threads per pe [default: cores of the node / pes on the node; at most the cores the pe
    /// may run on]
    #[arg(long, value_parser = at_least(1))]
    pub threads: Option<usize>,
    /// Verify the suffix array with the distributed checker before putting the outputs in place
    /// (the BWT and LCP array are built from the checked SA; their values are not checked again)
    #[arg(long)]
    pub check: bool,
    /// Write per-phase times, bytes sent, peak memory per pe and every setting as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Replace an output or stats file even when it is read-only (--infini-gram: rebuild the
    /// table.N files that are there too)
    #[arg(long)]
    pub force: bool,
    /// Use the GPU (pe r uses device r mod device count; build with --features gpu): a text that
    /// fits pe 0's device (about free memory / 19 characters) is built whole there, at p > 1
    /// streamed through pe 0 and back; larger texts run the distributed algorithm with local sorts,
    /// base cases and recursion levels that fit on the GPU
    #[arg(long)]
    pub gpu: bool,
    /// Where compiled GPU kernels are kept between runs [default: $XDG_CACHE_HOME/psa, else
    /// ~/.cache/psa]
    #[arg(long, value_name = "DIR")]
    pub kernel_cache: Option<PathBuf>,
    /// Memory each pe may use (e.g. 3G, 512M, 1.5G, 1024K, bytes): psa plans its work to stay
    /// inside it and refuses, before reading the input (FASTA/FASTQ: after counting it), a run whose leanest plan cannot fit
    /// [default: the node's available memory (or its cgroup's limit) / pes on the node, or Slurm's
    /// SLURM_MEM_PER_CPU × SLURM_CPUS_PER_TASK or SLURM_MEM_PER_NODE / pes on the node if smaller]
    #[arg(long, value_name = "SIZE", value_parser = mem_size)]
    pub mem_per_pe: Option<u64>,
    /// Heap blocks of at least SIZE (at most 32M) are mapped from the kernel and returned to it
    /// when freed, so memory freed by one phase is not held under the next; 0: the C library's own
    #[arg(long, default_value = "1M", value_name = "SIZE", value_parser = map_size)]
    pub map_threshold: u64,
    /// Do not ask for 2 MiB pages for the blocks mapped from the kernel, nor start those of 2 MiB
    /// and more on one (by default psa does, where the kernel's transparent huge pages are set to
    /// `madvise` or `always`: fewer page faults)
    #[arg(long)]
    pub no_huge_pages: bool,
    /// Subproblems of at most this many characters are solved sequentially on one pe (a
    /// recursion level also at most half a pe's share of the text, or 2^16)
    #[arg(long, default_value_t = 1 << 22, value_name = "N", value_parser = at_least(4))]
    pub base_case: usize,
    /// More log output (-v: the settings and the per-phase table, -vv: every pe's debug output)
    #[arg(short, long, action = ArgAction::Count)]
    pub verbose: u8,
    /// Only errors
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    #[command(flatten)]
    pub tuning: Tuning,
}

/// The hidden switches: each sets one field of [`Config`] or of its parts ([`psa::CssOptions`], …,
/// [`psa::GpuOptions`]), whose docs say what it does; left out, the library's default.
#[derive(Args, Debug)]
pub struct Tuning {
    /// Largest element count of one MPI call (tests: 7 runs every all-to-all in rounds)
    #[arg(long, hide = true, value_name = "N", value_parser = at_least(1))]
    pub mpi_max_count: Option<usize>,
    /// Largest volume a pe sends in one exchange round (tests: small values, many rounds)
    #[arg(long, hide = true, value_name = "BYTES", value_parser = at_least(1))]
    pub exchange_round_bytes: Option<usize>,
    /// Decompressed bytes of a gzip input (not BGZF) read at a time by pe 0, at most 1 GiB (tests:
    /// small values, many pieces)
    #[arg(long, hide = true, value_name = "BYTES", value_parser = between(1, 1 << 30))]
    pub read_piece: Option<usize>,
    /// Wide-record paths on any input
    #[arg(long, hide = true)]
    pub force_wide: bool,
    /// What the memory plan takes a pe to hold before the text, bytes (default: measured)
    #[arg(long, hide = true, value_name = "BYTES")]
    pub plan_base: Option<u64>,
    /// Index width of the difference covers' records, at least (32, 40 or 64 bits)
    #[arg(long, hide = true, value_name = "BITS", value_parser = index_bits)]
    pub index_bits: Option<IndexWidth>,
    /// pDC3 names its triples by a sample sort even where a bitmap of their codes would do
    #[arg(long, hide = true)]
    pub name_by_sort: bool,
    /// Share of a level's samples that must be discardable (unique windows) before they leave the recursion (0: whenever any, above 1: never)
    #[arg(long, hide = true, value_name = "F", value_parser = fraction)]
    pub discard_share: Option<f64>,
    /// Fraction of unresolved suffixes above which pCSS hands over (1 or more: never)
    #[arg(long, hide = true, value_name = "F", value_parser = fraction)]
    pub css_handover: Option<f64>,
    /// pCSS always runs its first sort (no prediction from a sample)
    #[arg(long, hide = true)]
    pub no_css_predict: bool,
    /// What finishes pCSS's hand-over after doubling
    #[arg(long, hide = true, value_enum, value_name = "ALGO")]
    pub css_finish: Option<FinishArg>,
    /// What pCSS does when its sample predicts the hand-over
    #[arg(long, hide = true, value_enum, value_name = "HOW")]
    pub css_predicted: Option<PredictedArg>,
    /// The most distinct values of 32-bit tokens that pCSS ranks (more: pDC3)
    #[arg(long, hide = true, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub css_alphabet: Option<u64>,
    /// With --gpu at p > 1, never build the whole text on pe 0's device
    #[arg(long, hide = true)]
    pub no_gpu_pool: bool,
    /// Records per message of the relay through pe 0 (--gpu at p > 1)
    #[arg(long, hide = true, value_name = "N", value_parser = at_least(1))]
    pub pool_piece: Option<usize>,
    /// Key ranges pCSS's sorts run in, one after the other (0: chosen from the input)
    #[arg(long, hide = true, value_name = "N")]
    pub sort_rounds: Option<usize>,
    /// Key ranges the difference covers sort their samples and merge in, one after the other
    /// (0: chosen by the memory plan)
    #[arg(long, hide = true, value_name = "N")]
    pub merge_rounds: Option<usize>,
    /// Characters of each suffix the LCP construction compares exactly before its fingerprint
    /// search (0–16; tests: 0 or 1 search almost every pair)
    #[arg(long, hide = true, value_name = "N", value_parser = at_most(psa::internals::LCP_PREFIX_MAX))]
    pub lcp_prefix: Option<usize>,
    /// Queries per pe in one request round of the BWT and LCP constructions (tests: small
    /// values, many rounds)
    #[arg(long, hide = true, value_name = "N", value_parser = at_least(1))]
    pub request_piece: Option<usize>,
    /// The sample step of the LCP search's first level, at most 2^32 (0: automatic; tests: 1,
    /// 2, 4)
    #[arg(long, hide = true, value_name = "N", value_parser = at_most(1 << 32))]
    pub lcp_sample: Option<usize>,
    /// Pinned staging buffers of GPU transfers: N buffers (at least 2) of M MiB
    #[arg(long, hide = true, value_name = "NxM", value_parser = stage_shape)]
    pub gpu_stage: Option<(usize, usize)>,
    /// Bytes per task of the CPU's copies into and out of the staging buffers
    #[arg(long, hide = true, value_name = "BYTES", value_parser = at_least(4096))]
    pub gpu_copy_piece: Option<usize>,
    /// How page-locked host memory is obtained
    #[arg(long, hide = true, value_enum, value_name = "HOW")]
    pub gpu_pin: Option<PinArg>,
    /// The device suffix array's sorts in at least N pieces (default: as few as fit)
    #[arg(long, hide = true, value_name = "N", value_parser = at_least(1))]
    pub gpu_sa_parts: Option<usize>,
}

/// `--css-finish`: [`psa::CssOptions::finish_dc3`].
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FinishArg {
    /// DC7 on the prefix names (the default)
    Dc7,
    /// DC3 on the prefix names
    Dc3,
}

/// `--css-predicted`: [`Predicted`].
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PredictedArg {
    /// DC7 on the text from the start (the default)
    Dc7,
    /// DC3 on the text from the start
    Dc3,
    /// the first sort, then DC7 on the prefix names
    Sort,
}

/// `--gpu-pin`: [`PinMethod`].
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PinArg {
    /// map huge pages, touch them on every thread, register them (the default)
    Register,
    /// cuMemHostAlloc
    Alloc,
}

/// A parser of integers of at least `min`.
fn at_least(min: usize) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s| match s.parse::<usize>() {
        Ok(v) if v >= min => Ok(v),
        Ok(v) => Err(format!("must be at least {min}, not {v}")),
        Err(e) => Err(format!("'{s}' is not a whole number: {e}")),
    }
}

/// A parser of integers from `min` to `max`.
fn between(
    min: usize,
    max: usize,
) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s| match s.parse::<usize>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        Ok(v) => Err(format!("must be from {min} to {max}, not {v}")),
        Err(e) => Err(format!("'{s}' is not a whole number: {e}")),
    }
}

/// A parser of integers of at most `max`.
fn at_most(max: usize) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s| match s.parse::<usize>() {
        Ok(v) if v <= max => Ok(v),
        Ok(v) => Err(format!("must be at most {max}, not {v}")),
        Err(e) => Err(format!("'{s}' is not a whole number: {e}")),
    }
}

/// `--index-bits`: 32, 40 or 64.
fn index_bits(s: &str) -> Result<IndexWidth, String> {
    s.parse::<u32>()
        .ok()
        .and_then(IndexWidth::from_bits)
        .ok_or_else(|| format!("'{s}' is not 32, 40 or 64"))
}

/// A parser of memory sizes ([`psa::plan::parse_size`]), at least 1 MiB.
fn mem_size(s: &str) -> Result<u64, String> {
    match psa::plan::parse_size(s)? {
        b if b < 1 << 20 => Err(format!("'{s}' is less than 1M")),
        b => Ok(b),
    }
}

/// A parser of the mapping threshold: a size of at most 32 MiB (glibc's largest), or 0.
fn map_size(s: &str) -> Result<u64, String> {
    match psa::plan::parse_size(s)? {
        b if b > 32 << 20 => Err(format!("'{s}' is more than 32M")),
        b => Ok(b),
    }
}

/// A parser of finite numbers.
fn fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("'{s}' is not a number")),
    }
}

/// `NxM`: N buffers (at least 2) of M MiB (at least 1), as (N, bytes).
fn stage_shape(s: &str) -> Result<(usize, usize), String> {
    let bad =
        || format!("'{s}' is not NxM, N buffers (at least 2) of M MiB (at least 1), e.g. 4x32");
    let (n, m) = s.split_once('x').ok_or_else(bad)?;
    let (n, m) = (n.parse::<usize>(), m.parse::<usize>());
    match (n, m) {
        (Ok(n), Ok(m)) if n >= 2 && (1..=1 << 20).contains(&m) => Ok((n, m << 20)),
        _ => Err(bad()),
    }
}

impl Cli {
    /// How the inputs become the text.
    pub fn seq_options(&self) -> SeqOptions {
        SeqOptions {
            format: self.format.map(|f| match f {
                FormatArg::Raw => Format::Raw,
                FormatArg::Fasta => Format::Fasta,
                FormatArg::Fastq => Format::Fastq,
            }),
            keep_case: self.keep_case,
            revcomp: self.revcomp,
        }
    }

    /// The library's settings for this command line; `kernel_cache` is the default directory of
    /// compiled GPU kernels (`--kernel-cache` overrides it).
    pub fn config(&self, kernel_cache: Option<PathBuf>) -> Config {
        let d = Config::default();
        let t = &self.tuning;
        let mut c = Config {
            algo: match self.algo {
                Some(AlgoArg::Dc3) => Algo::Dc3,
                Some(AlgoArg::Css | AlgoArg::Node) | None => Algo::Css,
            },
            plan_algo: self.algo.is_none(),
            relay: match self.algo {
                None => Relay::Auto,
                Some(AlgoArg::Node) => Relay::On,
                Some(_) => Relay::Off,
            },
            mem_per_pe: self.mem_per_pe,
            mem_per_pe_from: match self.mem_per_pe {
                Some(_) => "--mem-per-pe".into(),
                None => String::new(),
            },
            plan_base: self.tuning.plan_base,
            backend: if self.gpu { Backend::Gpu } else { Backend::Cpu },
            // 0: the library's default (cores / pes on the node); --threads 0 means 1.
            threads: self.threads.map_or(0, |t| t.max(1)),
            base_case: self.base_case,
            read_piece: t.read_piece.unwrap_or(d.read_piece),
            force_wide: t.force_wide,
            index_width: t.index_bits,
            ..d
        };
        c.comm.mpi_max_count = t.mpi_max_count.unwrap_or(c.comm.mpi_max_count);
        c.comm.round_bytes = t.exchange_round_bytes;
        c.alloc.map_threshold = (self.map_threshold > 0).then_some(self.map_threshold as usize);
        c.alloc.huge_pages = !self.no_huge_pages;
        let dcx = &mut c.dcx;
        dcx.name_by_sort = t.name_by_sort;
        dcx.discard_share = t.discard_share.unwrap_or(dcx.discard_share);
        dcx.merge_rounds = t.merge_rounds.unwrap_or(dcx.merge_rounds);
        let css = &mut c.css;
        css.handover = t.css_handover.unwrap_or(css.handover);
        css.predict = !t.no_css_predict;
        css.alphabet = t.css_alphabet.map_or(css.alphabet, |a| a as usize);
        if let Some(f) = t.css_finish {
            css.finish_dc3 = matches!(f, FinishArg::Dc3);
        }
        if let Some(p) = t.css_predicted {
            css.predicted = match p {
                PredictedArg::Dc7 => Predicted::Dc7,
                PredictedArg::Dc3 => Predicted::Dc3,
                PredictedArg::Sort => Predicted::SortThenDc7,
            };
        }
        css.sort_rounds = t.sort_rounds.unwrap_or(css.sort_rounds);
        let lcp = &mut c.lcp;
        lcp.prefix = t.lcp_prefix.unwrap_or(lcp.prefix);
        lcp.request_piece = t.request_piece.unwrap_or(lcp.request_piece);
        lcp.sample = t.lcp_sample.unwrap_or(lcp.sample);
        let gpu = &mut c.gpu;
        if let Some((n, bytes)) = t.gpu_stage {
            (gpu.stage_buffers, gpu.stage_buffer_bytes) = (n, bytes);
        }
        gpu.copy_piece = t.gpu_copy_piece.unwrap_or(gpu.copy_piece);
        if let Some(p) = t.gpu_pin {
            gpu.pin = match p {
                PinArg::Register => PinMethod::Register,
                PinArg::Alloc => PinMethod::Alloc,
            };
        }
        gpu.sa_parts = t.gpu_sa_parts.or(gpu.sa_parts);
        gpu.pool = !t.no_gpu_pool;
        gpu.pool_piece = t.pool_piece.unwrap_or(gpu.pool_piece);
        gpu.kernel_cache = self.kernel_cache.clone().or(kernel_cache);
        c
    }
}

/// `psa query`: answers from the files a build wrote, without MPI.
#[derive(Parser, Debug)]
#[command(
    name = "psa query",
    version,
    about = "Counts and places of patterns in an index built by psa (no mpirun needed)",
    after_help = QUERY_AFTER_HELP
)]
pub struct QueryCli {
    /// The suffix array a build wrote (its OUTPUT; OUTPUT.meta and, for sequence input,
    /// OUTPUT.text beside it)
    pub index: PathBuf,
    /// Patterns (upper-cased for sequence input built without --keep-case)
    pub pattern: Vec<std::ffi::OsString>,
    /// Read patterns from FILE ('-': standard input): the reads of a FASTA/FASTQ file (by its
    /// name, as the build's inputs: .fa .fq …, optionally .gz), else one pattern a line; gzip
    /// too
    #[arg(long, value_name = "FILE")]
    pub patterns: Option<PathBuf>,
    /// Read --patterns as this format, whatever its name
    #[arg(long, value_enum, value_name = "FORMAT", requires = "patterns")]
    pub patterns_format: Option<PatternsFormatArg>,
    /// Also report where each pattern occurs
    #[arg(long)]
    pub locate: bool,
    /// Report at most K occurrences per pattern (with --locate; K of them, not the first K in the text, listed in text order) [default: all]
    #[arg(long, value_name = "K")]
    pub max_hits: Option<usize>,
    /// One JSON object per pattern and line instead of TSV
    #[arg(long)]
    pub json: bool,
    /// Threads [default: the cores this process may use]
    #[arg(long, value_parser = at_least(1))]
    pub threads: Option<usize>,
}

const QUERY_AFTER_HELP: &str = "\
Output (TSV), for each pattern in order: pattern<TAB>count; with --locate, then one line per
reported occurrence: pattern<TAB>record<TAB>offset (the offset in the record of the records
table; for raw input the record is the input file). With --json: {\"pattern\", \"count\"} per
line, with --locate also \"hits\": [{\"record\", \"offset\", \"text_offset\"}].
Offsets count from 0. A token index (--token-width) takes patterns of decimal token ids separated
by spaces; built with --doc-sep, its hits are placed as document<TAB>offset (the document's number
from 0, the offset from the token after its separator; JSON: \"document\").
A hit in a reverse complement (--revcomp: record NAME/rc, offset o) is the
pattern's reverse complement on NAME's forward strand at len(NAME) - o - len(pattern).
Examples:
  psa query chrX.sa ACGTTGCA GATTACA
  psa query chrX.sa --patterns reads.fq.gz --locate --max-hits 10 > hits.tsv";

impl QueryCli {
    /// The query this command line asks.
    pub fn query(&self) -> psa::io::query::Query {
        use std::os::unix::ffi::OsStrExt;
        psa::io::query::Query {
            index: self.index.clone(),
            patterns: self.pattern.iter().map(|p| p.as_bytes().to_vec()).collect(),
            patterns_file: self.patterns.clone(),
            patterns_format: self.patterns_format.map(|f| match f {
                PatternsFormatArg::Lines => Format::Raw,
                PatternsFormatArg::Fasta => Format::Fasta,
                PatternsFormatArg::Fastq => Format::Fastq,
            }),
            locate: self.locate,
            max_hits: self.max_hits,
            json: self.json,
        }
    }
}

/// `psa repeats`: the duplicate spans of the inputs, under MPI as the build.
#[derive(Parser, Debug)]
#[command(
    name = "psa repeats",
    version,
    about = "Spans of the inputs covered by substrings of at least K tokens that occur at least twice",
    after_help = REPEATS_AFTER_HELP
)]
pub struct RepeatsCli {
    /// Input files, one text of them all in this order (raw bytes, or tokens with
    /// --token-width; every pe reads only its own slice)
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Where to write the spans (TSV: b<TAB>e a line)
    #[arg(short, long, value_name = "SPANS")]
    pub output: PathBuf,
    /// K: the fewest tokens a counted substring has
    #[arg(long, value_name = "K", value_parser = at_least(1))]
    pub min_len: usize,
    /// Read every input as little-endian unsigned tokens of this many bytes (1, 2 or 4);
    /// positions and K count tokens. An input whose size is not a multiple is refused
    #[arg(long, default_value = "1", value_parser = TokenWidth::parse, value_name = "BYTES")]
    pub token_width: TokenWidth,
    /// The document separator: a substring that holds this token (or byte) does not count
    /// (decimal, or 0x hex: 0xFFFF for infini-gram's u16)
    #[arg(long, value_name = "TOKEN", value_parser = parse_token)]
    pub doc_sep: Option<u32>,
    /// Report only the spans of the LAST input covered by substrings that also occur inside
    /// one of the other inputs (a test set's contamination), as positions from the last
    /// input's start
    #[arg(long)]
    pub across: bool,
    /// Algorithm of the suffix array [default: css, or dc3 when only dc3 fits --mem-per-pe;
    /// dc3 for tokens wider than a byte]
    #[arg(long, value_enum)]
    pub algo: Option<AlgoArg>,
    /// Threads per pe [default: cores of the node / pes on the node]
    #[arg(long, value_parser = at_least(1))]
    pub threads: Option<usize>,
    /// Memory each pe may use (e.g. 3G, 512M): planned as a build that also makes the LCP
    /// array, then the span phases [default: as the build's]
    #[arg(long, value_name = "SIZE", value_parser = mem_size)]
    pub mem_per_pe: Option<u64>,
    /// Write the job, every setting, the memory plan beside the measured peak, and each
    /// phase's time and memory as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Replace SPANS (and the stats file) even when it is read-only
    #[arg(long)]
    pub force: bool,
    /// More log output (-v: the settings, the plan and the per-phase table)
    #[arg(short, long, action = ArgAction::Count)]
    pub verbose: u8,
    /// Only errors
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    #[command(flatten)]
    pub tuning: Tuning,
}

const REPEATS_AFTER_HELP: &str = "\
A substring counts when it has at least K tokens, occurs at least twice in the text (the inputs
concatenated; occurrences may overlap) and holds no --doc-sep token. SPANS lists the union of
the counted occurrences: one line b<TAB>e for each maximal span [b, e), in text order, positions
in tokens from 0 (bytes for --token-width 1); overlapping and touching spans are merged into
one (as deduplicate-text-datasets' collect merges them: [0, 5) and [5, 9) give [0, 9)). With
--across, b and e count from the last input's start. SPANS is written under a temporary name
and renamed when complete; no span, an empty file.
Examples:
  mpirun -n 16 psa repeats --min-len 100 -o dups.tsv corpus.txt
  mpirun -n 16 psa repeats --min-len 50 --token-width 2 --doc-sep 65535 -o dups.tsv train.bin
  mpirun -n 16 psa repeats --min-len 50 --across -o leaked.tsv train.txt test.txt";

impl RepeatsCli {
    /// The build's command line that gives this one's settings (threads, memory, algorithm,
    /// logging, the hidden switches; the build's own flags left out), and the job itself.
    pub fn into_parts(self) -> Result<(Cli, psa::driver::repeats::Repeats), clap::Error> {
        let mut args: Vec<std::ffi::OsString> = vec!["psa".into()];
        let mut flag = |f: &str, v: Option<String>| {
            args.push(f.into());
            args.extend(v.map(Into::into));
        };
        if let Some(t) = self.threads {
            flag("--threads", Some(t.to_string()));
        }
        if let Some(m) = self.mem_per_pe {
            flag("--mem-per-pe", Some(m.to_string()));
        }
        if let Some(a) = self.algo.and_then(|a| a.to_possible_value()) {
            flag("--algo", Some(a.get_name().to_string()));
        }
        for _ in 0..self.verbose {
            flag("-v", None);
        }
        if self.quiet {
            flag("-q", None);
        }
        args.push("--".into());
        args.push(self.inputs[0].clone().into_os_string());
        let mut cli = Cli::try_parse_from(args)?;
        cli.tuning = self.tuning;
        let job = psa::driver::repeats::Repeats {
            inputs: self.inputs,
            output: self.output,
            min_len: self.min_len as u64,
            token_width: self.token_width,
            doc_sep: self.doc_sep.map(u64::from),
            across: self.across,
            force: self.force,
            show_plan: self.verbose >= 1,
            stats: self.stats,
        };
        Ok((cli, job))
    }
}

/// Parses a token value: decimal, or hex after 0x.
fn parse_token(s: &str) -> Result<u32, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse::<u32>(),
    };
    parsed.map_err(|_| format!("'{s}' is not a token: give 0 to 4294967295, or 0x0 to 0xFFFFFFFF"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from([&["psa"], args, &["in.txt"]].concat()).expect("arguments parse")
    }

    #[test]
    fn no_flags_give_the_library_defaults() {
        // But one: without --algo the plan may relay the text to pe 0 (the library never does
        // unless asked).
        let c = parse(&[]).config(None);
        let d = Config {
            relay: Relay::Auto,
            ..Config::default()
        };
        assert_eq!(c.to_json(), d.to_json());
    }

    #[test]
    fn every_switch_sets_its_field() {
        let c = parse(&[
            "--algo=dc3",
            "--gpu",
            "--threads=3",
            "--base-case=99",
            "--mpi-max-count=7",
            "--exchange-round-bytes=4096",
            "--read-piece=5",
            "--force-wide",
            "--index-bits=40",
            "--name-by-sort",
            "--discard-share=0.5",
            "--css-handover=2",
            "--no-css-predict",
            "--css-finish=dc3",
            "--css-predicted=sort",
            "--css-alphabet=300",
            "--no-gpu-pool",
            "--pool-piece=3",
            "--sort-rounds=5",
            "--merge-rounds=6",
            "--lcp-prefix=3",
            "--request-piece=9",
            "--lcp-sample=4",
            "--gpu-stage=4x32",
            "--gpu-copy-piece=8192",
            "--gpu-pin=alloc",
            "--gpu-sa-parts=7",
            "--kernel-cache=/k",
            "--mem-per-pe=1.5G",
            "--plan-base=12345",
        ])
        .config(Some("/default".into()));
        assert_eq!(
            c.summary(),
            "algo=\"dc3\" backend=\"gpu\" threads=3 base_case=99 mpi_max_count=7 \
             exchange_round_bytes=4096 mem_per_pe=1610612736 mem_per_pe_from=\"--mem-per-pe\" \
             plan_base=12345 plan_algo=false relay=\"off\" read_piece=5 map_threshold=1048576 huge_pages=true force_wide=true index_bits=40 \
             name_by_sort=true discard_share=0.5 css_handover=2.0 css_predict=false css_finish=\"dc3\" css_predicted=\"sort\" \
             css_alphabet=300 gpu_pool=false pool_piece=3 sort_rounds=5 merge_rounds=6 lcp_prefix=3 request_piece=9 lcp_sample=4 gpu_stage_buffers=4 gpu_stage_buffer_bytes=33554432 \
             gpu_copy_piece=8192 gpu_pin=\"alloc\" gpu_sa_parts=7 kernel_cache=\"/k\""
        );
        assert_eq!(
            parse(&[]).config(Some("/default".into())).gpu.kernel_cache,
            Some(PathBuf::from("/default"))
        );
        assert!(Cli::try_parse_from(["psa", "--threads", "0", "in.txt"]).is_err());
    }

    #[test]
    fn bad_values_are_refused_with_a_reason() {
        for (args, why) in [
            (&["--mpi-max-count", "0"][..], "must be at least 1"),
            (&["--pool-piece", "x"], "not a whole number"),
            (&["--gpu-stage", "1x64"], "not NxM"),
            (&["--gpu-stage", "4"], "not NxM"),
            (&["--gpu-copy-piece", "100"], "must be at least 4096"),
            (&["--css-handover", "nan"], "not a number"),
            (&["--css-predicted", "dc5"], "invalid value"),
            (&["--index-bits", "48"], "not 32, 40 or 64"),
            (&["--lcp-prefix", "17"], "must be at most 16"),
            (&["--mem-per-pe", "3X"], "not a size"),
            (&["--mem-per-pe", "512K"], "less than 1M"),
            (&["--mem-per-pe", ""], "not a size"),
        ] {
            let e = Cli::try_parse_from([&["psa"], args, &["in.txt"]].concat())
                .expect_err("refused")
                .to_string();
            assert!(e.contains(why), "{args:?}: {e}");
        }
    }
}
