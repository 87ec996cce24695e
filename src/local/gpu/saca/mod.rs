//! Whole suffix arrays on the device: prefix doubling over 32-bit ranks (the approach of Wang,
//! Baxter & Owens, "Fast parallel skew and prefix-doubling suffix array construction on the
//! GPU", and of libcubwt), for a text that one pe holds whole — the whole input at p = 1, or a
//! gathered base case of the distributed algorithms — of up to [`MAX_GPU_SA`] characters.
//!
//! The first round sorts every suffix by its first k characters, packed into 64 bits after the
//! alphabet is renumbered densely (k = 21 for DNA with N, 9 for English, 8 for arbitrary bytes);
//! round r then sorts only the suffixes still in groups of two or more, by (group, group of the
//! suffix k·2^(r-1) further on), on the device's radix sort. Groups keep their place in the
//! array, so sorting by the group's first position keeps them apart; the new groups are found by
//! comparing neighbours, numbered by a max-scan and compacted by an add-scan. Everything stays
//! on the device between rounds; the host reads a few counts per round. kernels: `saca.cu`.
//!
//! Memory. What lives through the whole build is the text, SA, ISA and the list of suffixes
//! still in groups (4 bytes each a character): 13 bytes a character for a byte text. The sorts
//! use two buffers of 16-byte records and their pass state, 33 bytes a record, for at most
//! `cap` records — all n when they fit (the fastest), else what the free memory leaves, at
//! least n / [`MAX_PARTS`](engine::MAX_PARTS) (or `cap` forced by
//! [`crate::GpuOptions::sa_parts`]). With fewer than n records a sort goes in pieces:
//! - the first round in key ranges: a histogram of the keys (2^16 bins, refined where one bin
//!   holds more than `cap`) cuts the key space into ranges of at most `cap` suffixes; each range
//!   is selected (the suffixes whose key lies in it), sorted and written to its place in SA; a
//!   range of one key more than `cap` suffixes share needs no sort. ISA and the new groups are
//!   then found from SA and the keys, the groups compacted in windows of `cap`;
//! - a doubling round in chunks of whole groups (groups are independent: a chunk's sort only
//!   reorders its own positions), each at most `cap` suffixes, found by probing the group at
//!   the chunk's end; a group larger than `cap` is sorted on its own in key ranges as above, its
//!   suffixes first copied into its stretch of the group list, which needs no entries for one
//!   group (its positions are consecutive).
//!
//! A chunk's new ranks are visible to the chunks after it in the same round. That is sound (as
//! in Larsson & Sadakane's doubling): a rank only ever moves to a position inside its old group,
//! so the order between old groups stays and a finer rank only tells more; the ranges of a
//! group sorted in pieces are cut from ranks nothing changes until all its pieces are placed.
//!
//! So device memory is 13 + 33 · cap / n bytes a character (46 when everything fits, 24 at
//! cap = n / 3, 16 at the least): a 3.1 G-character genome fits an 80 GB device. A text that
//! needs pieces takes at most 24 ([`PIECE_SHARE`](engine::PIECE_SHARE)) and leaves 1/20 of the
//! device free ([`MARGIN_SHARE`](engine::MARGIN_SHARE)).
//!
//! Time is O(n log n) in the worst case (aⁿ: every suffix stays in a group until the offset
//! reaches n/2), O(n log(LCP)) in general; pieces cost a pass over their group per key range.
//!
//! This file holds the entry points ([`GpuSort::suffix_array_on_device`], [`GpuSort::device_sa`]
//! and its [`DeviceSa`], [`DeviceSuffixArray`]); `engine.rs` the build.

mod engine;

use std::sync::atomic::Ordering;
use std::time::Instant;

use cudarc::driver::result;
use rayon::prelude::*;

use super::error::GpuError;
use super::kernels::Kernels;
use super::state::{GpuSort, State};
use crate::local::{used_bytes, widen_in_place, Alphabet, DeviceSuffixArray, PooledSa};
use engine::{SacaRun, MARGIN_BYTES};
pub use engine::{DEVICE_BYTES_PER_CHAR, MAX_GPU_SA, MIN_GPU_SA};

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
    /// suffix array comes back in any pieces ([`DeviceSa::download`]). Device memory: see the
    /// module doc; host memory only the staging buffers.
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
            "gpu: suffix array of {} characters (k = {}): sort buffers for {} records, first round in {} key range(s), {} rounds in {} chunk(s) and {} group(s) in key ranges; device memory in use {} of {} MiB; alloc {:.3}s, h2d {:.3}s, first sort {:.3}s, rounds {:.3}s, d2h {:.3}s, total {:.3}s",
            self.run.n,
            prof.k,
            prof.cap,
            prof.parts,
            prof.rounds,
            prof.chunks,
            prof.big_groups,
            prof.used >> 20,
            prof.total >> 20,
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

/// The relay's view ([`crate::algo::offload::relay`]): the error is a message for its log.
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
            Ok((free, _)) => ((free + self.lock().own_bytes())
                .saturating_sub(MARGIN_BYTES + (1 << 20))
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
