//! Small helpers every layer shares, each once: the bit width of a number ([`bits`]), a seeded
//! generator ([`SplitMix`]), the chunks of the parallel loops and whether a loop is worth
//! handing to rayon's pool ([`CHUNK`], [`serial`], [`parallel`]), and a pointer that may cross
//! threads for loops whose chunks write disjoint slots ([`SyncPtr`]), and a line written to
//! standard error whole ([`say`]).

/// Bits needed to write `x` (0 for 0).
#[inline]
pub(crate) fn bits(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// Records (or positions) per task in the parallel loops.
pub(crate) const CHUNK: usize = 1 << 16;

/// Whether this pe's loops run on several threads (rayon's pool is the pe's threads).
#[inline]
pub(crate) fn parallel() -> bool {
    rayon::current_num_threads() > 1
}

/// Whether a loop over `len` records should run on the calling thread: with one thread per pe
/// (the usual one pe per core) or little data, handing the loop to rayon's pool costs more than
/// it saves (its tasks and their joins, on a pool of one thread, only slow the loop).
#[inline]
pub(crate) fn serial(len: usize) -> bool {
    len < CHUNK || !parallel()
}

/// A raw pointer that may cross threads: every user writes disjoint slots.
pub(crate) struct SyncPtr<T>(pub(crate) *mut T);
impl<T> Clone for SyncPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SyncPtr<T> {}
unsafe impl<T: Send> Send for SyncPtr<T> {}
unsafe impl<T: Send> Sync for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    /// # Safety
    /// `i` is in bounds of the allocation and no other thread touches slot `i` meanwhile.
    #[inline]
    pub(crate) unsafe fn write(self, i: usize, v: T) {
        unsafe { self.0.add(i).write(v) }
    }
}

/// A small seeded generator (SplitMix64) for reproducible sampling.
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next number.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
}

/// Writes `line` and a line break to standard error in one `write` (the whole line built
/// first, standard error locked): `eprintln!` writes each piece of its format apart (standard
/// error is unbuffered), so the lines of pes sharing a terminal or a launcher's pipe would mix
/// mid-line. Failing to write is ignored (there is nowhere else to say it).
pub fn say(line: &str) {
    use std::io::Write;
    let mut s = String::with_capacity(line.len() + 1);
    s.push_str(line);
    s.push('\n');
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}

/// The next number of the tests' xorshift generator (13, 7, 17) from the state `x`, which it
/// advances: the same sequence every run.
#[cfg(test)]
pub(crate) fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_of_small_numbers() {
        assert_eq!([0, 1, 2, 3, 255, 256].map(bits), [0, 1, 2, 2, 8, 9]);
        assert_eq!(bits(u64::MAX), 64);
    }
}
