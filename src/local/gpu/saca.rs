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
//! reaches n/2), O(n log(LCP)) in general; device memory about 62 bytes per character.

use std::ffi::c_void;
use std::time::Instant;

use cudarc::driver::{result, sys, CudaFunction};
use rayon::prelude::*;

use super::{drv, GpuSort, Kernels, State, BLOCK};

/// Texts shorter than this are left to libsais: launches and transfers cost more than they save.
pub const MIN_GPU_SA: usize = 1 << 18;
/// Longest text the device path takes (32-bit positions and ranks, one sort chunk).
pub const MAX_GPU_SA: usize = (1 << 31) - 128;

/// Device memory a suffix array needs per character (two 16-byte sort records, six 4-byte arrays,
/// the text), rounded up for the fixed part.
pub const DEVICE_BYTES_PER_CHAR: usize = 2 * 16 + 6 * 4 + 4 + 2;

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

/// Turns n u32 values at the start of a buffer of n u64 into those n u64, in parallel.
///
/// u64 number q covers u32 slots 2q and 2q+1. Indices [lo, hi) with 2·lo ≥ hi read slots [lo, hi)
/// and write slots [2·lo, 2·hi): disjoint, and every slot written there held a value of index ≥ hi,
/// already widened. So the ranges [n/2, n), [n/4, n/2), … go one after the other, each in parallel,
/// and the last few indices one by one from the top.
///
/// # Safety
/// `p` points to a buffer of at least n u64 whose first n u32 slots are initialised.
unsafe fn widen_in_place(p: *mut u64, n: usize) {
    let base = p as usize;
    let mut hi = n;
    while hi >= 1 << 16 {
        let lo = hi.div_ceil(2);
        (lo..hi)
            .into_par_iter()
            .with_min_len(1 << 14)
            .for_each(|q| {
                let v = unsafe { *(base as *const u32).add(q) };
                unsafe { *(base as *mut u64).add(q) = v as u64 };
            });
        hi = lo;
    }
    for q in (0..hi).rev() {
        let v = unsafe { *(base as *const u32).add(q) };
        unsafe { *(base as *mut u64).add(q) = v as u64 };
    }
}

fn bits(x: u64) -> u32 {
    64 - x.leading_zeros()
}

impl GpuSort {
    /// The suffix array of `text` built on the device, or why not (the caller then uses the
    /// CPU). Suffixes compare as strings of their values; a proper prefix sorts first.
    pub fn suffix_array_on_device(&self, text: SacaText) -> std::result::Result<Vec<u64>, String> {
        let n = text.len();
        if n > MAX_GPU_SA {
            return Err(format!(
                "{n} characters is more than the device path takes ({MAX_GPU_SA})"
            ));
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let kernels = self.kernels()?;
        let mut st = self.lock();
        let st = &mut *st;
        self.ctx
            .bind_to_thread()
            .map_err(drv("cannot bind the context"))?;
        let t0 = Instant::now();
        let r = self.saca(kernels, st, &text);
        if let Ok((_, prof)) = &r {
            log::debug!(
                "gpu: suffix array of {n} characters (k = {}): {} rounds, alloc {:.3}s, h2d {:.3}s, first sort {:.3}s, rounds {:.3}s, d2h {:.3}s, total {:.3}s",
                prof.k,
                prof.rounds,
                prof.alloc_s,
                prof.h2d_s,
                prof.first_s,
                prof.rounds_s,
                prof.d2h_s,
                t0.elapsed().as_secs_f64()
            );
        }
        // The sort buffers were sized for this text: give them back for other processes.
        self.free_bufs(st);
        r.map(|(sa, _)| sa)
    }

    /// Blocks for a grid-stride kernel over `items` elements: one per BLOCK items, at most 16 a
    /// multiprocessor.
    fn grid_for(&self, items: usize) -> u32 {
        (items.div_ceil(BLOCK as usize) as u32).clamp(1, self.sms * 16)
    }

    fn saca(
        &self,
        kernels: &Kernels,
        st: &mut State,
        text: &SacaText,
    ) -> std::result::Result<(Vec<u64>, SacaProfile), String> {
        let k_ = &kernels.saca;
        let n = text.len();
        let n64 = n as u64;
        let mut prof = SacaProfile::default();
        let cu_stream = self.stream.cu_stream();
        let launch = |f: &CudaFunction, items: usize, params: &mut [*mut c_void]| {
            self.launch(f, self.grid_for(items), BLOCK, params)
        };
        // Inclusive scan of a[0..m) in place; op 0 = add, 1 = max.
        let part_cap = n.div_ceil(SCAN_PER).max(1);
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

        // The alphabet and the packing of the first keys.
        let t = Instant::now();
        let (max_code, code) = match text {
            SacaText::Bytes(t) => {
                let hist = t
                    .par_chunks(1 << 20)
                    .map(|c| {
                        let mut h = [false; 256];
                        for &b in c {
                            h[b as usize] = true;
                        }
                        h
                    })
                    .reduce(
                        || [false; 256],
                        |mut a, b| {
                            for i in 0..256 {
                                a[i] |= b[i];
                            }
                            a
                        },
                    );
                let mut code = [0u8; 256];
                let mut next = 0u32;
                for c in 0..256 {
                    if hist[c] {
                        code[c] = next as u8;
                        next += 1;
                    }
                }
                (next.saturating_sub(1) as u64, Some(code))
            }
            SacaText::Ints(t) => (t.par_iter().copied().max().unwrap_or(0), None),
        };
        if max_code >= 1 << 32 {
            return Err("values of 2^32 or more".into());
        }
        let cbits = bits(max_code).max(1);
        let k = (64 / cbits).min(64);
        prof.k = k;

        // Device memory: two sort buffers of 16 bytes a suffix, six arrays of 4, the text.
        let need = n * DEVICE_BYTES_PER_CHAR + (64 << 20);
        let (free, _) =
            result::mem_get_info().map_err(drv("cannot read the free device memory"))?;
        if need > free + st.buf_bytes * 2 {
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
        let word = 4usize;
        let text_bytes = match text {
            SacaText::Bytes(_) => n,
            SacaText::Ints(_) => n * word,
        };
        let d_text = dev.alloc(text_bytes + 8)?;
        let d_code = dev.alloc(256)?;
        let d_isa = dev.alloc(n * word)?;
        let d_sa = dev.alloc(n * word)?;
        let d_act = [dev.alloc(n * word)?, dev.alloc(n * word)?];
        let d_hp = dev.alloc(n * word)?;
        let d_keep = dev.alloc(n * word)?;
        let d_part = dev.alloc(part_cap * word)?;
        let d_total = dev.alloc(8)?;
        prof.alloc_s = t.elapsed().as_secs_f64();

        let t = Instant::now();
        match text {
            SacaText::Bytes(t) => {
                // Through the pinned staging buffers (allocated here on first use): the result
                // comes back through them too, and pinned copies are several times faster.
                self.upload(st, t, d_text)?;
                let code = code.expect("bytes have a code table");
                unsafe { result::memcpy_htod_async(d_code, &code[..], cu_stream) }
                    .map_err(drv("host-to-device copy"))?;
                self.stream
                    .synchronize()
                    .map_err(drv("host-to-device copy"))?;
            }
            SacaText::Ints(t) => {
                let v: Vec<u32> = t.par_iter().map(|&x| x as u32).collect();
                self.upload(st, bytemuck::cast_slice(&v), d_text)?;
            }
        }
        prof.h2d_s = t.elapsed().as_secs_f64();

        // First round: all suffixes by their first k characters.
        let t = Instant::now();
        let rec0 = st.bufs[0];
        match text {
            SacaText::Bytes(_) => launch(
                &k_.keys_u8,
                n,
                &mut params!(d_text, n64, d_code, cbits, k, rec0),
            )?,
            SacaText::Ints(_) => {
                launch(&k_.keys_u32, n, &mut params!(d_text, n64, cbits, k, rec0))?
            }
        }
        let (at, _) = self.sort_on_device::<u128>(kernels, st, n, true)?;
        let null: sys::CUdeviceptr = 0;
        let mut m = self.split_groups(
            kernels, st, at, n, null, d_sa, d_isa, d_hp, d_keep, d_part, d_act[0], d_total, k,
            &scan,
        )?;
        prof.first_s = t.elapsed().as_secs_f64();

        // Doubling rounds over the suffixes still in groups.
        let t = Instant::now();
        let sbits = bits(n64 + k as u64 - 1);
        let mut h = k as u64;
        let mut cur = 0usize;
        while m > 0 {
            if prof.rounds > 0 && h / 2 >= n64 {
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
            prof.rounds += 1;
            log::trace!(
                "gpu sa: round {} (offset {h}): {m} suffixes left in groups",
                prof.rounds
            );
        }
        prof.rounds_s = t.elapsed().as_secs_f64();

        let t = Instant::now();
        // 32-bit entries come over (half the bytes of 64-bit ones) into the front of the result's
        // buffer and are widened there in place: no second host array.
        let mut sa: Vec<u64> = Vec::with_capacity(n);
        self.download(st, d_sa, sa.as_mut_ptr() as *mut u8, n * word)?;
        // SAFETY: the buffer holds n u64 and its first n u32 slots were just written.
        unsafe {
            widen_in_place(sa.as_mut_ptr(), n);
            sa.set_len(n);
        }
        prof.d2h_s = t.elapsed().as_secs_f64();
        Ok((sa, prof))
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

#[cfg(test)]
mod tests {
    use super::widen_in_place;

    #[test]
    fn widen_in_place_keeps_every_value() {
        for n in [
            0usize,
            1,
            2,
            3,
            1000,
            (1 << 16) - 1,
            1 << 16,
            1 << 17,
            300_001,
        ] {
            let want: Vec<u32> = (0..n as u32)
                .map(|x| x.wrapping_mul(2_654_435_761))
                .collect();
            let mut v: Vec<u64> = Vec::with_capacity(n);
            unsafe {
                std::ptr::copy_nonoverlapping(want.as_ptr(), v.as_mut_ptr() as *mut u32, n);
                widen_in_place(v.as_mut_ptr(), n);
                v.set_len(n);
            }
            assert!(v.iter().zip(&want).all(|(&a, &b)| a == b as u64), "n = {n}");
        }
    }
}
