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
use crate::config::{Algo, Config};
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
    /// The algorithms' records' index width at least ([`crate::Tunables::index_width`]; None:
    /// what n needs).
    pub index_at_least: Option<IndexWidth>,
    /// Whether the distributed checker runs.
    pub check: bool,
    /// Whether the BWT is built (`--bwt`).
    pub bwt: bool,
    /// Whether the LCP array is built (`--lcp`).
    pub lcp: bool,
    /// Bytes pe 0 holds from before the build to its end besides it: the table of the input's
    /// records (names and places) of sequence input ([`crate::io::seq::Scanned::records_bytes`]);
    /// 0 for raw input. More pes do not shrink it.
    pub held: u64,
    /// Whether pe 0 writes the index files beside the output from that table at the end (not
    /// with `--no-sa`, beside an output that is a device or FIFO, nor for an output whose name
    /// leaves no room for theirs).
    pub index: bool,
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

/// The settings a plan chooses. A new knob of the algorithms (pCSS' sort in bucket rounds, a
/// `sort_rounds` field of [`crate::Tunables`]) goes here, into its algorithm's cost function
/// ([`costs`]) and into [`choose`]'s list of candidates, leanest last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// The algorithm.
    pub algo: Algo,
    /// Largest volume a pe sends in one exchange round ([`Config::round_bytes`]); None: one
    /// round.
    pub round_bytes: Option<usize>,
    /// Key ranges pCSS sorts one after the other ([`crate::Tunables::sort_rounds`]; 0: auto).
    /// Ignored by pDC3.
    pub sort_rounds: usize,
    /// Key ranges the difference covers merge in, one after the other
    /// ([`crate::Tunables::merge_rounds`]; 0: auto): pDC3's, and DC7's when pCSS hands over.
    pub merge_rounds: usize,
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
fn css_costs(shape: &Shape, knobs: &Knobs) -> Costs {
    let rounds = knobs.sort_rounds.max(1);
    let wide = if rounds == 1 { 8.0 } else { 0.0 };
    let exchanged = (16.0 / rounds as f64 + wide).max(3.7);
    Costs {
        held: step(CSS, rounds) * width_factor(shape) - exchanged,
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
    let build = chars * c.held + exchange;
    let after = |on: bool, per_char: f64| if on { chars * per_char } else { 0.0 };
    // A token text holds the text (and the BWT) in tokens, the rest as for bytes.
    let wider = token_factor(shape) - 1.0;
    let check = after(shape.check, check_bytes_per_char(shape) + wider);
    let bwt = after(shape.bwt, BWT_BYTES_PER_CHAR + 2.0 * wider);
    let lcp = after(shape.lcp, LCP_BYTES_PER_CHAR + wider);
    // After the build pe 0 writes the records table and the index's metadata from its records:
    // about twice their bytes again.
    let index = if shape.index {
        2.0 * shape.held as f64
    } else {
        0.0
    };
    let most = build.max(check).max(bwt).max(lcp).max(index);
    shape.base + per_peer(shape) + shape.held + most.ceil() as u64
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
            algo_name(self.knobs.algo),
            match (
                self.knobs.algo,
                self.knobs.sort_rounds,
                self.knobs.merge_rounds
            ) {
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
            json_str(algo_name(self.knobs.algo)),
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

fn algo_name(a: Algo) -> &'static str {
    match a {
        Algo::Css => "css",
        Algo::Dc3 => "dc3",
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
        round_bytes: config.round_bytes,
        sort_rounds: config.tune.sort_rounds,
        merge_rounds: config.tune.merge_rounds,
    };
    let mut v = vec![configured];
    for ranges in [4, 8, 16, 64] {
        let auto = |r: usize| if r == 0 { ranges } else { r };
        let k = match algo {
            Algo::Css if config.tune.sort_rounds == 0 => Knobs {
                sort_rounds: ranges,
                merge_rounds: auto(config.tune.merge_rounds),
                ..configured
            },
            Algo::Dc3 if config.tune.merge_rounds == 0 => Knobs {
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
    let fitted = config.round_bytes.map_or(fitted, |r| r.min(fitted));
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

/// The plan of a run of `shape` under `config` (see the module's docs). Local and pure: every pe
/// passing the same settings and shape gets the same plan (or the same refusal).
pub fn choose(config: &Config, shape: &Shape, source: &str) -> Result<Plan> {
    let algos = algorithms(config, shape)?;
    let budget = config.mem_per_pe;
    let all: Vec<Knobs> = algos
        .iter()
        .flat_map(|&a| candidates(config, shape, a, budget.unwrap_or(u64::MAX)))
        .collect();
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

/// The algorithms the plan may choose from, the configured first: the other one too where
/// [`Config::plan_algo`] allows. A token text (wider than a byte) takes pDC3 alone: pCSS reads
/// bytes only for now, and asking for it is refused ([`Error::Usage`]).
fn algorithms(config: &Config, shape: &Shape) -> Result<Vec<Algo>> {
    if shape.token_width != TokenWidth::W1 {
        return match (config.algo, config.plan_algo) {
            (Algo::Css, false) => Err(Error::Usage(format!(
                "--algo css takes bytes only for now: --token-width {} needs --algo dc3 (or no --algo)",
                shape.token_width
            ))),
            _ => Ok(vec![Algo::Dc3]),
        };
    }
    let mut algos = vec![config.algo];
    if config.plan_algo {
        algos.push(match config.algo {
            Algo::Css => Algo::Dc3,
            Algo::Dc3 => Algo::Css,
        });
    }
    Ok(algos)
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
        algo_name(k.algo),
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
        let allowed = algorithms(config, shape).unwrap_or_default();
        let knobs = [Algo::Css, Algo::Dc3]
            .into_iter()
            .filter(|a| allowed.contains(a))
            .map(|algo| Knobs {
                algo,
                round_bytes: Some(MIN_ROUND_BYTES),
                sort_rounds: match (algo, config.tune.sort_rounds) {
                    (Algo::Css, 0) => 64,
                    (_, r) => r,
                },
                merge_rounds: match config.tune.merge_rounds {
                    0 => 64,
                    r => r,
                },
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
mod tests {
    /// Slurm is named where its grant, or a cgroup's limit below it, bound the budget.
    #[test]
    fn slurm_is_advised_only_where_its_grant_binds() {
        let below = "below SLURM_MEM_PER_CPU's 2.0 GiB";
        assert!(!slurm_hint("SLURM_MEM_PER_CPU").is_empty());
        assert!(!slurm_hint("SLURM_MEM_PER_NODE / 2 pe(s) on the node").is_empty());
        let cgroup = format!("the cgroup's memory limit / 3 pe(s) on the node, {below}");
        assert!(!slurm_hint(&cgroup).is_empty());
        let free = format!("MemAvailable / 3 pe(s) on the node, {below}");
        assert!(slurm_hint(&free).is_empty());
        assert!(slurm_hint("--mem-per-pe").is_empty());
    }

    use super::*;

    /// What a test that plans returns: a refused plan fails it.
    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn shape(n: usize, pes: usize) -> Shape {
        Shape {
            n,
            pes,
            base: BASE_BYTES,
            width: 4,
            index_at_least: None,
            token_width: TokenWidth::W1,
            check: false,
            bwt: false,
            lcp: false,
            held: 0,
            index: true,
        }
    }

    fn config(budget: Option<u64>) -> Config {
        Config {
            mem_per_pe: budget,
            plan_algo: false,
            ..Config::default()
        }
    }

    #[test]
    fn sizes_parse() {
        for (s, want) in [
            ("3G", 3u64 << 30),
            ("512M", 512 << 20),
            ("1.5G", 3 << 29),
            ("1024K", 1 << 20),
            ("1000000", 1_000_000),
            ("2GiB", 2 << 30),
            ("64mb", 64 << 20),
            ("1t", 1 << 40),
        ] {
            assert_eq!(parse_size(s), Ok(want), "{s}");
        }
        for s in ["", "G", "3X", "-1G", "1.5", "1e3M", "3 G G"] {
            assert!(
                parse_size(s).is_err_and(|e| e.contains("not a size")),
                "{s}"
            );
        }
        for s in ["99999999999T", "99999999999999999999", "16777216T", "1e30"] {
            let r = parse_size(s);
            let want = if s == "1e30" {
                "not a size"
            } else {
                "too large"
            };
            assert!(r.as_ref().is_err_and(|e| e.contains(want)), "{s}: {r:?}");
        }
    }

    #[test]
    fn no_budget_keeps_the_configured_knobs() -> TestResult {
        let p = choose(&config(None), &shape(1 << 30, 4), "")?;
        assert_eq!(p.knobs.round_bytes, None);
        assert_eq!(p.knobs.algo, Algo::Css);
        assert!(p.peak > p.leanest);
        Ok(())
    }

    /// pe 0's table of a sequence input's records adds to the peak at any p: once through the
    /// build, three times at its end (the records table and the metadata written from it), once
    /// where no index files are written; a refusal names it, and what pe 0 needs without any text.
    #[test]
    fn pe_0s_records_table_counts_at_any_p() -> TestResult {
        const GIB: u64 = 1 << 30;
        for pes in [1, 16, 1024] {
            let text = shape(1 << 26, pes);
            let with = |held| Shape { held, ..text };
            let plain = choose(&config(None), &text, "")?;
            let small = choose(&config(None), &with(1 << 20), "")?;
            // Once through the build, where the build outweighs the end (not at p = 1024).
            assert!(small.peak >= plain.peak + (1 << 20), "p = {pes}");
            if pes <= 16 {
                assert_eq!(small.peak, plain.peak + (1 << 20), "p = {pes}");
                assert_eq!(small.leanest, plain.leanest + (1 << 20), "p = {pes}");
            }
            let empty = Shape { n: 0, ..with(GIB) };
            assert_eq!(
                choose(&config(None), &empty, "")?.peak,
                BASE_BYTES + per_peer(&empty) + 3 * GIB
            );
            // Without index files (--no-sa, an output that is a device or FIFO) the table is
            // held once, not written.
            let unwritten = Shape {
                index: false,
                ..empty
            };
            assert_eq!(
                choose(&config(None), &unwritten, "")?.peak,
                BASE_BYTES + per_peer(&unwritten) + GIB
            );
            let e = choose(&config(Some(GIB / 2)), &unwritten, "--mem-per-pe").unwrap_err();
            let e = e.to_string();
            let bare = |held| size_text(BASE_BYTES + per_peer(&unwritten) + held);
            let needle = format!(
                "pe 0 needs {} without any text (its records table)",
                bare(GIB)
            );
            assert!(e.contains(&needle), "p = {pes}: no '{needle}' in {e}");
            let e = choose(&config(Some(2 * GIB)), &with(GIB), "--mem-per-pe").unwrap_err();
            let e = e.to_string();
            for needle in [
                "pe 0 also holds the table of the input's records, 1.0 GiB, at any p".to_string(),
                format!(
                    "pe 0 needs {} without any text (its records table, and the index files",
                    bare(3 * GIB)
                ),
            ] {
                assert!(e.contains(&needle), "p = {pes}: no '{needle}' in {e}");
            }
        }
        Ok(())
    }

    #[test]
    fn a_large_budget_needs_no_rounds() -> TestResult {
        let p = choose(&config(Some(1 << 40)), &shape(1 << 20, 2), "")?;
        assert_eq!((p.knobs.round_bytes, p.rounds), (None, 1));
        Ok(())
    }

    #[test]
    fn tighter_budgets_give_smaller_rounds_down_to_the_leanest() -> TestResult {
        // pCSS in one key range: only the exchange rounds are left to choose.
        let config = |budget| {
            let mut c = config(budget);
            c.tune.sort_rounds = 1;
            c
        };
        let s = shape(1 << 20, 2);
        let one = choose(&config(None), &s, "")?;
        let mut last = usize::MAX;
        for budget in [
            one.peak - 1,
            one.peak - (1 << 20),
            one.leanest + 8192,
            one.leanest,
        ] {
            let p = choose(&config(Some(budget)), &s, "")?;
            assert!(p.peak <= budget, "{p:?}");
            let r = p.knobs.round_bytes.ok_or("no rounds")?;
            assert!(r <= last && r.is_multiple_of(MIN_ROUND_BYTES), "{p:?}");
            last = r;
        }
        assert_eq!(last, MIN_ROUND_BYTES);
        let e = choose(&config(Some(one.leanest - 1)), &s, "the test").unwrap_err();
        assert_eq!(e.exit_code(), 4);
        let m = e.to_string();
        assert!(
            m.contains(&format!("at least {} bytes", one.leanest)),
            "{m}"
        );
        assert!(m.contains("(the test)") && m.contains("more pes"), "{m}");
        Ok(())
    }

    #[test]
    fn the_other_algorithm_when_free_to_choose() -> TestResult {
        // The algorithm whose leanest plan needs more cannot fit a budget just below it; free to
        // choose, the plan takes the other one (in key ranges).
        let s = shape(1 << 24, 4);
        let leanest = |algo| {
            choose(
                &Config {
                    algo,
                    ..config(None)
                },
                &s,
                "",
            )
            .map(|p| p.leanest)
        };
        let (css, dc3) = (leanest(Algo::Css)?, leanest(Algo::Dc3)?);
        assert_ne!(css, dc3);
        let (fat, lean) = match css > dc3 {
            true => (Algo::Css, Algo::Dc3),
            false => (Algo::Dc3, Algo::Css),
        };
        let budget = css.max(dc3) - 1;
        let fixed = Config {
            algo: fat,
            ..config(Some(budget))
        };
        assert!(choose(&fixed, &s, "").is_err());
        let free = Config {
            plan_algo: true,
            ..fixed
        };
        let p = choose(&free, &s, "")?;
        assert_eq!(p.knobs.algo, lean);
        assert!(p.knobs.merge_rounds > 1 || p.knobs.sort_rounds > 1, "{p:?}");
        assert!(p.peak <= budget);
        Ok(())
    }

    #[test]
    fn pcss_sorts_in_more_key_ranges_under_a_tight_budget() -> TestResult {
        let s = shape(1 << 26, 4);
        let free = choose(&config(None), &s, "")?;
        assert_eq!(free.knobs.sort_rounds, 0, "auto without a budget");
        let fixed = |rounds, budget| Config {
            tune: crate::Tunables {
                sort_rounds: rounds,
                ..Default::default()
            },
            ..config(budget)
        };
        // Below what 4 ranges need even with the smallest exchange rounds.
        let four = choose(&fixed(4, None), &s, "")?.leanest;
        let tight = choose(&config(Some(four - 1)), &s, "")?;
        assert!(tight.knobs.sort_rounds >= 8, "{tight:?}");
        assert!(tight.peak < four);
        // A configured number of ranges is kept.
        assert_eq!(choose(&fixed(2, None), &s, "")?.knobs.sort_rounds, 2);
        assert!(choose(&fixed(4, Some(four - 1)), &s, "").is_err());
        Ok(())
    }

    #[test]
    fn pdc3_merges_in_key_ranges_under_a_tight_budget() -> TestResult {
        let s = shape(1 << 26, 4);
        let dc3 = |rounds, budget| Config {
            algo: Algo::Dc3,
            tune: crate::Tunables {
                merge_rounds: rounds,
                ..Default::default()
            },
            ..config(budget)
        };
        let free = choose(&dc3(0, None), &s, "")?;
        assert_eq!(free.knobs.merge_rounds, 0, "one range without a budget");
        // Below one range's need: key ranges before any exchange rounds.
        let tight = choose(&dc3(0, Some(free.peak - 1)), &s, "")?;
        assert!(tight.knobs.merge_rounds >= 4, "{tight:?}");
        assert_eq!(tight.knobs.round_bytes, None, "{tight:?}");
        assert!(tight.summary().contains("merging in"), "{tight:?}");
        // The leanest plan merges in 64 ranges.
        let leanest = choose(&dc3(0, Some(free.leanest)), &s, "")?;
        assert_eq!(leanest.knobs.merge_rounds, 64, "{leanest:?}");
        // A configured number of ranges is kept.
        let fixed = choose(&dc3(2, None), &s, "")?;
        assert_eq!(fixed.knobs.merge_rounds, 2);
        assert!(fixed.peak < free.peak);
        Ok(())
    }

    /// The model against peaks measured on the fullest pe (`scripts/plan-calibration.sh`: 16 MiB
    /// texts at p = 4, and 80 MiB ones and 40 MB of Rust source at p = 16 on the 16-core GPU
    /// host): for every plan the input it fits closest and DNA. Never below a measured peak;
    /// DNA's within 2.5 times (the worst text of each size sets the model: see [`CSS`]).
    #[test]
    fn the_model_covers_the_measured_peaks() {
        // (n, p, algo, key ranges, exchange rounds of 4 KiB, 40-bit records, --check, the
        // plan's base MiB, measured MiB)
        let measured = [
            (16777216, 2, Algo::Css, 1, false, false, false, 21.0, 443.0), // random
            (83886080, 16, Algo::Css, 1, false, false, false, 21.0, 219.0), // dna
            (83886080, 16, Algo::Css, 2, false, false, true, 21.0, 211.0), // an
            (83886080, 16, Algo::Css, 2, false, false, true, 21.0, 161.0), // dna
            (40080860, 16, Algo::Css, 4, false, false, true, 21.0, 94.0),  // source
            (83886080, 16, Algo::Css, 4, false, false, true, 21.0, 118.0), // dna
            (40080860, 16, Algo::Css, 8, false, false, true, 21.0, 77.0),  // source
            (83886080, 16, Algo::Css, 8, false, false, true, 21.0, 95.0),  // dna
            (40080860, 16, Algo::Css, 8, false, true, true, 21.0, 81.0),   // source
            (83886080, 16, Algo::Css, 8, false, true, true, 21.0, 100.0),  // dna
            (40080860, 16, Algo::Css, 16, false, false, true, 21.0, 77.0), // source
            (83886080, 16, Algo::Css, 16, false, false, true, 21.0, 89.0), // dna
            (83886080, 16, Algo::Css, 64, false, false, true, 21.0, 118.0), // fib
            (83886080, 16, Algo::Css, 64, false, false, true, 21.0, 90.0), // dna
            (16777216, 4, Algo::Css, 64, true, false, true, 24.0, 78.0),   // fib
            (83886080, 16, Algo::Css, 64, true, false, true, 21.0, 66.0),  // dna
            (40080860, 16, Algo::Dc3, 1, false, false, false, 21.0, 120.0), // source
            (83886080, 16, Algo::Dc3, 1, false, false, false, 21.0, 198.0), // dna
            (40080860, 16, Algo::Dc3, 4, false, false, true, 21.0, 94.0),  // source
            (83886080, 16, Algo::Dc3, 4, false, false, true, 21.0, 120.0), // dna
            (83886080, 16, Algo::Dc3, 8, false, false, true, 21.0, 132.0), // repblock
            (83886080, 16, Algo::Dc3, 8, false, false, true, 21.0, 95.0),  // dna
            (83886080, 16, Algo::Dc3, 64, false, false, true, 21.0, 134.0), // repblock
            (83886080, 16, Algo::Dc3, 64, false, false, true, 21.0, 86.0), // dna
            (83886080, 16, Algo::Dc3, 64, true, false, true, 21.0, 114.0), // repblock
            (83886080, 16, Algo::Dc3, 64, true, false, true, 21.0, 63.0),  // dna
        ];
        for (n, pes, algo, ranges, rounds, wide, check, base, mib) in measured {
            let s = Shape {
                check,
                base: (base * (1 << 20) as f64) as u64,
                index_at_least: wide.then_some(IndexWidth::W40),
                token_width: TokenWidth::W1,
                ..shape(n, pes)
            };
            let knobs = Knobs {
                algo,
                round_bytes: rounds.then_some(MIN_ROUND_BYTES),
                sort_rounds: ranges,
                merge_rounds: ranges,
            };
            let ratio = peak_per_pe(&s, &knobs) as f64 / (mib * (1 << 20) as f64);
            assert!(
                (1.0..=2.5).contains(&ratio),
                "n {n}, p {pes}, {algo:?} in {ranges} ranges: {ratio:.2} × measured"
            );
        }
    }

    #[test]
    fn a_budget_below_the_base_says_so() {
        let m = choose(&config(Some(1 << 20)), &shape(100, 1), "--mem-per-pe")
            .unwrap_err()
            .to_string();
        assert!(m.contains("before it holds any text"), "{m}");
    }

    /// Where the budget is the node's memory shared by the pes on it, more pes on that node only
    /// shrink each share: the refusal asks for more nodes.
    #[test]
    fn a_node_shared_budget_asks_for_more_nodes() {
        let s = shape(1 << 30, 2);
        for (source, nodes) in [
            ("MemAvailable / 2 pe(s) on the node", true),
            ("the cgroup's memory limit / 2 pe(s) on the node", true),
            ("SLURM_MEM_PER_NODE / 2 pe(s) on the node", true),
            ("--mem-per-pe", false),
            ("SLURM_MEM_PER_CPU", false),
            (
                "ulimit -v less 1.0 MiB of address space held but not resident",
                false,
            ),
        ] {
            let m = choose(&config(Some(4 << 30)), &s, source)
                .unwrap_err()
                .to_string();
            assert_eq!(m.contains("use more nodes"), nodes, "{source}: {m}");
            assert_eq!(m.contains("use more pes"), !nodes, "{source}: {m}");
        }
    }

    #[test]
    fn the_refusal_names_enough_pes() {
        let s = shape(1 << 30, 2);
        let budget = 4 << 30;
        let m = choose(&config(Some(budget)), &s, "x")
            .unwrap_err()
            .to_string();
        let pes: usize = m
            .split("about ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{m}"));
        assert!(choose(&config(Some(budget)), &shape(1 << 30, pes), "").is_ok());
        assert!(choose(&config(Some(budget)), &shape(1 << 30, pes / 2), "").is_err());
    }
}
