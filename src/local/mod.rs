//! Local sorts behind one trait: the algorithms see [`LocalSort`] and do not know which backend
//! sorts for them.

pub mod cpu;
#[cfg(feature = "gpu")]
pub mod gpu;

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
    /// The suffix array of a whole byte text that this pe holds, if the backend builds suffix
    /// arrays itself (the GPU does, for texts of 2^18 to 2^31 characters); None: the caller uses
    /// the sequential CPU algorithm (libsais).
    fn suffix_array_bytes(&self, _text: &[u8]) -> Option<Vec<u64>> {
        None
    }
    /// The same for a text of integers (values below 2^32).
    fn suffix_array_ints(&self, _text: &[u64]) -> Option<Vec<u64>> {
        None
    }
    /// The longest text [`Self::suffix_array_ints`] would take now (0: none).
    fn suffix_array_max_len(&self) -> usize {
        0
    }
}
