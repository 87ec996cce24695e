//! The radix sort engine: LSD passes over the varying 8-bit digits of the keys on the device.
//!
//! One sort: the keys go to the device ([`super::stage`]), the digits that are constant over the
//! input are found (OR and AND of all keys), and every other 8-bit digit gets one stable counting
//! pass. A pass is one-sweep: the digit counts of all positions come from one kernel per sort, and
//! each pass is one launch whose blocks take tiles in order and add up the counts of the tiles
//! before them (decoupled look-back), so the keys are read once and written once per digit; the
//! classic pass (histogram, scan, scatter) remains the fallback. A large input is first split by
//! its highest varying digit into groups that are sorted one after another, each copied home on
//! the second stream while the next is sorted. Inputs larger than what fits on the device are
//! sorted in chunks whose sorted runs are merged on the CPU ([`super::merge`]).

use std::sync::atomic::Ordering;
use std::time::Instant;

use cudarc::driver::{result, sys};

use super::buffer::DeviceBuffer;
use super::device::Events;
use super::error::{drv, fault, GpuError};
use super::kernels::{Kernels, BLOCK};
use super::merge;
use super::stage::Failure;
use super::state::{GpuSort, Profile, State, HIST_BYTES};
use crate::local::cpu::CpuSort;

/// Inputs with fewer keys than this are sorted on the CPU: the transfers and launches cost more.
pub const MIN_GPU_KEYS: usize = 1 << 16;

/// Device memory left free for the driver, the count table and other processes' headroom.
const RESERVE_BYTES: usize = 512 << 20;
/// Keys per overlap group of a large sort (see [`GpuSort::sort_grouped`]), and the most groups:
/// smaller groups would leave the device idle between launches.
const GROUP_KEYS: usize = 1 << 21;
const MAX_GROUPS: usize = 16;

/// Groups for a one-chunk sort of `n` keys: 1 (no overlap) below 2 × [`GROUP_KEYS`].
fn overlap_groups(n: usize) -> usize {
    (n / GROUP_KEYS).clamp(1, MAX_GROUPS)
}

/// Chunks hold at most this many keys so that the kernels' 32-bit offsets cannot overflow.
pub(super) const MAX_CHUNK_KEYS: usize = 1 << 31;

/// A key type the kernels sort: `u64` or `u128` (two little-endian 64-bit words).
pub trait GpuKey: bytemuck::Pod + Ord + Send + Sync {
    /// 64-bit words per key.
    const WORDS: usize;
    /// Keys per scatter tile (`BLOCK * IPT` in kernels.cu).
    const TILE: usize;
    /// Suffix of the kernel names.
    const NAME: &'static str;
}

impl GpuKey for u64 {
    const WORDS: usize = 1;
    const TILE: usize = 256 * 16;
    const NAME: &'static str = "u64";
}

impl GpuKey for u128 {
    const WORDS: usize = 2;
    const TILE: usize = 256 * 8;
    const NAME: &'static str = "u128";
}

impl GpuSort {
    /// Sorts `v`: on the CPU when small, else on the GPU; if the GPU fails before `v` was
    /// touched, on the CPU with a warning.
    /// `high_only`: sort by the high 64 bits of u128 keys only (LSD passes over the high digits).
    pub(super) fn sort_keys<K: GpuKey>(
        &self,
        v: &mut [K],
        high_only: bool,
        cpu: impl Fn(&CpuSort, &mut [K]),
    ) {
        if v.len() < MIN_GPU_KEYS {
            return cpu(&self.cpu, v);
        }
        match self.gpu_sort(v, high_only) {
            Ok(()) => {
                self.gpu_sorts.fetch_add(1, Ordering::Relaxed);
            }
            Err(Failure::Untouched(e)) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "gpu sort of {} {} keys failed, sorting on the CPU instead: {e}",
                    v.len(),
                    K::NAME
                );
                cpu(&self.cpu, v);
            }
            Err(Failure::Clobbered(e)) => {
                panic!(
                    "gpu sort of {} {} keys failed while copying the result back: {e}",
                    v.len(),
                    K::NAME
                )
            }
        }
    }

    fn gpu_sort<K: GpuKey>(&self, v: &mut [K], high_only: bool) -> Result<(), Failure> {
        let n = v.len();
        let kernels = self.kernels().map_err(Failure::Untouched)?;
        let mut st = self.lock();
        let st = &mut *st;
        self.dev.bind().map_err(Failure::Untouched)?;
        let mut prof = Profile {
            keys: n,
            direct: st
                .staging
                .is_host_mem(v.as_ptr() as *const u8, std::mem::size_of_val(v)),
            ..Default::default()
        };
        st.staging.secs = [0.0; 2];
        let t0 = Instant::now();
        let chunk = self.reserve::<K>(st, n).map_err(Failure::Untouched)?;
        prof.alloc_s = t0.elapsed().as_secs_f64();
        let size = std::mem::size_of::<K>();
        if chunk >= n {
            prof.chunks = 1;
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(v);
            let t = Instant::now();
            let buf0 = st.bufs[0].ptr();
            st.staging
                .upload(&self.dev.stream, bytes, buf0)
                .map_err(Failure::Untouched)?;
            prof.h2d_s = t.elapsed().as_secs_f64();
            let groups = self.groups.unwrap_or_else(|| overlap_groups(n));
            if groups > 1 {
                let r = self.sort_grouped::<K>(kernels, st, high_only, groups, bytes, &mut prof);
                if r.is_err() {
                    // Copies and passes may still be queued on either stream: let them end
                    // before anything else uses the buffers.
                    self.dev.copy_stream.synchronize().ok();
                    self.dev.stream.synchronize().ok();
                }
                r?;
            } else {
                let t = Instant::now();
                let (at, passes) = self
                    .sort_on_device::<K>(kernels, st, n, high_only)
                    .map_err(Failure::Untouched)?;
                prof.sort_s = t.elapsed().as_secs_f64();
                prof.passes = passes;
                let t = Instant::now();
                if passes > 0 {
                    let src = st.bufs[at].ptr();
                    st.staging
                        .download(
                            self.dev.stream.cu_stream(),
                            src,
                            bytes.as_mut_ptr(),
                            bytes.len(),
                        )
                        .map_err(Failure::Clobbered)?;
                }
                prof.d2h_s = t.elapsed().as_secs_f64();
            }
        } else {
            // Balanced chunks; each sorted run lands in `runs`, then they are merged into `v`.
            let k = n.div_ceil(chunk);
            let len = n.div_ceil(k);
            let mut runs: Vec<K> = Vec::with_capacity(n);
            let runs_ptr = runs.as_mut_ptr() as *mut u8;
            let mut bounds = vec![0usize];
            for (c, part) in v.chunks(len).enumerate() {
                let bytes: &[u8] = bytemuck::cast_slice(part);
                let t = Instant::now();
                let buf0 = st.bufs[0].ptr();
                st.staging
                    .upload(&self.dev.stream, bytes, buf0)
                    .map_err(Failure::Untouched)?;
                prof.h2d_s += t.elapsed().as_secs_f64();
                let t = Instant::now();
                // Full sorts here: the merge compares whole keys, so runs must be sorted by them.
                let (at, passes) = self
                    .sort_on_device::<K>(kernels, st, part.len(), false)
                    .map_err(Failure::Untouched)?;
                prof.sort_s += t.elapsed().as_secs_f64();
                prof.passes += passes;
                let t = Instant::now();
                // SAFETY: runs has capacity n; this writes bytes [c*len*size, +part bytes).
                let dst = unsafe { runs_ptr.add(c * len * size) };
                let src = st.bufs[at].ptr();
                st.staging
                    .download(self.dev.stream.cu_stream(), src, dst, bytes.len())
                    .map_err(Failure::Untouched)?;
                prof.d2h_s += t.elapsed().as_secs_f64();
                bounds.push(bounds.last().unwrap() + part.len());
            }
            // SAFETY: every byte of runs[..n] was written by the downloads above, and K is Pod.
            unsafe { runs.set_len(n) };
            prof.chunks = k;
            let t = Instant::now();
            merge::merge_runs(&runs, &bounds, v);
            prof.merge_s = t.elapsed().as_secs_f64();
        }
        log::debug!(
            "gpu: sorted {n} {} keys{}: {} chunk(s), {} passes, h2d {:.4}s, kernels {:.4}s, d2h {:.4}s, merge {:.4}s",
            K::NAME,
            if high_only { " by high word" } else { "" },
            prof.chunks,
            prof.passes,
            prof.h2d_s,
            prof.sort_s,
            prof.d2h_s,
            prof.merge_s
        );
        [prof.h2d_stage_s, prof.d2h_stage_s] = st.staging.secs;
        st.profile = prof;
        Ok(())
    }

    /// Makes sure both device buffers exist and returns how many keys one chunk can hold (at
    /// least `n` when the input fits).
    pub(super) fn reserve<K: GpuKey>(&self, st: &mut State, n: usize) -> Result<usize, GpuError> {
        let size = std::mem::size_of::<K>();
        let cap = self.max_chunk.unwrap_or(usize::MAX).min(MAX_CHUNK_KEYS);
        let want = n.min(cap);
        if st.buf_bytes() >= want * size {
            return Ok((st.buf_bytes() / size).min(cap));
        }
        st.free_bufs();
        let (free, _total) =
            result::mem_get_info().map_err(drv("cannot read the free device memory"))?;
        // Two key buffers and the one-sweep pass state (at most 1 byte per key).
        let fit = free.saturating_sub(RESERVE_BYTES) / (2 * size + 1);
        let mut keys = want.min(fit);
        // Another process may take memory between the query and the allocation: halve and retry.
        loop {
            if keys < MIN_GPU_KEYS.min(n) {
                return Err(GpuError::OutOfMemory(format!(
                    "not enough free device memory for a sort ({} MiB free on device {})",
                    free >> 20,
                    self.dev.ordinal
                )));
            }
            let bytes = keys * size;
            let ctx = &self.dev.ctx;
            // (What one of them got is freed when the other failed.)
            match (
                DeviceBuffer::alloc(ctx, bytes),
                DeviceBuffer::alloc(ctx, bytes),
            ) {
                (Ok(a), Ok(b)) => {
                    st.bufs = [a, b];
                    return Ok(keys);
                }
                _ => keys /= 2,
            }
        }
    }

    /// Whether one-sweep passes over `n` keys can run: on, and their state allocated (a failed
    /// allocation leaves the classic passes, which need none).
    fn ensure_status<K: GpuKey>(&self, st: &mut State, n: usize) -> bool {
        if !self.onesweep || st.hists.is_none() {
            return false;
        }
        let bytes = 8 + n.div_ceil(K::TILE) * 256 * 8;
        if st.status.bytes() >= bytes {
            return true;
        }
        // The old state goes first.
        st.status = DeviceBuffer::default();
        match DeviceBuffer::alloc(&self.dev.ctx, bytes) {
            Ok(b) => {
                st.status = b;
                true
            }
            Err(e) => {
                log::debug!("gpu: no one-sweep pass state for {n} keys ({e}); classic passes");
                false
            }
        }
    }

    /// Enqueues the digit counts of the `n` keys at `src` for the digit positions of `shifts`
    /// into table `slot` of `hists` (whose row for shift s starts at `hist_row(slot, s)`).
    fn digit_hist<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &State,
        src: sys::CUdeviceptr,
        n: usize,
        shifts: &[u32],
        slot: usize,
    ) -> Result<(), GpuError> {
        let ki = K::WORDS - 1;
        let out = st.hists.ptr() + (slot * HIST_BYTES) as u64;
        let mask: u32 = shifts
            .iter()
            .map(|&s| 1u32 << (s / 8))
            .fold(0, |a, b| a | b);
        unsafe { result::memset_d8_async(out, 0, HIST_BYTES, self.dev.stream.cu_stream()) }
            .map_err(drv("cannot clear the digit counts"))?;
        let grid = (n.div_ceil(BLOCK as usize) as u32).clamp(1, self.dev.sms * 4);
        let n64 = n as u64;
        self.dev.launch(
            &k.digit_hist[ki],
            grid,
            BLOCK,
            &mut params!(src, n64, mask, out),
        )
    }

    /// Device address of the counts of digit `shift` in table `slot`.
    fn hist_row(st: &State, slot: usize, shift: u32) -> sys::CUdeviceptr {
        st.hists.ptr() + (slot * HIST_BYTES + (shift as usize / 8) * 256 * 4) as u64
    }

    /// Enqueues one one-sweep pass of the `n` keys at `src` by digit `shift` into `dst`, with
    /// the digit counts at `hist_row` (needs [`Self::ensure_status`] for at least `n` keys).
    #[allow(clippy::too_many_arguments)]
    fn pass_onesweep<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &State,
        src: sys::CUdeviceptr,
        dst: sys::CUdeviceptr,
        n: usize,
        shift: u32,
        hist_row: sys::CUdeviceptr,
    ) -> Result<(), GpuError> {
        let ki = K::WORDS - 1;
        let tiles = n.div_ceil(K::TILE);
        let bytes = 8 + tiles * 256 * 8;
        debug_assert!(bytes <= st.status.bytes());
        let state = st.status.ptr();
        unsafe { result::memset_d8_async(state, 0, bytes, self.dev.stream.cu_stream()) }
            .map_err(drv("cannot clear the pass state"))?;
        let n64 = n as u64;
        self.dev.launch(
            &k.onesweep[ki],
            tiles as u32,
            BLOCK,
            &mut params!(src, dst, n64, shift, hist_row, state),
        )
    }

    /// Radix-sorts the `n` keys in `bufs[0]` (by the high word only when `high_only`); returns
    /// which buffer holds the result and how many passes ran.
    pub(super) fn sort_on_device<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &mut State,
        n: usize,
        high_only: bool,
    ) -> Result<(usize, usize), GpuError> {
        let shifts = self.varying_shifts::<K>(k, st, n, high_only)?;
        let onesweep = !shifts.is_empty() && self.ensure_status::<K>(st, n);
        if onesweep {
            self.digit_hist::<K>(k, st, st.bufs[0].ptr(), n, &shifts, 0)?;
        }
        let mut cur = 0usize;
        for &shift in &shifts {
            let (src, dst) = (st.bufs[cur].ptr(), st.bufs[1 - cur].ptr());
            if onesweep {
                let row = Self::hist_row(st, 0, shift);
                self.pass_onesweep::<K>(k, st, src, dst, n, shift, row)?;
            } else {
                self.pass::<K>(k, st, src, dst, n, shift)?;
            }
            cur = 1 - cur;
        }
        self.dev
            .stream
            .synchronize()
            .map_err(fault("a sort kernel failed"))?;
        Ok((cur, shifts.len()))
    }

    /// The bit shifts of the 8-bit digits that are not constant over the `n` keys in `bufs[0]`
    /// (OR and AND of all keys), ascending; with `high_only` only those of the high word.
    fn varying_shifts<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &mut State,
        n: usize,
        high_only: bool,
    ) -> Result<Vec<u32>, GpuError> {
        let ki = K::WORDS - 1;
        let stream = &self.dev.stream;
        let n64 = n as u64;
        let mut words = [0u64, !0, 0, !0];
        unsafe {
            result::memcpy_htod_async(st.orand.ptr(), &words, stream.cu_stream())
                .map_err(drv("copy"))?;
        }
        let grid = (n.div_ceil(BLOCK as usize) as u32).min(self.dev.sms * 8);
        let (buf0, orand) = (st.bufs[0].ptr(), st.orand.ptr());
        self.dev
            .launch(&k.orand[ki], grid, BLOCK, &mut params!(buf0, n64, orand))?;
        unsafe {
            result::memcpy_dtoh_async(&mut words, st.orand.ptr(), stream.cu_stream())
                .map_err(drv("copy"))?;
        }
        stream
            .synchronize()
            .map_err(fault("the OR/AND kernel failed"))?;
        let varying = [words[0] ^ words[1], words[2] ^ words[3]];
        let first = if high_only {
            64 * (K::WORDS as u32 - 1)
        } else {
            0
        };
        Ok((0..8 * K::WORDS as u32)
            .filter(|&d| (varying[d as usize / 8] >> (8 * (d % 8))) & 0xff != 0)
            .map(|d| 8 * d)
            .filter(|&s| s >= first)
            .collect())
    }

    /// Enqueues one stable counting pass (histogram, scan, scatter) of the `n` keys at device
    /// address `src` by the digit at `shift`, into `dst`. Returns the number of blocks, so that
    /// the scanned count table (digit-major, `256 × blocks`) can be read: digit d starts at
    /// `counts[d * blocks]`.
    fn pass<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &State,
        src: sys::CUdeviceptr,
        dst: sys::CUdeviceptr,
        n: usize,
        shift: u32,
    ) -> Result<u32, GpuError> {
        let ki = K::WORDS - 1;
        let tiles = n.div_ceil(K::TILE);
        let blocks = tiles.min(k.max_blocks[ki] as usize).max(1);
        let per = tiles.div_ceil(blocks) * K::TILE;
        let blocks = n.div_ceil(per).max(1) as u32;
        let (n64, per64) = (n as u64, per as u64);
        let m = 256 * blocks;
        debug_assert!(m as usize * 4 <= st.counts.bytes());
        let counts = st.counts.ptr();
        self.dev.launch(
            &k.hist[ki],
            blocks,
            BLOCK,
            &mut params!(src, n64, per64, shift, counts),
        )?;
        self.dev.launch(&k.scan, 1, 1024, &mut params!(counts, m))?;
        self.dev.launch(
            &k.scatter[ki],
            blocks,
            BLOCK,
            &mut params!(src, dst, n64, per64, shift, counts),
        )?;
        Ok(blocks)
    }

    /// Sorts the keys in `bufs[0]` and copies them into `host` (as many keys' bytes), the copy
    /// overlapping the sort: one pass by the highest varying digit splits the keys into
    /// contiguous groups of whole digit values (about `n / groups` keys each); each group is then
    /// radix-sorted on its own, and while the device sorts group g + 1 the copy stream brings
    /// group g home. Without this the device-to-host copy (a third of a u128 sort) would start
    /// only after the last pass. Fills `prof`'s passes (the split included), groups and times.
    /// Errors: `Untouched` while `host` has not been written, else `Clobbered`.
    fn sort_grouped<K: GpuKey>(
        &self,
        k: &Kernels,
        st: &mut State,
        high_only: bool,
        groups: usize,
        host: &mut [u8],
        prof: &mut Profile,
    ) -> Result<(), Failure> {
        let size = std::mem::size_of::<K>();
        let n = host.len() / size;
        let untouched = Failure::Untouched;
        let t = Instant::now();
        let shifts = self
            .varying_shifts::<K>(k, st, n, high_only)
            .map_err(untouched)?;
        let shifts_s = t.elapsed().as_secs_f64();
        let Some(&top) = shifts.last() else {
            // Nothing to sort: the keys are all equal (in the digits that count).
            prof.sort_s = shifts_s;
            return Ok(());
        };
        let timing = Events::new(2, true).map_err(untouched)?;
        unsafe { result::event::record(timing.0[0], self.dev.stream.cu_stream()) }
            .map_err(drv("cannot record an event"))
            .map_err(untouched)?;
        // The split: a stable pass by the top varying digit into bufs[1], then the bucket starts.
        let onesweep = self.ensure_status::<K>(st, n);
        let mut starts: Vec<usize> = if onesweep {
            self.digit_hist::<K>(k, st, st.bufs[0].ptr(), n, &[top], 0)
                .map_err(untouched)?;
            let row = Self::hist_row(st, 0, top);
            self.pass_onesweep::<K>(k, st, st.bufs[0].ptr(), st.bufs[1].ptr(), n, top, row)
                .map_err(untouched)?;
            let mut counts = [0u32; 256];
            unsafe {
                result::memcpy_dtoh_async(&mut counts, row, self.dev.stream.cu_stream())
                    .map_err(drv("copy"))
                    .map_err(untouched)?;
            }
            self.dev
                .stream
                .synchronize()
                .map_err(fault("a sort kernel failed"))
                .map_err(untouched)?;
            counts
                .iter()
                .scan(0usize, |acc, &c| {
                    let start = *acc;
                    *acc += c as usize;
                    Some(start)
                })
                .collect()
        } else {
            let blocks = self
                .pass::<K>(k, st, st.bufs[0].ptr(), st.bufs[1].ptr(), n, top)
                .map_err(untouched)?;
            let mut table = vec![0u32; 256 * blocks as usize];
            unsafe {
                result::memcpy_dtoh_async(&mut table, st.counts.ptr(), self.dev.stream.cu_stream())
                    .map_err(drv("copy"))
                    .map_err(untouched)?;
            }
            self.dev
                .stream
                .synchronize()
                .map_err(fault("a sort kernel failed"))
                .map_err(untouched)?;
            (0..256)
                .map(|d| table[d * blocks as usize] as usize)
                .collect()
        };
        starts.push(n);
        let spans = group_spans(&starts, groups);
        // Enqueue every group's passes on the sort stream, an event after each.
        let events = Events::new(spans.len(), false).map_err(untouched)?;
        let mut at = Vec::with_capacity(spans.len());
        for (g, &(b, e, single)) in spans.iter().enumerate() {
            let mut cur = 1usize;
            // Within one digit value the split digit is constant: its pass can be left out.
            let own: Vec<u32> = shifts
                .iter()
                .copied()
                .filter(|&s| !(single && s == top))
                .collect();
            let off = (b * size) as u64;
            if onesweep && !own.is_empty() {
                self.digit_hist::<K>(k, st, st.bufs[1].ptr() + off, e - b, &own, 1)
                    .map_err(untouched)?;
            }
            for &shift in &own {
                let (src, dst) = (st.bufs[cur].ptr() + off, st.bufs[1 - cur].ptr() + off);
                if onesweep {
                    let row = Self::hist_row(st, 1, shift);
                    self.pass_onesweep::<K>(k, st, src, dst, e - b, shift, row)
                } else {
                    self.pass::<K>(k, st, src, dst, e - b, shift).map(|_| ())
                }
                .map_err(untouched)?;
                cur = 1 - cur;
            }
            unsafe { result::event::record(events.0[g], self.dev.stream.cu_stream()) }
                .map_err(drv("cannot record an event"))
                .map_err(untouched)?;
            at.push(cur);
        }
        prof.passes = 1 + shifts.len();
        prof.groups = spans.len();
        unsafe { result::event::record(timing.0[1], self.dev.stream.cu_stream()) }
            .map_err(drv("cannot record an event"))
            .map_err(untouched)?;
        // Bring each group home once its sort is done (the copy stream waits for its event).
        let host = host.as_mut_ptr();
        let copies: Vec<_> = spans
            .iter()
            .enumerate()
            .map(|(g, &(b, e, _))| {
                let src = st.bufs[at[g]].ptr() + (b * size) as u64;
                // SAFETY: host holds n keys' bytes and b <= e <= n.
                (
                    src,
                    unsafe { host.add(b * size) },
                    (e - b) * size,
                    Some(events.0[g]),
                )
            })
            .collect();
        let copy = self.dev.copy_stream.cu_stream();
        st.staging.download_spans(copy, &copies)?;
        // Split and group sorts by the device clock; what the copies added after them is D2H.
        let total = t.elapsed().as_secs_f64();
        let kernels_ms = unsafe {
            result::event::synchronize(timing.0[1])
                .and_then(|()| result::event::elapsed(timing.0[0], timing.0[1]))
        }
        .unwrap_or(f32::NAN);
        prof.sort_s = shifts_s + kernels_ms as f64 / 1e3;
        prof.d2h_s = (total - prof.sort_s).max(0.0);
        Ok(())
    }
}

/// The groups of a grouped sort: `starts[d]` is where the keys of top digit d begin after the
/// split (257 entries, the last = n). Returns `(begin, end, one digit value)` spans of whole
/// buckets in order, none empty, each closed once it holds n / `groups` keys; a bucket that big
/// on its own gets a span of its own (so a skewed digit does not merge a small bucket into it,
/// which would cost the big one the split digit's pass again).
fn group_spans(starts: &[usize], groups: usize) -> Vec<(usize, usize, bool)> {
    let n = starts[starts.len() - 1];
    let target = n.div_ceil(groups.max(1)).max(1);
    let mut spans = Vec::new();
    let (mut begin, mut digits) = (starts[0], 0usize);
    for d in 0..starts.len() - 1 {
        let (b, e) = (starts[d], starts[d + 1]);
        if e - b >= target && b > begin {
            spans.push((begin, b, digits <= 1));
            begin = b;
            digits = 0;
        }
        if e > b {
            digits += 1;
        }
        if e - begin >= target || d + 2 == starts.len() {
            if e > begin {
                spans.push((begin, e, digits <= 1));
            }
            begin = e;
            digits = 0;
        }
    }
    spans
}
#[cfg(test)]
mod tests {
    use super::group_spans;

    fn starts_of(counts: &[usize]) -> Vec<usize> {
        let mut s = vec![0];
        for c in counts {
            s.push(s.last().unwrap() + c);
        }
        s
    }

    /// Spans cover [0, n) in order, are not empty, end on bucket boundaries, know whether they
    /// hold one digit value, and never put a bucket of >= n / groups keys with another.
    fn check(counts: &[usize], groups: usize) -> Vec<(usize, usize, bool)> {
        let starts = starts_of(counts);
        let n = *starts.last().unwrap();
        let spans = group_spans(&starts, groups);
        let target = n.div_ceil(groups.max(1)).max(1);
        let mut at = 0;
        for &(b, e, single) in &spans {
            assert_eq!(b, at, "spans must be contiguous: {spans:?}");
            assert!(e > b, "empty span: {spans:?}");
            let inside: Vec<usize> = (0..counts.len())
                .filter(|&d| counts[d] > 0 && starts[d] >= b && starts[d + 1] <= e)
                .collect();
            assert!(starts.contains(&e), "span end {e} is not a bucket boundary");
            assert_eq!(single, inside.len() == 1, "one-value flag of ({b}, {e})");
            if inside.len() > 1 {
                assert!(
                    inside.iter().all(|&d| counts[d] < target),
                    "big bucket shared"
                );
            }
            at = e;
        }
        assert_eq!(at, n, "spans must end at n: {spans:?}");
        spans
    }

    #[test]
    fn even_buckets_make_the_asked_groups() {
        let spans = check(&[10; 256], 16);
        assert_eq!(spans.len(), 16);
        assert!(spans.iter().all(|&(b, e, single)| e - b == 160 && !single));
    }

    #[test]
    fn a_dominant_bucket_gets_its_own_span() {
        // One small key before a bucket holding all the others (u64 keys 0xFF<<56 | r, and 0).
        let mut counts = vec![0; 256];
        counts[0] = 1;
        counts[255] = 999_999;
        assert_eq!(check(&counts, 16), vec![(0, 1, true), (1, 1_000_000, true)]);
        // Small buckets on both sides of a big one.
        let mut counts = vec![1; 256];
        counts[100] = 10_000;
        let spans = check(&counts, 4);
        assert!(spans.contains(&(100, 10_100, true)), "{spans:?}");
    }

    #[test]
    fn one_bucket_and_sparse_buckets() {
        let mut counts = vec![0; 256];
        counts[7] = 5;
        assert_eq!(check(&counts, 16), vec![(0, 5, true)]);
        let mut x = 12345u64;
        for groups in [1, 2, 5, 16, 300] {
            for _ in 0..200 {
                let counts: Vec<usize> = (0..256)
                    .map(|_| {
                        crate::util::xorshift(&mut x);
                        match x % 10 {
                            0..=5 => 0,
                            6..=8 => (x >> 8) as usize % 50,
                            _ => (x >> 8) as usize % 5000,
                        }
                    })
                    .collect();
                if counts.iter().sum::<usize>() > 0 {
                    check(&counts, groups);
                }
            }
        }
    }
}
