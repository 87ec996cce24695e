//! Sequential suffix array construction for base cases: the `libsais` crate (SA-IS by Ilya
//! Grebnov), the fastest sequential SACA there is, for byte and integer alphabets.

use libsais::{SuffixArrayConstruction, ThreadCount};

use crate::index::Index;

/// Below this length libsais' OpenMP driver costs more than it saves.
const MT_MIN_LEN: usize = 1 << 22;

/// Suffix array of a byte string. `threads` > 1 uses libsais' OpenMP driver (for texts of at
/// least 4 Mi characters).
pub fn sa_bytes(text: &[u8], threads: usize) -> Vec<u64> {
    if text.is_empty() {
        return Vec::new();
    }
    let threads = if text.len() < MT_MIN_LEN { 1 } else { threads };
    if text.len() < i32::MAX as usize {
        let c = SuffixArrayConstruction::for_text(text).in_owned_buffer32();
        let r = if threads > 1 {
            c.multi_threaded(ThreadCount::fixed(threads as u16)).run()
        } else {
            c.single_threaded().run()
        };
        r.expect("libsais accepts any byte text below 2^31")
            .into_vec()
            .into_iter()
            .map(|x| x as u64)
            .collect()
    } else {
        let c = SuffixArrayConstruction::for_text(text).in_owned_buffer64();
        let r = if threads > 1 {
            c.multi_threaded(ThreadCount::fixed(threads as u16)).run()
        } else {
            c.single_threaded().run()
        };
        r.expect("libsais accepts any byte text")
            .into_vec()
            .into_iter()
            .map(|x| x as u64)
            .collect()
    }
}

/// Suffix array of a string of integers in any index width (names ≥ 1 in psa; any values work).
/// `threads` > 1 uses libsais' OpenMP driver for 32-bit texts of at least 4 Mi / 8 characters.
pub fn sa_ints<I: Index>(text: &[I], threads: usize) -> Vec<u64> {
    if text.is_empty() {
        return Vec::new();
    }
    let max = text.iter().map(|x| x.to_u64()).max().unwrap_or(0);
    if max as usize > 2 * text.len() && max < 1 << 32 && text.len() < 1 << 31 {
        // Sparse values (names that are group starts): libsais' buckets grow with the alphabet
        // and it slows down severalfold; renumbered densely, the order is the same.
        return sa_ints(&dense(text, threads), threads);
    }
    if max < i32::MAX as u64 - 1 && text.len() < i32::MAX as usize {
        let mut t: Vec<i32> = text.iter().map(|x| x.to_u64() as i32).collect();
        let c = SuffixArrayConstruction::for_text_mut(&mut t[..]).in_owned_buffer32();
        let threads = if text.len() < MT_MIN_LEN / 8 {
            1
        } else {
            threads
        };
        let r = if threads > 1 {
            c.multi_threaded(ThreadCount::fixed(threads.min(u16::MAX as usize) as u16))
                .run()
        } else {
            c.single_threaded().run()
        };
        r.expect("libsais accepts an i32 text with values below its length bound")
            .into_vec()
            .into_iter()
            .map(|x| x as u64)
            .collect()
    } else {
        let mut t: Vec<i64> = text.iter().map(|x| x.to_u64() as i64).collect();
        SuffixArrayConstruction::for_text_mut(&mut t[..])
            .in_owned_buffer64()
            .single_threaded()
            .run()
            .expect("libsais accepts an i64 text")
            .into_vec()
            .into_iter()
            .map(|x| x as u64)
            .collect()
    }
}

/// The same string with its values renumbered 1, 2, … in order (values below 2^32, length below
/// 2^32), as 32-bit integers: one radix sort of (value, position).
fn dense<I: Index>(text: &[I], threads: usize) -> Vec<u32> {
    use voracious_radix_sort::RadixSort;
    let mut keyed: Vec<u64> = text
        .iter()
        .enumerate()
        .map(|(j, x)| (x.to_u64() << 32) | j as u64)
        .collect();
    if threads > 1 && keyed.len() >= 1 << 16 {
        keyed.voracious_mt_sort(threads);
    } else {
        keyed.voracious_sort();
    }
    let mut out = vec![0u32; text.len()];
    let mut name = 0u32;
    let mut prev = u64::MAX;
    for &k in &keyed {
        if k >> 32 != prev {
            prev = k >> 32;
            name += 1;
        }
        out[(k & 0xffff_ffff) as usize] = name;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::oracle::naive_sa;
    use crate::index::U40;

    /// The integer path in index width `I` on the characters of `t` (+ 1, and sparse).
    fn ints_match<I: Index>(t: &[u8]) {
        let ints: Vec<I> = t.iter().map(|&c| I::from_u64(c as u64 + 1)).collect();
        assert_eq!(sa_ints(&ints, 1), naive_sa(t), "{} bits: {t:?}", I::BITS);
        // Sparse values take the renumbering path.
        let sparse: Vec<I> = t
            .iter()
            .map(|&c| I::from_u64(c as u64 * 1000 + 7))
            .collect();
        assert_eq!(sa_ints(&sparse, 1), naive_sa(t), "{} bits: {t:?}", I::BITS);
    }

    #[test]
    fn libsais_matches_naive() {
        for t in [
            &b""[..],
            b"a",
            b"banana",
            b"\0\0\xff\0",
            b"aaaaaaaa",
            b"abcabcabcab",
        ] {
            assert_eq!(sa_bytes(t, 1), naive_sa(t), "text {t:?}");
            ints_match::<u32>(t);
            ints_match::<U40>(t);
            ints_match::<u64>(t);
        }
    }
}
