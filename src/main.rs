//! `psa`: build the suffix array of a file on every MPI process of the job.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgAction, Parser, ValueEnum};
use psa::driver::{report_table, run, Job};
use psa::io::Width;
use psa::{Algo, Backend, Config, Ctx, Error};

/// A failed allocation ends the whole job with one clear message (see `psa::alloc`).
#[global_allocator]
static ALLOC: psa::alloc::AbortOnOom = psa::alloc::AbortOnOom;

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
The file is written under a temporary name beside OUTPUT, its space reserved at the start, and
renamed when complete, so OUTPUT never holds a partial result. A device or FIFO (-o /dev/null) is
written through. psa refuses to overwrite its input, a directory or special file, and (without
--force) a read-only file. Exit status: 0 on success, 1 on any error (reported once, by the
lowest pe that failed), 2 for bad arguments and refused outputs (before the input is read).
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
    /// Threads per pe [default: cores of the node / pes on the node; at most the cores the pe
    /// may run on]
    #[arg(long, value_parser = at_least::<1>)]
    threads: Option<u64>,
    /// Verify the result with the distributed checker before writing it
    #[arg(long)]
    check: bool,
    /// Write per-phase times, bytes sent, peak memory per pe as JSON to FILE
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// Replace an output or stats file even when it is read-only
    #[arg(long)]
    force: bool,
    /// Use the GPU (pe r uses device r mod device count; build with --features gpu): a text that
    /// fits pe 0's device (about free memory / 63 characters) is built whole there, at p > 1
    /// streamed through pe 0 and back; larger texts run the distributed algorithm with local sorts,
    /// base cases and recursion levels that fit on the GPU
    #[arg(long)]
    gpu: bool,
    /// Subproblems of at most this many characters are solved sequentially on one pe
    #[arg(long, default_value_t = 1 << 22, value_name = "N",
          value_parser = at_least::<4>)]
    base_case: u64,
    /// More log output (-v: per-phase table, -vv: every pe's debug output)
    #[arg(short, long, action = ArgAction::Count)]
    verbose: u8,
    /// Only errors
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,
}

/// A whole number of at least MIN, with a message that says so.
fn at_least<const MIN: u64>(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v) if v >= MIN => Ok(v),
        Ok(v) => Err(format!("must be at least {MIN}, not {v}")),
        Err(_) => Err(format!("'{s}' is not a whole number")),
    }
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

/// The cores this process may run on (its affinity mask).
fn usable_cores() -> usize {
    std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(1)
}

/// Threads per pe: as asked, but at most the cores the pe may run on (more only slow it down),
/// by default those cores shared by the pes of the node.
fn threads_per_pe(asked: Option<u64>, local_pes: usize, rank: usize) -> usize {
    let cores = usable_cores();
    match asked {
        Some(t) if t as usize > cores => {
            if rank == 0 {
                log::warn!(
                    "--threads {t} is more than the {cores} core(s) this pe may run on: using {cores} (give a pe more cores with `mpirun --map-by slot:PE={t} --bind-to core` or `--bind-to none`)"
                );
            }
            cores
        }
        Some(t) => t as usize,
        None => (cores / local_pes.max(1)).max(1),
    }
}

/// This process's rank as its launcher (mpirun, srun) tells it, before MPI starts: argument
/// errors are printed by rank 0 alone. None when no launcher started it.
fn launcher_rank() -> Option<usize> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

fn main() -> ExitCode {
    // libsais (base cases) uses OpenMP; spinning idle OpenMP threads slow everything else on a
    // busy node by up to 10×. Set before any thread starts.
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        std::env::set_var("OMP_WAIT_POLICY", "passive");
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Every pe parsed the same argv and reached the same verdict; one prints it.
            if launcher_rank().unwrap_or(0) == 0 {
                let _ = e.print();
            }
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
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

    let threads = threads_per_pe(cli.threads, comm0.local_size(), rank);
    let size = comm0.size();
    let config = Config {
        algo: match cli.algo {
            AlgoArg::Dc3 => Algo::Dc3,
            AlgoArg::Css => Algo::Css,
        },
        backend: if cli.gpu { Backend::Gpu } else { Backend::Cpu },
        threads: threads.max(1),
        base_case: cli.base_case as usize,
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
            force: cli.force,
        };
        let report = run(&ctx, &job)?;
        if rank == 0 {
            if cli.verbose >= 1 {
                log::info!("phases (max and mean over pes):\n{}", report_table(&report));
            } else {
                log::info!(
                    "wrote '{}' ({} entries) in {:.3} s ({:.2} MB/s), {}",
                    job.output.display(),
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
        // The failing pe printed the message.
        Err(e @ Error::Remote { .. }) => ExitCode::from(e.exit_code()),
        Err(e) => {
            // Where it failed matters when pes run on several nodes (a path that one node lacks).
            match size {
                1 => eprintln!("psa: error: {e}"),
                _ => eprintln!(
                    "psa: error on pe {rank} (host {}): {e}",
                    psa::io::output::host_name()
                ),
            }
            ExitCode::from(e.exit_code())
        }
    }
}
