//! The file-to-file job: read each pe's slice, build, optionally check, write, report.
//!
//! `mod.rs` owns the job's run ([`run`]) and its steps once the plan is made: the outputs
//! created, the text read, the suffix array built and checked (the BWT and the LCP array made
//! from it), every file written and put in place. `job.rs` owns what a job is given ([`Job`]),
//! settles and measured ([`Report`]), `files.rs` the job's files (judged, created, committed
//! together), `index_files.rs` the index's side files and their metadata, `report.rs` the
//! [`Report`] gathered, as a table and as JSON; `infini_gram.rs` infini-gram's index directory,
//! one job per table; `repeats.rs` `psa repeats`, the duplicate spans of the inputs as TSV.

mod docs;
mod files;
mod index_files;
pub mod infini_gram;
mod job;
pub mod repeats;
mod report;
mod tokens;

use std::path::Path;
use std::time::Instant;

use crate::config::Knobs;
use crate::dist::Layout;
use crate::error::{Error, Result};
use crate::io::seq::{self, Format, InputFile, Record};
use crate::plan::{self, Plan, Shape};
use crate::token::{Token, TokenWidth};
use crate::{algo, entry, Ctx, SaSource};
use files::{write_text, EarlyFiles, Files};
use index_files::side_bytes;
use job::Run;

pub use job::{Job, Report};

pub use report::{report_json, report_table};

/// Runs a job, on the context's threads ([`Ctx::install`]). Collective; every pe returns the same
/// verdict.
///
/// Everything that can be checked without the text is checked before it is read: the inputs'
/// sizes and formats on every pe, the stats and index files' paths (created now), and for raw
/// input the entry width, the memory plan ([`plan::choose`], whose knobs — the algorithm, the
/// exchange rounds, the key ranges — the job then runs with, or which refuses a run that cannot
/// fit [`crate::Config::mem_per_pe`]) and the output (created now, its space reserved, every pe
/// opening it), so a doomed run fails in seconds, not after the build. The context's
/// configuration is not changed: the plan travels with the job. Sequence input is parsed and
/// counted first ([`seq::scan`]); its plan and output follow, before its characters move to T's
/// layout.
///
/// The phases' peak memory is sampled by one thread (see [`crate::stats`]) that runs from the
/// start of the job to its end.
pub fn run(ctx: &Ctx, job: &Job) -> Result<Report> {
    ctx.log.hold_sampler();
    let report = run_sampled(ctx, job);
    ctx.log.release_sampler();
    report
}

/// [`run`] while the sampler runs.
fn run_sampled(ctx: &Ctx, job: &Job) -> Result<Report> {
    let t0 = Instant::now();
    if !job.write_sa && job.bwt.is_none() && job.lcp.is_none() {
        return ctx.comm.agree(Err(Error::Usage(
            "--no-sa needs --bwt or --lcp: the run would write nothing".into(),
        )));
    }
    if job.infini_gram && (!job.write_sa || job.bwt.is_some() || job.lcp.is_some()) {
        return ctx.comm.agree(Err(Error::Usage(
            "infini-gram's table is a suffix array alone: no --bwt, --lcp or --no-sa".into(),
        )));
    }
    let files = ctx.install(|ctx| InputFile::open_all(&ctx.comm, &job.inputs, &job.seq))?;
    ctx.comm
        .agree(tokens::admissible(job.token_width, &files))?;
    let inputs: Vec<&Path> = job.inputs.iter().map(|p| p.as_path()).collect();
    let sequence = files.iter().any(|f| f.format != Format::Raw);
    ctx.comm
        .agree(docs::admissible(job.doc_sep, job.token_width, sequence))?;
    let early = ctx.install(|ctx| EarlyFiles::create(ctx, job, &inputs, sequence))?;
    // T's length: the files' sizes for raw input, else parsed and counted.
    let scanned = match InputFile::known_len(&files) {
        Some(_) => None,
        None => Some(ctx.install(|ctx| {
            ctx.phase("scan", || {
                seq::scan(&ctx.comm, &files, &job.seq, ctx.config.read_piece)
            })
        })?),
    };
    let n = match &scanned {
        Some(s) => s.len() as usize,
        None => InputFile::known_len(&files).unwrap_or(0) / job.token_width.bytes(),
    };
    // pe 0 holds the records' table to the end of the build: part of its peak at any p.
    let mut held = scanned.as_ref().map_or(0, |s| s.records_bytes());
    ctx.comm.broadcast(&mut held, 0);
    let index = early.side.is_some();
    let (width, plan) = ctx.install(|ctx| width_and_plan(ctx, job, n, held, index, false))?;
    let rounds = plan.knobs.round_bytes;
    ctx.install(|ctx| {
        let run = Run {
            job,
            files: &files,
            inputs: &inputs,
            sequence,
            n,
            width,
            plan,
            t0,
        };
        ctx.comm
            .in_rounds_of(rounds, || run_here(ctx, run, early, scanned))
    })
}

/// The entry width and the memory plan for n characters, pe 0 holding `held` bytes of records
/// besides and writing the index files from them at the end where `index`, and the duplicate
/// spans found after the LCP array where `spans` (`psa repeats`). Collective.
fn width_and_plan(
    ctx: &Ctx,
    job: &Job,
    n: usize,
    held: u64,
    index: bool,
    spans: bool,
) -> Result<(usize, Plan)> {
    let comm = &ctx.comm;
    let width = match job.infini_gram {
        true => job.width.resolve_infini_gram(n, job.token_width.bytes()),
        false => job.width.resolve(n),
    };
    let width = comm.agree(width.map_err(|e| Error::Usage(e.to_string())))?;
    let shape = Shape {
        n,
        pes: comm.size(),
        base: match ctx.config.plan_base {
            Some(b) => b,
            None => Shape::measured_base(comm.all_reduce_max(crate::stats::rss_bytes())),
        },
        width,
        index_at_least: ctx.config.index_width,
        token_width: job.token_width,
        check: job.check,
        bwt: job.bwt.is_some(),
        lcp: job.lcp.is_some(),
        spans,
        held,
        index,
        one_node: comm.all_reduce_min(comm.local_size() as u64) as usize == comm.size(),
        node_cpus: comm.all_reduce_max(crate::affinity::count(&ctx.node_cpus) as u64) as usize,
    };
    // The same on every pe (the same settings and size): pe 0 reports a refusal, every pe
    // leaves with its status.
    let plan = comm.agree(plan::choose(
        &ctx.config,
        &shape,
        &ctx.config.mem_per_pe_from,
    ))?;
    if comm.rank() == 0 {
        let changed = plan.knobs != Knobs::configured(&ctx.config);
        match job.show_plan || changed {
            true => log::info!("{}", plan.summary()),
            false => log::debug!("{}", plan.summary()),
        }
    }
    Ok((width, plan))
}

/// [`run`] on the calling thread's pool, once the plan is made, in four steps: the outputs
/// created, the text read, the suffix array built and checked (and the BWT and LCP array made
/// from it), every file written and put in place with the report; with the plan's exchange
/// rounds.
fn run_here(
    ctx: &Ctx,
    run: Run<'_>,
    early: EarlyFiles,
    scanned: Option<seq::Scanned<'_>>,
) -> Result<Report> {
    let mut files = Files::create(ctx, &run, early)?;
    if let Some(side) = &files.side {
        side.reserve(&ctx.comm, side_bytes(&ctx.comm, &run, scanned.as_ref()))?;
    }
    let (built, records) = match run.job.token_width {
        TokenWidth::W1 => {
            let seq::Loaded {
                text,
                layout,
                records,
            } = read(ctx, &run, &mut files, scanned)?;
            write_docs(ctx, &run, &mut files, &text, &layout)?;
            (build(ctx, &run, &files, text, &layout)?, records)
        }
        TokenWidth::W2 => read_and_build_tokens::<u16>(ctx, &run, &mut files)?,
        TokenWidth::W4 => read_and_build_tokens::<u32>(ctx, &run, &mut files)?,
    };
    finish(ctx, &run, files, &records, built)
}

/// Steps 2 and 3 for a text of tokens `T` wider than a byte: read, its document table written,
/// built. Returns what the report takes from it and the index's records. Collective.
fn read_and_build_tokens<T: Token>(
    ctx: &Ctx,
    run: &Run<'_>,
    files: &mut Files,
) -> Result<(Built, Vec<Record>)> {
    let (text, layout) = tokens::read::<T>(ctx, run)?;
    write_docs(ctx, run, files, &text, &layout)?;
    let built = build(ctx, run, files, text, &layout)?;
    Ok((built, tokens::records(ctx.comm.rank(), run)))
}

/// The end of step 2 with `--doc-sep` and an index: the document table (`OUT.docs`) of `text`,
/// this pe's block. Collective.
fn write_docs<T: Token>(
    ctx: &Ctx,
    run: &Run<'_>,
    files: &mut Files,
    text: &[T],
    layout: &Layout,
) -> Result<()> {
    let (comm, job) = (&ctx.comm, run.job);
    let Some(sep) = job.doc_sep else {
        return Ok(());
    };
    if files.side.is_none() {
        if comm.rank() == 0 {
            log::warn!("no index files beside the output: --doc-sep writes no document table");
        }
        return Ok(());
    }
    let at = (job.output.as_path(), run.inputs, job.force);
    let (file, count) = ctx.phase("write docs", || {
        docs::write_docs(comm, at, T::from_u64(sep as u64), text, layout, run.width)
    })?;
    if comm.rank() == 0 {
        log::info!("{count} document(s), begun by the token {sep}");
    }
    files.docs = Some(file);
    Ok(())
}

/// Step 2: this pe's block of T (placed from the scan, or read), and for sequence input with an
/// index `OUT.text` written. Collective.
fn read(
    ctx: &Ctx,
    run: &Run<'_>,
    files: &mut Files,
    scanned: Option<seq::Scanned<'_>>,
) -> Result<seq::Loaded> {
    let (comm, job) = (&ctx.comm, run.job);
    if comm.rank() == 0 {
        log::info!(
            "building the suffix array of {} ({} characters) on {} pes × {} threads with {}, {}-byte entries",
            report::shown_inputs(&job.inputs),
            run.n,
            comm.size(),
            ctx.config.threads,
            run.plan.knobs.name(),
            run.width
        );
    }
    let loaded = ctx.phase("read", || match scanned {
        Some(s) => s.place(comm),
        None => seq::load(comm, run.files, &job.seq, ctx.config.read_piece),
    })?;
    debug_assert_eq!(loaded.layout.len(), run.n);
    if files.side.is_some() && run.sequence {
        let (text, layout) = (&loaded.text, &loaded.layout);
        files.text = Some(ctx.phase("write text", || {
            write_text(comm, &job.output, run.inputs, job.force, text, layout)
        })?);
    }
    Ok(loaded)
}

/// Step 3: the suffix array with the plan's knobs, checked (`--check`), written where it is held,
/// and the BWT and the LCP array made from it and written; frees the text. Returns what the
/// report takes from it (pCSS' doubling rounds, the BWT's primary index). Collective.
///
/// Into a regular file the build writes the suffix array itself as it becomes final (no pe
/// holds it); the checker, the BWT and the LCP array read it back from there. A device, a FIFO
/// or `--no-sa` keeps each pe's part in memory (written after the check).
fn build<T: Token>(
    ctx: &Ctx,
    run: &Run<'_>,
    files: &Files,
    text: Vec<T>,
    layout: &Layout,
) -> Result<Built> {
    let comm = &ctx.comm;
    let out = files.sa.as_ref();
    let entry::Built {
        mut sa,
        refine_rounds,
    } = entry::build(ctx, run.plan.knobs, &text, out)?;
    // Without an output the suffix array is held.
    let source = match (&sa, out) {
        (None, Some(out)) => Some(SaSource::File(out)),
        (sa, _) => sa.as_deref().map(SaSource::Held),
    };
    if let (true, Some(source)) = (run.job.check, source) {
        ctx.phase("check", || algo::check::check(ctx, &text, source, layout))?;
        if comm.rank() == 0 {
            log::info!("check passed: the output is the suffix array of the input");
        }
    }
    let first = layout.start(comm.rank());
    if let (Some(out), Some(sa)) = (out, &sa) {
        ctx.phase("write", || out.write(comm, first, sa))?;
    }
    let mut bwt_primary = None;
    if let (Some(bwt_out), Some(source)) = (&files.bwt, source) {
        let part = algo::bwt::bwt(ctx, &text, source, layout)?;
        ctx.phase("write bwt", || bwt_out.write(comm, part.first, &part.bytes))?;
        bwt_primary = Some(part.primary);
        if comm.rank() == 0 {
            log::info!("BWT primary index: {}", part.primary);
        }
    }
    if let Some(lcp_out) = &files.lcp {
        // The LCP array takes this pe's part whole (read back when the build wrote it).
        let part = match (sa.take(), out) {
            (Some(sa), _) => sa,
            (None, out) => ctx.phase("read sa", || {
                let len = layout.local_len(comm.rank());
                comm.agree(out.map_or(Ok(Vec::new()), |o| o.read_part(first, len)))
            })?,
        };
        let lcp = algo::lcp::lcp(ctx, &text, part, layout)?;
        ctx.phase("write lcp", || lcp_out.write(comm, first, &lcp))?;
    }
    drop(sa);
    drop(text);
    Ok(Built {
        refine_rounds,
        bwt_primary,
    })
}

/// What the build step gives the report.
pub(super) struct Built {
    /// pCSS' doubling rounds (0 for the other paths).
    refine_rounds: usize,
    /// The BWT's primary index (with `--bwt`).
    bwt_primary: Option<u64>,
}

/// Step 4: every file written and made durable, the report gathered (and written to
/// `--stats`), then every file put in place together. Collective.
///
/// A failure on the way (a full disk, an I/O error) replaces none of the requested files, so an
/// output is never left beside another run's index files or stats.
fn finish(
    ctx: &Ctx,
    run: &Run<'_>,
    mut files: Files,
    records: &[Record],
    built: Built,
) -> Result<Report> {
    let comm = &ctx.comm;
    files.write_and_sync(comm, run, records, built.bwt_primary)?;
    let report = Report::gather(ctx, run, built.refine_rounds, built.bwt_primary);
    if let Some(f) = &mut files.stats {
        f.write(comm, report_json(&report, ctx, run.job).as_bytes())?;
    }
    files.commit(comm)?;
    Ok(report)
}
