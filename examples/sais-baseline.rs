//! `sais-baseline`: the sequential / shared-memory baseline psa is measured against.
//!
//! Reads a whole file into memory, builds its suffix array with libsais (Ilya Grebnov's SA-IS,
//! through the `libsais` crate, OpenMP for `--threads` > 1), and prints one JSON line:
//!
//! ```text
//! {"tool": "sais-baseline", "input": "...", "n": 20000000, "threads": 2, "read_secs": 0.01,
//!  "secs": 1.23, "mb_per_sec": 16.2, "write_secs": 0.0, "peak_rss_bytes": 100663296,
//!  "bytes_per_char": 5.03}
//! ```
//!
//! `--mode` picks what is built: `sa` (the default, above), `bwt` (libsais' BWT: the text's
//! BWT without the sentinel and its primary index, `"primary"` in the line; `-o` writes the n
//! bytes as psa's `--bwt` does) or `lcp` (the suffix array, then libsais' PLCP and LCP, timed
//! apart as `"sa_secs"`, `"plcp_secs"`, `"lcp_secs"`; `secs` is their sum; `-o` writes the LCP
//! array as psa's `--lcp` does). The bwt and lcp modes always use libsais' OpenMP code path
//! with `--threads` threads.
//!
//! `secs` (and `mb_per_sec = n / 1e6 / secs`) cover the construction only; reading and writing are
//! timed separately. `peak_rss_bytes` is VmHWM of the process (text + SA + libsais' workspace),
//! `bytes_per_char` is that divided by n. With `-o OUT` the SA is written in psa's output format:
//! SA[0..n) as little-endian unsigned integers of `--width` bytes, so `cmp` can compare it with
//! psa's output.
//!
//! Set `OMP_WAIT_POLICY=passive` when running it (the bench scripts do): libsais' OpenMP threads
//! otherwise spin after each parallel region, which on a shared machine steals cores from the
//! other processes (and from the MPI ranks of a psa run started next to it) and inflates timings.
//!
//! A plain program: no MPI. Exit status 0 on success, 1 on an error, 2 for bad arguments. An
//! example of the crate, not installed with psa: `cargo build --release --example sais-baseline`
//! builds `target/release/examples/sais-baseline`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use libsais::{SuffixArrayConstruction, ThreadCount};
use psa::internals::json_str;
use psa::io::Width;

/// Suffix array of a file with libsais (the baseline for psa's benchmarks).
#[derive(Parser, Debug)]
#[command(
    name = "sais-baseline",
    version,
    about,
    after_help = "Prints one JSON line: n, threads, read_secs, secs (construction only), mb_per_sec, \
                  write_secs, peak_rss_bytes, bytes_per_char.\n\
                  Run with OMP_WAIT_POLICY=passive so idle OpenMP threads do not spin."
)]
struct Cli {
    /// Input file (any bytes)
    input: PathBuf,
    /// Threads for libsais (1 = its single-threaded code path, > 1 = OpenMP)
    #[arg(long, default_value_t = 1)]
    threads: u16,
    /// Write the SA here in psa's format (n entries of --width bytes, little-endian)
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Bytes per SA entry in the output: auto (4 when every index fits 32 bits, else 5), 4, 5 or 8
    #[arg(long, default_value = "auto", value_parser = Width::parse)]
    width: Width,
    /// What to build: the suffix array, the BWT, or the LCP array (with the SA and PLCP)
    #[arg(long, value_enum, default_value = "sa")]
    mode: Mode,
}

/// `--mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// libsais' suffix array
    Sa,
    /// libsais' BWT (`libsais_bwt`) and primary index
    Bwt,
    /// libsais' suffix array, PLCP and LCP arrays
    Lcp,
}

/// The BWT of `text` and its primary index (0 for an empty text).
fn build_bwt(text: &[u8], threads: u16) -> Result<(Vec<u8>, usize), String> {
    if text.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let err = |e| format!("libsais failed: {e:?}");
    let t = ThreadCount::fixed(threads);
    let b = if text.len() < i32::MAX as usize {
        libsais::BwtConstruction::for_text(text)
            .with_owned_temporary_array_buffer32()
            .multi_threaded(t)
            .run()
            .map_err(err)?
            .into_parts()
    } else {
        libsais::BwtConstruction::for_text(text)
            .with_owned_temporary_array_buffer64()
            .multi_threaded(t)
            .run()
            .map_err(err)?
            .into_parts()
    };
    Ok(b)
}

/// The LCP array of `text` (as `u64`) and the seconds of its SA, PLCP and LCP steps.
fn build_lcp(text: &[u8], threads: u16) -> Result<(Vec<u64>, [f64; 3]), String> {
    if text.is_empty() {
        return Ok((Vec::new(), [0.0; 3]));
    }
    let err = |e| format!("libsais failed: {e:?}");
    let t = ThreadCount::fixed(threads);
    macro_rules! chain {
        ($buffer:ident) => {{
            let t0 = Instant::now();
            let sa = SuffixArrayConstruction::for_text(text)
                .$buffer()
                .multi_threaded(t)
                .run()
                .map_err(err)?;
            let t1 = Instant::now();
            let plcp = sa
                .plcp_construction()
                .multi_threaded(t)
                .run()
                .map_err(err)?;
            let t2 = Instant::now();
            let lcp = plcp
                .lcp_construction()
                .multi_threaded(t)
                .run()
                .map_err(err)?;
            let t3 = Instant::now();
            let (_, lcp, _, _) = lcp.into_parts();
            let secs = [t1 - t0, t2 - t1, t3 - t2].map(|d| d.as_secs_f64());
            (lcp.iter().map(|&x| x as u64).collect(), secs)
        }};
    }
    Ok(match text.len() < i32::MAX as usize {
        true => chain!(in_owned_buffer32),
        false => chain!(in_owned_buffer64),
    })
}

/// `--mode bwt|lcp`: builds, optionally writes, prints the JSON line.
fn run_mode(cli: &Cli, text: &[u8], read_secs: f64, width: usize) -> Result<(), String> {
    let n = text.len();
    let t1 = Instant::now();
    let (bytes, extra, secs) = match cli.mode {
        Mode::Bwt => {
            let (bwt, primary) = build_bwt(text, cli.threads)?;
            let secs = t1.elapsed().as_secs_f64();
            (bwt, format!("\"primary\": {primary}, "), secs)
        }
        _ => {
            let (lcp, [sa, plcp, l]) = build_lcp(text, cli.threads)?;
            let mut b = Vec::with_capacity(n * width);
            if cli.output.is_some() {
                for x in &lcp {
                    b.extend_from_slice(&x.to_le_bytes()[..width]);
                }
            }
            let extra =
                format!("\"sa_secs\": {sa:.6}, \"plcp_secs\": {plcp:.6}, \"lcp_secs\": {l:.6}, ");
            (b, extra, sa + plcp + l)
        }
    };
    let mut write_secs = 0.0;
    if let Some(out) = &cli.output {
        let t2 = Instant::now();
        std::fs::write(out, &bytes)
            .map_err(|e| format!("cannot write output '{}': {e}", out.display()))?;
        write_secs = t2.elapsed().as_secs_f64();
    }
    let peak = psa::stats::peak_rss_bytes();
    println!(
        "{{\"tool\": \"sais-baseline\", \"mode\": \"{}\", \"input\": {}, \"n\": {n}, \"threads\": {}, \"read_secs\": {read_secs:.6}, \
         {extra}\"secs\": {secs:.6}, \"mb_per_sec\": {:.3}, \"write_secs\": {write_secs:.6}, \"width\": {width}, \
         \"peak_rss_bytes\": {peak}, \"bytes_per_char\": {:.3}}}",
        format!("{:?}", cli.mode).to_lowercase(),
        json_str(&cli.input.display().to_string()),
        cli.threads,
        n as f64 / 1e6 / secs.max(1e-9),
        peak as f64 / n.max(1) as f64
    );
    Ok(())
}

/// The SA in whichever integer type libsais filled.
enum Sa {
    I32(Vec<i32>),
    I64(Vec<i64>),
}

fn build(text: &[u8], threads: u16) -> Result<Sa, String> {
    if text.is_empty() {
        return Ok(Sa::I32(Vec::new()));
    }
    let err = |e| format!("libsais failed: {e:?}");
    // libsais' 32-bit interface takes n < 2^31; past that use 64-bit indices.
    if text.len() < i32::MAX as usize {
        let c = SuffixArrayConstruction::for_text(text).in_owned_buffer32();
        let r = if threads > 1 {
            c.multi_threaded(ThreadCount::fixed(threads)).run()
        } else {
            c.single_threaded().run()
        };
        Ok(Sa::I32(r.map_err(err)?.into_vec()))
    } else {
        let c = SuffixArrayConstruction::for_text(text).in_owned_buffer64();
        let r = if threads > 1 {
            c.multi_threaded(ThreadCount::fixed(threads)).run()
        } else {
            c.single_threaded().run()
        };
        Ok(Sa::I64(r.map_err(err)?.into_vec()))
    }
}

fn write_sa(path: &PathBuf, sa: &Sa, width: usize) -> std::io::Result<()> {
    let f = std::fs::File::create(path)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 22, f);
    match sa {
        Sa::I32(v) => {
            for &x in v {
                w.write_all(&(x as u64).to_le_bytes()[..width])?;
            }
        }
        Sa::I64(v) => {
            for &x in v {
                w.write_all(&(x as u64).to_le_bytes()[..width])?;
            }
        }
    }
    w.into_inner().map_err(|e| e.into_error())?.sync_data()
}

fn run(cli: &Cli) -> Result<(), String> {
    if cli.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    let t0 = Instant::now();
    let text = std::fs::read(&cli.input)
        .map_err(|e| format!("cannot read input '{}': {e}", cli.input.display()))?;
    let read_secs = t0.elapsed().as_secs_f64();
    let n = text.len();
    let width = cli.width.resolve(n).map_err(|e| e.to_string())?;
    if cli.mode != Mode::Sa {
        return run_mode(cli, &text, read_secs, width);
    }

    let t1 = Instant::now();
    let sa = build(&text, cli.threads)?;
    let secs = t1.elapsed().as_secs_f64();

    let mut write_secs = 0.0;
    if let Some(out) = &cli.output {
        let t2 = Instant::now();
        write_sa(out, &sa, width)
            .map_err(|e| format!("cannot write output '{}': {e}", out.display()))?;
        write_secs = t2.elapsed().as_secs_f64();
    }
    let peak = psa::stats::peak_rss_bytes();
    println!(
        "{{\"tool\": \"sais-baseline\", \"input\": {}, \"n\": {n}, \"threads\": {}, \"read_secs\": {read_secs:.6}, \
         \"secs\": {secs:.6}, \"mb_per_sec\": {:.3}, \"write_secs\": {write_secs:.6}, \"width\": {width}, \
         \"peak_rss_bytes\": {peak}, \"bytes_per_char\": {:.3}}}",
        json_str(&cli.input.display().to_string()),
        cli.threads,
        n as f64 / 1e6 / secs.max(1e-9),
        peak as f64 / n.max(1) as f64
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sais-baseline: error: {e}");
            ExitCode::from(1)
        }
    }
}
