//! `psa`: build the suffix array of a file on every MPI process of the job.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgAction, Parser, ValueEnum};
use psa::driver::{report_json, report_table, run, Job};
use psa::io::Width;
use psa::{Algo, Backend, Config, Ctx, Error};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum AlgoArg {
    /// parallel DC3 (Kulla & Sanders): sample sorts, prefix-sum naming, distributed recursion
    Dc3,
    /// parallel CSS: 8-character keys, one sample sort, prefix doubling on equal runs; texts
    /// that a sample shows to be repetitive go to DC7 (difference cover mod 7)
    Css,
}

const AFTER_HELP: &str = "\
Examples:
  psa small.txt                                   one process; writes small.txt.sa
  mpirun -n 64 psa genome.txt                     64 processes (pes), each reads 1/64 of the input
  mpirun -n 16 psa --algo dc3 --width 5 -o /scratch/web.sa web.txt
  mpirun -n 2 --bind-to none psa --threads 8 x.txt  without --bind-to none, Open MPI pins each of
                                                  up to 2 processes to one core
  srun --mpi=pmix psa --check corpus.txt          in a Slurm job (Open MPI; see slurm/psa.sbatch)

Output: SA[0..n) as little-endian unsigned integers of --width bytes each (n × width bytes).
The file is written under a temporary name beside OUTPUT and renamed when complete, so OUTPUT
never holds a partial result. Exit status: 0 on success, 1 on any error (reported once, by the
lowest pe that failed), 2 for bad arguments.
Environment: RUST_LOG overrides -v/-q (e.g. RUST_LOG=debug shows every pe's phases).";

/// Distributed suffix array construction on MPI.
#[derive(Parser, Debug)]
#[command(name = "psa", version, about, after_help = AFTER_HELP)]
struct Cli {
    /// Input file (any bytes; every pe reads only its own slice)
    input: PathBuf,
    /// Output file [default: INPUT.sa]
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Algorithm (css is the faster on real texts; both give the same output)
    #[arg(long, value_enum, default_value = "css")]
    algo: AlgoArg,
    /// Bytes per SA entry: auto (4 when every index fits 32 bits, else 5), 4, 5 or 8
    #[arg(long, default_value = "auto", value_parser = Width::parse)]
    width: Width,
    /// Threads per pe [default: cores of the node / pes on the node]
    #[arg(long)]
    threads: Option<usize>,
    /// Verify the result with the distributed checker before writing it
    #[arg(long)]
    check: bool,
    /// Write per-phase times, bytes sent, peak memory per pe as JSON to FILE
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// Use the GPU (pe r uses device r mod device count; build with --features gpu): a text that
    /// fits pe 0's device (about free memory / 63 characters) is built whole there, at p > 1
    /// streamed through pe 0 and back; larger texts run the distributed algorithm with local sorts,
    /// base cases and recursion levels that fit on the GPU
    #[arg(long)]
    gpu: bool,
    /// Subproblems of at most this many characters are solved sequentially on one pe
    #[arg(long, default_value_t = 1 << 22, value_name = "N")]
    base_case: usize,
    /// More log output (-v: per-phase table, -vv: every pe's debug output)
    #[arg(short, long, action = ArgAction::Count)]
    verbose: u8,
    /// Only errors
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,
}

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

fn default_threads(ctx_local_pes: usize) -> usize {
    let cores = std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(1);
    (cores / ctx_local_pes.max(1)).max(1)
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
    let comm0 = psa::comm::Comm::new(universe.world());
    let rank = comm0.rank();
    init_logging(&cli, rank);

    // A panic on one pe must end the whole job, not leave the others waiting in a collective.
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("psa: internal error on pe {rank}: {info}");
        psa::io::remove_partial_now();
        // No collective here (Comm::new broadcasts): the other pes may be anywhere.
        psa::comm::abort_world(101);
    }));

    let threads = cli
        .threads
        .unwrap_or_else(|| default_threads(comm0.local_size()));
    let config = Config {
        algo: match cli.algo {
            AlgoArg::Dc3 => Algo::Dc3,
            AlgoArg::Css => Algo::Css,
        },
        backend: if cli.gpu { Backend::Gpu } else { Backend::Cpu },
        threads: threads.max(1),
        base_case: cli.base_case,
    };
    drop(comm0);
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .num_threads(config.threads)
        .build_global()
    {
        log::warn!("could not size the thread pool: {e}");
    }
    let ctx = Ctx::new(world, config);
    let result = ctx.comm.agree(psa::backend_for(&ctx)).and_then(|sorter| {
        let ctx = Ctx { sorter, ..ctx };
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
