//! `psa`: build the suffix array of a file on every MPI process of the job.

mod cli;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use mpi::traits::Communicator;
use psa::driver::{report_json, report_table, run, Job};
use psa::{Ctx, Error};

use cli::Cli;

fn init_logging(cli: &Cli, rank: usize) {
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "info",
        (false, 1) => "info",
        _ => "debug",
    };
    // Only pe 0 reports progress; the others speak up for warnings (or everything with -vv).
    let level = if rank != 0 && cli.verbose < 2 {
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

/// Where compiled GPU kernels are kept by default: `$XDG_CACHE_HOME/psa`, else `~/.cache/psa`.
fn default_kernel_cache() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(|d| PathBuf::from(d).join("psa"))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/psa")))
}

fn main() -> ExitCode {
    // libsais (base cases) uses OpenMP; spinning idle OpenMP threads slow everything else on a
    // busy node by up to 10×. Set before any thread starts.
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        std::env::set_var("OMP_WAIT_POLICY", "passive");
    }
    let cli = Cli::parse();
    let Some(universe) = mpi::initialize() else {
        eprintln!("psa: error: MPI could not be initialised");
        return ExitCode::from(1);
    };
    let world = universe.world();
    let rank = world.rank() as usize;
    init_logging(&cli, rank);
    // A panic on one pe must end the whole job, not leave the others waiting in a collective.
    psa::abort_on_panic();

    let ctx = Ctx::new(world, cli.config(default_kernel_cache()));
    // The library's parallel work runs on the calling thread when its pool has the context's
    // thread count (Ctx::install): size the global pool so, and MPI stays on this thread.
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.config.threads)
        .build_global()
    {
        log::warn!("could not size the thread pool: {e}");
    }
    if rank == 0 && cli.verbose >= 1 {
        log::info!("settings: {}", ctx.config.summary());
    }
    let result = ctx.comm.agree(psa::backend_for(&ctx)).and_then(|sorter| {
        let ctx = ctx.with_sorter(sorter);
        let job = Job {
            output: cli.output.clone().unwrap_or_else(|| {
                let mut s = cli.input.clone().into_os_string();
                s.push(".sa");
                PathBuf::from(s)
            }),
            input: cli.input.clone(),
            width: cli.width,
            check: cli.check,
            stats: cli.stats.clone(),
        };
        let report = run(&ctx, &job)?;
        if rank == 0 {
            if cli.verbose >= 1 {
                log::info!("phases (max and mean over pes):\n{}", report_table(&report));
            } else {
                log::info!(
                    "wrote '{}' ({} entries) in {:.3} s ({:.2} MB/s), {:.1} bytes/char",
                    job.output.display(),
                    report.n,
                    report.total_secs,
                    report.n as f64 / 1e6 / report.total_secs.max(1e-9),
                    report.bytes_per_char()
                );
            }
        }
        let written = match (&job.stats, rank) {
            (Some(path), 0) => std::fs::write(path, report_json(&report, &ctx, &job))
                .map_err(|e| Error::io("write stats to", path, e)),
            _ => Ok(()),
        };
        ctx.comm.agree(written)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Remote { .. }) => ExitCode::from(1),
        Err(e) => {
            eprintln!("psa: error: {e}");
            ExitCode::from(1)
        }
    }
}
