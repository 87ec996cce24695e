//! The search for patterns' SA intervals in an opened index, many patterns at a time.
//!
//! A query's cost is memory latency: a plain binary search over an SA of n entries reads about
//! 2·log2(n) places of the SA and of T that no cache holds, one after another. Two things cut it:
//! - the **top level** ([`Top`]): the first symbols of every `step`-th suffix in SA order, packed
//!   into 64-bit keys that order as the strings do, with levels of every 32nd key above them (about
//!   1.6 % of the SA's bytes, built from the SA and T when an index is opened for many
//!   patterns); two small searches in it leave about `step` entries of the SA to search;
//! - the **interleaved kernel** ([`ranges`]): 32 patterns' searches advance in turns, each turn
//!   prefetching what its next step reads, so that one pattern's wait for memory overlaps the
//!   others' ([`prefetch`]); comparisons skip the bytes both bounds of a search already share
//!   with the pattern (Manber and Myers' mlr), and the upper bound gallops from the lower one.
//!
//! A pattern's interval is `[lo, hi)`: the suffixes `SA[lo..hi)` start with it. Local: no MPI;
//! the callers run batches on rayon's threads.

mod kernel;
mod saved;
pub mod text;
mod top;

pub use kernel::ranges;
pub use saved::Owner;
pub use text::Text;
pub use top::Top;

use crate::error::{Error, Result};

/// The SA as the search reads it: `n` little-endian entries of `width` bytes (mapped).
#[derive(Clone, Copy)]
pub struct Sa<'a> {
    bytes: &'a [u8],
    width: usize,
    n: usize,
}

impl<'a> Sa<'a> {
    /// The SA of `n` entries of `width` (1 to 8) bytes in `bytes` (n·width of them).
    pub fn new(bytes: &'a [u8], width: usize, n: usize) -> Sa<'a> {
        Sa { bytes, width, n }
    }

    /// Entries (= n).
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the SA has no entries.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Bytes per entry.
    pub fn width(&self) -> usize {
        self.width
    }

    /// SA[k] (k below n), or an error where it is not below n (a damaged file).
    #[inline]
    pub fn get(&self, k: usize) -> Result<u64> {
        let (w, at) = (self.width, k * self.width);
        let v = match self.bytes.get(at..at + 8) {
            Some(b) => {
                u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) & (u64::MAX >> (64 - 8 * w))
            }
            None => {
                let mut b = [0u8; 8];
                b[..w].copy_from_slice(&self.bytes[at..at + w]);
                u64::from_le_bytes(b)
            }
        };
        if v >= self.n as u64 {
            return Err(Error::BadInput(format!(
                "entry {k} of the suffix array is {v}, not below n = {}: the file is damaged; build the index again",
                self.n
            )));
        }
        Ok(v)
    }

    /// The address of entry k, for a prefetch only.
    #[inline]
    fn addr(&self, k: usize) -> *const u8 {
        self.bytes.as_ptr().wrapping_add(k * self.width)
    }
}

/// Asks the CPU to bring the cache line at `p` closer (x86-64: into every cache level); does
/// nothing elsewhere. Never faults, whatever `p` is.
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing the program sees and never faults, so any
    // address is allowed (SSE, which it needs, is part of every x86-64).
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests;
