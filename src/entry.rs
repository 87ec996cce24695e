//! The public entry: the suffix array of a distributed text, the choice between the device and
//! the distributed algorithms, the backend the configuration asks for, and the panic hook that
//! ends the whole job. The top of the library: it uses the algorithms and the run context, and
//! nothing below calls back into it.

use crate::algo;
use crate::algo::sink::SaSink;
use crate::comm;
use crate::config::{Algo, Backend, Knobs};
use crate::ctx::{Ctx, Settings};
use crate::dist;
use crate::error::{Error, Result};
use crate::io;
use crate::local::{self, LocalSort};
use crate::token::{Token, TokenWidth};

/// Builds the suffix array of a distributed text. Collective.
///
/// Entry: each pe holds a contiguous slice of the text, in pe order (any lengths, empty allowed).
/// Exit: each pe holds the suffix array entries for the same global range as its slice, as global
/// positions. Suffixes compare as byte strings; a proper prefix sorts first.
pub fn suffix_array(ctx: &Ctx, text: &[u8]) -> Result<Vec<u64>> {
    let built = build(ctx, Knobs::configured(&ctx.config), text, None)?;
    Ok(built.sa.expect("a sink that holds returns the part"))
}

/// The suffix array of a distributed text for `out` (created for it, with room for n entries).
/// When `out` is a regular file ([`io::OutputFile::is_positional`]) no pe holds the suffix
/// array: level 0 of the distributed algorithms writes every entry into it as soon as it is
/// final (a merge round's part at its SA index, pCSS' placed part at its offset), and with
/// `--gpu`, when the text fits pe 0's device, pe 0 writes the device's suffix array as it
/// comes (at p = 1 too: the host holds a piece of its 32-bit entries at a time); every pe gets
/// Ok(None) and may read its part back ([`io::OutputFile::read_part`]) until the caller commits
/// `out`. For a device or FIFO every pe gets Ok(Some(its part)), which
/// the caller writes ([`io::OutputFile::write`]). Collective.
pub fn suffix_array_or_write(
    ctx: &Ctx,
    text: &[u8],
    out: &io::OutputFile,
) -> Result<Option<Vec<u64>>> {
    Ok(build(ctx, Knobs::configured(&ctx.config), text, Some(out))?.sa)
}

/// What a build gives back: this pe's part of the suffix array (None where it was written into
/// the output file), and pCSS' doubling rounds (0 for the other paths).
pub(crate) struct Built {
    pub(crate) sa: Option<Vec<u64>>,
    pub(crate) refine_rounds: usize,
}

/// [`suffix_array_tokens`] (`out` None) or [`suffix_array_tokens_or_write`] with `knobs` (a
/// plan's, or the configuration's), on the context's threads. Collective.
pub(crate) fn build<T: Token>(
    ctx: &Ctx,
    knobs: Knobs,
    text: &[T],
    out: Option<&io::OutputFile>,
) -> Result<Built> {
    ctx.install(|ctx| {
        let sink = match out {
            Some(out) if out.is_positional() => SaSink::to_file(out),
            _ => SaSink::hold(),
        };
        ctx.sampling(|| {
            let built = match T::WIDTH {
                TokenWidth::W1 => suffix_array_here(ctx, knobs, bytemuck::cast_slice(text), &sink)?,
                _ => tokens_here(ctx, knobs, text, &sink)?,
            };
            sink.finish(&ctx.comm)?;
            Ok(built)
        })
    })
}

/// Builds the suffix array of a distributed text of tokens ([`Token`]: `u8`, `u16` or `u32`).
/// Collective. Entry and exit as [`suffix_array`], in tokens: suffixes compare token by token
/// by the tokens' values, and the entries are token positions. `u8` tokens are the byte path;
/// wider ones are built by pDC3 (`config.algo` must be [`Algo::Dc3`]: pCSS takes bytes only
/// for now, an [`Error::Unsupported`] otherwise) on the CPU (with `--gpu`, only the recursion's
/// levels may go to the device).
pub fn suffix_array_tokens<T: Token>(ctx: &Ctx, text: &[T]) -> Result<Vec<u64>> {
    let built = build(ctx, Knobs::configured(&ctx.config), text, None)?;
    Ok(built.sa.expect("a sink that holds returns the part"))
}

/// [`suffix_array_or_write`] for a text of tokens (see [`suffix_array_tokens`]). Collective.
pub fn suffix_array_tokens_or_write<T: Token>(
    ctx: &Ctx,
    text: &[T],
    out: &io::OutputFile,
) -> Result<Option<Vec<u64>>> {
    Ok(build(ctx, Knobs::configured(&ctx.config), text, Some(out))?.sa)
}

/// The suffix array of a token text wider than bytes for `sink`, on the calling thread's pool.
fn tokens_here<T: Token>(ctx: &Ctx, knobs: Knobs, text: &[T], sink: &SaSink) -> Result<Built> {
    check_config(ctx)?;
    let layout = dist::Layout::from_local_len(&ctx.comm, text.len());
    let set = Settings::of_text(ctx, knobs, &layout, text.len());
    Ok(match knobs.algo {
        Algo::Css => {
            let (sa, refine_rounds) = algo::css::css(ctx, &set, text, &layout, sink);
            Built { sa, refine_rounds }
        }
        Algo::Dc3 => Built {
            sa: algo::dc3::dc3(ctx, &set, text, &layout, sink),
            refine_rounds: 0,
        },
    })
}

/// The suffix array for `sink` on the calling thread's pool: this pe's part when it holds, None
/// when it wrote it (the caller ends the sink with [`SaSink::finish`]). The build's setting is
/// made here, once, from `knobs` and the text.
fn suffix_array_here(ctx: &Ctx, knobs: Knobs, text: &[u8], sink: &SaSink) -> Result<Built> {
    check_config(ctx)?;
    let layout = dist::Layout::from_local_len(&ctx.comm, text.len());
    let set = Settings::of_text(ctx, knobs, &layout, text.len());
    // A device that takes the whole text builds it; else the distributed algorithm (which
    // does not ask the device again at level 0).
    if let Some(sa) = set.offload.whole_text(ctx, text, &layout, sink) {
        return sa.map(|sa| Built {
            sa,
            refine_rounds: 0,
        });
    }
    Ok(distributed(ctx, &set, text, &layout, sink))
}

/// Errors in the configuration, on every pe. Collective.
fn check_config(ctx: &Ctx) -> Result<()> {
    if ctx.comm.any(ctx.config.base_case < 4) {
        return ctx.comm.agree(Err(Error::Invalid(format!(
            "base case size must be at least 4, got {}",
            ctx.config.base_case
        ))));
    }
    Ok(())
}

/// The build's distributed algorithm, its level 0 into `sink`. Collective.
fn distributed(
    ctx: &Ctx,
    set: &Settings,
    text: &[u8],
    layout: &dist::Layout,
    sink: &SaSink,
) -> Built {
    match set.knobs.algo {
        Algo::Dc3 => Built {
            sa: algo::dc3::dc3(ctx, set, text, layout, sink),
            refine_rounds: 0,
        },
        Algo::Css => {
            let (sa, refine_rounds) = algo::css::css(ctx, set, text, layout, sink);
            Built { sa, refine_rounds }
        }
    }
}

/// The local sort backend the configuration asks for, or a clear error when it is unavailable.
/// Local; callers agree on the result.
pub fn backend_for(ctx: &Ctx) -> Result<Box<dyn LocalSort>> {
    match ctx.config.backend {
        Backend::Cpu => Ok(Box::new(local::cpu::CpuSort::new(ctx.config.threads))),
        // Pe 0 opens its device now (it builds whatever fits there, and its errors should stop
        // the job at the start); the others check theirs now and open it when first used.
        #[cfg(feature = "gpu")]
        Backend::Gpu if ctx.comm.rank() == 0 => {
            let gpu = local::gpu::GpuSort::open(0, ctx.config.threads, ctx.config.gpu.clone())?;
            Ok(Box::new(gpu))
        }
        #[cfg(feature = "gpu")]
        Backend::Gpu => {
            local::gpu::GpuSort::probe(ctx.comm.rank())?;
            Ok(Box::new(local::gpu::LazyGpu::new(
                ctx.comm.rank(),
                ctx.config.threads,
                ctx.config.gpu.clone(),
            )))
        }
        #[cfg(not(feature = "gpu"))]
        Backend::Gpu => Err(Error::Unsupported(
            "--gpu needs a build with GPU support: cargo build --release --features gpu".into(),
        )),
    }
}

/// Makes a panic on this pe, on any thread, end the whole MPI job at once instead of leaving the
/// other pes waiting in their next collective: the hook prints `psa: internal error on pe R: …`,
/// removes the partial output file of a running job ([`io::OutputFile`]) and calls MPI_Abort
/// (exit status 101). Without MPI running it only prints the message (the panic then goes on as
/// usual). Replaces the panic hook of the process; the `psa` binary installs it at start-up.
pub fn abort_on_panic() {
    std::panic::set_hook(Box::new(|info| {
        let Some(rank) = comm::world_rank_if_running() else {
            crate::util::say(&format!("psa: internal error: {info}"));
            return;
        };
        crate::util::say(&format!("psa: internal error on pe {rank}: {info}"));
        io::remove_partial_now();
        // No collective here: the other pes may be anywhere.
        comm::abort_world(101);
    }));
}
