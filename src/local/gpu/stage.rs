//! Transfers between host and device: through pinned staging buffers (the CPU copies into one
//! while the other is in flight), or directly when the host memory is page-locked by this
//! backend ([`super::host_mem`]).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use cudarc::driver::{result, sys, CudaContext, CudaStream, DriverError};
use rayon::prelude::*;

use super::device::Events;
use super::error::{drv, GpuError};
use super::host_mem::HostRanges;
use crate::config::GpuOptions;

/// How a transfer into host memory (or a sort that ends with one) failed: before or after it
/// started writing into the caller's memory.
pub(super) enum Failure {
    Untouched(GpuError),
    Clobbered(GpuError),
}

/// Pinned staging buffers, an event for each (recorded after the copy that uses the buffer);
/// freed when dropped (with their context bound).
pub(super) struct Stage {
    pins: Vec<*mut u8>,
    /// Destroyed after `drop` has bound the context, before it lets go of the context.
    events: Events,
    /// Bytes per buffer.
    bytes: usize,
    /// Last: fields drop in order.
    ctx: Arc<CudaContext>,
}

// Plain addresses, used under the GpuSort mutex with the context bound (or handed over once
// from the thread that allocated them).
unsafe impl Send for Stage {}

impl Drop for Stage {
    /// Frees the buffers and the events (nothing may use them in flight).
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            // Without the context the events cannot go either: they go with it.
            std::mem::forget(std::mem::replace(&mut self.events, Events(Vec::new())));
            return;
        }
        for &p in &self.pins {
            unsafe { result::free_host(p as _).ok() };
        }
    }
}

/// Buffers and bytes per buffer of the staging memory (at least 2 buffers of at least 1 byte).
fn stage_shape(opts: &GpuOptions) -> (usize, usize) {
    (opts.stage_buffers.max(2), opts.stage_buffer_bytes.max(1))
}

/// Allocates `count` staging buffers of `bytes` bytes and their events (`ctx` must be bound);
/// on an error frees what it got.
fn alloc_staging(ctx: &Arc<CudaContext>, count: usize, bytes: usize) -> Result<Stage, DriverError> {
    let mut stage = Stage {
        pins: Vec::with_capacity(count),
        events: Events(Vec::with_capacity(count)),
        bytes,
        ctx: ctx.clone(),
    };
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
    for _ in 0..count {
        let p = unsafe { result::malloc_host(bytes, 0) }?;
        stage.pins.push(p as *mut u8);
        stage.events.0.push(result::event::create(flags)?);
    }
    Ok(stage)
}

/// The transfers of one backend and their staging buffers; kept in the backend's state (under
/// its mutex, with the context bound during every call).
pub(super) struct Staging {
    /// The pinned staging buffers, once allocated.
    stage: Option<Stage>,
    /// The staging buffers being allocated in the background since the backend was opened
    /// (pinning 128 MiB takes ~50 ms, which then overlaps reading the input).
    pending: Option<JoinHandle<Option<Stage>>>,
    /// Whether pinned staging could not be had (then pageable copies are used).
    failed: bool,
    /// Pinned staging buffers (default) or plain pageable copies.
    pub(super) pinned: bool,
    /// Host staging copy seconds of the current sort: [into, out of] the staging buffers.
    pub(super) secs: [f64; 2],
    ctx: Arc<CudaContext>,
    /// Buffers and bytes per buffer.
    shape: (usize, usize),
    /// Bytes per task of the parallel staging copies.
    copy_piece: usize,
    /// Page-locked host memory of this backend: copies from or to it skip the staging.
    ranges: HostRanges,
}

impl Staging {
    /// Starts allocating the staging buffers of `opts` in `ctx` in the background.
    pub(super) fn new(ctx: &Arc<CudaContext>, opts: &GpuOptions, ranges: HostRanges) -> Staging {
        let ctx_bg = ctx.clone();
        let (count, bytes) = stage_shape(opts);
        Staging {
            stage: None,
            pending: Some(std::thread::spawn(move || {
                ctx_bg.bind_to_thread().ok()?;
                alloc_staging(&ctx_bg, count, bytes).ok()
            })),
            failed: false,
            pinned: true,
            secs: [0.0; 2],
            ctx: ctx.clone(),
            shape: (count, bytes),
            copy_piece: opts.copy_piece,
            ranges,
        }
    }

    /// Whether `[ptr, ptr + len)` lies in page-locked memory from this backend (then the DMA
    /// engine copies it directly, with no staging copy by the CPU).
    pub(super) fn is_host_mem(&self, ptr: *const u8, len: usize) -> bool {
        self.ranges.contains(ptr, len)
    }

    /// Frees the staging buffers, once the background allocation is done (the context must be
    /// bound, nothing using them in flight).
    pub(super) fn close(&mut self) {
        if let Some(h) = self.pending.take() {
            self.stage = h.join().ok().flatten();
        }
        self.stage = None;
    }

    /// Makes the pinned staging buffers ready (allocated on first use); false when they cannot
    /// be had or are off.
    fn ready(&mut self) -> bool {
        if !self.pinned || self.failed {
            return false;
        }
        if self.stage.is_none() {
            if let Some(h) = self.pending.take() {
                self.stage = h.join().ok().flatten();
            }
        }
        if self.stage.is_none() {
            let (count, bytes) = self.shape;
            match alloc_staging(&self.ctx, count, bytes) {
                Ok(s) => self.stage = Some(s),
                Err(e) => {
                    log::warn!("gpu: no pinned staging buffers ({e}); using pageable copies");
                    self.failed = true;
                }
            }
        }
        self.stage.is_some()
    }

    /// Copies `host` to device address `dst` on `stream`; the copy is complete (stream-ordered)
    /// on return.
    pub(super) fn upload(
        &mut self,
        stream: &CudaStream,
        host: &[u8],
        dst: sys::CUdeviceptr,
    ) -> Result<(), GpuError> {
        let cu_stream = stream.cu_stream();
        let staged = !self.is_host_mem(host.as_ptr(), host.len()) && self.ready();
        match self.stage.as_ref().filter(|_| staged) {
            Some(stage) => {
                let (pins, events) = (&stage.pins, &stage.events.0);
                for (i, part) in host.chunks(stage.bytes).enumerate() {
                    let b = i % pins.len();
                    unsafe {
                        result::event::synchronize(events[b])
                            .map_err(drv("host-to-device copy"))?;
                        let pin = std::slice::from_raw_parts_mut(pins[b], part.len());
                        let t = Instant::now();
                        par_copy(pin, part, self.copy_piece);
                        self.secs[0] += t.elapsed().as_secs_f64();
                        result::memcpy_htod_async(dst + (i * stage.bytes) as u64, pin, cu_stream)
                            .map_err(drv("host-to-device copy"))?;
                        result::event::record(events[b], cu_stream)
                            .map_err(drv("host-to-device copy"))?;
                    }
                }
            }
            None => unsafe {
                result::memcpy_htod_async(dst, host, cu_stream)
                    .map_err(drv("host-to-device copy"))?;
            },
        }
        stream.synchronize().map_err(drv("host-to-device copy"))
    }

    /// Copies `len` bytes from device address `src` to `host` on `stream` (after whatever that
    /// stream waits for); complete on return.
    pub(super) fn download(
        &mut self,
        stream: sys::CUstream,
        src: sys::CUdeviceptr,
        host: *mut u8,
        len: usize,
    ) -> Result<(), GpuError> {
        self.download_spans(stream, &[(src, host, len, None)])
            .map_err(|f| match f {
                Failure::Untouched(e) | Failure::Clobbered(e) => e,
            })
    }

    /// Copies each span `(src, host, len, after)` — `len` bytes from device address `src` to
    /// `host`, once event `after` (if any) has completed — on `stream`, in order, as one pipeline:
    /// the staging copy of one piece overlaps the transfer of the next, across spans too.
    /// Complete on return. An error is `Untouched` while no host byte has been written (a fault
    /// of a kernel that `after` waits for shows up here first), else `Clobbered`.
    pub(super) fn download_spans(
        &mut self,
        stream: sys::CUstream,
        spans: &[(sys::CUdeviceptr, *mut u8, usize, Option<sys::CUevent>)],
    ) -> Result<(), Failure> {
        let mut touched = false;
        let fail = |touched: bool, e: GpuError| match touched {
            false => Failure::Untouched(e),
            true => Failure::Clobbered(e),
        };
        let wait = |after: Option<sys::CUevent>| -> Result<(), GpuError> {
            match after {
                Some(e) => unsafe {
                    let flags = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
                    result::stream::wait_event(stream, e, flags)
                        .map_err(drv("cannot order a copy after the sort"))
                },
                None => Ok(()),
            }
        };
        let direct = spans
            .iter()
            .all(|&(_, host, len, _)| self.is_host_mem(host, len));
        let staged = !direct && self.ready();
        match self.stage.as_ref().filter(|_| staged) {
            Some(stage) => {
                let (pins, events, nb) = (&stage.pins, &stage.events.0, stage.pins.len());
                // Pieces of at most one staging buffer: (src, host, len, wait first).
                let mut pieces = Vec::new();
                for &(src, host, len, after) in spans {
                    for off in (0..len).step_by(stage.bytes) {
                        let l = stage.bytes.min(len - off);
                        let first = if off == 0 { after } else { None };
                        // SAFETY: callers pass `len` writable bytes at `host`.
                        pieces.push((src + off as u64, unsafe { host.add(off) }, l, first));
                    }
                }
                let issue = |i: usize| -> Result<(), GpuError> {
                    let (src, _, l, after) = pieces[i];
                    wait(after)?;
                    let b = i % nb;
                    unsafe {
                        let pin = std::slice::from_raw_parts_mut(pins[b], l);
                        result::memcpy_dtoh_async(pin, src, stream)
                            .map_err(drv("device-to-host copy"))?;
                        result::event::record(events[b], stream).map_err(drv("device-to-host copy"))
                    }
                };
                // Piece i goes through buffer i % nb; the copies run nb - 1 pieces ahead of the
                // host, which issues piece i + nb - 1 once it has emptied that buffer (piece i - 1).
                for j in 0..(nb - 1).min(pieces.len()) {
                    issue(j).map_err(|e| fail(touched, e))?;
                }
                for i in 0..pieces.len() {
                    if i + nb - 1 < pieces.len() {
                        issue(i + nb - 1).map_err(|e| fail(touched, e))?;
                    }
                    let (_, host, l, _) = pieces[i];
                    unsafe { result::event::synchronize(events[i % nb]) }
                        .map_err(drv("device-to-host copy"))
                        .map_err(|e| fail(touched, e))?;
                    touched = true;
                    let t = Instant::now();
                    unsafe {
                        let pin = std::slice::from_raw_parts(pins[i % nb], l);
                        let piece = self.copy_piece;
                        par_copy(std::slice::from_raw_parts_mut(host, l), pin, piece);
                    }
                    self.secs[1] += t.elapsed().as_secs_f64();
                }
                Ok(())
            }
            None => {
                for &(src, host, len, after) in spans {
                    wait(after).map_err(|e| fail(touched, e))?;
                    touched = true;
                    unsafe {
                        // SAFETY: callers pass `len` writable bytes at `host`.
                        let host = std::slice::from_raw_parts_mut(host, len);
                        result::memcpy_dtoh_async(host, src, stream)
                            .map_err(drv("device-to-host copy"))
                            .map_err(|e| fail(true, e))?;
                    }
                }
                unsafe { result::stream::synchronize(stream) }
                    .map_err(drv("device-to-host copy"))
                    .map_err(|e| fail(touched, e))
            }
        }
    }
}

/// Copies `src` into `dst` (same length) with the rayon pool, in tasks of `piece` bytes (at least
/// 4096). 1 MiB, the default ([`GpuOptions::copy_piece`]), is small enough that the threads'
/// shares stay balanced (larger pieces, up to one share per thread, balance worse; see
/// `bench-results/2026-11-23-h100-sort-copy-piece.md`).
fn par_copy(dst: &mut [u8], src: &[u8], piece: usize) {
    let piece = piece.max(4096);
    dst.par_chunks_mut(piece)
        .zip(src.par_chunks(piece))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

#[cfg(test)]
mod tests {
    use super::par_copy;

    #[test]
    fn parallel_copy_copies_every_byte() {
        let big: Vec<u8> = (0..(3 << 20) + 77)
            .map(|i: usize| (i ^ (i >> 9)) as u8)
            .collect();
        let mut out = vec![0u8; big.len()];
        par_copy(&mut out[..], &big, 1 << 20);
        assert!(out == big);
    }
}
