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
use std::time::Instant;

use cudarc::driver::{result, sys, CudaFunction};
use rayon::prelude::*;

use super::{drv, GpuSort, Kernels, State, BLOCK};
use crate::local::{used_bytes, widen_in_place, Alphabet, PooledSa};

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
        f: &dyn Fn(&str) -> std::result::Result<CudaFunction, String>,
    ) -> std::result::Result<Self, String> {
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
    Bytes(&'a [u8]),
    Ints(&'a [u64]),
}

impl SacaText<'_> {
    pub fn len(&self) -> usize {
        match self {
            SacaText::Bytes(t) => t.len(),
            SacaText::Ints(t) => t.len(),
        }
    }

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

/// Device allocations of one run, freed on drop.
struct DeviceBufs(Vec<sys::CUdeviceptr>);

impl DeviceBufs {
    fn alloc(&mut self, bytes: usize) -> std::result::Result<sys::CUdeviceptr, String> {
        let p = unsafe { result::malloc_sync(bytes.max(4)) }
            .map_err(|e| format!("cannot allocate {} MiB on the device: {e}", bytes >> 20))?;
        self.0.push(p);
        Ok(p)
    }
}

impl Drop for DeviceBufs {
    fn drop(&mut self) {
        for &p in &self.0 {
            unsafe { result::free_sync(p).ok() };
        }
    }
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
/// [`GpuSort::saca_upload`], built by [`GpuSort::saca_build`], read by [`GpuSort::saca_download`].
pub(super) struct SacaRun {
    n: usize,
    /// Bytes per character on the device (1 for bytes, 4 for integers).
    word: usize,
    ints: bool,
    cbits: u32,
    k: u32,
    /// Characters uploaded so far.
    filled: usize,
    d_text: sys::CUdeviceptr,
    d_code: sys::CUdeviceptr,
    d_isa: sys::CUdeviceptr,
    d_sa: sys::CUdeviceptr,
    d_act: [sys::CUdeviceptr; 2],
    d_hp: sys::CUdeviceptr,
    d_keep: sys::CUdeviceptr,
    d_part: sys::CUdeviceptr,
    d_total: sys::CUdeviceptr,
    prof: SacaProfile,
    /// Freed last (after the fields above stop being used).
    _dev: DeviceBufs,
}

impl GpuSort {
    /// The suffix array of `text` built on the device, or why not (the caller then uses the
    /// CPU). Suffixes compare as strings of their values; a proper prefix sorts first.
    pub fn suffix_array_on_device(&self, text: SacaText) -> std::result::Result<Vec<u64>, String> {
        let n = text.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let alphabet = match text {
            SacaText::Bytes(t) => Alphabet::Bytes(used_bytes(t)),
            SacaText::Ints(t) => Alphabet::Ints(t.par_iter().copied().max().unwrap_or(0)),
        };
        let mut session = self.device_sa(n, alphabet)?;
        match text {
            SacaText::Bytes(t) => session.upload(t)?,
            SacaText::Ints(t) => {
                let v: Vec<u32> = t.par_iter().map(|&x| x as u32).collect();
                session.upload(bytemuck::cast_slice(&v))?;
            }
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
    pub fn device_sa(
        &self,
        n: usize,
        alphabet: Alphabet,
    ) -> std::result::Result<DeviceSa<'_>, String> {
        if n > MAX_GPU_SA {
            return Err(format!(
                "{n} characters is more than the device path takes ({MAX_GPU_SA})"
            ));
        }
        let kernels = self.kernels()?;
        let mut st = self.lock();
        self.ctx
            .bind_to_thread()
            .map_err(drv("cannot bind the context"))?;
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
                self.free_bufs(&mut st);
                Err(e)
            }
        }
    }

    /// Blocks for a grid-stride kernel over `items` elements: one per BLOCK items, at most 16 a
    /// multiprocessor.
    fn grid_for(&self, items: usize) -> u32 {
        (items.div_ceil(BLOCK as usize) as u32).clamp(1, self.sms * 16)
    }

    fn saca_begin(
        &self,
        st: &mut State,
        n: usize,
        alphabet: Alphabet,
    ) -> std::result::Result<SacaRun, String> {
        let mut prof = SacaProfile::default();
        let t = Instant::now();
        let (max_code, code) = alphabet.codes();
        if max_code >= 1 << 32 {
            return Err("values of 2^32 or more".into());
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
            return Err(format!(
                "a suffix array of {n} characters needs about {} MiB of device memory, {} MiB are free",
                need >> 20,
                free >> 20
            ));
        }
        let mut dev = DeviceBufs(Vec::new());
        let chunk = self.reserve::<u128>(st, n)?;
        if chunk < n {
            return Err(format!(
                "the device holds {chunk} of the {n} sort records a suffix array needs"
            ));
        }
        let ints = code.is_none();
        let word = if ints { 4 } else { 1 };
        let w = 4usize;
        let part_cap = n.div_ceil(SCAN_PER).max(1);
        let d_text = dev.alloc(n * word + 8)?;
        let d_code = dev.alloc(256)?;
        let d_isa = dev.alloc(n * w)?;
        let d_sa = dev.alloc(n * w)?;
        let d_act = [dev.alloc(n * w)?, dev.alloc(n * w)?];
        let d_hp = dev.alloc(n * w)?;
        let d_keep = dev.alloc(n * w)?;
        let d_part = dev.alloc(part_cap * w)?;
        let d_total = dev.alloc(8)?;
        if let Some(code) = code {
            unsafe { result::memcpy_htod_async(d_code, &code[..], self.stream.cu_stream()) }
                .map_err(drv("host-to-device copy"))?;
            self.stream
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
            _dev: dev,
        })
    }

    fn saca_build(
        &self,
        kernels: &Kernels,
        st: &mut State,
        run: &mut SacaRun,
    ) -> std::result::Result<(), String> {
        let k_ = &kernels.saca;
        let n = run.n;
        if run.filled != n {
            return Err(format!(
                "internal error: {} of {n} characters uploaded",
                run.filled
            ));
        }
        let n64 = n as u64;
        let (cbits, k) = (run.cbits, run.k);
        let (d_text, d_code, d_sa, d_isa) = (run.d_text, run.d_code, run.d_sa, run.d_isa);
        let (d_hp, d_keep, d_part, d_total, d_act) =
            (run.d_hp, run.d_keep, run.d_part, run.d_total, run.d_act);
        let launch = |f: &CudaFunction, items: usize, params: &mut [*mut c_void]| {
            self.launch(f, self.grid_for(items), BLOCK, params)
        };
        // Inclusive scan of a[0..m) in place; op 0 = add, 1 = max.
        let scan = |a: sys::CUdeviceptr, m: usize, op: usize, part: sys::CUdeviceptr| {
            let nb = m.div_ceil(SCAN_PER).max(1);
            let (m64, per) = (m as u64, SCAN_PER as u64);
            let nb32 = nb as u32;
            let run = |f: &CudaFunction, grid: u32, params: &mut [*mut c_void]| {
                self.launch(f, grid, BLOCK, params)
            };
            run(&k_.reduce[op], nb32, &mut params!(a, m64, per, part))?;
            run(&k_.part[op], 1, &mut params!(part, nb32))?;
            run(&k_.apply[op], nb32, &mut params!(a, m64, per, part))
        };

        // First round: all suffixes by their first k characters.
        let t = Instant::now();
        let rec0 = st.bufs[0];
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
                return Err(format!(
                    "internal error: {m} suffixes unresolved at offset {h} of {n}"
                ));
            }
            let (act, rec0) = (d_act[cur], st.bufs[0]);
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
        scan: &dyn Fn(
            sys::CUdeviceptr,
            usize,
            usize,
            sys::CUdeviceptr,
        ) -> std::result::Result<(), String>,
    ) -> std::result::Result<usize, String> {
        let k_ = &kernels.saca;
        let cu_stream = self.stream.cu_stream();
        let grid = self.grid_for(m);
        let launch =
            |f: &CudaFunction, params: &mut [*mut c_void]| self.launch(f, grid, BLOCK, params);
        let rec = st.bufs[at];
        let m64 = m as u64;
        launch(&k_.heads, &mut params!(rec, m64, act, d_sa, d_hp))?;
        scan(d_hp, m, 1, d_part)?;
        launch(&k_.ranks, &mut params!(rec, m64, d_hp, k, d_isa, d_keep))?;
        scan(d_keep, m, 0, d_part)?;
        launch(&k_.compact, &mut params!(act, d_keep, m64, out, d_total))?;
        let mut total = [0u32; 1];
        unsafe { result::memcpy_dtoh_async(&mut total[..], d_total, cu_stream) }
            .map_err(drv("device-to-host copy"))?;
        self.stream
            .synchronize()
            .map_err(drv("a suffix array kernel failed"))?;
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
    pub fn upload(&mut self, piece: &[u8]) -> std::result::Result<(), String> {
        let run = &mut self.run;
        let chars = piece.len() / run.word;
        if !piece.len().is_multiple_of(run.word) || run.filled + chars > run.n {
            return Err(format!(
                "internal error: a piece of {} bytes after {} of {} characters",
                piece.len(),
                run.filled,
                run.n
            ));
        }
        let t = Instant::now();
        let dst = run.d_text + (run.filled * run.word) as u64;
        self.gpu.upload(&mut self.st, piece, dst)?;
        run.filled += chars;
        run.prof.h2d_s += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// Sorts the suffixes of the uploaded text (all of it must be there).
    pub fn build(&mut self) -> std::result::Result<(), String> {
        self.gpu
            .saca_build(self.kernels, &mut self.st, &mut self.run)
    }

    /// Copies SA[offset .. offset + out.len()) (after [`Self::build`]) into `out`.
    pub fn download(&mut self, offset: usize, out: &mut [u32]) -> std::result::Result<(), String> {
        let run = &mut self.run;
        if offset + out.len() > run.n {
            return Err(format!(
                "internal error: SA[{offset}..{}) of {}",
                offset + out.len(),
                run.n
            ));
        }
        let t = Instant::now();
        let src = run.d_sa + (offset * 4) as u64;
        self.gpu.download(
            &mut self.st,
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
        self.gpu.free_bufs(&mut self.st);
    }
}

impl PooledSa for DeviceSa<'_> {
    fn upload(&mut self, piece: &[u8]) -> std::result::Result<(), String> {
        DeviceSa::upload(self, piece)
    }
    fn build(&mut self) -> std::result::Result<(), String> {
        DeviceSa::build(self)
    }
    fn download(&mut self, offset: usize, out: &mut [u32]) -> std::result::Result<(), String> {
        DeviceSa::download(self, offset, out)
    }
}
