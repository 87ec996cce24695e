//! psa as a library in a user's rsmpi program: every pe reads its own slice of a file, the pes
//! build the suffix array together, check it with the distributed checker, write it (each pe at
//! its own offset), and then each pe reads its part of the written file back and compares.
//!
//! ```text
//! cargo build --release --example library
//! mpirun -n 3 target/release/examples/library tests/data/example.txt /tmp/example.sa [dc3]
//! ```
//!
//! Exits 0 with one line from pe 0 when every check passed; on an error every pe leaves with
//! the error's exit code and pe 0 prints the message.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use psa::io::{agreed_input_len, read_distributed, OutputFile, Width};
use psa::{Algo, Config, Ctx, Error};

fn main() -> ExitCode {
    // Serialized: psa may call MPI from a thread of its own pool (see `psa::Ctx`).
    let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Serialized) else {
        eprintln!("library: cannot initialise MPI");
        return ExitCode::FAILURE;
    };
    psa::abort_on_panic();

    let args: Vec<String> = std::env::args().skip(1).collect();
    let algo = match args.get(2).map(String::as_str) {
        None | Some("css") => Algo::Css,
        Some("dc3") => Algo::Dc3,
        Some(other) => {
            eprintln!("library: unknown algorithm '{other}' (css or dc3)");
            return ExitCode::from(2);
        }
    };
    let (input, output) = match (args.first(), args.get(1)) {
        (Some(i), Some(o)) => (PathBuf::from(i), PathBuf::from(o)),
        _ => {
            eprintln!("usage: library INPUT OUTPUT [css|dc3]");
            return ExitCode::from(2);
        }
    };

    let config = Config {
        algo,
        ..Config::default()
    };
    let ctx = Ctx::new(universe.world(), config);
    match run(&ctx, &input, &output) {
        Ok(n) => {
            if ctx.comm.rank() == 0 {
                println!(
                    "library: suffix array of {n} characters built on {} pes ({algo:?}), \
                     checked, written to {} and read back",
                    ctx.comm.size(),
                    output.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            // Every pe has the same verdict (the library agrees on errors); pe 0 says it.
            if ctx.comm.rank() == 0 {
                eprintln!("library: {e}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}

/// Reads, builds, checks, writes, reads back. Returns the text's length. Collective.
fn run(ctx: &Ctx, input: &Path, output: &Path) -> psa::Result<usize> {
    let comm = &ctx.comm;
    let me = comm.rank();

    // Each pe reads only its block of the file.
    let n = agreed_input_len(comm, input)?;
    let (text, layout) = read_distributed(comm, input, n)?;

    // Exit: this pe holds SA[start..end) of its own block.
    let sa = psa::suffix_array(ctx, &text)?;
    psa::check(ctx, &text, &sa, &layout)?;

    // Every pe writes its entries at its offset; pe 0 puts the file in place.
    let width = Width::Auto.resolve(n)?;
    let out = OutputFile::create(comm, output, &[input], false, n, width)?;
    out.write(comm, layout.start(me), &sa)?;
    out.commit(comm)?;

    // What the file holds at this pe's range is what this pe built.
    let back = read_entries(output, layout.start(me), sa.len(), width);
    let same = back.map(|b| b == sa).unwrap_or(false);
    comm.agree(if same {
        Ok(())
    } else {
        Err(Error::CheckFailed(format!(
            "pe {me}: the written file does not hold this pe's entries"
        )))
    })?;
    Ok(n)
}

/// `count` little-endian entries of `width` bytes from entry `first` of the file at `path`.
fn read_entries(
    path: &Path,
    first: usize,
    count: usize,
    width: usize,
) -> std::io::Result<Vec<u64>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = vec![0u8; count * width];
    file.read_exact_at(&mut bytes, (first * width) as u64)?;
    Ok(bytes
        .chunks_exact(width)
        .map(|e| {
            let mut le = [0u8; 8];
            le[..width].copy_from_slice(e);
            u64::from_le_bytes(le)
        })
        .collect())
}
