//! T as a query reads it: one or more mapped files one after another, compared with patterns
//! symbol by symbol (a symbol is a byte, or a little-endian token compared by its value).

use std::cmp::Ordering;

/// T as one or more mapped files, one after another (a raw index's inputs; a sequence index's
/// `OUT.text`). Every part holds whole tokens.
pub struct Text {
    parts: Vec<Option<memmap2::Mmap>>,
    /// Offset in T (bytes) of each part, and T's bytes at the end.
    starts: Vec<u64>,
    /// Bytes per token (1 for a text of characters).
    token: usize,
}

impl Text {
    /// T made of `parts` (None: an empty file, which cannot be mapped) of `sizes` bytes each,
    /// in tokens of `token` bytes.
    pub fn new(parts: Vec<Option<memmap2::Mmap>>, sizes: &[u64], token: usize) -> Text {
        let mut starts = vec![0u64];
        for s in sizes {
            starts.push(starts.last().copied().unwrap_or(0) + s);
        }
        Text {
            parts,
            starts,
            token,
        }
    }

    /// Bytes per token (1 for a text of characters).
    pub fn token(&self) -> usize {
        self.token
    }

    fn part(&self, k: usize) -> &[u8] {
        self.parts[k].as_deref().unwrap_or(&[])
    }

    /// The part holding byte `at` of T, and the offset in it (`at` below T's length).
    fn locate(&self, at: u64) -> (usize, usize) {
        let k = self.starts.partition_point(|&s| s <= at) - 1;
        (k, (at - self.starts[k]) as usize)
    }

    /// The address of byte `at` of T, for a prefetch only (never read through it); any
    /// address where `at` is past T's end.
    #[inline]
    pub fn addr(&self, at: u64) -> *const u8 {
        let (k, off) = match self.parts.len() {
            1 => (0, at as usize),
            _ if at >= *self.starts.last().unwrap_or(&0) => (0, 0),
            _ => self.locate(at),
        };
        self.part(k).as_ptr().wrapping_add(off)
    }

    /// Copies T's bytes from `at` into `out` as far as T goes; returns how many.
    pub fn read(&self, at: u64, out: &mut [u8]) -> usize {
        if at >= *self.starts.last().unwrap_or(&0) {
            return 0;
        }
        let (mut k, mut off) = self.locate(at);
        let mut done = 0;
        while done < out.len() && k < self.parts.len() {
            let part = &self.part(k)[off..];
            let take = part.len().min(out.len() - done);
            out[done..done + take].copy_from_slice(&part[..take]);
            done += take;
            (k, off) = (k + 1, 0);
        }
        done
    }

    /// The suffix of T at byte `at` (whole tokens) compared with `pat`, knowing that their first
    /// `skip` bytes agree (0: nothing known; at most their common prefix): Equal when `pat` is a
    /// prefix of the suffix, Less when the suffix sorts first (a proper prefix of `pat` does).
    /// Also the bytes they share, in whole tokens (at most `pat`'s length). Tokens compare by
    /// value.
    #[inline]
    pub fn cmp_from(&self, at: u64, pat: &[u8], skip: usize) -> (Ordering, usize) {
        if let [one] = &self.parts[..] {
            let t = one.as_deref().unwrap_or(&[]);
            let suffix = t.get(at as usize..).unwrap_or(&[]);
            return cmp_slices(suffix, pat, skip, self.token);
        }
        self.cmp_parts(at, pat, skip)
    }

    /// [`Self::cmp_from`] across parts, one part's stretch at a time.
    fn cmp_parts(&self, at: u64, pat: &[u8], skip: usize) -> (Ordering, usize) {
        let end = *self.starts.last().unwrap_or(&0);
        let mut done = skip.min(pat.len());
        loop {
            if done == pat.len() {
                return (Ordering::Equal, done);
            }
            if at + done as u64 >= end {
                // T ended first: a proper prefix of the pattern sorts before it.
                return (Ordering::Less, done);
            }
            let (k, off) = self.locate(at + done as u64);
            let part = &self.part(k)[off..];
            let take = part.len().min(pat.len() - done);
            let (o, same) = cmp_slices(&part[..take], &pat[done..done + take], 0, self.token);
            if o != Ordering::Equal {
                return (o, done + same);
            }
            done += take;
        }
    }
}

/// `suffix` (T from some token on) against `pat`, their first `skip` bytes known equal: the
/// order and the bytes shared, in whole tokens of `token` bytes compared by value. A suffix
/// shorter than `pat` that is a prefix of it sorts first.
#[inline]
pub fn cmp_slices(suffix: &[u8], pat: &[u8], skip: usize, token: usize) -> (Ordering, usize) {
    let m = suffix.len().min(pat.len());
    let skip = skip.min(m);
    let same = skip + common_prefix(&suffix[skip..m], &pat[skip..m]);
    if same == m {
        return match m == pat.len() {
            true => (Ordering::Equal, m),
            false => (Ordering::Less, m),
        };
    }
    let at = same - same % token;
    let value = |t: &[u8]| t.iter().rev().fold(0u32, |v, &x| (v << 8) | x as u32);
    let o = match token {
        1 => suffix[at].cmp(&pat[at]),
        _ => value(&suffix[at..at + token]).cmp(&value(&pat[at..at + token])),
    };
    (o, at)
}

/// The length of the common prefix of `a` and `b` (of equal lengths), sixteen bytes at a time
/// (x86-64), then eight.
#[inline]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    while i + 16 <= a.len() && i + 16 <= b.len() {
        use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8};
        // SAFETY: both loads read bytes i..i + 16, within both slices (checked above);
        // unaligned loads and SSE2 (part of every x86-64) are allowed anywhere.
        let same = unsafe {
            let x = _mm_loadu_si128(a.as_ptr().add(i) as *const __m128i);
            let y = _mm_loadu_si128(b.as_ptr().add(i) as *const __m128i);
            _mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) as u32
        };
        if same != 0xffff {
            return i + (!same).trailing_zeros() as usize;
        }
        i += 16;
    }
    while i + 8 <= a.len() {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().unwrap_or([0; 8]));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < a.len() && a[i] == b[i] {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive order of the suffix `s` and a pattern `p`: Equal when `p` is a prefix of `s`.
    fn naive(s: &[u8], p: &[u8], token: usize) -> Ordering {
        let value = |t: &[u8]| t.iter().rev().fold(0u32, |v, &x| (v << 8) | x as u32);
        let (a, b) = (s.chunks(token), p.chunks(token));
        for (x, y) in a.zip(b) {
            match value(x).cmp(&value(y)) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        match s.len() >= p.len() {
            true => Ordering::Equal,
            false => Ordering::Less,
        }
    }

    #[test]
    fn slices_compare_as_the_naive_order_with_any_known_prefix() {
        let mut rng = crate::util::SplitMix::new(5);
        for token in [1usize, 2, 4] {
            for _ in 0..3000 {
                let alphabet = 1 + rng.next() % 3;
                let word = |rng: &mut crate::util::SplitMix, at_least: usize| -> Vec<u8> {
                    let len = ((rng.next() % 24) as usize * token).max(at_least);
                    (0..len)
                        .map(|_| (rng.next() % alphabet) as u8 * 0x7f)
                        .collect()
                };
                let (s, p) = (word(&mut rng, 0), word(&mut rng, token));
                let (o, same) = cmp_slices(&s, &p, 0, token);
                assert_eq!(o, naive(&s, &p, token), "{s:?} {p:?} {token}");
                assert_eq!(same % token, 0);
                assert!(s[..same] == p[..same] && same <= p.len());
                // Any known prefix up to the shared one gives the same answer.
                let skip = same - same % token;
                assert_eq!(cmp_slices(&s, &p, skip, token), (o, same));
            }
        }
    }
}
