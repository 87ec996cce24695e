//! Local sorts behind one trait: the algorithms see [`LocalSort`] and do not know which backend
//! sorts for them. A backend with a device that builds whole suffix arrays (the GPU) offers it as
//! a [`DeviceSuffixArray`].

pub mod cpu;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod host;

/// A backend that sorts one pe's records in place, ascending by the whole integer. Keys handed
/// to it are unique in psa (they carry a position), so stability does not arise.
pub trait LocalSort: Send + Sync {
    /// A short name for logs ("cpu", "gpu").
    fn name(&self) -> &'static str;
    /// CPU threads this pe may use (for sorts that stay on the CPU).
    fn threads(&self) -> usize {
        1
    }
    /// Sorts 64-bit keys ascending.
    fn sort_u64(&self, v: &mut [u64]);
    /// Sorts 128-bit keys ascending.
    fn sort_u128(&self, v: &mut [u128]);
    /// Sorts 128-bit records by their high 64 bits only; records with equal high halves may end in
    /// any order. A full sort is a valid implementation (the default).
    fn sort_u128_by_high(&self, v: &mut [u128]) {
        self.sort_u128(v);
    }
    /// Sorts 192-bit records, three 64-bit words least significant first, by their high two
    /// words only; records with equal high words may end in any order. The default is a
    /// comparison sort on the CPU.
    fn sort_u192_by_high(&self, v: &mut [[u64; 3]]) {
        use rayon::prelude::*;
        v.par_sort_unstable_by_key(|r| (r[2], r[1]));
    }
    /// `bytes` of page-locked host memory that this backend's sorts copy to and from its device
    /// directly (see [`HostBuf`]); None: the backend has none to give (the CPU backend, or the
    /// allocation failed; the reason is logged).
    fn host_mem(&self, _bytes: usize) -> Option<Box<dyn HostMem>> {
        None
    }
    /// The backend's device that builds whole suffix arrays, if it has one (the GPU); None: the
    /// algorithms build them themselves (libsais, or distributed). The callers ask for it through
    /// [`crate::Ctx::device_suffix_array`].
    fn device_suffix_array(&self) -> Option<&dyn DeviceSuffixArray> {
        None
    }
}

/// A device that builds whole suffix arrays (the GPU's, see `gpu::saca`), offered by a
/// backend through [`LocalSort::device_suffix_array`]. A whole text comes in one piece (p = 1, a
/// gathered base case) or streamed in pieces ([`Self::pooled_sa`]: the pes of a distributed run
/// send their slices to the device through one pe, see `psa::algo::offload::relay`).
pub trait DeviceSuffixArray: Send + Sync {
    /// The suffix array of a whole byte text that this pe holds, if the device builds it (the
    /// GPU does, for texts of 2^18 to 2^31 characters); None: the caller uses the sequential
    /// CPU algorithm (libsais).
    fn suffix_array_bytes(&self, _text: &[u8]) -> Option<Vec<u64>> {
        None
    }
    /// The same for a text of integers (the device takes values below 2^32).
    fn suffix_array_ints(&self, _text: &[u32]) -> Option<Vec<u64>> {
        None
    }
    /// The longest text [`Self::suffix_array_ints`] or [`Self::pooled_sa`] would take now (0:
    /// none).
    fn suffix_array_max_len(&self) -> usize;
    /// Starts a suffix array of a text of `n` characters over `alphabet`, handed to the device
    /// in pieces. None: the device does not build it (too short, no room on the device; the
    /// reason is logged).
    fn pooled_sa(&self, n: usize, alphabet: &Alphabet) -> Option<Box<dyn PooledSa + '_>>;
}

/// Memory a backend allocated for [`HostBuf`]; freed when dropped.
pub trait HostMem: Send + Sync {
    /// The first byte (aligned to at least 16 bytes).
    fn ptr(&self) -> *mut u8;
    /// Its size in bytes.
    fn bytes(&self) -> usize;
    /// Whether it arrives zeroed (then [`HostBuf::zeroed`] does not clear it again).
    fn is_zeroed(&self) -> bool {
        false
    }
}

/// Records that a backend will sort, in memory it chose: on the GPU backend page-locked host
/// memory, which its sorts copy to and from the device directly at the DMA engine's rate
/// instead of through the CPU and pinned staging buffers (for large sorts the host copies are
/// most of the transfer time); elsewhere a plain vector. Page-locking costs more than the
/// copies it saves on one sort, so a buffer pays off when it is allocated once and sorted in
/// many times. Dereferences to a slice.
///
/// ```
/// use psa::local::{cpu::CpuSort, HostBuf, LocalSort};
/// let sorter = CpuSort::new(2); // or a GpuSort (feature `gpu`)
/// let mut buf = HostBuf::<u128>::zeroed(&sorter, 4);
/// buf.copy_from_slice(&[3 << 64 | 0, 1 << 64 | 1, 2 << 64 | 2, 1 << 64 | 3]);
/// sorter.sort_u128_by_high(&mut buf);
/// assert!(buf.windows(2).all(|w| w[0] >> 64 <= w[1] >> 64));
/// ```
pub struct HostBuf<T: bytemuck::Pod> {
    mem: Option<Box<dyn HostMem>>,
    vec: Vec<T>,
    len: usize,
}

impl<T: bytemuck::Pod + Send + Sync> HostBuf<T> {
    /// `len` zeroed records in memory from `sorter` (a plain vector if it has none).
    pub fn zeroed(sorter: &dyn LocalSort, len: usize) -> HostBuf<T> {
        use rayon::prelude::*;
        let size = std::mem::size_of::<T>();
        let mem = len
            .checked_mul(size)
            .filter(|&b| b > 0)
            .and_then(|b| sorter.host_mem(b))
            .filter(|m| {
                m.bytes() >= len * size
                    && (m.ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
            });
        match mem {
            Some(m) => {
                // SAFETY: the memory holds len * size bytes, aligned for T; zero bytes are a
                // valid T (Pod).
                if !m.is_zeroed() {
                    let bytes = unsafe { std::slice::from_raw_parts_mut(m.ptr(), len * size) };
                    bytes.par_chunks_mut(1 << 20).for_each(|c| c.fill(0));
                }
                HostBuf {
                    mem: Some(m),
                    vec: Vec::new(),
                    len,
                }
            }
            None => HostBuf {
                mem: None,
                vec: vec![T::zeroed(); len],
                len,
            },
        }
    }

    /// Whether the records are in the backend's memory (not a plain vector).
    pub fn is_backend_memory(&self) -> bool {
        self.mem.is_some()
    }
}

impl<T: bytemuck::Pod> std::ops::Deref for HostBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.mem {
            // SAFETY: checked in `zeroed`: len records, aligned, initialised; owned by self.
            Some(m) => unsafe { std::slice::from_raw_parts(m.ptr() as *const T, self.len) },
            None => &self.vec,
        }
    }
}

impl<T: bytemuck::Pod> std::ops::DerefMut for HostBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &self.mem {
            // SAFETY: as in `deref`, and &mut self makes this the only reference.
            Some(m) => unsafe { std::slice::from_raw_parts_mut(m.ptr() as *mut T, self.len) },
            None => &mut self.vec,
        }
    }
}

/// The alphabet of a text handed to a device's suffix array.
#[derive(Clone, Copy, Debug)]
#[allow(clippy::large_enum_variant)] // made once per suffix array
pub enum Alphabet {
    /// Bytes; `used[b]`: byte value b occurs. Pieces are the bytes themselves.
    Bytes([bool; 256]),
    /// Integers up to this largest value (below 2^32 for the GPU). Pieces are little-endian u32.
    Ints(u64),
}

/// The byte values that occur in `t` (in parallel).
pub(crate) fn used_bytes(t: &[u8]) -> [bool; 256] {
    use rayon::prelude::*;
    t.par_chunks(1 << 20)
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
        )
}

/// A suffix array that a device builds from a text handed over in pieces; see
/// [`DeviceSuffixArray::pooled_sa`]. The device's resources are held until it is dropped.
pub trait PooledSa {
    /// The next piece of the text, in text order, encoded as [`Alphabet`] says.
    fn upload(&mut self, piece: &[u8]) -> Result<(), String>;
    /// Sorts the suffixes (after the whole text has been uploaded).
    fn build(&mut self) -> Result<(), String>;
    /// Copies SA[offset .. offset + out.len()) into `out` (after [`Self::build`]).
    fn download(&mut self, offset: usize, out: &mut [u32]) -> Result<(), String>;
    /// The whole suffix array where it is in this process's memory (after [`Self::build`]), to
    /// be written without a copy; None: [`Self::download`] it (a device's).
    fn whole(&self) -> Option<&[u32]> {
        None
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
pub(crate) unsafe fn widen_in_place(p: *mut u64, n: usize) {
    use rayon::prelude::*;
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

#[cfg(test)]
mod tests {
    use super::widen_in_place;

    #[test]
    fn host_buf_without_backend_memory_is_a_zeroed_vector() {
        use super::HostBuf;
        let cpu = crate::local::cpu::CpuSort::new(2);
        for n in [0usize, 1, 1000, 1 << 20] {
            let mut b: HostBuf<u128> = HostBuf::zeroed(&cpu, n);
            assert!(!b.is_backend_memory());
            assert_eq!(b.len(), n);
            assert!(b.iter().all(|&x| x == 0));
            b.iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = (n - i) as u128);
            crate::local::LocalSort::sort_u128(&cpu, &mut b);
            assert!(b.iter().enumerate().all(|(i, &x)| x == i as u128 + 1));
        }
    }

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
