//! The relay: the whole suffix array on pe 0's device, for a distributed text that fits it
//! (`--gpu`; [`super::Offload::Relay`], and a whole text into a file at p = 1 too), or on pe 0's
//! CPUs by libsais (`Offload::Host`, `--algo node`: [`crate::local::host`]).
//!
//! One GPU builds the suffix array of 70 MB of DNA in about 0.1 s; the distributed algorithms
//! need seconds for it on the pes of one node, most of it in all-to-all exchanges. So when the
//! whole text fits pe 0's device, the pes stream their slices to it through pe 0, the device
//! builds the suffix array, and pe 0 streams each pe its part back. Pe 0 relays in pieces of
//! [`PIECE`] characters: no pe's memory ever holds the whole text or the whole suffix array (the
//! device does). Texts that do not fit, or any failure on the device, leave the work to the
//! distributed algorithm, decided together by every pe. [`crate::GpuOptions::pool`] = false
//! (`psa --no-gpu-pool`) turns this off for the whole text (to measure the distributed algorithm
//! with device sorts); recursion levels still go to the device when they fit.
//!
//! The same relay serves a recursion level of pDC3 (integer names) that fits the device when the
//! whole text did not ([`ints`], asked through [`super::Offload::level`]).
//!
//! Traffic: every character once to pe 0 (1 byte, or its name: 4, 5 or 8 bytes, the recursion
//! text's width) and every SA entry once from it (4 bytes: 32-bit entries, widened by their
//! owner). Memory: pe 0 two pieces (and their 4-byte encoding for names); each pe its SA part.
//! The file job (`psa` without `--check`) skips the way back: pe 0 writes the SA to the output
//! file as the device gives it ([`to_file`]).

use bytemuck::Pod;

use super::DeviceChar;
use crate::dist::Layout;
use crate::io::OutputFile;
use crate::local::{used_bytes, widen_in_place, Alphabet, DeviceSuffixArray, HostBuf, PooledSa};
use crate::Ctx;

/// The suffix array part of this pe for a byte text, built on pe 0's device; None (on every pe)
/// when the device does not take the text. Collective.
pub fn bytes(
    ctx: &Ctx,
    device: Option<&dyn DeviceSuffixArray>,
    text: &[u8],
    layout: &Layout,
) -> Option<Vec<u64>> {
    build_bytes(ctx, device, text, layout)?.send_to_pes(ctx, layout)
}

/// The same, written straight to `out` by pe 0 as the device gives it (no pe holds its part, and
/// nothing goes back through MPI): Some(result) when the device built it (an error writing the
/// file is an error on every pe), None (on every pe) when the device did not take the text or
/// failed (then nothing valid is in `out`; the caller builds the SA another way). Collective.
pub fn to_file(
    ctx: &Ctx,
    device: Option<&dyn DeviceSuffixArray>,
    phase: &str,
    text: &[u8],
    layout: &Layout,
    out: &OutputFile,
) -> Option<crate::Result<()>> {
    let built = ctx.phase(phase, || build_bytes(ctx, device, text, layout))?;
    ctx.phase("write", || built.write_to(ctx, layout, out))
}

/// Streams a byte text to pe 0's `device` and builds its suffix array there.
fn build_bytes<'a>(
    ctx: &'a Ctx,
    device: Option<&'a dyn DeviceSuffixArray>,
    text: &[u8],
    layout: &Layout,
) -> Option<Built<'a>> {
    // The byte values that occur anywhere: the device packs its first keys by them.
    let seen = ctx
        .comm
        .all_reduce_sum_vec(&used_bytes(text).map(u64::from));
    let mut used = [false; 256];
    for (u, &s) in used.iter_mut().zip(&seen) {
        *u = s > 0;
    }
    build(ctx, device, text, layout, Alphabet::Bytes(used), as_bytes)
}

/// A piece of a byte text as the device takes it: as it is.
fn as_bytes<'a>(piece: &'a [u8], _scratch: &'a mut [u8]) -> &'a [u8] {
    piece
}

/// A piece of a text of characters with values below 2^32 as the device takes it: their values
/// ([`DeviceChar::device_val`]) as little-endian u32 in `scratch`.
fn as_u32<'a, C: DeviceChar>(piece: &'a [C], scratch: &'a mut [u8]) -> &'a [u8] {
    let out = &mut scratch[..4 * piece.len()];
    for (d, &c) in out.chunks_exact_mut(4).zip(piece) {
        d.copy_from_slice(&(c.device_val() as u32).to_le_bytes());
    }
    out
}

/// The same for a text of integers (a recursion level's names; the device takes values below
/// 2^32): None on every pe where a value is larger.
pub fn ints<C: DeviceChar>(ctx: &Ctx, text: &[C], layout: &Layout) -> Option<Vec<u64>> {
    let max = ctx
        .comm
        .all_reduce_max(text.iter().map(|c| c.device_val()).max().unwrap_or(0));
    if max >= 1 << 32 {
        return None;
    }
    let device = ctx.device_suffix_array();
    build(ctx, device, text, layout, Alphabet::Ints(max), as_u32::<C>)?.send_to_pes(ctx, layout)
}

/// A suffix array built on pe 0's device, not yet brought back: on pe 0 the device build and its
/// piece buffer, on the others nothing.
struct Built<'a> {
    session: Option<Box<dyn PooledSa + 'a>>,
    /// Pe 0's buffer for the pieces coming back (u32 SA entries), in its backend's memory.
    pieces: Option<HostBuf<u32>>,
}

/// Streams `text` through pe 0 to its backend `device` (pe 0's; None elsewhere), which builds
/// the suffix array; None on every pe when it does not take the text or fails. `encode` gives a
/// piece in the backend's format for `alphabet` (the piece itself, or written into the scratch
/// buffer, 4 bytes per record).
///
/// Pe 0 keeps the pieces in memory from its backend ([`HostBuf`]: on the GPU page-locked, so the
/// DMA engine copies them without the staging copies, which at p = 16 run on pe 0's one thread).
fn build<'a, T: Pod + Send + Sync>(
    ctx: &'a Ctx,
    device: Option<&'a dyn DeviceSuffixArray>,
    text: &[T],
    layout: &Layout,
    alphabet: Alphabet,
    encode: for<'b> fn(&'b [T], &'b mut [u8]) -> &'b [u8],
) -> Option<Built<'a>> {
    let comm = &ctx.comm;
    let root = 0;
    let n = layout.len();
    let mut session = if comm.rank() == root {
        device.and_then(|d| d.pooled_sa(n, &alphabet))
    } else {
        None
    };
    let mut go = session.is_some() as u64;
    comm.broadcast(&mut go, root);
    if go == 0 {
        return None;
    }

    let piece = ctx.config.gpu.pool_piece;
    let mut failed: Option<String> = None;
    // Pe 0's piece buffers (the largest piece any pe sends or gets), in its backend's memory.
    let most = comm.all_reduce_max(layout.local_len(comm.rank()) as u64) as usize;
    let most = most.min(piece);
    let sorter = ctx.sorter.as_ref();
    let mut pieces_in = session.as_ref().map(|_| HostBuf::<T>::zeroed(sorter, most));
    // Encoded pieces going in, SA pieces (u32) coming out.
    let mut scratch = session
        .as_ref()
        .map(|_| HostBuf::<u32>::zeroed(sorter, most));
    comm.stream_to_root(text, root, piece, pieces_in.as_deref_mut(), |_, piece| {
        if failed.is_none() {
            if let (Some(s), Some(scratch)) = (session.as_mut(), scratch.as_deref_mut()) {
                failed = s
                    .upload(encode(piece, bytemuck::cast_slice_mut(scratch)))
                    .err();
            }
        }
    });
    drop(pieces_in);
    if let (None, Some(s)) = (&failed, session.as_mut()) {
        failed = s.build().err();
    }
    // The other pes sleep while the device works.
    comm.quiet_barrier();
    agreed_ok(ctx, &failed).then_some(Built {
        session,
        pieces: scratch,
    })
}

impl Built<'_> {
    /// Streams each pe its part of the suffix array; None on every pe when the device failed.
    fn send_to_pes(mut self, ctx: &Ctx, layout: &Layout) -> Option<Vec<u64>> {
        let comm = &ctx.comm;
        let (root, me) = (0, comm.rank());
        let len = layout.local_len(me);
        let mut failed: Option<String> = None;
        // Zeroed (fresh pages from the allocator: no extra pass); the 32-bit entries land in its
        // first half and are widened in place.
        let mut sa: Vec<u64> = vec![0; len];
        {
            let front: &mut [u32] = &mut bytemuck::cast_slice_mut(&mut sa[..])[..len];
            let (session, pieces) = (&mut self.session, self.pieces.as_deref_mut());
            comm.stream_from_root(
                front,
                root,
                ctx.config.gpu.pool_piece,
                pieces,
                |dst, off, out| {
                    if let (None, Some(s)) = (&failed, session.as_mut()) {
                        failed = s.download(layout.start(dst) + off, out).err();
                    }
                    if failed.is_some() {
                        // Never leave a piece half written (all is discarded after the agreement).
                        out.fill(0);
                    }
                },
            );
            // SAFETY: `sa` holds len u64, and its first len u32 slots are initialised.
            unsafe { widen_in_place(sa.as_mut_ptr(), len) };
        }
        drop(self);
        agreed_ok(ctx, &failed).then_some(sa)
    }

    /// Pe 0 writes the whole suffix array to `out`, piece by piece as the device gives it; see
    /// [`to_file`].
    fn write_to(
        mut self,
        ctx: &Ctx,
        layout: &Layout,
        out: &OutputFile,
    ) -> Option<crate::Result<()>> {
        let mut failed: Option<String> = None;
        let mut written = Ok(());
        if let (Some(s), Some(buf)) = (self.session.as_mut(), self.pieces.as_deref_mut()) {
            // Pe 0 writes with every CPU of its node (the others wait asleep), and flushes what
            // it wrote: only it wrote.
            let node = NodePool::new(ctx);
            let n = layout.len();
            let mut off = 0;
            if let Some(all) = s.whole() {
                written = node.run(|| out.write_part(0, all));
                off = n;
            }
            while off < n && failed.is_none() && written.is_ok() {
                let m = (n - off).min(buf.len().max(1));
                failed = s.download(off, &mut buf[..m]).err();
                if failed.is_none() {
                    let piece = &buf[..m];
                    written = node.run(|| out.write_part(off, piece));
                }
                off += m;
            }
            if failed.is_none() && written.is_ok() {
                written = out.sync_local();
            }
        }
        ctx.comm.quiet_barrier();
        drop(self);
        if !agreed_ok(ctx, &failed) {
            return None;
        }
        Some(ctx.comm.agree(written))
    }
}

/// A pool of as many threads as the CPUs of this pe's node, started with the calling thread
/// allowed on all of them (pe 0's work while the other pes of its node wait asleep).
struct NodePool {
    pool: Option<rayon::ThreadPool>,
}

impl NodePool {
    fn new(ctx: &Ctx) -> NodePool {
        let _wide = crate::affinity::widen(&ctx.node_cpus);
        let threads = crate::affinity::count(&ctx.node_cpus).max(ctx.config.threads);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
        NodePool { pool: pool.ok() }
    }

    /// `f` on the pool; on the current one where no pool could be started.
    fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }
}

/// Whether pe 0's device work went well, on every pe; a failure is logged on pe 0 and the
/// distributed algorithm takes over.
fn agreed_ok(ctx: &Ctx, failed: &Option<String>) -> bool {
    let mut ok = failed.is_none() as u64;
    ctx.comm.broadcast(&mut ok, 0);
    if let Some(e) = failed {
        log::warn!("the device suffix array failed, building it with the distributed algorithm instead: {e}");
    }
    ok == 1
}
