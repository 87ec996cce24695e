//! `psa`: build the suffix array of a file on every MPI process of the job.

mod budget;
mod cli;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use mpi::traits::Communicator;
use psa::driver::{report_table, run, Job};
use psa::{say, Ctx, Error};

use cli::{Cli, QueryCli, RepeatsCli};

/// A failed allocation ends the whole job with one clear message (see `psa::alloc`).
#[global_allocator]
static ALLOC: psa::alloc::AbortOnOom = psa::alloc::AbortOnOom;

fn init_logging(cli: &Cli, rank: usize) {
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "info",
        (false, 1) => "info",
        _ => "debug",
    };
    // Only pe 0 reports progress; the others speak up for warnings (or everything with -vv), and
    // with -q only for errors, as pe 0.
    let level = if rank != 0 && cli.verbose < 2 && !cli.quiet {
        "warn"
    } else {
        level
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format(move |buf, rec| {
            writeln!(
                buf,
                "[psa pe {rank} {}] {}",
                rec.level().as_str().to_lowercase(),
                rec.args()
            )
        })
        .init();
}

/// The cores this process may run on (its affinity mask).
fn usable_cores() -> usize {
    std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(1)
}

/// Threads per pe: as asked, but at most the cores the pe may run on (more only slow it down);
/// None: the library's default (the node's cores shared by its pes).
fn threads_per_pe(asked: Option<usize>, rank: usize) -> Option<usize> {
    let cores = usable_cores();
    match asked {
        Some(t) if t > cores => {
            if rank == 0 {
                log::warn!(
                    "--threads {t} is more than the {cores} core(s) this pe may run on: using {cores} (give a pe more cores with `mpirun --map-by slot:PE={t} --bind-to core` or `--bind-to none`)"
                );
            }
            Some(cores)
        }
        asked => asked,
    }
}

/// clap's message: help and the version on standard output as clap writes them, an error as
/// one write of its lines ([`say`]).
fn print_clap(e: &clap::Error) {
    match e.use_stderr() {
        true => say(e.render().to_string().trim_end()),
        false => {
            let _ = e.print();
        }
    }
}

/// This process's rank as its launcher (mpirun, srun) tells it, before MPI starts: argument
/// errors are printed by rank 0 alone. None when no launcher started it. A variable that is not
/// a rank is ignored with a warning ([`budget::env_value`]), which the process that prints the
/// argument error prints.
fn launcher_rank(warnings: &mut Vec<String>) -> Option<usize> {
    let var = |v: &str| std::env::var(v).ok();
    let what = ("a whole number", "not taken as this process's rank");
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| budget::env_value(&var, v, what, |r| r.parse().ok(), warnings))
}

/// Where compiled GPU kernels are kept by default: `$XDG_CACHE_HOME/psa`, else `~/.cache/psa`.
fn default_kernel_cache() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(|d| PathBuf::from(d).join("psa"))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/psa")))
}

/// `psa query …`: no MPI at all (the binary runs without a launcher), on rayon's threads.
fn query_main() -> ExitCode {
    let args =
        std::iter::once(std::ffi::OsString::from("psa query")).chain(std::env::args_os().skip(2));
    let cli = match QueryCli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            print_clap(&e);
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if cli.pattern.is_empty() && cli.patterns.is_none() {
        say("psa query: error: give patterns, or --patterns FILE");
        return ExitCode::from(2);
    }
    // Out of memory, a query speaks of itself (it has no pes or phases).
    psa::alloc::in_query();
    if let Some(t) = cli.threads {
        // As the build's: at most the cores this process may run on (more only slow it down,
        // and thousands of threads take minutes to start).
        let cores = usable_cores();
        if t > cores {
            say(&format!(
                "psa query: warning: --threads {t} is more than the {cores} core(s) this process may run on: using {cores}"
            ));
        }
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(t.min(cores))
            .build_global();
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    let warn = |w: &str| say(&format!("psa query: warning: {w}"));
    match psa::io::query::run(&cli.query(), &mut out, warn) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            say(&format!("psa query: error: {e}"));
            ExitCode::from(e.exit_code())
        }
    }
}

fn main() -> ExitCode {
    // `psa query` needs no MPI: decided before anything starts it. (An input file named
    // `query` is given as `./query`.)
    if std::env::args_os().nth(1).is_some_and(|a| a == "query") {
        return query_main();
    }
    // libsais (base cases) uses OpenMP; spinning idle OpenMP threads slow everything else on a
    // busy node by up to 10×. Set before any thread starts.
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        std::env::set_var("OMP_WAIT_POLICY", "passive");
    }
    let parsed = match std::env::args_os().nth(1).is_some_and(|a| a == "repeats") {
        // `psa repeats …`: its own command line, the build's settings. (An input file named
        // `repeats` is given as `./repeats`.)
        true => repeats_cli().map(|(cli, job)| (cli, Some(job))),
        false => Cli::try_parse().map(|cli| (cli, None)),
    };
    let (cli, repeats) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            // Every pe parsed the same argv and reached the same verdict; one prints it.
            let code = if e.use_stderr() { 2 } else { 0 };
            let mut warnings = Vec::new();
            if launcher_rank(&mut warnings).unwrap_or(0) == 0 {
                for w in warnings {
                    say(&format!("psa: warning: {w}"));
                }
                print_clap(&e);
            } else {
                // A launcher ends the job at the first non-zero exit, possibly before rank 0
                // has printed: the others leave at once with 0, and the job's status is rank
                // 0's (mpirun's first non-zero exit, srun's largest).
                return ExitCode::SUCCESS;
            }
            return ExitCode::from(code);
        }
    };
    let Some(universe) = mpi::initialize() else {
        let e = Error::System("MPI could not be initialised".into());
        say(&format!("psa: error: {e}"));
        return ExitCode::from(e.exit_code());
    };
    let world = universe.world();
    let rank = world.rank() as usize;
    init_logging(&cli, rank);
    // A panic on one pe must end the whole job, not leave the others waiting in a collective.
    psa::abort_on_panic();

    let mut config = cli.config(default_kernel_cache());
    config.threads = threads_per_pe(cli.threads, rank).unwrap_or(0);
    let size = world.size() as usize;
    let mut ctx = Ctx::new(world, config);
    // The library's parallel work runs on the calling thread when its pool has the context's
    // thread count (Ctx::install): size the global pool so, and MPI stays on this thread. First,
    // so that the default budget sees the address space its threads hold. A pe that cannot
    // start its threads ends the job (agreed: no pe goes on to a collective alone).
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.config.threads)
        .build_global()
        .map_err(|e| {
            Error::OutOfMemory(format!(
                "could not start {} threads on this pe ({e}); a limit on processes or address space (ulimit -u, ulimit -v) may stop them: try --threads 1",
                ctx.config.threads
            ))
        });
    if let Err(e) = ctx.comm.agree(pool) {
        return exit_with(e, size, rank);
    }
    if ctx.config.mem_per_pe.is_none() {
        // Collective: every pe asks for the pes on its node, then all take the smallest default
        // (nodes differ, and so may their pes' counts and available memory): every pe must plan
        // with the same budget, or their plans, and so their collectives, would differ.
        let local_pes = ctx.comm.local_size();
        let own = budget::default_budget(
            &|v| std::env::var(v).ok(),
            std::path::Path::new("/"),
            local_pes,
            rank == 0,
        );
        let least = ctx
            .comm
            .all_reduce_min(own.as_ref().map_or(u64::MAX, |b| b.0));
        if least != u64::MAX {
            ctx.config.mem_per_pe = Some(least);
            ctx.config.mem_per_pe_from = match own {
                Some((bytes, from)) if bytes == least => from,
                _ => "the smallest default over the pes".into(),
            };
        }
    }
    if let Some(given) = ctx.config.mem_per_pe.filter(|_| cli.mem_per_pe.is_some()) {
        cap_to_hard_limit(&mut ctx, given);
    }
    if rank == 0 && cli.verbose >= 1 {
        log::info!("settings: {}", ctx.config.summary());
    }
    let result = ctx.comm.agree(psa::backend_for(&ctx)).and_then(|sorter| {
        let ctx = ctx.with_sorter(sorter);
        if let Some(job) = &repeats {
            return repeats_job(&ctx, job, cli.verbose);
        }
        if cli.infini_gram {
            return infini_gram(&ctx, &cli);
        }
        let job = Job {
            output: cli.output.clone().unwrap_or_else(|| {
                let mut s = cli.inputs[0].clone().into_os_string();
                s.push(".sa");
                PathBuf::from(s)
            }),
            write_sa: !cli.no_sa,
            bwt: cli.bwt.clone(),
            lcp: cli.lcp.clone(),
            inputs: cli.inputs.clone(),
            seq: cli.seq_options(),
            token_width: cli.token_width.unwrap_or_default(),
            token_ids: cli.token_width.is_some(),
            doc_sep: cli.doc_sep,
            infini_gram: false,
            width: cli.width,
            check: cli.check,
            stats: cli.stats.clone(),
            force: cli.force,
            show_plan: cli.verbose >= 1,
        };
        let report = run(&ctx, &job)?;
        if rank == 0 {
            if cli.verbose >= 1 {
                log::info!("phases (max and mean over pes):\n{}", report_table(&report));
            } else {
                // The BWT's primary index file is written beside a regular file only.
                let primary = (job.bwt.as_ref())
                    .filter(|b| std::fs::metadata(b).is_ok_and(|m| m.is_file()))
                    .map(|b| {
                        let mut s = b.clone().into_os_string();
                        s.push(".primary");
                        PathBuf::from(s)
                    });
                let written: Vec<String> = [
                    job.write_sa.then_some(&job.output),
                    job.bwt.as_ref(),
                    primary.as_ref(),
                    job.lcp.as_ref(),
                ]
                .into_iter()
                .flatten()
                .map(|p| format!("'{}'", p.display()))
                .collect();
                log::info!(
                    "wrote {} ({} entries) in {:.3} s ({:.2} MB/s), {}",
                    written.join(", "),
                    report.n,
                    report.total_secs,
                    report.n as f64 / 1e6 / report.total_secs.max(1e-9),
                    report.bytes_per_char_text()
                );
            }
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => exit_with(e, size, rank),
    }
}

/// `psa repeats …` parsed: the build's command line that gives its settings, and the job.
fn repeats_cli() -> Result<(Cli, psa::driver::repeats::Repeats), clap::Error> {
    let args =
        std::iter::once(std::ffi::OsString::from("psa repeats")).chain(std::env::args_os().skip(2));
    RepeatsCli::try_parse_from(args)?.into_parts()
}

/// `psa repeats`: the duplicate spans written ([`psa::driver::repeats::run`]), reported by pe 0.
/// Collective.
fn repeats_job(ctx: &Ctx, job: &psa::driver::repeats::Repeats, verbose: u8) -> Result<(), Error> {
    let report = psa::driver::repeats::run(ctx, job)?;
    if ctx.comm.rank() == 0 {
        if verbose >= 1 {
            log::info!("phases (max and mean over pes):\n{}", report.table());
        }
        log::info!(
            "wrote {} spans covering {} of {} tokens to '{}' in {:.3} s",
            report.spans,
            report.covered,
            report.n,
            job.output.display(),
            report.total_secs
        );
    }
    Ok(())
}

/// `psa --infini-gram DIR`: infini-gram's tables of the directory's shards
/// ([`psa::driver::infini_gram::run_dir`]), each job's phases shown with -v. Collective.
fn infini_gram(ctx: &Ctx, cli: &Cli) -> Result<(), Error> {
    let dir = match cli.inputs.as_slice() {
        [dir] => dir.clone(),
        more => {
            return ctx.comm.agree(Err(Error::Usage(format!(
                "--infini-gram takes one directory (infini-gram's index, with its tokenized.N files), not {} inputs",
                more.len()
            ))))
        }
    };
    let ig = psa::driver::infini_gram::InfiniGram {
        dir,
        token_width: cli.token_width.unwrap_or_default(),
        width: cli.width,
        check: cli.check,
        force: cli.force,
        show_plan: cli.verbose >= 1,
    };
    let built = psa::driver::infini_gram::run_dir(ctx, &ig)?;
    if ctx.comm.rank() == 0 && cli.verbose >= 1 {
        for (shard, report) in &built {
            log::info!(
                "phases of table.{} (max and mean over pes):\n{}",
                shard.n,
                report_table(report)
            );
        }
    }
    Ok(())
}

/// Caps a `--mem-per-pe` above what the kernel enforces per pe (the cgroup's limit shared by
/// the node's pes: the smallest over all pes), loudly: with that budget the plan
/// would let a pe grow until the kernel ends it without a word from psa. Collective.
fn cap_to_hard_limit(ctx: &mut Ctx, given: u64) {
    let local_pes = ctx.comm.local_size();
    let own = budget::hard_limit_per_pe(std::path::Path::new("/"), local_pes);
    let least = ctx
        .comm
        .all_reduce_min(own.as_ref().map_or(u64::MAX, |b| b.0));
    if given <= least {
        return;
    }
    let from = match own {
        Some((bytes, from)) if bytes == least => from,
        _ => "the smallest cgroup limit per pe over the pes".into(),
    };
    if ctx.comm.rank() == 0 {
        log::warn!(
            "--mem-per-pe {} is above what the kernel lets each pe have ({}: {}): planning with {} instead (ask the batch system for more memory, or spread the job over more nodes)",
            psa::plan::size_text(given),
            from,
            psa::plan::size_text(least),
            psa::plan::size_text(least)
        );
    }
    ctx.config.mem_per_pe = Some(least);
    ctx.config.mem_per_pe_from = format!(
        "{from} (--mem-per-pe {} capped)",
        psa::plan::size_text(given)
    );
}

/// The exit of a pe whose run failed with `e` (agreed over the pes, [`psa::comm::Comm::agree`]):
/// the failing pe (the lowest, when several failed) prints the message as one line, the others
/// ([`Error::Remote`]) leave with its status without a word.
fn exit_with(e: Error, size: usize, rank: usize) -> ExitCode {
    if !matches!(e, Error::Remote { .. }) {
        // Where it failed matters when pes run on several nodes (a path that one node lacks).
        say(&match size {
            1 => format!("psa: error: {e}"),
            _ => format!(
                "psa: error on pe {rank} (host {}): {e}",
                psa::io::host_name()
            ),
        });
    }
    ExitCode::from(e.exit_code())
}
