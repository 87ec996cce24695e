//! `psa repeats`: the duplicate spans of the inputs ([`crate::algo::repeats`]) written as TSV.
//!
//! The job reads the inputs as raw tokens, builds the suffix array (held, never written) with the
//! memory plan of a build that also makes the LCP array and then finds the spans
//! ([`crate::plan::Shape::spans`]), makes the LCP array, finds the spans and writes them: one line `b<TAB>e` per span, in text order, each pe writing its lines at the
//! offset given by an exclusive prefix sum of the pes' byte counts. The output is created before
//! the input is read and written as the build's outputs are ([`OutputFile`]): under a temporary
//! name, renamed into place when complete, so SPANS never holds a partial result; `--stats` is
//! put in place with it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::job::Job;
use crate::algo::repeats::{self, Rules, Sources};
use crate::config::json_str;
use crate::error::{Error, Result};
use crate::io::output::{commit_all, Named, SideFile};
use crate::io::seq::{Format, InputFile, SeqOptions};
use crate::io::tokens::{admissible, read_tokens};
use crate::io::{OutputFile, Width};
use crate::plan::Plan;
use crate::stats::{summarise, PhaseSummary};
use crate::token::{Token, TokenOrder, TokenWidth};
use crate::{algo, entry, Ctx};

/// What `psa repeats` is asked.
#[derive(Clone, Debug)]
pub struct Repeats {
    /// The inputs, concatenated in this order (raw bytes, or tokens of `token_width`).
    pub inputs: Vec<PathBuf>,
    /// Where the spans go (TSV).
    pub output: PathBuf,
    /// K: the fewest tokens a counted substring has (at least 1).
    pub min_len: u64,
    /// Bytes per token of every input.
    pub token_width: TokenWidth,
    /// A token that no counted substring contains (`--doc-sep`).
    pub doc_sep: Option<u64>,
    /// `--across`: report the spans of the last input that also occur in one of the others,
    /// as positions from the last input's start.
    pub across: bool,
    /// Replace a read-only output instead of refusing.
    pub force: bool,
    /// Log the memory plan (pe 0, at info).
    pub show_plan: bool,
    /// Where to write the report as JSON (`--stats`), put in place with the spans.
    pub stats: Option<PathBuf>,
}

/// What a finished `psa repeats` found (the same on every pe).
#[derive(Clone, Debug)]
pub struct RepeatsReport {
    /// Tokens of the text (all inputs).
    pub n: usize,
    /// Spans written.
    pub spans: u64,
    /// Tokens those spans cover.
    pub covered: u64,
    /// Wall time of the whole job, seconds (the slowest pe's).
    pub total_secs: f64,
    /// Every phase, summarised over pes.
    pub phases: Vec<PhaseSummary>,
    /// The largest peak resident memory of a pe over the run, bytes.
    pub peak_rss: u64,
    /// The memory plan the run kept.
    pub plan: Plan,
}

impl RepeatsReport {
    /// The phases as a table for the log (max and mean over pes).
    pub fn table(&self) -> String {
        let mut s = super::report::phase_rows(&self.phases, self.n);
        s.push_str(&format!(
            "total {:.3} s; peak RSS max {:.1} MB per pe ({:.2} of the plan's {})",
            self.total_secs,
            self.peak_rss as f64 / 1e6,
            self.peak_rss as f64 / self.plan.peak.max(1) as f64,
            crate::plan::size_text(self.plan.peak)
        ));
        s
    }

    /// The report as JSON (`--stats`): the job, the plan, the measured peak and every phase.
    pub fn to_json(&self, ctx: &Ctx, job: &Repeats) -> String {
        let path = |p: &Path| json_str(&p.display().to_string());
        let inputs: Vec<String> = job.inputs.iter().map(|p| path(p)).collect();
        format!(
            "{{\n  \"command\": \"repeats\",\n  \"inputs\": [{}],\n  \"output\": {},\n  \"min_len\": {},\n  \"token_width\": {},\n  \"doc_sep\": {},\n  \"across\": {},\n  \"config\": {},\n  \"n\": {},\n  \"pes\": {},\n  \"threads_per_pe\": {},\n  \"spans\": {},\n  \"covered\": {},\n  \"total_secs\": {:.6},\n  \"mem_per_pe\": {},\n  \"plan\": {},\n  \"planned_peak_bytes\": {},\n  \"measured_max_peak_bytes\": {},\n  \"measured_over_planned\": {:.4},\n  \"phases\": [\n{}\n  ]\n}}\n",
            inputs.join(", "),
            path(&job.output),
            job.min_len,
            job.token_width.bytes(),
            job.doc_sep.map_or("null".into(), |t| t.to_string()),
            job.across,
            ctx.config.to_json_with(&self.plan.knobs),
            self.n,
            ctx.comm.size(),
            ctx.config.threads,
            self.spans,
            self.covered,
            self.total_secs,
            self.plan.budget.map_or("null".into(), |b| b.to_string()),
            self.plan.to_json(),
            self.plan.peak,
            self.peak_rss,
            self.peak_rss as f64 / self.plan.peak.max(1) as f64,
            super::report::phases_json(&self.phases)
        )
    }
}

/// Runs `psa repeats`, on the context's threads. Collective; every pe returns the same verdict.
///
/// The arguments, the inputs (raw, sizes a multiple of the token width), the memory plan and the
/// output are checked before the text is read.
pub fn run(ctx: &Ctx, job: &Repeats) -> Result<RepeatsReport> {
    ctx.log.hold_sampler();
    let report = ctx.install(|ctx| run_sampled(ctx, job));
    ctx.log.release_sampler();
    report
}

/// [`run`] while the sampler runs.
fn run_sampled(ctx: &Ctx, job: &Repeats) -> Result<RepeatsReport> {
    let (t0, comm) = (Instant::now(), &ctx.comm);
    comm.agree(admissible_args(job))?;
    let opts = SeqOptions {
        format: Some(Format::Raw),
        ..SeqOptions::default()
    };
    let files = InputFile::open_all(comm, &job.inputs, &opts)?;
    comm.agree(admissible(job.token_width, &files))?;
    let w = job.token_width.bytes() as u64;
    let ends: Vec<u64> = (files.iter())
        .scan(0, |end, f| {
            *end += f.size / w;
            Some(*end)
        })
        .collect();
    let n = ends.last().copied().unwrap_or(0) as usize;
    let inputs: Vec<&Path> = job.inputs.iter().map(|p| p.as_path()).collect();
    let out = OutputFile::create_named(
        comm,
        &job.output,
        &inputs,
        job.force,
        (0, 1),
        "spans output",
        Named::ByUser,
    )?;
    let mut stats = match &job.stats {
        Some(p) => Some(SideFile::create(
            comm,
            p,
            &inputs,
            job.force,
            "stats file",
            Named::ByUser,
        )?),
        None => None,
    };
    let plan = plan(ctx, job, n)?;
    let rules = Rules {
        min_len: job.min_len,
        doc_sep: job.doc_sep,
        sources: match job.across {
            true => Sources::Across { ends },
            false => Sources::All,
        },
    };
    let found = comm.in_rounds_of(plan.knobs.round_bytes, || match job.token_width {
        TokenWidth::W1 => spans_of::<u8>(ctx, &files, n, &plan, &rules),
        TokenWidth::W2 => spans_of::<u16>(ctx, &files, n, &plan, &rules),
        TokenWidth::W4 => spans_of::<u32>(ctx, &files, n, &plan, &rules),
    })?;
    let shift = rules.sources.first_target();
    let (spans, covered) = (found.len() as u64, found.iter().map(|s| s[1] - s[0]).sum());
    ctx.phase("write spans", || write_spans(ctx, &out, &found, shift))?;
    drop(found);
    out.sync(comm)?;
    let report = RepeatsReport {
        n,
        spans: comm.all_reduce_sum(spans),
        covered: comm.all_reduce_sum(covered),
        total_secs: comm.all_reduce_f64(&[t0.elapsed().as_secs_f64()]).0[0],
        phases: summarise(comm, &ctx.log),
        peak_rss: comm.all_reduce_max(ctx.log.run_peak_rss()),
        plan,
    };
    if let Some(f) = &mut stats {
        f.write(comm, report.to_json(ctx, job).as_bytes())?;
    }
    commit_all(
        comm,
        vec![out.into_staged(), stats.and_then(SideFile::into_staged)],
    )?;
    Ok(report)
}

/// The arguments' own checks: `--across` needs two inputs or more, the separator must be a
/// token of the width. Local (the same on every pe).
fn admissible_args(job: &Repeats) -> Result<()> {
    if job.across && job.inputs.len() < 2 {
        return Err(Error::Usage(
            "--across compares the last input with the others: give two inputs or more".into(),
        ));
    }
    let max = u64::MAX >> (64 - 8 * job.token_width.bytes());
    match job.doc_sep {
        Some(t) if t > max => Err(Error::Usage(format!(
            "--doc-sep {t} is not a token of {} byte(s) (at most {max})",
            job.token_width
        ))),
        _ => Ok(()),
    }
}

/// The memory plan of a build of n tokens that also makes the LCP array and then the spans
/// (the plan the job runs with, or a refusal when it cannot fit `--mem-per-pe`). Collective.
fn plan(ctx: &Ctx, job: &Repeats, n: usize) -> Result<Plan> {
    let as_build = Job {
        inputs: job.inputs.clone(),
        seq: SeqOptions::default(),
        output: job.output.clone(),
        write_sa: false,
        bwt: None,
        lcp: Some(job.output.clone()),
        token_width: job.token_width,
        token_ids: false,
        doc_sep: None,
        infini_gram: false,
        width: Width::Auto,
        check: false,
        stats: None,
        force: job.force,
        show_plan: job.show_plan,
    };
    Ok(super::width_and_plan(ctx, &as_build, n, 0, false, true)?.1)
}

/// The text read as tokens `T`, its suffix array (held) and LCP array, and this pe's spans.
/// Collective.
fn spans_of<T: Token>(
    ctx: &Ctx,
    files: &[InputFile],
    n: usize,
    plan: &Plan,
    rules: &Rules,
) -> Result<Vec<[u64; 2]>> {
    let comm = &ctx.comm;
    if comm.rank() == 0 {
        log::info!(
            "finding the spans of repeats of at least {} tokens in {n} tokens of {} byte(s) on {} pes × {} threads with {:?}",
            rules.min_len,
            T::WIDTH,
            comm.size(),
            ctx.config.threads,
            plan.knobs.algo
        );
    }
    let (text, layout) = ctx.phase("read", || {
        read_tokens::<T>(comm, files, n, TokenOrder::Value)
    })?;
    let sa = entry::build(ctx, plan.knobs, &text, None)?.sa;
    let sa =
        comm.agree(sa.ok_or_else(|| Error::Invalid("internal: the build held no SA".into())))?;
    let (lcp, sa) = algo::lcp::lcp_keeping_sa(ctx, &text, sa, &layout)?;
    Ok(repeats::spans(ctx, &text, &layout, sa, lcp, rules))
}

/// Writes this pe's spans as `b<TAB>e` lines (positions less `shift`) at its offset in the
/// output. Collective.
fn write_spans(ctx: &Ctx, out: &OutputFile, spans: &[[u64; 2]], shift: u64) -> Result<()> {
    let comm = &ctx.comm;
    let mut bytes = Vec::with_capacity(spans.len() * 16);
    for &[b, e] in spans {
        // Writing into a Vec cannot fail.
        let _ = writeln!(bytes, "{}\t{}", b - shift, e - shift);
    }
    let at = comm.exscan_sum(bytes.len() as u64) as usize;
    out.write(comm, at, &bytes)
}
