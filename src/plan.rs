//! The memory plan of a run: the knobs that keep every pe's peak inside [`Config::mem_per_pe`].
//!
//! [`choose`] runs before the text is read (n is the input's size) and is a pure function of the
//! settings and the run's [`Shape`], so every pe reaches the same plan without communicating. It
//! predicts each candidate's peak per pe with the calibrated model of its algorithm
//! ([`peak_per_pe`]) and takes the fastest candidate that fits: the configured knobs; then
//! exchanges in rounds as large as the room left allows; then (with [`Config::plan_algo`]) the
//! other algorithm the same way. When not even the leanest candidate fits, the run is refused
//! ([`Error::Budget`], exit status 4), naming the budget, the need and the way out.
//!
//! The model ([`Costs`], one function per algorithm) is an upper bound from measured per-phase
//! peaks (`-v`, `--stats`): the base a pe holds before the text (its resident size when the plan
//! is made, measured, with a margin), a little per other pe, plus per character of the largest
//! block what the algorithm holds at its fullest phase (worst over the inputs measured), plus an
//! exchange's second copy of its records when it runs in one round, or two rounds' staging when
//! it runs in rounds. Made before the text is read, it must cover the worst text of that size:
//! DNA and other texts that are not repetitive peak at 0.6–0.8 of it. `--stats` writes the plan
//! beside the measured peak and their ratio, so the model can be checked on every run.

use crate::config::json_str;
pub use crate::config::Knobs;
use crate::config::{Algo, Backend, Config, Relay};
use crate::error::{Error, Result};
use crate::index::IndexWidth;
use crate::token::TokenWidth;

/// Resident memory of a pe before it holds any of the text where it was not measured
/// ([`Shape::base`]): the binary, MPI's buffers, the thread pool.
pub const BASE_BYTES: u64 = 32 << 20;

/// What a pe's resident memory grows by, whatever the text, between the plan and the build's
/// peak: the pool's threads touching their stacks, MPI's buffers for the first large exchanges,
/// the allocator's arenas.
pub const BASE_MARGIN: u64 = 6 << 20;

/// The smallest exchange round the plan chooses, bytes per pe: the leanest plan's.
pub const MIN_ROUND_BYTES: usize = 4096;

/// What a run's peak depends on that is known before the text is read. The same on every pe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Characters of the text.
    pub n: usize,
    /// Number of pes.
    pub pes: usize,
    /// Bytes resident on the fullest pe before it holds any of the text (the binary, MPI's
    /// buffers, the thread pool): its resident size when the plan is made, the most over pes
    /// ([`Shape::measured_base`]); [`BASE_BYTES`] where unmeasured.
    pub base: u64,
    /// Bytes per entry of the output.
    pub width: usize,
    /// Bytes per token of the text (`--token-width`; n counts tokens). Wider than a byte: only
    /// pDC3 takes it, and every per-character cost is taken times the width
    /// ([`token_factor`]).
    pub token_width: TokenWidth,
    /// The algorithms' records' index width at least ([`crate::Config::index_width`]; None:
    /// what n needs).
    pub index_at_least: Option<IndexWidth>,
    /// Whether the distributed checker runs.
    pub check: bool,
    /// Whether the BWT is built (`--bwt`).
    pub bwt: bool,
    /// Whether the LCP array is built (`--lcp`).
    pub lcp: bool,
    /// Whether `psa repeats` finds the duplicate spans from the SA and LCP array
    /// ([`crate::algo::repeats`]) after building them.
    pub spans: bool,
    /// Bytes pe 0 holds from before the build to its end besides it: the table of the input's
    /// records (names and places) of sequence input ([`crate::io::seq::Scanned::records_bytes`]);
    /// 0 for raw input. More pes do not shrink it.
    pub held: u64,
    /// Whether pe 0 writes the index files beside the output from that table at the end (not
    /// with `--no-sa`, beside an output that is a device or FIFO, nor for an output whose name
    /// leaves no room for theirs).
    pub index: bool,
    /// Whether every pe runs on one node (then [`Relay::Auto`] may relay the text to pe 0).
    pub one_node: bool,
    /// CPUs the pes of pe 0's node may run on together: the relay's libsais threads.
    pub node_cpus: usize,
}

impl Shape {
    /// The base of a pe now resident with `rss` bytes (0: unknown), the most over pes given:
    /// what it holds before the text, plus [`BASE_MARGIN`].
    pub fn measured_base(rss_most: u64) -> u64 {
        match rss_most {
            0 => BASE_BYTES,
            r => r + BASE_MARGIN,
        }
    }

    /// Characters of the largest block (the block layout's first pe).
    pub fn block(&self) -> usize {
        self.n.div_ceil(self.pes.max(1))
    }
}

/// What an algorithm holds per character of a pe's block, bytes (the model's coefficients).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// The most it holds at once in any phase, apart from an exchange's second copy (text, keys,
    /// names, the suffix array, …): the worst over the inputs measured.
    pub held: f64,
    /// The records of its largest exchange: held twice while it runs in one round.
    pub exchanged: f64,
}

/// Bytes per character of the fullest pe's block at the peak of a build in r key ranges, above
/// [`Shape::base`] and [`per_peer`], with exchanges in one round: steps of (ranges, bytes), each
/// holding from its ranges up to the next step's. Each is the worst over the runs measured
/// (`scripts/plan-calibration.sh`: DNA, Rust source, aⁿ, Fibonacci, a repeated 64 KiB block
/// and random bytes at p = 2, 4 and 16) with 5 % to spare, for 32-bit indices; wider ones scale
/// it ([`width_factor`]). The worst is a repetitive text's (its hand-over to a difference cover
/// and the recursion's levels) or the source's (its keys cluster); DNA takes 0.6–0.8 of it.
type Steps = [(usize, f64)];

/// The step of `steps` that `ranges` falls in.
fn step(steps: &Steps, ranges: usize) -> f64 {
    let ranges = ranges.max(1);
    (steps.iter().rev())
        .find(|&&(r, _)| r <= ranges)
        .map_or(steps[0].1, |&(_, b)| b)
}

/// pCSS (`sort_rounds` ranges; repetitive texts hand over to DC7, merging in as many).
const CSS: &Steps = &[(1, 54.0), (2, 36.6), (4, 25.1), (8, 17.6), (64, 17.0)];

/// pDC3 (`merge_rounds` ranges): past 8 ranges the recursion's texts and the sample sort of the
/// level below hold the peak. Two ranges were not measured: their step lies between one's and
/// four's as 1/r does.
const DC3: &Steps = &[(1, 36.5), (2, 28.9), (4, 25.1), (8, 20.4)];

/// What a pe holds more per other pe, whatever the text: MPI's buffers for each peer and the
/// samples and counts of the sample sorts (measured about 1 MiB at p = 16 and none to speak of
/// at p = 2 and 4; counted for at most 64 pes).
fn per_peer(shape: &Shape) -> u64 {
    (shape.pes.min(64) as u64) << 20
}

/// How much more a build holds with the run's index width than with 32 bits: measured 1.06–1.08
/// for 40-bit records at 8 key ranges (p = 2, 4 and 16), 1.20–1.25 before at p = 16 on DNA and
/// English from 1 to 64 ranges; 64-bit ones (2^40 characters and more) are assumed twice as
/// large.
fn width_factor(shape: &Shape) -> f64 {
    match IndexWidth::choose(shape.n as u64, shape.index_at_least) {
        IndexWidth::W32 => 1.0,
        IndexWidth::W40 => 1.25,
        IndexWidth::W64 => 2.0,
    }
}

/// How much more a build holds per token than per byte: the token width, an upper bound (the
/// text and BWT grow by the width; the sample keys and merge records grow less: a 16-bit token
/// text's triples take 128-bit keys instead of 64, its merge records 20 bytes instead of 16).
fn token_factor(shape: &Shape) -> f64 {
    shape.token_width.bytes() as f64
}

/// pCSS: keys and positions (16 bytes) of one key range exchanged, and at least what the leanest
/// plan's exchange rounds were measured to save (3.7 bytes a character at 64 ranges); the rest of
/// [`CSS`] held. In one range the 128-bit keys of alphabets of more than 16 letters make them 24
/// bytes (measured in [`CSS`]'s first step: the plan is made before the text is read).
///
/// A 16-bit token text: its 128-bit keys always, and the rest times the width, an upper bound
/// (the text doubles; names, depths and records do not grow).
fn css_costs(shape: &Shape, knobs: &Knobs) -> Costs {
    let rounds = knobs.sort_rounds.max(1);
    let tokens = token_factor(shape);
    let wide = if rounds == 1 || tokens > 1.0 {
        8.0
    } else {
        0.0
    };
    let exchanged = (16.0 / rounds as f64 + wide).max(3.7);
    Costs {
        held: step(CSS, rounds) * width_factor(shape) * tokens - exchanged,
        exchanged,
    }
}

/// pDC3: the sample triples (12 bytes) of one key range exchanged, and at least what the leanest
/// plan's exchange rounds were measured to save (4 bytes a character at 64 ranges: the samples'
/// ranks sent to text order, which no key range cuts); the rest of [`DC3`] held.
fn dc3_costs(shape: &Shape, knobs: &Knobs) -> Costs {
    let rounds = knobs.merge_rounds.max(1);
    let tokens = token_factor(shape);
    let exchanged = (12.0 / rounds as f64).max(4.0) * tokens;
    Costs {
        held: step(DC3, rounds) * width_factor(shape) * tokens - exchanged,
        exchanged,
    }
}

/// The distributed checker (after the build, which has released everything else): the text,
/// the inverse (w bytes), a step byte per character and pieces of at most 3.5 bytes per
/// character of the block (the exchanged pairs with the entries read back, or the keys sent,
/// received and placed). Measured 9.5 bytes per character of the fullest pe's block at 32 bits
/// (p = 16, English; 7.4–8.6 on DNA, English, Django and the source with pieces of a sixteenth of
/// the block, 8.9 at 40 bits).
fn check_bytes_per_char(shape: &Shape) -> f64 {
    let w = IndexWidth::choose(shape.n as u64, shape.index_at_least).bits() as f64 / 8.0;
    6.0 + w
}

/// The BWT (`algo::bwt`, after the build): the text, the suffix array, the queries of its one
/// request round (8 bytes an entry, bucketed twice) and their answers. Measured (-v's peak of
/// `bwt`, less [`BASE_BYTES`]) at 38 bytes per character of the block on 4 M characters of
/// Fibonacci, aⁿ, a repeated 1 MB block, DNA and English at p = 2, rounded up.
const BWT_BYTES_PER_CHAR: f64 = 40.0;

/// The LCP array (`algo::lcp`, after the build and the BWT): the text, the SA, Φ and PLCP in
/// 4-byte words, the fingerprints (8 bytes) and the request pieces (at most 1/32 of the block).
/// Measured (-v's peak over the `lcp` phases, less [`BASE_BYTES`]) at 17 bytes per character
/// of the block on 4 M characters of the same five inputs at p = 2 (the phases peak at 67–69
/// MB a pe); rounded up to cover the 8-byte words above 2^32 characters.
const LCP_BYTES_PER_CHAR: f64 = 26.0;

/// [`LCP_BYTES_PER_CHAR`] where Φ, PLCP and the requests take 8-byte words (past 2^32
/// characters, or a forced wider index): measured at 35.5 bytes per character of the block on
/// 8 MiB of aⁿ, Fibonacci and DNA at p = 2 with 40- and 64-bit indices; 7 % to spare.
const LCP_WIDE_BYTES_PER_CHAR: f64 = 38.0;

/// The LCP array's bytes per character of the block at the run's index width.
fn lcp_bytes_per_char(shape: &Shape) -> f64 {
    match IndexWidth::choose(shape.n as u64, shape.index_at_least) {
        IndexWidth::W32 => LCP_BYTES_PER_CHAR,
        _ => LCP_WIDE_BYTES_PER_CHAR,
    }
}

/// The duplicate spans (`algo::repeats`, after the LCP array), bytes per character of the block:
/// the text, and the most of the scan (the SA and LCP parts, 8 bytes an entry each, and a record
/// of two index words for every entry: aⁿ gives one for every suffix) and of the records' move to
/// their owners (the records, their send buffer and a bucket word each), plus 2 bytes the
/// allocator keeps from the phases before; with 5 % to spare. Measured above the base at
/// 26.3, 28.4 and 38.3 bytes per character (32-, 40- and 64-bit records) on 8 MiB of aⁿ and
/// Fibonacci at p = 2, against 28.4, 30.5 and 41.0 here; DNA took 18.
fn spans_bytes_per_char(shape: &Shape) -> f64 {
    let record: f64 = match IndexWidth::choose(shape.n as u64, shape.index_at_least) {
        IndexWidth::W32 => 8.0,
        IndexWidth::W40 => 10.0,
        IndexWidth::W64 => 16.0,
    };
    let held = (16.0 + record).max(2.0 * record + 4.0);
    1.05 * (shape.token_width.bytes() as f64 + held + 2.0)
}

/// The model's coefficients of `knobs.algo`.
pub fn costs(shape: &Shape, knobs: &Knobs) -> Costs {
    match knobs.algo {
        Algo::Css => css_costs(shape, knobs),
        Algo::Dc3 => dc3_costs(shape, knobs),
    }
}

/// The predicted peak resident memory of the fullest pe, bytes: its base ([`Shape::base`]) and
/// [`per_peer`], plus the largest block (⌈n/p⌉) times what the algorithm holds per character, plus an
/// exchange's second copy (one round) or two rounds' staging (rounds); plus pe 0's records table
/// ([`Shape::held`]) throughout, and twice it again at the end where the index files are written
/// from it ([`Shape::index`]).
pub fn peak_per_pe(shape: &Shape, knobs: &Knobs) -> u64 {
    let c = costs(shape, knobs);
    let chars = shape.block() as f64;
    let records = chars * c.exchanged;
    let exchange = match knobs.round_bytes {
        Some(r) if (r as f64) < records => 2.0 * r as f64,
        _ => records,
    };
    let build = match knobs.relay {
        true => relay_bytes(shape),
        false => chars * c.held + exchange,
    };
    let after = |on: bool, per_char: f64| if on { chars * per_char } else { 0.0 };
    // A token text holds the text (and the BWT) in tokens, the rest as for bytes.
    let wider = token_factor(shape) - 1.0;
    let check = after(shape.check, check_bytes_per_char(shape) + wider);
    let bwt = after(shape.bwt, BWT_BYTES_PER_CHAR + 2.0 * wider);
    let lcp = after(shape.lcp, lcp_bytes_per_char(shape) + wider);
    let spans = after(shape.spans, spans_bytes_per_char(shape));
    // After the build pe 0 writes the records table and the index's metadata from its records:
    // about twice their bytes again.
    let index = if shape.index {
        2.0 * shape.held as f64
    } else {
        0.0
    };
    let most = build.max(check).max(bwt).max(lcp).max(spans).max(index);
    shape.base + per_peer(shape) + shape.held + most.ceil() as u64
}

/// The fewest characters [`Relay::Auto`] relays to pe 0: smaller texts are gathered there by
/// the algorithms anyway ([`Config::base_case`]).
pub const RELAY_MIN: usize = 1 << 22;

/// Characters the relay streams at a time (the default [`crate::GpuOptions::pool_piece`]).
const RELAY_PIECE: usize = 1 << 24;

/// libsais' own buffers on pe 0 in the relay, bytes per thread: its per-thread cache (24,576
/// entries of 8 bytes) and buckets, rounded up.
const RELAY_THREAD_BYTES: f64 = (1 << 18) as f64;

/// What pe 0 holds at the relay's fullest besides its base, bytes (its block is the largest):
/// its block of the text, and then the larger of
/// - while libsais runs: the whole text gathered, its 32-bit suffix array, the piece the text
///   came in by, and libsais' buffers per thread;
/// - where the suffix array goes back to the pes (`--check`, `--bwt`, `--lcp`): the suffix
///   array, pe 0's part of it in 64-bit entries and the piece of 32-bit entries going out
///   (into a file, the text's piece buffer holds them);
///
/// with 5 % to spare.
fn relay_bytes(shape: &Shape) -> f64 {
    let (n, block) = (shape.n as f64, shape.block() as f64);
    let piece = block.min(RELAY_PIECE as f64);
    let build = 5.0 * n + piece + RELAY_THREAD_BYTES * shape.node_cpus.max(1) as f64;
    let back = match shape.check || shape.bwt || shape.lcp {
        true => 4.0 * n + 8.0 * block + 4.0 * piece,
        false => 4.0 * n + 4.0 * piece,
    };
    1.05 * (block + build.max(back))
}

/// Whether the relay may build the text (see [`Relay`]): a byte text that libsais' 32-bit suffix
/// array holds, without a device; with [`Relay::Auto`] on one node and past [`RELAY_MIN`].
fn relay_allowed(config: &Config, shape: &Shape) -> bool {
    let takes = shape.token_width == TokenWidth::W1
        && shape.n <= crate::local::host::MAX_LEN
        && config.backend == Backend::Cpu;
    takes
        && match config.relay {
            Relay::Off => false,
            Relay::On => true,
            Relay::Auto => shape.one_node && shape.n > RELAY_MIN.max(config.base_case),
        }
}

/// A run's plan: the knobs it sets and what it predicts.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The knobs the run uses.
    pub knobs: Knobs,
    /// Predicted peak resident memory of the fullest pe, bytes.
    pub peak: u64,
    /// The budget per pe ([`Config::mem_per_pe`]), bytes; None: no budget.
    pub budget: Option<u64>,
    /// The leanest candidate's predicted peak, bytes (what the smallest budget must hold).
    pub leanest: u64,
    /// Rounds of the largest exchange (1: one round).
    pub rounds: usize,
    /// Of `peak`, what pe 0's records table holds throughout ([`Shape::held`]; 0 for raw input).
    pub records: u64,
    /// Of `peak`, what a pe holds before the text ([`Shape::base`]).
    pub base: u64,
}

impl Plan {
    /// The plan on one line for the log.
    pub fn summary(&self) -> String {
        let rounds = match self.knobs.round_bytes {
            Some(r) if self.rounds > 1 => format!(
                "exchanges in rounds of {} per pe (about {} rounds in the largest)",
                size_text(r as u64),
                self.rounds
            ),
            _ => "exchanges in one round".into(),
        };
        let budget = match self.budget {
            Some(b) => format!("budget {} per pe", size_text(b)),
            None => "no budget".into(),
        };
        let records = match self.records {
            0 => String::new(),
            r => format!(" (pe 0's includes its records table, {})", size_text(r)),
        };
        format!(
            "plan: {}{}, {rounds}; predicted peak {} per pe{records}, {budget} (leanest plan: {})",
            self.knobs.name(),
            match (
                self.knobs.algo,
                self.knobs.sort_rounds,
                self.knobs.merge_rounds
            ) {
                _ if self.knobs.relay => {
                    " (the whole text to libsais on pe 0 with its node's CPUs)".into()
                }
                (Algo::Css, 0, 0) | (Algo::Dc3, _, 0) => String::new(),
                (Algo::Css, s, 0) => format!(" sorting in {s} key ranges"),
                (Algo::Css, 0, m) | (Algo::Dc3, _, m) => format!(" merging in {m} key ranges"),
                (Algo::Css, s, m) => format!(" sorting in {s} and merging in {m} key ranges"),
            },
            size_text(self.peak),
            size_text(self.leanest)
        )
    }

    /// The plan as a JSON object (`--stats`'s "plan").
    pub fn to_json(&self) -> String {
        format!(
            "{{\"algo\": {}, \"sort_rounds\": {}, \"merge_rounds\": {}, \"exchange_round_bytes\": {}, \"exchange_rounds\": {}, \"predicted_peak_bytes\": {}, \"leanest_peak_bytes\": {}, \"records_table_bytes\": {}, \"base_bytes\": {}, \"mem_per_pe\": {}}}",
            json_str(self.knobs.name()),
            self.knobs.sort_rounds,
            self.knobs.merge_rounds,
            self.knobs
                .round_bytes
                .map_or("null".into(), |r| r.to_string()),
            self.rounds,
            self.peak,
            self.leanest,
            self.records,
            self.base,
            self.budget.map_or("null".into(), |b| b.to_string())
        )
    }
}

/// Bytes for people: "512 KiB", "1.5 GiB".
pub fn size_text(b: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    match u {
        0 => format!("{b} bytes"),
        _ => format!("{x:.1} {}", UNITS[u]),
    }
}

/// The rounds of the largest exchange under `knobs`.
fn rounds(shape: &Shape, knobs: &Knobs) -> usize {
    if knobs.relay {
        return 1;
    }
    let c = costs(shape, knobs);
    let records = (shape.block() as f64 * c.exchanged).ceil() as usize;
    match knobs.round_bytes {
        Some(r) => records.div_ceil(r.max(1)).max(1),
        None => 1,
    }
}

/// The candidates for `algo`, fastest first, leanest last: the configured knobs; then 4, 8, 16
/// and 64 key ranges, exchanges still in one round (past 8 the peak hardly falls and the time
/// grows: 16 and 64 are for budgets the model says 8 misses): pCSS sorting in them (unless its key ranges
/// are configured) and merging in as many when it hands over to a difference cover, pDC3
/// merging in them (unless its merge ranges are configured); then, on top of the leanest of
/// those, exchanges in rounds as large as `budget` allows, down to [`MIN_ROUND_BYTES`] (many
/// small rounds are slow: the last resort).
fn candidates(config: &Config, shape: &Shape, algo: Algo, budget: u64) -> Vec<Knobs> {
    let configured = Knobs {
        algo,
        sort_rounds: first_sort_rounds(config, shape, algo),
        ..Knobs::configured(config)
    };
    let mut v = vec![configured];
    for ranges in [4, 8, 16, 64] {
        let auto = |r: usize| if r == 0 { ranges } else { r };
        let k = match algo {
            Algo::Css if config.css.sort_rounds == 0 => Knobs {
                sort_rounds: ranges,
                merge_rounds: auto(config.dcx.merge_rounds),
                ..configured
            },
            Algo::Dc3 if config.dcx.merge_rounds == 0 => Knobs {
                merge_rounds: ranges,
                ..configured
            },
            _ => continue,
        };
        v.push(k);
    }
    let leanest = *v.last().expect("one candidate");
    let at_floor = Knobs {
        round_bytes: Some(MIN_ROUND_BYTES),
        ..leanest
    };
    // With rounds of r the peak is the floor's plus 2 (r - MIN_ROUND_BYTES).
    let room = budget.saturating_sub(peak_per_pe(shape, &at_floor)) / 2;
    let largest = MIN_ROUND_BYTES.saturating_add(usize::try_from(room).unwrap_or(usize::MAX));
    let fitted = (largest / MIN_ROUND_BYTES) * MIN_ROUND_BYTES;
    let fitted = config.comm.round_bytes.map_or(fitted, |r| r.min(fitted));
    for r in [fitted.max(MIN_ROUND_BYTES), MIN_ROUND_BYTES] {
        let k = Knobs {
            round_bytes: Some(r),
            ..leanest
        };
        if !v.contains(&k) {
            v.push(k);
        }
    }
    v
}

/// pCSS' key ranges before any budget: the configured ones, or for a text of 16- or 32-bit tokens
/// (whose keys take 128 bits) [`TOKEN_SORT_ROUNDS`] where they are auto. Others: as configured.
fn first_sort_rounds(config: &Config, shape: &Shape, algo: Algo) -> usize {
    let auto = config.css.sort_rounds == 0;
    match (algo, shape.token_width, auto) {
        (Algo::Css, TokenWidth::W2 | TokenWidth::W4, true) => TOKEN_SORT_ROUNDS,
        _ => config.css.sort_rounds,
    }
}

/// pCSS' key ranges on a text of 16- or 32-bit tokens without a budget: measured both faster and
/// about a third of the memory of one range (16-bit word-level English tokens, p = 2: 2.3 s and
/// 19 bytes a token against 5 s and 57; pDC3 took 3.9 s and 41; `docs/decisions.md`).
pub const TOKEN_SORT_ROUNDS: usize = 4;

/// The plan of a run of `shape` under `config` (see the module's docs). Local and pure: every pe
/// passing the same settings and shape gets the same plan (or the same refusal).
pub fn choose(config: &Config, shape: &Shape, source: &str) -> Result<Plan> {
    let budget = config.mem_per_pe;
    let relay = Knobs {
        relay: true,
        ..Knobs::configured(config)
    };
    let mut all: Vec<Knobs> = Vec::new();
    match (relay_allowed(config, shape), config.relay) {
        (true, _) => all.push(relay),
        (false, Relay::On) => return Err(Error::Usage(relay_refused(shape))),
        _ => {}
    }
    if config.relay != Relay::On {
        all.extend(
            algorithms(config)
                .iter()
                .flat_map(|&a| candidates(config, shape, a, budget.unwrap_or(u64::MAX))),
        );
    }
    let leanest = (all.iter())
        .map(|k| (peak_per_pe(shape, k), *k))
        .min_by_key(|&(peak, _)| peak)
        .expect("at least one candidate");
    let plan = |knobs: Knobs| Plan {
        knobs,
        peak: peak_per_pe(shape, &knobs),
        budget,
        leanest: leanest.0,
        rounds: rounds(shape, &knobs),
        records: shape.held,
        base: shape.base,
    };
    let Some(budget) = budget else {
        return Ok(plan(all[0]));
    };
    if let Some(k) = all.iter().find(|k| peak_per_pe(shape, k) <= budget) {
        return Ok(plan(*k));
    }
    Err(Error::Budget(refusal(
        config, shape, budget, source, leanest,
    )))
}

/// Why `--algo node` cannot build the text of `shape`.
fn relay_refused(shape: &Shape) -> String {
    let what = match shape.token_width {
        TokenWidth::W1 => format!("a text of {} characters", shape.n),
        _ => "a text of tokens wider than a byte".into(),
    };
    format!(
        "--algo node builds byte texts of at most {} characters on pe 0 (libsais' 32-bit suffix array), without --gpu: not {what}; leave --algo out, or give --algo css or dc3",
        crate::local::host::MAX_LEN
    )
}

/// The algorithms the plan may choose from, the configured first: the other one too where
/// [`Config::plan_algo`] allows.
fn algorithms(config: &Config) -> Vec<Algo> {
    let mut algos = vec![config.algo];
    if config.plan_algo {
        algos.push(match config.algo {
            Algo::Css => Algo::Dc3,
            Algo::Dc3 => Algo::Css,
        });
    }
    algos
}

/// The message of a refused run: the budget, the need, the leanest plan, and what to do.
fn refusal(
    config: &Config,
    shape: &Shape,
    budget: u64,
    source: &str,
    leanest: (u64, Knobs),
) -> String {
    let (need, k) = leanest;
    if k.relay {
        return format!(
            "memory budget too small: --algo node holds the whole text and its suffix array on pe 0, which needs {need} bytes ({}) for a text of {} characters, but the budget is {budget} bytes ({}) per pe ({source}); raise --mem-per-pe{}, or leave --algo out (the distributed algorithms share the text over the pes)",
            size_text(need),
            shape.n,
            size_text(budget),
            slurm_hint(source)
        );
    }
    // pe 0's table of records (sequence input) does not shrink with more pes.
    let held = match shape.held {
        0 => String::new(),
        h => format!(
            "; pe 0 also holds the table of the input's records, {}, at any p",
            size_text(h)
        ),
    };
    let mut msg = format!(
        "memory budget too small: {} needs at least {need} bytes ({}) per pe on {} ({} with exchanges in rounds of {}{held}), but the budget is {budget} bytes ({}) per pe ({source})",
        match shape.n {
            1 => "a text of 1 character".to_string(),
            n => format!("a text of {n} characters"),
        },
        size_text(need),
        match shape.pes {
            1 => "1 pe".to_string(),
            p => format!("{p} pes"),
        },
        k.name(),
        size_text(MIN_ROUND_BYTES as u64),
        size_text(budget),
    );
    let base = peak_per_pe(&Shape { n: 0, ..*shape }, &k);
    // What a pe needs without any text: with a records table, pe 0's (the table, and the index
    // files written from it at the end where they are).
    let bare = match (shape.held, shape.index) {
        (0, _) => format!("a pe needs {} before it holds any text", size_text(base)),
        (_, true) => format!(
            "pe 0 needs {} without any text (its records table, and the index files written from it at the end)",
            size_text(base)
        ),
        (_, false) => format!(
            "pe 0 needs {} without any text (its records table)",
            size_text(base)
        ),
    };
    if base > budget {
        msg.push_str(&format!(
            "; {bare}: raise --mem-per-pe{}",
            slurm_hint(source)
        ));
        return msg;
    }
    // The fewest pes at which the leanest plan fits the same budget per pe.
    let mut pes = shape.pes.max(1);
    let fits = |pes: usize| {
        let s = Shape { pes, ..*shape };
        let allowed = algorithms(config);
        let knobs = [Algo::Css, Algo::Dc3]
            .into_iter()
            .filter(|a| allowed.contains(a))
            .map(|algo| Knobs {
                algo,
                round_bytes: Some(MIN_ROUND_BYTES),
                sort_rounds: match (algo, config.css.sort_rounds) {
                    (Algo::Css, 0) => 64,
                    (_, r) => r,
                },
                merge_rounds: match config.dcx.merge_rounds {
                    0 => 64,
                    r => r,
                },
                relay: false,
            });
        knobs.into_iter().any(|k| peak_per_pe(&s, &k) <= budget)
    };
    while !fits(pes) && pes < 1 << 24 {
        pes *= 2;
    }
    if !fits(pes) {
        // What a pe holds beside its share of the text leaves no room for any share.
        msg.push_str(&format!(
            "; {bare}, too close to the budget for more pes to help: raise --mem-per-pe{}",
            slurm_hint(source)
        ));
        return msg;
    }
    // A budget that is a node's memory shared by its pes shrinks as pes are added there: the
    // pes it takes must come with nodes of their own.
    let more = match source.contains("pe(s) on the node") {
        true => format!(
            "use more nodes (about {pes} pes in all at this budget, as many per node as now: more pes on the same node only shrink each one's share)"
        ),
        false => format!("use more pes (about {pes} at this budget)"),
    };
    msg.push_str(&format!(
        "; {more} or more memory per pe (--mem-per-pe {}, on nodes that have it{})",
        size_arg(need),
        slurm_hint(source)
    ));
    msg
}

/// Where a budget came from Slurm's grant (or a cgroup's limit below it), how to ask Slurm for
/// more; not where the node's free memory or `ulimit -v` bound it.
fn slurm_hint(source: &str) -> &'static str {
    let cgroup_under_slurm = source.starts_with("the cgroup's") && source.contains("SLURM_");
    if source.starts_with("SLURM_") || cgroup_under_slurm {
        "; or ask Slurm for more: sbatch --mem-per-cpu or --mem"
    } else {
        ""
    }
}

/// A size as `--mem-per-pe` takes it, rounded up to whole MiB ("1234M").
pub fn size_arg(b: u64) -> String {
    format!("{}M", b.div_ceil(1 << 20))
}

/// Parses a size: plain bytes, or a number (decimals allowed) with K, M, G or T (powers of 1024;
/// a trailing "B" or "iB" is allowed: `3G`, `512M`, `1.5GiB`, `1024K`, `1000000`).
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let bad = || {
        format!("'{s}' is not a size: give bytes, or a number with K, M, G or T (powers of 1024), e.g. 3G, 512M, 1.5G")
    };
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix("ib"))
        .or_else(|| t.strip_suffix(['B', 'b']))
        .unwrap_or(t);
    let (num, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, ' '),
    };
    let shift = match unit {
        ' ' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        _ => return Err(bad()),
    };
    if num.is_empty() || !num.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return Err(bad());
    }
    let too_large = || format!("'{s}' is too large: a size is at most 16 EiB (2^64 bytes)");
    if num.bytes().all(|c| c.is_ascii_digit()) {
        // Digits only: too many of them is a number too large, not a bad one.
        return (num.parse::<u64>().ok())
            .and_then(|v| v.checked_mul(1 << shift))
            .ok_or_else(too_large);
    }
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && shift > 0 => {
            let b = (v * (1u64 << shift) as f64).round();
            (b < u64::MAX as f64)
                .then_some(b as u64)
                .ok_or_else(too_large)
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests;
