//! Whole suffix arrays on the device: prefix doubling over 32-bit ranks (the approach of Wang,
//! Baxter & Owens, "Fast parallel skew and prefix-doubling suffix array construction on the
//! GPU", and of libcubwt), for a text that one pe holds whole — the whole input at p = 1, or a
//! gathered base case of the distributed algorithms.
//!
//! The first round sorts every suffix by its first k characters, packed into 64 bits after the
//! alphabet is renumbered densely (k = 21 for DNA with N, 9 for English, 8 for arbitrary bytes);
//! round r then sorts only the suffixes still in groups of two or more, by (group, group of the
//! suffix k·2^(r-1) further on), on the device's radix sort. Groups keep their place in the
//! array, so sorting by the group's first position keeps them apart; the new groups are found by
//! comparing neighbours, numbered by a max-scan and compacted by an add-scan. Everything stays
//! on the device between rounds; the host reads one count per round. kernels: `saca.cu`.
//!
//! Time is O(n log n) in the worst case (aⁿ: every suffix stays in a group until the offset
//! reaches n/2), O(n log(LCP)) in general; device memory about 63 bytes per character.

use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::time::Instant;

use cudarc::driver::{result, sys, CudaFunction};
use rayon::prelude::*;

use super::backend::{GpuSort, State};
use super::buffer::DeviceBuffer;
use super::error::{drv, fault, GpuError};
use super::kernels::{Kernels, BLOCK};
use crate::local::{used_bytes, widen_in_place, Alphabet, DeviceSuffixArray, PooledSa};

/// Texts shorter than this are left to libsais: launches and transfers cost more than they save.
pub const MIN_GPU_SA: usize = 1 << 18;
/// Longest text the device path takes (32-bit positions and ranks, one sort chunk).
pub const MAX_GPU_SA: usize = (1 << 31) - 128;

/// Device memory a suffix array needs per character (two 16-byte sort records, six 4-byte arrays,
/// the text, the one-sweep sort passes' tile state of 1 byte per record), rounded up for the
/// fixed part.
pub const DEVICE_BYTES_PER_CHAR: usize = 2 * 16 + 6 * 4 + 4 + 1 + 2;

/// Elements each block of the scan kernels covers (so that the partials fit one block's loop).
const SCAN_PER: usize = 1 << 16;

/// The kernels of the device suffix array.
pub(super) struct SacaKernels {
    keys_u8: CudaFunction,
    keys_u32: CudaFunction,
    round_keys: CudaFunction,
    heads: CudaFunction,
    ranks: CudaFunction,
    compact: CudaFunction,
    /// [add, max] for each of the three scan steps.
    reduce: [CudaFunction; 2],
    part: [CudaFunction; 2],
    apply: [CudaFunction; 2],
}

impl SacaKernels {
    pub(super) fn load(
        f: &dyn Fn(&str) -> Result<CudaFunction, GpuError>,
    ) -> Result<Self, GpuError> {
        Ok(SacaKernels {
            keys_u8: f("sa_keys_u8")?,
            keys_u32: f("sa_keys_u32")?,
            round_keys: f("sa_round_keys")?,
            heads: f("sa_heads")?,
            ranks: f("sa_ranks")?,
            compact: f("sa_compact")?,
            reduce: [f("scan_reduce_add")?, f("scan_reduce_max")?],
            part: [f("scan_part_add")?, f("scan_part_max")?],
            apply: [f("scan_apply_add")?, f("scan_apply_max")?],
        })
    }
}

/// A text for the device: bytes, or integers below 2^32.
pub enum SacaText<'a> {
    /// A byte text.
    Bytes(&'a [u8]),
    /// A text of integers (below 2^32).
    Ints(&'a [u32]),
}

impl SacaText<'_> {
    /// Characters of the text.
    pub fn len(&self) -> usize {
        match self {
            SacaText::Bytes(t) => t.len(),
            SacaText::Ints(t) => t.len(),
        }
    }

    /// Whether the text has no characters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where the time of one device suffix array went (logged at debug level).
#[derive(Clone, Debug, Default)]
struct SacaProfile {
    /// Characters per first-round key.
    k: u32,
    /// Doubling rounds after the first sort.
    rounds: usize,
    alloc_s: f64,
    h2d_s: f64,
    first_s: f64,
    rounds_s: f64,
    d2h_s: f64,
}

fn bits(x: u64) -> u32 {
    64 - x.leading_zeros()
}

impl Alphabet {
    /// (largest code, the byte → code table for bytes).
    fn codes(&self) -> (u64, Option<[u8; 256]>) {
        match self {
            Alphabet::Bytes(used) => {
                let mut code = [0u8; 256];
                let mut next = 0u32;
                for c in 0..256 {
                    if used[c] {
                        code[c] = next as u8;
                        next += 1;
                    }
                }
                (next.saturating_sub(1) as u64, Some(code))
            }
            Alphabet::Ints(max) => (*max, None),
        }
    }
}

/// One device suffix array in the making: its buffers on the device, filled by
/// [`DeviceSa::upload`], built by [`DeviceSa::build`], read by [`DeviceSa::download`]; every
/// buffer is freed when it is dropped.
pub(super) struct SacaRun {
    n: usize,
    /// Bytes per character on the device (1 for bytes, 4 for integers).
    word: usize,
    ints: bool,
    cbits: u32,
    k: u32,
    /// Characters uploaded so far.
    filled: usize,
    d_text: DeviceBuffer,
    d_code: DeviceBuffer,
    d_isa: DeviceBuffer,
    d_sa: DeviceBuffer,
    d_act: [DeviceBuffer; 2],
    d_hp: DeviceBuffer,
    d_keep: DeviceBuffer,
    d_part: DeviceBuffer,
    d_total: DeviceBuffer,
    prof: SacaProfile,
}

impl GpuSort {
    /// The suffix array of `text` built on the device, or why not (the caller then uses the
    /// CPU). Suffixes compare as strings of their values; a proper prefix sorts first.
    pub fn suffix_array_on_device(&self, text: SacaText) -> Result<Vec<u64>, GpuError> {
        let n = text.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let alphabet = match text {
            SacaText::Bytes(t) => Alphabet::Bytes(used_bytes(t)),
            SacaText::Ints(t) => Alphabet::Ints(t.par_iter().copied().max().unwrap_or(0) as u64),
        };
        let mut session = self.device_sa(n, alphabet)?;
        match text {
            SacaText::Bytes(t) => session.upload(t)?,
            SacaText::Ints(t) => session.upload(bytemuck::cast_slice(t))?,
        }
        session.build()?;
        let t = Instant::now();
        // 32-bit entries come over (half the bytes of 64-bit ones) into the front of the result's
        // buffer and are widened there in place: no second host array.
        let mut sa: Vec<u64> = Vec::with_capacity(n);
        // SAFETY: the buffer has room for n u64, so for 2n u32; the first n are written here.
        let front = unsafe { std::slice::from_raw_parts_mut(sa.as_mut_ptr() as *mut u32, n) };
        session.download(0, front)?;
        // SAFETY: the buffer holds n u64 and its first n u32 slots were just written.
        unsafe {
            widen_in_place(sa.as_mut_ptr(), n);
            sa.set_len(n);
        }
        session.run.prof.d2h_s += t.elapsed().as_secs_f64();
        Ok(sa)
    }

    /// Starts a device suffix array of `n` characters over `alphabet`: checks the device memory
    /// and allocates everything, holding the device until the build handle is dropped. The text then
    /// goes up in consecutive pieces ([`DeviceSa::upload`]), [`DeviceSa::build`] sorts, and the
    /// suffix array comes back in any pieces ([`DeviceSa::download`]). Device memory ≈
    /// [`DEVICE_BYTES_PER_CHAR`] per character; host memory only the staging buffers.
    pub fn device_sa(&self, n: usize, alphabet: Alphabet) -> Result<DeviceSa<'_>, GpuError> {
        if n > MAX_GPU_SA {
            return Err(GpuError::Unsupported(format!(
                "{n} characters is more than the device path takes ({MAX_GPU_SA})"
            )));
        }
        let kernels = self.kernels()?;
        let mut st = self.lock();
        self.dev.bind()?;
        let started = Instant::now();
        let run = self.saca_begin(&mut st, n, alphabet);
        match run {
            Ok(run) => Ok(DeviceSa {
                gpu: self,
                kernels,
                st,
                run,
                started,
            }),
            Err(e) => {
                st.free_bufs();
                Err(e)
            }
        }
    }

    /// Blocks for a grid-stride kernel over `items` elements: one per BLOCK items, at most 16 a
    /// multiprocessor.
    fn grid_for(&self, items: usize) -> u32 {
        (items.div_ceil(BLOCK as usize) as u32).clamp(1, self.dev.sms * 16)
    }

    fn saca_begin(
        &self,
        st: &mut State,
        n: usize,
        alphabet: Alphabet,
    ) -> Result<SacaRun, GpuError> {
        let mut prof = SacaProfile::default();
        let t = Instant::now();
        let (max_code, code) = alphabet.codes();
        if max_code >= 1 << 32 {
            return Err(GpuError::Unsupported("values of 2^32 or more".into()));
        }
        let cbits = bits(max_code).max(1);
        let k = (64 / cbits).min(64);
        prof.k = k;

        // Device memory: two sort buffers of 16 bytes a suffix, six arrays of 4, the text.
        // (GpuSort::suffix_array_max_len promises what this check accepts: keep them together.)
        let need = n * DEVICE_BYTES_PER_CHAR + (64 << 20);
        let (free, _) =
            result::mem_get_info().map_err(drv("cannot read the free device memory"))?;
        if need > free + st.own_bytes() {
            return Err(GpuError::OutOfMemory(format!(
                "a suffix array of {n} characters needs about {} MiB of device memory, {} MiB are free",
                need >> 20,
                free >> 20
            )));
        }
        let chunk = self.reserve::<u128>(st, n)?;
        if chunk < n {
            return Err(GpuError::OutOfMemory(format!(
                "the device holds {chunk} of the {n} sort records a suffix array needs"
            )));
        }
        let ints = code.is_none();
        let word = if ints { 4 } else { 1 };
        let w = 4usize;
        let part_cap = n.div_ceil(SCAN_PER).max(1);
        // At least 4 bytes each; a failure frees those allocated before it.
        let alloc = |bytes: usize| {
            DeviceBuffer::alloc(&self.dev.ctx, bytes.max(4))
                .map_err(|source| GpuError::Alloc { bytes, source })
        };
        let d_text = alloc(n * word + 8)?;
        let d_code = alloc(256)?;
        let d_isa = alloc(n * w)?;
        let d_sa = alloc(n * w)?;
        let d_act = [alloc(n * w)?, alloc(n * w)?];
        let d_hp = alloc(n * w)?;
        let d_keep = alloc(n * w)?;
        let d_part = alloc(part_cap * w)?;
        let d_total = alloc(8)?;
        if let Some(code) = code {
            let stream = self.dev.stream.cu_stream();
            unsafe { result::memcpy_htod_async(d_code.ptr(), &code[..], stream) }
                .map_err(drv("host-to-device copy"))?;
            self.dev
                .stream
                .synchronize()
                .map_err(drv("host-to-device copy"))?;
        }
        prof.alloc_s = t.elapsed().as_secs_f64();
        Ok(SacaRun {
            n,
            word,
            ints,
            cbits,
            k,
            filled: 0,
            d_text,
            d_code,
            d_isa,
            d_sa,
            d_act,
            d_hp,
            d_keep,
            d_part,
            d_total,
            prof,
        })
    }

    fn saca_build(
        &self,
        kernels: &Kernels,
        st: &mut State,
        run: &mut SacaRun,
    ) -> Result<(), GpuError> {
        let k_ = &kernels.saca;
        let n = run.n;
        if run.filled != n {
            return Err(GpuError::Internal(format!(
                "{} of {n} characters uploaded",
                run.filled
            )));
        }
        let n64 = n as u64;
        let (cbits, k) = (run.cbits, run.k);
        let (d_text, d_code) = (run.d_text.ptr(), run.d_code.ptr());
        let (d_sa, d_isa) = (run.d_sa.ptr(), run.d_isa.ptr());
        let (d_hp, d_keep) = (run.d_hp.ptr(), run.d_keep.ptr());
        let (d_part, d_total) = (run.d_part.ptr(), run.d_total.ptr());
        let d_act = [run.d_act[0].ptr(), run.d_act[1].ptr()];
        let launch = |f: &CudaFunction, items: usize, params: &mut [*mut c_void]| {
            self.dev.launch(f, self.grid_for(items), BLOCK, params)
        };
        // Inclusive scan of a[0..m) in place; op 0 = add, 1 = max.
        let scan = |a: sys::CUdeviceptr, m: usize, op: usize, part: sys::CUdeviceptr| {
            let nb = m.div_ceil(SCAN_PER).max(1);
            let (m64, per) = (m as u64, SCAN_PER as u64);
            let nb32 = nb as u32;
            let run = |f: &CudaFunction, grid: u32, params: &mut [*mut c_void]| {
                self.dev.launch(f, grid, BLOCK, params)
            };
            run(&k_.reduce[op], nb32, &mut params!(a, m64, per, part))?;
            run(&k_.part[op], 1, &mut params!(part, nb32))?;
            run(&k_.apply[op], nb32, &mut params!(a, m64, per, part))
        };

        // First round: all suffixes by their first k characters.
        let t = Instant::now();
        let rec0 = st.bufs[0].ptr();
        if run.ints {
            launch(&k_.keys_u32, n, &mut params!(d_text, n64, cbits, k, rec0))?
        } else {
            launch(
                &k_.keys_u8,
                n,
                &mut params!(d_text, n64, d_code, cbits, k, rec0),
            )?
        }
        let (at, _) = self.sort_on_device::<u128>(kernels, st, n, true)?;
        let null: sys::CUdeviceptr = 0;
        let mut m = self.split_groups(
            kernels, st, at, n, null, d_sa, d_isa, d_hp, d_keep, d_part, d_act[0], d_total, k,
            &scan,
        )?;
        run.prof.first_s = t.elapsed().as_secs_f64();

        // Doubling rounds over the suffixes still in groups.
        let t = Instant::now();
        let sbits = bits(n64 + k as u64 - 1);
        let mut h = k as u64;
        let mut cur = 0usize;
        while m > 0 {
            if run.prof.rounds > 0 && h / 2 >= n64 {
                // The previous round compared 2·(h/2) ≥ n characters: no two suffixes can tie.
                return Err(GpuError::Internal(format!(
                    "{m} suffixes unresolved at offset {h} of {n}"
                )));
            }
            let (act, rec0) = (d_act[cur], st.bufs[0].ptr());
            let m64 = m as u64;
            launch(
                &k_.round_keys,
                m,
                &mut params!(act, m64, d_sa, d_isa, n64, h, k, sbits, rec0),
            )?;
            let (at, _) = self.sort_on_device::<u128>(kernels, st, m, true)?;
            m = self.split_groups(
                kernels,
                st,
                at,
                m,
                act,
                d_sa,
                d_isa,
                d_hp,
                d_keep,
                d_part,
                d_act[1 - cur],
                d_total,
                k,
                &scan,
            )?;
            cur = 1 - cur;
            h *= 2;
            run.prof.rounds += 1;
            log::trace!(
                "gpu sa: round {} (offset {h}): {m} suffixes left in groups",
                run.prof.rounds
            );
        }
        run.prof.rounds_s = t.elapsed().as_secs_f64();
        Ok(())
    }

    /// After a sort of m records (in bufs[at]) of the suffixes at sorted positions `act` (null:
    /// 0..m): writes their sa and isa entries, splits their groups, and compacts the positions of
    /// the suffixes still in groups of two or more into `out`; returns how many.
    #[allow(clippy::too_many_arguments)]
    fn split_groups(
        &self,
        kernels: &Kernels,
        st: &mut State,
        at: usize,
        m: usize,
        act: sys::CUdeviceptr,
        d_sa: sys::CUdeviceptr,
        d_isa: sys::CUdeviceptr,
        d_hp: sys::CUdeviceptr,
        d_keep: sys::CUdeviceptr,
        d_part: sys::CUdeviceptr,
        out: sys::CUdeviceptr,
        d_total: sys::CUdeviceptr,
        k: u32,
        scan: &dyn Fn(sys::CUdeviceptr, usize, usize, sys::CUdeviceptr) -> Result<(), GpuError>,
    ) -> Result<usize, GpuError> {
        let k_ = &kernels.saca;
        let cu_stream = self.dev.stream.cu_stream();
        let grid = self.grid_for(m);
        let launch =
            |f: &CudaFunction, params: &mut [*mut c_void]| self.dev.launch(f, grid, BLOCK, params);
        let rec = st.bufs[at].ptr();
        let m64 = m as u64;
        launch(&k_.heads, &mut params!(rec, m64, act, d_sa, d_hp))?;
        scan(d_hp, m, 1, d_part)?;
        launch(&k_.ranks, &mut params!(rec, m64, d_hp, k, d_isa, d_keep))?;
        scan(d_keep, m, 0, d_part)?;
        launch(&k_.compact, &mut params!(act, d_keep, m64, out, d_total))?;
        let mut total = [0u32; 1];
        unsafe { result::memcpy_dtoh_async(&mut total[..], d_total, cu_stream) }
            .map_err(drv("device-to-host copy"))?;
        self.dev
            .stream
            .synchronize()
            .map_err(fault("a suffix array kernel failed"))?;
        Ok(total[0] as usize)
    }
}

/// A device suffix array in the making (see [`GpuSort::device_sa`]); holds the device (its
/// lock) until dropped, and frees every buffer then.
pub struct DeviceSa<'a> {
    gpu: &'a GpuSort,
    kernels: &'a Kernels,
    /// Declared before `st`: fields drop in order, so the buffers are freed before the lock goes.
    run: SacaRun,
    st: std::sync::MutexGuard<'a, State>,
    started: Instant,
}

impl DeviceSa<'_> {
    /// Copies the next piece of the text to the device: pieces come in text order, as raw
    /// characters (bytes; for an integer text, little-endian u32).
    pub fn upload(&mut self, piece: &[u8]) -> Result<(), GpuError> {
        let run = &mut self.run;
        let chars = piece.len() / run.word;
        if !piece.len().is_multiple_of(run.word) || run.filled + chars > run.n {
            return Err(GpuError::Internal(format!(
                "a piece of {} bytes after {} of {} characters",
                piece.len(),
                run.filled,
                run.n
            )));
        }
        let t = Instant::now();
        let dst = run.d_text.ptr() + (run.filled * run.word) as u64;
        self.st.staging.upload(&self.gpu.dev.stream, piece, dst)?;
        run.filled += chars;
        run.prof.h2d_s += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// Sorts the suffixes of the uploaded text (all of it must be there).
    pub fn build(&mut self) -> Result<(), GpuError> {
        self.gpu
            .saca_build(self.kernels, &mut self.st, &mut self.run)
    }

    /// Copies SA[offset .. offset + out.len()) (after [`Self::build`]) into `out`.
    pub fn download(&mut self, offset: usize, out: &mut [u32]) -> Result<(), GpuError> {
        let run = &mut self.run;
        if offset + out.len() > run.n {
            return Err(GpuError::Internal(format!(
                "SA[{offset}..{}) of {}",
                offset + out.len(),
                run.n
            )));
        }
        let t = Instant::now();
        let src = run.d_sa.ptr() + (offset * 4) as u64;
        self.st.staging.download(
            self.gpu.dev.stream.cu_stream(),
            src,
            out.as_mut_ptr() as *mut u8,
            std::mem::size_of_val(out),
        )?;
        run.prof.d2h_s += t.elapsed().as_secs_f64();
        Ok(())
    }
}

impl Drop for DeviceSa<'_> {
    fn drop(&mut self) {
        let prof = &self.run.prof;
        log::debug!(
            "gpu: suffix array of {} characters (k = {}): {} rounds, alloc {:.3}s, h2d {:.3}s, first sort {:.3}s, rounds {:.3}s, d2h {:.3}s, total {:.3}s",
            self.run.n,
            prof.k,
            prof.rounds,
            prof.alloc_s,
            prof.h2d_s,
            prof.first_s,
            prof.rounds_s,
            prof.d2h_s,
            self.started.elapsed().as_secs_f64()
        );
        // The sort buffers were sized for this text: give them back for other processes. (The
        // run's own buffers go with it, after this.)
        self.st.free_bufs();
    }
}

/// The relay's view ([`crate::algo::pooled`]): the error is a message for its log.
impl PooledSa for DeviceSa<'_> {
    fn upload(&mut self, piece: &[u8]) -> Result<(), String> {
        DeviceSa::upload(self, piece).map_err(|e| e.to_string())
    }
    fn build(&mut self) -> Result<(), String> {
        DeviceSa::build(self).map_err(|e| e.to_string())
    }
    fn download(&mut self, offset: usize, out: &mut [u32]) -> Result<(), String> {
        DeviceSa::download(self, offset, out).map_err(|e| e.to_string())
    }
}

impl GpuSort {
    /// The device suffix array for texts in the device path's range; None (with a warning when
    /// the device failed) otherwise.
    fn suffix_array_or_cpu(&self, text: SacaText) -> Option<Vec<u64>> {
        let n = text.len();
        if !(MIN_GPU_SA..=MAX_GPU_SA).contains(&n) {
            return None;
        }
        match self.suffix_array_on_device(text) {
            Ok(sa) => Some(sa),
            Err(e) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                log::warn!("gpu suffix array of {n} characters failed, building it on the CPU instead: {e}");
                None
            }
        }
    }
}

impl DeviceSuffixArray for GpuSort {
    fn suffix_array_bytes(&self, text: &[u8]) -> Option<Vec<u64>> {
        self.suffix_array_or_cpu(SacaText::Bytes(text))
    }

    fn suffix_array_ints(&self, text: &[u32]) -> Option<Vec<u64>> {
        self.suffix_array_or_cpu(SacaText::Ints(text))
    }

    fn suffix_array_max_len(&self) -> usize {
        if self.dev.bind().is_err() {
            return 0;
        }
        match result::mem_get_info() {
            // The free memory now, plus what this backend's own sort buffers would give back.
            // The same margin as the check before a suffix array starts.
            Ok((free, _)) => ((free + self.lock().own_bytes()).saturating_sub(64 << 20)
                / DEVICE_BYTES_PER_CHAR)
                .min(MAX_GPU_SA),
            Err(_) => 0,
        }
    }

    fn pooled_sa(&self, n: usize, alphabet: &Alphabet) -> Option<Box<dyn PooledSa + '_>> {
        if !(MIN_GPU_SA..=MAX_GPU_SA).contains(&n) {
            return None;
        }
        match self.device_sa(n, *alphabet) {
            Ok(s) => Some(Box::new(s)),
            Err(e) => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                log::warn!("gpu suffix array of {n} characters cannot start on the device, the distributed algorithm builds it instead: {e}");
                None
            }
        }
    }
}
