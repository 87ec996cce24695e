//! The device suffix array's build: how much device memory a text needs and gets (the
//! constants), a run's buffers ([`SacaRun`]), the first sort and the doubling rounds, whole or in
//! pieces (key ranges, chunks of whole groups) when the sort buffers hold fewer than n records.
//! The method is the module doc of [`super`]'s.

use std::ffi::c_void;
use std::time::Instant;

use cudarc::driver::{result, sys, CudaFunction};

use super::super::buffer::DeviceBuffer;
use super::super::error::{drv, fault, GpuError};
use super::super::kernels::{Kernels, SacaKernels, BLOCK};
use super::super::sort::MAX_CHUNK_KEYS;
use super::super::state::{GpuSort, State};
use crate::local::Alphabet;
use crate::util::bits;

/// Texts shorter than this are left to libsais: launches and transfers cost more than they save.
pub const MIN_GPU_SA: usize = 1 << 18;
/// Longest text the device path takes: 32-bit positions and ranks (a rank is a position plus
/// k ≤ 64, and a doubling key packs a position above a rank in 64 bits).
pub const MAX_GPU_SA: usize = (1 << 32) - 128;

/// Device memory a suffix array needs per character at the least (what the host plans with):
/// SA, ISA and the group list (4 bytes each), a text of up to 4 bytes a character, and sort
/// records for n / [`MAX_PARTS`] suffixes (33 bytes each), rounded up. A byte text needs 3
/// bytes less; any memory beyond this makes the sorts go in fewer pieces.
pub const DEVICE_BYTES_PER_CHAR: usize = 3 * 4 + 4 + RECORD_BYTES.div_ceil(MAX_PARTS);

/// Device bytes per sort record: two 16-byte buffers and the one-sweep pass state.
const RECORD_BYTES: usize = 2 * 16 + 1;
/// The sort buffers hold at least n / MAX_PARTS records (else the device is too small).
const MAX_PARTS: usize = 16;
/// Device memory kept free beside a suffix array (the driver, the count tables, other users):
/// at least this, and what [`MARGIN_SHARE`] of the device leaves when the text needs pieces.
pub(super) const MARGIN_BYTES: usize = 256 << 20;
/// The share of the device's memory (1/20) that sort buffers leave free: fewer records than n
/// cost one more key range now and then, a device filled to the last MiB a failed allocation
/// elsewhere.
const MARGIN_SHARE: usize = 20;
/// A text that needs pieces gets sort records for at most n / PIECE_SHARE suffixes: 13 + 33 / 3
/// = 24 bytes a character at the peak (more records save little: one key range or chunk in a
/// few).
const PIECE_SHARE: usize = 3;
/// Bins of one key histogram.
const HIST_BINS: usize = 1 << 16;

/// Elements each block of the scan kernels covers (so that the partials fit one block's loop).
const SCAN_PER: usize = 1 << 16;

/// Where the time of one device suffix array went (logged at debug level).
#[derive(Clone, Debug, Default)]
pub(super) struct SacaProfile {
    /// Characters per first-round key.
    pub(super) k: u32,
    /// Doubling rounds after the first sort.
    pub(super) rounds: usize,
    /// Records the sort buffers hold.
    pub(super) cap: usize,
    /// Key ranges of the first round (1: sorted whole).
    pub(super) parts: usize,
    /// Sorts of the doubling rounds: chunks of whole groups, and groups sorted in key ranges.
    pub(super) chunks: usize,
    pub(super) big_groups: usize,
    /// Device memory in use (all processes) at the end of the build, and the device's total.
    pub(super) used: usize,
    pub(super) total: usize,
    pub(super) alloc_s: f64,
    pub(super) h2d_s: f64,
    pub(super) first_s: f64,
    pub(super) rounds_s: f64,
    pub(super) d2h_s: f64,
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
/// [`DeviceSa::upload`](super::DeviceSa::upload), built by
/// [`DeviceSa::build`](super::DeviceSa::build), read by
/// [`DeviceSa::download`](super::DeviceSa::download); every
/// buffer is freed when it is dropped. The sort buffers are the backend's (`State::bufs`),
/// sized for `cap` records.
pub(super) struct SacaRun {
    pub(super) n: usize,
    /// Bytes per character on the device (1 for bytes, 4 for integers).
    pub(super) word: usize,
    ints: bool,
    cbits: u32,
    k: u32,
    cap: usize,
    /// Characters uploaded so far.
    pub(super) filled: usize,
    pub(super) d_text: DeviceBuffer,
    d_code: DeviceBuffer,
    d_isa: DeviceBuffer,
    pub(super) d_sa: DeviceBuffer,
    d_act: DeviceBuffer,
    d_part: DeviceBuffer,
    d_total: DeviceBuffer,
    d_hist: DeviceBuffer,
    pub(super) prof: SacaProfile,
}

/// How a kernel computes the key of a suffix (`KeyArgs` in saca.cu): mode 0 a byte text's first
/// k characters, 1 a 32-bit text's, 2 a doubling round's (group, rank at offset h).
#[derive(Clone, Copy)]
struct Key {
    text: sys::CUdeviceptr,
    code: sys::CUdeviceptr,
    isa: sys::CUdeviceptr,
    n: u64,
    h: u64,
    k: u32,
    bits: u32,
    mode: u32,
}

/// A key range of a sort in pieces: keys lo..=hi, held by `count` suffixes.
#[derive(Clone, Copy, Debug)]
struct Range {
    lo: u64,
    hi: u64,
    count: usize,
}

/// The build's view of one run: the device addresses and sizes the steps share.
struct Build<'a> {
    gpu: &'a GpuSort,
    kernels: &'a Kernels,
    n: usize,
    k: u32,
    cap: usize,
    sa: sys::CUdeviceptr,
    isa: sys::CUdeviceptr,
    act: sys::CUdeviceptr,
    part: sys::CUdeviceptr,
    total: sys::CUdeviceptr,
    hist: sys::CUdeviceptr,
}

/// Device address of 32-bit element `i` of the array at `base`.
fn at4(base: sys::CUdeviceptr, i: usize) -> sys::CUdeviceptr {
    base + 4 * i as u64
}

impl GpuSort {
    /// Blocks for a grid-stride kernel over `items` elements: one per BLOCK items, at most 16 a
    /// multiprocessor.
    pub(super) fn grid_for(&self, items: usize) -> u32 {
        (items.div_ceil(BLOCK as usize) as u32).clamp(1, self.dev.sms * 16)
    }

    pub(super) fn saca_begin(
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
        let ints = code.is_none();
        let word = if ints { 4 } else { 1 };

        // The arrays that live through the build, then as many sort records as fit (all n, or
        // at least n / MAX_PARTS; fewer when forced). (GpuSort::suffix_array_max_len promises
        // what this check accepts: keep them together.)
        st.free_bufs();
        let fixed = n * (word + 12) + 8 + HIST_BINS * 4 + n.div_ceil(SCAN_PER) * 4 + 512;
        let (free, total) =
            result::mem_get_info().map_err(drv("cannot read the free device memory"))?;
        let room = free.saturating_sub(fixed + MARGIN_BYTES) / RECORD_BYTES;
        let room = if room >= n {
            room
        } else {
            // Pieces anyway: records for at most n / PIECE_SHARE suffixes, leaving a share of
            // the device free (but at least the least).
            let spare = free.saturating_sub(fixed + MARGIN_BYTES.max(total / MARGIN_SHARE));
            (spare / RECORD_BYTES)
                .min(n.div_ceil(PIECE_SHARE))
                .max(n.div_ceil(MAX_PARTS))
                .min(room)
        };
        let least = n.div_ceil(MAX_PARTS);
        let forced = self.opts.sa_parts.map(|p| n.div_ceil(p.max(1)));
        // (One sort takes at most MAX_CHUNK_KEYS records: the kernels' offsets are 32-bit.)
        let cap = forced.unwrap_or(n).min(room).min(n).min(MAX_CHUNK_KEYS);
        if cap < least.min(forced.unwrap_or(n)) || cap == 0 {
            return Err(GpuError::OutOfMemory(format!(
                "a suffix array of {n} characters needs about {} MiB of device memory, {} MiB are free",
                (fixed + least * RECORD_BYTES + MARGIN_BYTES) >> 20,
                free >> 20
            )));
        }
        prof.cap = cap;
        // At least 4 bytes each; a failure frees those allocated before it.
        let alloc = |bytes: usize| {
            DeviceBuffer::alloc(&self.dev.ctx, bytes.max(4))
                .map_err(|source| GpuError::Alloc { bytes, source })
        };
        let d_text = alloc(n * word + 8)?;
        let d_code = alloc(256)?;
        let d_isa = alloc(n * 4)?;
        let d_sa = alloc(n * 4)?;
        let d_act = alloc(n * 4)?;
        let d_part = alloc(n.div_ceil(SCAN_PER).max(1) * 4)?;
        let d_total = alloc(8)?;
        let d_hist = alloc(HIST_BINS * 4)?;
        st.bufs = [alloc(cap * 16)?, alloc(cap * 16)?];
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
            cap,
            filled: 0,
            d_text,
            d_code,
            d_isa,
            d_sa,
            d_act,
            d_part,
            d_total,
            d_hist,
            prof,
        })
    }

    pub(super) fn saca_build(
        &self,
        kernels: &Kernels,
        st: &mut State,
        run: &mut SacaRun,
    ) -> Result<(), GpuError> {
        let n = run.n;
        if run.filled != n {
            return Err(GpuError::Internal(format!(
                "{} of {n} characters uploaded",
                run.filled
            )));
        }
        let b = Build {
            gpu: self,
            kernels,
            n,
            k: run.k,
            cap: run.cap,
            sa: run.d_sa.ptr(),
            isa: run.d_isa.ptr(),
            act: run.d_act.ptr(),
            part: run.d_part.ptr(),
            total: run.d_total.ptr(),
            hist: run.d_hist.ptr(),
        };
        let n64 = n as u64;
        let k = run.k;
        let prof = &mut run.prof;

        // First round: all suffixes by their first k characters.
        let t = Instant::now();
        let first = Key {
            text: run.d_text.ptr(),
            code: run.d_code.ptr(),
            isa: 0,
            n: n64,
            h: 0,
            k,
            bits: run.cbits,
            mode: run.ints as u32,
        };
        let mut m = if n <= b.cap {
            prof.parts = 1;
            let rec = st.bufs[0].ptr();
            let Key {
                text,
                code,
                isa,
                n,
                h,
                k,
                bits,
                mode,
            } = first;
            b.launch(
                &b.k_().keys,
                b.n,
                &mut params!(text, code, isa, n, h, k, bits, mode, rec),
            )?;
            b.sort_split(st, b.n, 0, b.act)?
        } else {
            let (kept, parts) = b.sort_in_ranges(st, 0, b.n, 0, first, b.act, b.act)?;
            prof.parts = parts;
            kept
        };
        prof.first_s = t.elapsed().as_secs_f64();

        // Doubling rounds over the suffixes still in groups, in chunks of whole groups.
        let t = Instant::now();
        let sbits = bits(n64 + k as u64 - 1);
        let mut h = k as u64;
        while m > 0 {
            if prof.rounds > 0 && h / 2 >= n64 {
                // The previous round compared 2·(h/2) ≥ n characters: no two suffixes can tie.
                return Err(GpuError::Internal(format!(
                    "{m} suffixes unresolved at offset {h} of {n}"
                )));
            }
            let key = Key {
                text: 0,
                code: 0,
                isa: b.isa,
                n: n64,
                h,
                k,
                bits: sbits,
                mode: 2,
            };
            // Entries [a, m) of the group list are still to sort; the survivors so far are in
            // [0, w) (w ≤ a: a chunk never keeps more than it had).
            let (mut a, mut w) = (0usize, 0usize);
            while a < m {
                let end = if a + b.cap >= m {
                    m
                } else {
                    b.group_start(a + b.cap)?
                };
                if end > a {
                    w += b.chunk(st, a, end, w, key)?;
                    prof.chunks += 1;
                    a = end;
                } else {
                    // The group at a alone holds more than the sort buffers.
                    let head = b.read_u32(at4(b.act, a))? as usize;
                    let size = b.group_end(head)? - head;
                    let src = at4(b.act, a);
                    let stream = self.dev.stream.cu_stream();
                    unsafe { result::memcpy_dtod_async(src, at4(b.sa, head), 4 * size, stream) }
                        .map_err(drv("device copy"))?;
                    let (kept, _) =
                        b.sort_in_ranges(st, src, size, head, key, at4(b.act, w), src)?;
                    w += kept;
                    prof.big_groups += 1;
                    a += size;
                }
            }
            m = w;
            h *= 2;
            prof.rounds += 1;
            log::trace!(
                "gpu sa: round {} (offset {h}): {m} suffixes left in groups",
                prof.rounds
            );
        }
        prof.rounds_s = t.elapsed().as_secs_f64();
        if let Ok((free, total)) = result::mem_get_info() {
            (prof.used, prof.total) = (total - free, total);
        }
        Ok(())
    }
}

impl Build<'_> {
    fn k_(&self) -> &SacaKernels {
        &self.kernels.saca
    }

    fn launch(
        &self,
        f: &CudaFunction,
        items: usize,
        params: &mut [*mut c_void],
    ) -> Result<(), GpuError> {
        self.gpu
            .dev
            .launch(f, self.gpu.grid_for(items), BLOCK, params)
    }

    fn stream(&self) -> sys::CUstream {
        self.gpu.dev.stream.cu_stream()
    }

    /// Inclusive scan of the m u32 at `a` in place; op 0 = add, 1 = max.
    fn scan(&self, a: sys::CUdeviceptr, m: usize, op: usize) -> Result<(), GpuError> {
        let k_ = self.k_();
        let nb = m.div_ceil(SCAN_PER).max(1);
        let (m64, per, part) = (m as u64, SCAN_PER as u64, self.part);
        let nb32 = nb as u32;
        let dev = &self.gpu.dev;
        dev.launch(&k_.reduce[op], nb32, BLOCK, &mut params!(a, m64, per, part))?;
        dev.launch(&k_.part[op], 1, BLOCK, &mut params!(part, nb32))?;
        dev.launch(&k_.apply[op], nb32, BLOCK, &mut params!(a, m64, per, part))
    }

    fn zero(&self, p: sys::CUdeviceptr, bytes: usize) -> Result<(), GpuError> {
        unsafe { result::memset_d8_async(p, 0, bytes, self.stream()) }
            .map_err(drv("cannot clear device memory"))
    }

    /// Waits for the queued work and reads `out.len()` u32 at `p`.
    fn read(&self, p: sys::CUdeviceptr, out: &mut [u32]) -> Result<(), GpuError> {
        unsafe { result::memcpy_dtoh_async(out, p, self.stream()) }
            .map_err(drv("device-to-host copy"))?;
        self.gpu
            .dev
            .stream
            .synchronize()
            .map_err(fault("a suffix array kernel failed"))
    }

    fn read_u32(&self, p: sys::CUdeviceptr) -> Result<u32, GpuError> {
        let mut v = [0u32; 1];
        self.read(p, &mut v)?;
        Ok(v[0])
    }

    fn read_u64(&self, p: sys::CUdeviceptr) -> Result<u64, GpuError> {
        let mut v = [0u32; 2];
        self.read(p, &mut v)?;
        Ok(v[0] as u64 | (v[1] as u64) << 32)
    }

    /// Sorts the m records in bufs[0] (suffix, key) whose sorted positions are act[0..m) (act
    /// 0: 0..m, ascending either way; whole groups), writes their SA and ISA entries, splits
    /// their groups and compacts the positions still in groups into `out`; returns how many.
    fn sort_split(
        &self,
        st: &mut State,
        m: usize,
        act: sys::CUdeviceptr,
        out: sys::CUdeviceptr,
    ) -> Result<usize, GpuError> {
        let k_ = self.k_();
        let (at, _) = self.gpu.sort_on_device::<u128>(self.kernels, st, m, true)?;
        let rec = st.bufs[at].ptr();
        // The other buffer (16 bytes a record) holds the heads, the keep flags and the positions.
        let spare = st.bufs[1 - at].ptr();
        let (hp, keep, qs) = (spare, at4(spare, self.cap), at4(spare, 2 * self.cap));
        let (m64, k, sa, isa, total) = (m as u64, self.k, self.sa, self.isa, self.total);
        let base = 0u64;
        self.launch(&k_.heads, m, &mut params!(rec, m64, act, sa, hp, qs))?;
        self.scan(hp, m, 1)?;
        self.launch(&k_.ranks, m, &mut params!(rec, m64, hp, k, isa, keep))?;
        self.scan(keep, m, 0)?;
        self.launch(
            &k_.compact,
            m,
            &mut params!(qs, keep, m64, base, out, total),
        )?;
        Ok(self.read_u32(total)? as usize)
    }

    /// A doubling round's chunk: the whole groups at entries [a, end) of the group list, the
    /// survivors compacted to entry w on.
    fn chunk(
        &self,
        st: &mut State,
        a: usize,
        end: usize,
        w: usize,
        key: Key,
    ) -> Result<usize, GpuError> {
        let (act, m64, rec) = (at4(self.act, a), (end - a) as u64, st.bufs[0].ptr());
        let (sa, isa, n, h, k, sbits) = (self.sa, self.isa, key.n, key.h, key.k, key.bits);
        self.launch(
            &self.k_().round_keys,
            end - a,
            &mut params!(act, m64, sa, isa, n, h, k, sbits, rec),
        )?;
        self.sort_split(st, end - a, act, at4(self.act, w))
    }

    /// The entry of the group list where the group of entry j begins (j itself when it begins
    /// one).
    fn group_start(&self, j: usize) -> Result<usize, GpuError> {
        let (act, sa, isa, k, j64, total) =
            (self.act, self.sa, self.isa, self.k, j as u64, self.total);
        self.gpu.dev.launch(
            &self.k_().group_start,
            1,
            1,
            &mut params!(act, sa, isa, k, j64, total),
        )?;
        Ok(self.read_u64(total)? as usize)
    }

    /// One past the last position of the group that begins at sorted position `head`.
    fn group_end(&self, head: usize) -> Result<usize, GpuError> {
        let n64 = self.n as u64;
        unsafe { result::memcpy_htod_async(self.total, &[n64], self.stream()) }
            .map_err(drv("host-to-device copy"))?;
        let (sa, isa, k, q0, total) = (self.sa, self.isa, self.k, head as u64, self.total);
        self.launch(
            &self.k_().group_end,
            self.n - head,
            &mut params!(sa, isa, n64, k, q0, total),
        )?;
        Ok(self.read_u64(total)? as usize)
    }

    /// Sorts one group in key ranges: the m suffixes src[0..m) (src 0: 0..m) at sorted positions
    /// [q0, q0 + m), by `key`, none of whose ranks change meanwhile. Writes their SA and ISA
    /// entries, splits the group, and compacts the positions still in groups into `out`; `hp`
    /// (m u32, may be `src`: it is read before) takes the heads. Returns (survivors, ranges).
    #[allow(clippy::too_many_arguments)]
    fn sort_in_ranges(
        &self,
        st: &mut State,
        src: sys::CUdeviceptr,
        m: usize,
        q0: usize,
        key: Key,
        out: sys::CUdeviceptr,
        hp: sys::CUdeviceptr,
    ) -> Result<(usize, usize), GpuError> {
        let k_ = self.k_();
        let mut ranges = Vec::new();
        self.ranges(src, m, key, 0, u64::MAX, m, &mut ranges)?;
        let Key {
            text,
            code,
            isa,
            n,
            h,
            k,
            bits,
            mode,
        } = key;
        let (m64, total) = (m as u64, self.total);
        let mut base = 0usize;
        for r in &ranges {
            let (lo, hi) = (r.lo, r.hi);
            let dst = at4(self.sa, q0 + base);
            self.zero(total, 4)?;
            // A range of one key that does not fit is one group: placed in any order.
            let (rec, to): (sys::CUdeviceptr, sys::CUdeviceptr) = if r.count <= self.cap {
                (st.bufs[0].ptr(), 0)
            } else {
                (0, dst)
            };
            self.launch(
                &k_.select,
                m,
                &mut params!(
                    src, m64, text, code, isa, n, h, k, bits, mode, lo, hi, rec, to, total
                ),
            )?;
            let got = self.read_u32(total)? as usize;
            if got != r.count {
                return Err(GpuError::Internal(format!(
                    "key range {lo:#x}..={hi:#x}: {got} suffixes selected, {} counted",
                    r.count
                )));
            }
            if rec != 0 {
                let (at, _) = self
                    .gpu
                    .sort_on_device::<u128>(self.kernels, st, r.count, true)?;
                let (rec, c64) = (st.bufs[at].ptr(), r.count as u64);
                self.launch(&k_.place, r.count, &mut params!(rec, c64, dst))?;
            }
            base += r.count;
        }
        if base != m {
            return Err(GpuError::Internal(format!(
                "key ranges hold {base} of {m} suffixes"
            )));
        }
        // The new groups, from SA and the keys (which no rank change has touched yet).
        let (sa, q64) = (self.sa, q0 as u64);
        self.launch(
            &k_.group_heads,
            m,
            &mut params!(sa, q64, m64, text, code, isa, n, h, k, bits, mode, hp),
        )?;
        self.scan(hp, m, 1)?;
        let isa_out = self.isa;
        self.launch(
            &k_.group_ranks,
            m,
            &mut params!(sa, q64, m64, hp, k, isa_out),
        )?;
        // Compact the positions still in groups, a window of `cap` at a time (the keep flags in
        // a sort buffer).
        let keep = st.bufs[0].ptr();
        let mut kept = 0usize;
        let mut t0 = 0usize;
        while t0 < m {
            let w = self.cap.min(m - t0);
            let (t064, w64, base) = (t0 as u64, w as u64, (q0 + t0) as u64);
            self.launch(
                &k_.group_keep,
                w,
                &mut params!(sa, isa_out, q64, m64, t064, w64, keep),
            )?;
            self.scan(keep, w, 0)?;
            let (null, dst) = (0u64, at4(out, kept));
            self.launch(
                &k_.compact,
                w,
                &mut params!(null, keep, w64, base, dst, total),
            )?;
            kept += self.read_u32(total)? as usize;
            t0 += w;
        }
        Ok((kept, ranges.len()))
    }

    /// Appends to `out`, in key order, key ranges of at most `cap` of the m suffixes (src as
    /// in [`Self::sort_in_ranges`]) that together hold the `count` suffixes with keys in
    /// lo..=hi; a range may hold more only when it is one key. One histogram of 2^16 bins over
    /// lo..=hi; a bin above `cap` is refined by its own histogram.
    #[allow(clippy::too_many_arguments)]
    fn ranges(
        &self,
        src: sys::CUdeviceptr,
        m: usize,
        key: Key,
        lo: u64,
        hi: u64,
        count: usize,
        out: &mut Vec<Range>,
    ) -> Result<(), GpuError> {
        if count <= self.cap || lo == hi {
            out.push(Range { lo, hi, count });
            return Ok(());
        }
        let span = hi - lo;
        let shift = bits(span).saturating_sub(16);
        let bins = (span >> shift) as usize + 1;
        let Key {
            text,
            code,
            isa,
            n,
            h,
            k,
            bits,
            mode,
        } = key;
        let (m64, hist) = (m as u64, self.hist);
        self.zero(hist, bins * 4)?;
        self.launch(
            &self.k_().hist,
            m,
            &mut params!(src, m64, text, code, isa, n, h, k, bits, mode, lo, hi, shift, hist),
        )?;
        let mut counts = vec![0u32; bins];
        self.read(hist, &mut counts)?;
        let (mut plo, mut acc) = (lo, 0usize);
        for (b, &c) in counts.iter().enumerate() {
            let c = c as usize;
            if c == 0 {
                continue;
            }
            let blo = lo + ((b as u64) << shift);
            let bhi = if b + 1 == bins {
                hi
            } else {
                blo + ((1u64 << shift) - 1)
            };
            if c > self.cap {
                if acc > 0 {
                    out.push(Range {
                        lo: plo,
                        hi: blo - 1,
                        count: acc,
                    });
                    acc = 0;
                }
                self.ranges(src, m, key, blo, bhi, c, out)?;
                plo = bhi.wrapping_add(1);
            } else if acc + c > self.cap {
                out.push(Range {
                    lo: plo,
                    hi: blo - 1,
                    count: acc,
                });
                (plo, acc) = (blo, c);
            } else {
                acc += c;
            }
        }
        if acc > 0 {
            out.push(Range {
                lo: plo,
                hi,
                count: acc,
            });
        }
        Ok(())
    }
}
