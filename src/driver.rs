//! The file-to-file job: read each pe's slice, build, optionally check, write, report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::comm::Comm;
use crate::config::json_str;
use crate::error::{Error, Result};
use crate::io::index::{
    side_path, BuildStamps, FileStamp, IndexMeta, InputMeta, RecordMeta, Side, VERSION,
};
use crate::io::output::{commit_all, random_tag, Named, Staged};
use crate::io::seq::{self, Format, InputFile, Record, SeqOptions};
use crate::io::{OutputFile, SideFile, Width};
use crate::plan::{self, Plan, Shape};
use crate::stats::{summarise, PhaseSummary};
use crate::{algo, suffix_array, suffix_array_or_write, Ctx, SaSource};

/// What the command line asks for.
#[derive(Clone, Debug)]
pub struct Job {
    /// The input files, in T order (one or more).
    pub inputs: Vec<PathBuf>,
    /// How the inputs become the text (formats, case, reverse complements).
    pub seq: SeqOptions,
    /// Where the suffix array goes (a file, a device or a FIFO); unused without `write_sa`.
    pub output: PathBuf,
    /// Write the suffix array (false: `--no-sa`, only the BWT and/or LCP array; then neither
    /// `output` nor the index files beside it are created).
    pub write_sa: bool,
    /// Where the BWT goes (`--bwt`): n bytes, and its primary index in `PATH.primary`.
    pub bwt: Option<PathBuf>,
    /// Where the LCP array goes (`--lcp`): n entries of the SA's width.
    pub lcp: Option<PathBuf>,
    /// Bytes per SA entry.
    pub width: Width,
    /// Run the distributed checker before the output is put in place (renamed).
    pub check: bool,
    /// Where to write the report as JSON (`--stats`).
    pub stats: Option<PathBuf>,
    /// Replace a read-only output (or stats file) instead of refusing.
    pub force: bool,
    /// Log the memory plan (pe 0, at info) before the build; else only when it changes a knob.
    pub show_plan: bool,
}

/// What a finished job measured (the same on every pe).
#[derive(Clone, Debug)]
pub struct Report {
    /// Characters of the text.
    pub n: usize,
    /// Bytes per SA entry written.
    pub width: usize,
    /// Wall time of the whole job, seconds.
    pub total_secs: f64,
    /// Every phase, summarised over pes.
    pub phases: Vec<PhaseSummary>,
    /// Peak resident memory of each pe over the run, bytes.
    pub peak_rss: Vec<u64>,
    /// Bytes each pe sent.
    pub bytes_sent: Vec<u64>,
    /// The largest share of one pe after a sort, over the mean.
    pub max_imbalance: f64,
    /// pCSS prefix-doubling rounds (0 for DC3).
    pub refine_rounds: usize,
    /// Whether the distributed checker passed the result.
    pub checked: bool,
    /// The memory plan the run kept ([`plan::choose`]).
    pub plan: Plan,
    /// The BWT's primary index (with `--bwt`).
    pub bwt_primary: Option<u64>,
}

impl Report {
    /// [`Self::bytes_per_char`] for people: "12.3 bytes/char", or "no characters".
    pub fn bytes_per_char_text(&self) -> String {
        match self.bytes_per_char() {
            Some(b) => format!("{b:.1} bytes/char"),
            None => "no characters".into(),
        }
    }

    /// Sum of peak resident memory over pes divided by n (None for an empty text).
    pub fn bytes_per_char(&self) -> Option<f64> {
        (self.n > 0).then(|| self.peak_rss.iter().sum::<u64>() as f64 / self.n as f64)
    }
}

/// Runs a job, on the context's threads ([`Ctx::install`]). Collective; every pe returns the same
/// verdict.
///
/// Everything that can be checked without the text is checked before it is read: the inputs'
/// sizes and formats on every pe, the stats and index files' paths (created now), and for raw
/// input the entry width, the memory plan ([`plan::choose`], which sets the context's algorithm
/// and exchange rounds, or refuses a run that cannot fit [`crate::Config::mem_per_pe`]) and the
/// output (created now, its space reserved, every pe opening it), so a doomed run fails in
/// seconds, not after the build. Sequence input is parsed and counted first ([`seq::scan`]);
/// its plan and output follow, before its characters move to T's layout.
///
/// The phases' peak memory is sampled by one thread (see [`crate::stats`]) that runs from the
/// start of the job to its end.
pub fn run(ctx: &mut Ctx, job: &Job) -> Result<Report> {
    ctx.log.hold_sampler();
    let report = run_sampled(ctx, job);
    ctx.log.release_sampler();
    report
}

/// [`run`] while the sampler runs.
fn run_sampled(ctx: &mut Ctx, job: &Job) -> Result<Report> {
    let t0 = Instant::now();
    if !job.write_sa && job.bwt.is_none() && job.lcp.is_none() {
        return ctx.comm.agree(Err(Error::Usage(
            "--no-sa needs --bwt or --lcp: the run would write nothing".into(),
        )));
    }
    let files = ctx.install(|ctx| InputFile::open_all(&ctx.comm, &job.inputs, &job.seq))?;
    let inputs: Vec<&Path> = job.inputs.iter().map(|p| p.as_path()).collect();
    let sequence = files.iter().any(|f| f.format != Format::Raw);
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
        None => InputFile::known_len(&files).unwrap_or(0),
    };
    // pe 0 holds the records' table to the end of the build: part of its peak at any p.
    let mut held = scanned.as_ref().map_or(0, |s| s.records_bytes());
    ctx.comm.broadcast(&mut held, 0);
    let index = early.side.is_some();
    let (width, plan) = ctx.install(|ctx| width_and_plan(ctx, job, n, held, index))?;
    ctx.config.algo = plan.knobs.algo;
    if let Some(r) = plan.knobs.round_bytes {
        ctx.config.round_bytes = Some(r);
        ctx.comm.set_round_bytes(r);
    }
    ctx.config.tune.sort_rounds = plan.knobs.sort_rounds;
    ctx.tune.sort_rounds = plan.knobs.sort_rounds;
    ctx.config.tune.merge_rounds = plan.knobs.merge_rounds;
    ctx.tune.merge_rounds = plan.knobs.merge_rounds;
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
        run_here(ctx, run, early, scanned)
    })
}

/// The entry width and the memory plan for n characters, pe 0 holding `held` bytes of records
/// besides and writing the index files from them at the end where `index`. Collective.
fn width_and_plan(ctx: &Ctx, job: &Job, n: usize, held: u64, index: bool) -> Result<(usize, Plan)> {
    let comm = &ctx.comm;
    let width = comm.agree(
        job.width
            .resolve(n)
            .map_err(|e| Error::Usage(e.to_string())),
    )?;
    let shape = Shape {
        n,
        pes: comm.size(),
        base: match ctx.config.plan_base {
            Some(b) => b,
            None => Shape::measured_base(comm.all_reduce_max(crate::stats::rss_bytes())),
        },
        width,
        index_at_least: ctx.tune.index_width,
        check: job.check,
        bwt: job.bwt.is_some(),
        lcp: job.lcp.is_some(),
        held,
        index,
    };
    // The same on every pe (the same settings and size): pe 0 reports a refusal, every pe
    // leaves with its status.
    let plan = comm.agree(plan::choose(
        &ctx.config,
        &shape,
        &ctx.config.mem_per_pe_from,
    ))?;
    if comm.rank() == 0 {
        let changed = plan.knobs.algo != ctx.config.algo
            || plan.knobs.round_bytes != ctx.config.round_bytes
            || plan.knobs.sort_rounds != ctx.config.tune.sort_rounds
            || plan.knobs.merge_rounds != ctx.config.tune.merge_rounds;
        match job.show_plan || changed {
            true => log::info!("{}", plan.summary()),
            false => log::debug!("{}", plan.summary()),
        }
    }
    Ok((width, plan))
}

/// What [`run`] settled before the build.
struct Run<'a> {
    job: &'a Job,
    files: &'a [InputFile],
    inputs: &'a [&'a Path],
    sequence: bool,
    n: usize,
    width: usize,
    plan: Plan,
    t0: Instant,
}

/// The stats file, the index's side files and the BWT's primary index file, created before the
/// input is read.
struct EarlyFiles {
    stats: Option<SideFile>,
    side: Option<IndexFiles>,
    primary: Option<SideFile>,
}

impl EarlyFiles {
    /// Collective.
    fn create(ctx: &Ctx, job: &Job, inputs: &[&Path], sequence: bool) -> Result<EarlyFiles> {
        let comm = &ctx.comm;
        let clash = match comm.rank() {
            0 => same_files(job, sequence),
            _ => None,
        };
        if comm.any(clash.is_some()) {
            return comm.agree(Err(Error::Usage(clash.unwrap_or_default())));
        }
        // The outputs' paths judged now, before any input is parsed (their files are made once
        // n is known): the input itself, a directory, a read-only file are refused at once.
        let outputs = [
            job.write_sa.then_some((&job.output, "output")),
            job.bwt.as_ref().map(|p| (p, "BWT output")),
            job.lcp.as_ref().map(|p| (p, "LCP output")),
        ];
        for (path, what) in outputs.into_iter().flatten() {
            let planned = match comm.rank() {
                0 => crate::io::output::plan(path, inputs, job.force, what, 0, Named::ByUser)
                    .map(|_| ()),
                _ => Ok(()),
            };
            comm.agree(planned)?;
        }
        let stats = match &job.stats {
            Some(p) => Some(SideFile::create(
                comm,
                p,
                inputs,
                job.force,
                "stats file",
                Named::ByUser,
            )?),
            None => None,
        };
        let side = match job.write_sa {
            true => IndexFiles::create(comm, &job.output, inputs, job.force, sequence)?,
            false => None,
        };
        let primary = match &job.bwt {
            Some(bwt) if !is_special(comm, bwt) => Some(SideFile::create(
                comm,
                &side_path(bwt, ".primary"),
                inputs,
                job.force,
                "BWT primary index file",
                Named::Beside,
            )?),
            Some(bwt) => {
                if comm.rank() == 0 {
                    log::info!(
                        "the BWT output '{}' is not a regular file: its primary index goes to the log and --stats only",
                        bwt.display()
                    );
                }
                None
            }
            None => None,
        };
        Ok(EarlyFiles {
            stats,
            side,
            primary,
        })
    }
}

/// The files a job writes, by what messages call them: the SA (unless `--no-sa`) and the index
/// files beside it (T's own only for `sequence` input), `--stats`, the BWT and its primary index
/// file, the LCP array.
fn job_files(job: &Job, sequence: bool) -> Vec<(String, PathBuf, Named)> {
    let mut v = Vec::new();
    let mut add = |what: &str, p: PathBuf, named| v.push((what.to_string(), p, named));
    if job.write_sa {
        let out = &job.output;
        add("the output", out.clone(), Named::ByUser);
        add(
            "its records table",
            side_path(out, ".records.tsv"),
            Named::Beside,
        );
        add("its index file", side_path(out, ".meta"), Named::Beside);
        if sequence {
            add("its text file", side_path(out, ".text"), Named::Beside);
        }
    }
    if let Some(p) = &job.stats {
        add("--stats", p.clone(), Named::ByUser);
    }
    if let Some(p) = &job.bwt {
        add("--bwt", p.clone(), Named::ByUser);
        add(
            "--bwt's primary index file",
            side_path(p, ".primary"),
            Named::Beside,
        );
    }
    if let Some(p) = &job.lcp {
        add("--lcp", p.clone(), Named::ByUser);
    }
    v
}

/// Two of the job's files that end up at one file, as a message (local; pe 0 asks). The null
/// device may take several (each discarded); any other device or FIFO would carry them one
/// after another in one stream (a pe's stdout is a terminal device under mpirun).
fn same_files(job: &Job, sequence: bool) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let null = std::fs::metadata("/dev/null").ok().map(|m| m.rdev());
    let is_null = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device() && Some(m.rdev()) == null)
    };
    let files = job_files(job, sequence);
    for (i, (what_a, a, named_a)) in files.iter().enumerate() {
        if is_null(a) {
            continue;
        }
        for (what_b, b, named_b) in &files[i + 1..] {
            if crate::io::output::same_destination((a, *named_a), (b, *named_b)) {
                return Some(format!(
                    "{what_a} '{}' and {what_b} '{}' are the same file",
                    a.display(),
                    b.display()
                ));
            }
        }
    }
    None
}

/// Whether `path` is a character device or FIFO (written through: no side files beside it).
/// Collective (pe 0 looks).
fn is_special(comm: &Comm, path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let special = comm.rank() == 0
        && std::fs::metadata(path).is_ok_and(|m| {
            let t = m.file_type();
            t.is_char_device() || t.is_fifo()
        });
    comm.any(special)
}

/// [`run`] on the calling thread's pool, once the plan is made.
fn run_here(
    ctx: &Ctx,
    run: Run<'_>,
    early: EarlyFiles,
    scanned: Option<seq::Scanned<'_>>,
) -> Result<Report> {
    let comm = &ctx.comm;
    let Run {
        job,
        files,
        inputs,
        sequence,
        n,
        width,
        plan,
        t0,
    } = run;
    let EarlyFiles {
        stats: stats_file,
        side,
        primary,
    } = early;
    let out = match job.write_sa {
        true => Some(OutputFile::create(
            comm,
            &job.output,
            inputs,
            job.force,
            n,
            width,
        )?),
        false => None,
    };
    let bwt_out = match &job.bwt {
        Some(p) => Some(OutputFile::create_named(
            comm,
            p,
            inputs,
            job.force,
            (n, 1),
            "BWT output",
            Named::ByUser,
        )?),
        None => None,
    };
    let lcp_out = match &job.lcp {
        Some(p) => Some(OutputFile::create_named(
            comm,
            p,
            inputs,
            job.force,
            (n, width),
            "LCP output",
            Named::ByUser,
        )?),
        None => None,
    };
    if comm.rank() == 0 {
        log::info!(
            "building the suffix array of {} ({n} characters) on {} pes × {} threads with {:?}, {}-byte entries",
            shown_inputs(&job.inputs),
            comm.size(),
            ctx.config.threads,
            ctx.config.algo,
            width
        );
    }
    let loaded = ctx.phase("read", || match scanned {
        Some(s) => s.place(comm),
        None => seq::load(comm, files, &job.seq, ctx.config.read_piece),
    })?;
    let seq::Loaded {
        text,
        layout,
        records,
    } = loaded;
    debug_assert_eq!(layout.len(), n);
    let text_file = match (&side, sequence) {
        (Some(_), true) => Some(ctx.phase("write text", || {
            write_text(comm, &job.output, inputs, job.force, &text, &layout)
        })?),
        _ => None,
    };
    // Into a regular file the build writes the suffix array itself as it becomes final (no pe
    // holds it); the checker, the BWT and the LCP array read it back from there. A device, a
    // FIFO or `--no-sa` keeps each pe's part in memory (written after the check).
    let mut sa = match &out {
        Some(out) => suffix_array_or_write(ctx, &text, out)?,
        None => Some(suffix_array(ctx, &text)?),
    };
    // Without an output the suffix array is held.
    let source = match (&sa, &out) {
        (None, Some(out)) => Some(SaSource::File(out)),
        (sa, _) => sa.as_deref().map(SaSource::Held),
    };
    if let (true, Some(source)) = (job.check, source) {
        ctx.phase("check", || algo::check::check(ctx, &text, source, &layout))?;
        if comm.rank() == 0 {
            log::info!("check passed: the output is the suffix array of the input");
        }
    }
    let first = layout.start(comm.rank());
    if let (Some(out), Some(sa)) = (&out, &sa) {
        ctx.phase("write", || out.write(comm, first, sa))?;
    }
    let mut bwt_primary = None;
    if let (Some(bwt_out), Some(source)) = (&bwt_out, source) {
        let part = algo::bwt::bwt(ctx, &text, source, &layout)?;
        ctx.phase("write bwt", || bwt_out.write(comm, part.first, &part.bytes))?;
        bwt_primary = Some(part.primary);
        if comm.rank() == 0 {
            log::info!("BWT primary index: {}", part.primary);
        }
    }
    if let Some(lcp_out) = &lcp_out {
        // The LCP array takes this pe's part whole (read back when the build wrote it).
        let part = match (sa.take(), &out) {
            (Some(sa), _) => sa,
            (None, out) => ctx.phase("read sa", || {
                let len = layout.local_len(comm.rank());
                comm.agree(
                    out.as_ref()
                        .map_or(Ok(Vec::new()), |o| o.read_part(first, len)),
                )
            })?,
        };
        let lcp = algo::lcp::lcp(ctx, &text, part, &layout)?;
        ctx.phase("write lcp", || lcp_out.write(comm, first, &lcp))?;
    }
    drop(sa);
    drop(text);
    // Every file is written and made durable first, then all are put in place: a failure on the
    // way (a full disk, an I/O error) replaces none of the requested files, so an output is
    // never left beside another run's index files or stats.
    let primary = match (primary, bwt_primary) {
        (Some(mut f), Some(p)) => {
            f.write(comm, format!("{p}\n").as_bytes())?;
            Some(f)
        }
        _ => None,
    };
    for f in [&out, &bwt_out, &lcp_out, &text_file].into_iter().flatten() {
        f.sync(comm)?;
    }
    let mut side = side;
    if let Some(side) = &mut side {
        let meta = index_meta(comm, files, job, n, width, sequence, &records);
        // Taken now that every pe has written and synced: the renames keep them.
        let stamp = |f: Option<&OutputFile>| f.map_or(Ok(None), |f| f.stamp());
        let stamps =
            comm.agree(stamp(out.as_ref()).and_then(|sa| Ok((sa, stamp(text_file.as_ref())?))))?;
        side.write(comm, &records, meta, stamps)?;
    }
    let total_secs = comm_max_f64(ctx, t0.elapsed().as_secs_f64());
    let phases = summarise(comm, &ctx.log);
    let peak_rss = comm.all_gather(ctx.log.run_peak_rss());
    let bytes_sent = comm.all_gather(comm.bytes_sent());
    let max_imbalance = comm_max_f64(ctx, ctx.log.max_imbalance());
    let refine_rounds = ctx.log.refine_rounds.get();
    let report = Report {
        n,
        width,
        total_secs,
        phases,
        peak_rss,
        bytes_sent,
        max_imbalance,
        refine_rounds,
        checked: job.check,
        plan,
        bwt_primary,
    };
    let mut stats_file = stats_file;
    if let Some(f) = &mut stats_file {
        f.write(comm, report_json(&report, ctx, job).as_bytes())?;
    }
    // Every file in place together, or none; the index's metadata last.
    let mut staged: Vec<_> = [out, bwt_out, lcp_out, text_file]
        .into_iter()
        .map(|f| f.and_then(OutputFile::into_staged))
        .collect();
    staged.extend([primary, stats_file].map(|f| f.and_then(SideFile::into_staged)));
    let stale_text = side.and_then(|s| s.into_staged(&mut staged));
    commit_all(comm, staged)?;
    if let Some(text) = stale_text {
        log::warn!(
            "'{}', the text of the sequence index this raw one replaced, is not used by the new index: remove it if nothing else reads it",
            text.display()
        );
    }
    Ok(report)
}

/// The inputs for messages: 'a', or 'a' and 2 more files.
fn shown_inputs(inputs: &[PathBuf]) -> String {
    match inputs {
        [one] => format!("'{}'", one.display()),
        [first, rest @ ..] => format!("'{}' and {} more files", first.display(), rest.len()),
        [] => "no input".into(),
    }
}

/// The index's side files (`OUT.records.tsv`, `OUT.meta`), planned and created before the
/// input is read (pe 0 writes them at the end). None when the output is a device or FIFO.
struct IndexFiles {
    records: SideFile,
    meta: SideFile,
    /// `OUT.text` of the sequence index a raw one replaces (its `OUT.meta` says so), when it is a
    /// regular file and none of the inputs: the new index does not read it, which is said once
    /// it is in place (it is left alone: something else may read it). Pe 0's.
    stale_text: Option<PathBuf>,
}

impl IndexFiles {
    /// Collective.
    fn create(
        comm: &Comm,
        out: &Path,
        inputs: &[&Path],
        force: bool,
        sequence: bool,
    ) -> Result<Option<IndexFiles>> {
        use std::os::unix::fs::FileTypeExt;
        let special = comm.rank() == 0
            && std::fs::metadata(out).is_ok_and(|m| {
                let t = m.file_type();
                t.is_char_device() || t.is_fifo()
            });
        if comm.any(special) {
            if comm.rank() == 0 {
                log::info!(
                    "the output '{}' is not a regular file: no index files are written beside it",
                    out.display()
                );
            }
            return Ok(None);
        }
        let name_len = out.file_name().map_or(0, |n| n.len());
        if name_len + ".records.tsv".len() > 255 {
            if comm.rank() == 0 {
                log::warn!(
                    "the output's name is too long for the index files beside it (OUT.records.tsv, OUT.meta): none are written, and psa query cannot use this output"
                );
            }
            return Ok(None);
        }
        // T's file is made once its size is known; its path is checked now.
        if sequence {
            let text = side_path(out, ".text");
            let planned = match comm.rank() {
                0 => crate::io::output::plan(&text, inputs, force, "text file", 0, Named::Beside)
                    .map(|_| ()),
                _ => Ok(()),
            };
            comm.agree(planned)?;
        }
        let records = SideFile::create(
            comm,
            &side_path(out, ".records.tsv"),
            inputs,
            force,
            "records table",
            Named::Beside,
        )?;
        let stale_text = (comm.rank() == 0 && !sequence)
            .then(|| side_path(out, ".text"))
            .filter(|text| {
                let Ok(m) = std::fs::symlink_metadata(text) else {
                    return false;
                };
                let is_input = |i: &&Path| {
                    std::fs::metadata(i).is_ok_and(|im| crate::io::output::same_file(&m, &im))
                };
                m.is_file()
                    && !inputs.iter().any(is_input)
                    && IndexMeta::read(&side_path(out, ".meta")).is_ok_and(|m| m.sequence)
            });
        let meta = SideFile::create(
            comm,
            &side_path(out, ".meta"),
            inputs,
            force,
            "index file",
            Named::Beside,
        )?;
        // Files beside it that psa did not write are kept, unless --force (after the checks
        // of each path above, which name a link or file of another user as such).
        let foreign = match (comm.rank(), force) {
            (0, false) => foreign_side_file(out, sequence),
            _ => None,
        };
        comm.agree(foreign.map_or(Ok(()), |m| Err(Error::Usage(m))))?;
        Ok(Some(IndexFiles {
            records,
            meta,
            stale_text,
        }))
    }

    /// Writes the records table and the metadata (pe 0's), not yet in place, the metadata with
    /// the build's stamps: a fresh build id, the stamps of the SA and `OUT.text` (pe 0's
    /// `stamps`) and the records table's size. Collective.
    fn write(
        &mut self,
        comm: &Comm,
        records: &[Record],
        meta: Option<IndexMeta>,
        (sa, text): (Option<FileStamp>, Option<FileStamp>),
    ) -> Result<()> {
        // The table is freed before the metadata is encoded (the plan counts one of them).
        let table = IndexMeta::records_tsv(records);
        self.records.write(comm, &table)?;
        let records_size = table.len() as u64;
        drop(table);
        let bytes = meta.map_or_else(Vec::new, |mut m| {
            m.stamps = sa.map(|sa| BuildStamps {
                build: random_tag(),
                sa,
                text,
                records_size,
            });
            m.encode()
        });
        self.meta.write(comm, &bytes)
    }

    /// Adds the records table and then the metadata to the files a job puts in place; returns
    /// the stale text to warn of once they are.
    fn into_staged(self, staged: &mut Vec<Option<Staged>>) -> Option<PathBuf> {
        staged.push(self.records.into_staged());
        staged.push(self.meta.into_staged());
        self.stale_text
    }
}

/// The first file beside `out` that a build would replace but psa did not write, as a message
/// (local; pe 0 asks): an `OUT.meta` that is not a psa index file (no magic), or an
/// `OUT.records.tsv` or (`sequence` input) `OUT.text` that the `OUT.meta` beside it does not
/// describe ([`IndexMeta::wrote`]: its stamps, or an older index's sizes), or that has none
/// beside it. A file that does not exist passes, and so does one beside a damaged psa index
/// (the magic, but no index: rebuilding is the remedy for the damage), and anything but a
/// regular file (which is written through or refused as such).
fn foreign_side_file(out: &Path, sequence: bool) -> Option<String> {
    use std::io::Read;
    let existing = |p: &Path| std::fs::metadata(p).ok().filter(|m| m.is_file());
    let meta_path = side_path(out, ".meta");
    let has_magic = existing(&meta_path).map(|_| {
        let mut head = [0u8; 8];
        let read = std::fs::File::open(&meta_path).and_then(|mut f| f.read_exact(&mut head));
        read.is_ok() && head == *crate::io::index::MAGIC
    });
    let refuse = |p: &Path, what: &str, why: String| {
        Some(format!(
            "{what} '{}' exists and {why}: refusing to replace it; remove it, choose another output (-o), or pass --force to replace it",
            p.display()
        ))
    };
    if has_magic == Some(false) {
        return refuse(
            &meta_path,
            "the index file",
            "is not a psa index file".into(),
        );
    }
    let meta = has_magic.and_then(|_| IndexMeta::read(&meta_path).ok());
    let sides = [
        (Side::Records, ".records.tsv", "the records table"),
        (Side::Text, ".text", "the text file"),
    ];
    for (side, suffix, what) in sides {
        let path = side_path(out, suffix);
        let Some(m) = existing(&path).filter(|_| side == Side::Records || sequence) else {
            continue;
        };
        let shown = meta_path.display();
        let why = match (&meta, has_magic) {
            (Some(meta), _) if meta.wrote(side, &m) => continue,
            (Some(_), _) => format!("is not the one of the psa index '{shown}' beside it"),
            // psa's index, damaged: its files are taken as psa's (rebuilding is the remedy
            // `psa query` gives for the damage).
            (None, Some(true)) => continue,
            _ => format!("is not psa's (there is no psa index '{shown}' beside it)"),
        };
        return refuse(&path, what, why);
    }
    None
}

/// Writes T beside the output (`OUT.text`), every pe its block; put in place by the caller
/// with [`OutputFile::commit`] once the SA is. Collective.
fn write_text(
    comm: &Comm,
    out: &Path,
    inputs: &[&Path],
    force: bool,
    text: &[u8],
    layout: &crate::dist::Layout,
) -> Result<OutputFile> {
    let path = side_path(out, ".text");
    let shape = (layout.len(), 1);
    let file = OutputFile::create_named(
        comm,
        &path,
        inputs,
        force,
        shape,
        "text file",
        Named::Beside,
    )?;
    let me = comm.rank();
    comm.agree(
        file.write_part(layout.start(me), text)
            .and_then(|()| file.sync_local()),
    )?;
    Ok(file)
}

/// Warns when records share a name (paired reads, one file given twice): `psa query --locate`
/// names their hits alike. Local; by 64-bit hashes of the names, sorted (16 bytes a record).
fn warn_repeated_names(records: &[Record]) {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let hasher = BuildHasherDefault::<DefaultHasher>::default();
    let mut keyed: Vec<(u64, usize)> = (records.iter().enumerate())
        .map(|(k, r)| (hasher.hash_one(&r.name), k))
        .collect();
    keyed.sort_unstable();
    let repeated: Vec<usize> = (keyed.windows(2))
        .filter(|w| w[0].0 == w[1].0 && records[w[0].1].name == records[w[1].1].name)
        .map(|w| w[0].1.max(w[1].1))
        .collect();
    if let Some(&first) = repeated.iter().min() {
        log::warn!(
            "{} record(s) have the name of an earlier one (the first: '{}', record {}): psa query --locate names their hits alike (its --json output's text_offset tells them apart)",
            repeated.len(),
            records[first].name,
            first + 1
        );
    }
}

/// The index metadata (pe 0; None elsewhere), without its stamps ([`IndexFiles::write`] adds
/// them).
fn index_meta(
    comm: &Comm,
    files: &[InputFile],
    job: &Job,
    n: usize,
    width: usize,
    sequence: bool,
    records: &[Record],
) -> Option<IndexMeta> {
    if comm.rank() != 0 {
        return None;
    }
    // With --revcomp the second half of the records are the first half's twins.
    let forward = match job.seq.revcomp {
        true => &records[..records.len() / 2],
        false => records,
    };
    warn_repeated_names(forward);
    use std::os::unix::ffi::OsStrExt;
    let inputs = files
        .iter()
        .map(|f| InputMeta {
            given: f.path.display().to_string(),
            absolute: std::fs::canonicalize(&f.path)
                .unwrap_or_else(|_| f.path.clone())
                .as_os_str()
                .as_bytes()
                .to_vec(),
            size: f.size,
            modified: f.modified,
            format: f.format.name().into(),
            gzip: f.gzip,
        })
        .collect();
    Some(IndexMeta {
        version: VERSION,
        n: n as u64,
        width: width as u32,
        sequence,
        keep_case: job.seq.keep_case,
        revcomp: job.seq.revcomp,
        inputs,
        records: records
            .iter()
            .map(|r| RecordMeta {
                name: r.name.clone(),
                start: r.start,
                len: r.len,
            })
            .collect(),
        stamps: None,
    })
}

fn comm_max_f64(ctx: &Ctx, x: f64) -> f64 {
    ctx.comm.all_reduce_f64(&[x]).0[0]
}

/// The report as a table for the log (Kulla–Sanders Table 1 style: max and mean over pes).
pub fn report_table(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<5} {:<18} {:>10} {:>10} {:>12} {:>12} {:>14}\n",
        "level", "phase", "max s", "mean s", "max MB sent", "max MB peak", "sum peak B/ch"
    ));
    let n = r.n.max(1) as f64;
    for ph in &r.phases {
        s.push_str(&format!(
            "{:<5} {:<18} {:>10.3} {:>10.3} {:>12.1} {:>12.1} {:>14.1}\n",
            ph.level,
            ph.name,
            ph.max_secs,
            ph.mean_secs,
            ph.max_bytes / 1e6,
            ph.max_peak_rss / 1e6,
            ph.sum_peak_rss / n
        ));
    }
    let peak = r.peak_rss.iter().copied().max().unwrap_or(0);
    s.push_str(&format!(
        "total {:.3} s ({:.2} MB/s); peak RSS max {:.1} MB per pe, {} summed over pes; fullest pe {:.2}× mean",
        r.total_secs,
        r.n as f64 / 1e6 / r.total_secs.max(1e-9),
        peak as f64 / 1e6,
        r.bytes_per_char_text(),
        r.max_imbalance
    ));
    s.push_str(&format!(
        "\nmemory: measured peak {} on the fullest pe, planned {} (measured/planned {:.2}; {})",
        plan::size_text(peak),
        plan::size_text(r.plan.peak),
        peak as f64 / r.plan.peak.max(1) as f64,
        r.plan.budget.map_or("no budget".into(), |b| format!(
            "budget {}",
            plan::size_text(b)
        ))
    ));
    s
}

/// The settings of the run as a JSON object: [`crate::Config::fields`], with the switches the
/// algorithms read (`ctx.tune`).
fn config_json(ctx: &Ctx) -> String {
    let config = crate::Config {
        tune: ctx.tune.clone(),
        ..ctx.config.clone()
    };
    config.to_json()
}

/// A path as JSON: a string, or null for none.
fn path_json(p: Option<&PathBuf>) -> String {
    p.map_or("null".into(), |p| json_str(&p.display().to_string()))
}

/// The report as JSON (for `--stats`), with every setting under `"config"` and the job's own
/// (inputs and their formats, outputs, the width asked for) at the top.
pub fn report_json(r: &Report, ctx: &Ctx, job: &Job) -> String {
    let list = |v: &[u64]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let phases: Vec<String> = r
        .phases
        .iter()
        .map(|ph| {
            format!(
                "    {{\"level\": {}, \"name\": {}, \"max_secs\": {:.6}, \"mean_secs\": {:.6}, \"mean_a2a_secs\": {:.6}, \"max_bytes_sent\": {}, \"total_bytes_sent\": {}, \"max_peak_rss\": {}, \"sum_peak_rss\": {}}}",
                ph.level,
                json_str(&ph.name),
                ph.max_secs,
                ph.mean_secs,
                ph.mean_a2a_secs,
                ph.max_bytes as u64,
                ph.total_bytes as u64,
                ph.max_peak_rss as u64,
                ph.sum_peak_rss as u64
            )
        })
        .collect();
    format!(
        "{{\n  \"input\": {},\n  \"inputs\": [{}],\n  \"format\": {},\n  \"formats\": [{}],\n  \"keep_case\": {},\n  \"revcomp\": {},\n  \"output\": {},\n  \"bwt\": {},\n  \"lcp\": {},\n  \"width_asked\": {},\n  \"force\": {},\n  \"config\": {},\n  \"n\": {},\n  \"pes\": {},\n  \"threads_per_pe\": {},\n  \"algo\": {},\n  \"backend\": {},\n  \"width\": {},\n  \"checked\": {},\n  \"total_secs\": {:.6},\n  \"mb_per_sec\": {:.3},\n  \"peak_rss_bytes_per_pe\": [{}],\n  \"bytes_per_char\": {},\n  \"bytes_sent_per_pe\": [{}],\n  \"max_imbalance\": {:.4},\n  \"refine_rounds\": {},\n  \"bwt_primary\": {},\n  \"mem_per_pe\": {},\n  \"plan\": {},\n  \"planned_peak_bytes\": {},\n  \"measured_max_peak_bytes\": {},\n  \"measured_over_planned\": {:.4},\n  \"phases\": [\n{}\n  ]\n}}\n",
        json_str(&job.inputs.first().map(|p| p.display().to_string()).unwrap_or_default()),
        job.inputs
            .iter()
            .map(|p| json_str(&p.display().to_string()))
            .collect::<Vec<_>>()
            .join(", "),
        job.seq.format.map_or("null".into(), |f| json_str(f.name())),
        job.inputs
            .iter()
            .map(|p| json_str(job.seq.format.unwrap_or_else(|| Format::from_name(p)).name()))
            .collect::<Vec<_>>()
            .join(", "),
        job.seq.keep_case,
        job.seq.revcomp,
        path_json(job.write_sa.then_some(&job.output)),
        path_json(job.bwt.as_ref()),
        path_json(job.lcp.as_ref()),
        json_str(&match job.width {
            Width::Auto => "auto".to_string(),
            Width::Fixed(w) => w.to_string(),
        }),
        job.force,
        config_json(ctx),
        r.n,
        ctx.comm.size(),
        ctx.config.threads,
        json_str(&format!("{:?}", ctx.config.algo).to_lowercase()),
        json_str(ctx.sorter.name()),
        r.width,
        r.checked,
        r.total_secs,
        r.n as f64 / 1e6 / r.total_secs.max(1e-9),
        list(&r.peak_rss),
        r.bytes_per_char().map_or("null".into(), |b| format!("{b:.3}")),
        list(&r.bytes_sent),
        r.max_imbalance,
        r.refine_rounds,
        r.bwt_primary.map_or("null".into(), |p| p.to_string()),
        r.plan.budget.map_or("null".into(), |b| b.to_string()),
        r.plan.to_json(),
        r.plan.peak,
        r.peak_rss.iter().copied().max().unwrap_or(0),
        r.peak_rss.iter().copied().max().unwrap_or(0) as f64 / r.plan.peak.max(1) as f64,
        phases.join(",\n")
    )
}
