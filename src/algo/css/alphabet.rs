//! Phase 1, the alphabet: one reduction finds the byte (or token) values the text uses,
//! and keys pack their codes ([`Codes`]) into a 64- or 128-bit integer ([`KeyWord`]) whose order
//! is the characters' lexicographic order. Memory per pe: a histogram and code table of 256
//! entries (2^16 for 16-bit tokens, σ for 32-bit ones, which are ranked first).

use crate::token::Token;
use crate::util::bits;
use crate::Ctx;

/// Phase 1: the text's alphabet, packed for keys: a code per byte value that occurs (in byte
/// order), `b` bits per code, `k` codes per key of one `word` ([`KeyWord`]; ⌊64/b⌋ per 64 bits):
/// 64 bits for alphabets of at most [`NARROW_ALPHABET`] letters (DNA: 21 or 32 characters), 128
/// above (text and code: 16–24 characters instead of the 8–12 of 64 bits, which left a doubling
/// round over most suffixes — English shares its first 9 characters with another suffix at 79 %
/// of its positions, its first 18 at 29 %).
pub(super) struct Codes {
    /// The code of every character value (256 of them, 2^16 for 16-bit tokens, or the ranks of
    /// 32-bit ones).
    pub(super) code: Vec<u64>,
    pub(super) b: u32,
    /// Bits of a key: 64 or 128.
    pub(super) word: u32,
    pub(super) k: usize,
    /// Unused low bits of a key: word − b·k.
    pub(super) align: u32,
    /// k ones, b bits apart: a run's key is its character times this.
    repunit: u128,
}

/// Alphabets of at most this many letters pack their keys in 64 bits (16 characters or more);
/// larger ones in 128. Small alphabets (DNA) peak in the first sort, whose records the wider key
/// makes half as large again; their 64-bit keys already hold 16 characters or more.
const NARROW_ALPHABET: u64 = 16;

impl Codes {
    /// Collective: one reduction of a histogram of every value of `C` (bytes or 16-bit tokens),
    /// or for 32-bit tokens of every value up to the text's largest: their ranks (`ranks.rs`).
    pub(super) fn of<C: Token>(ctx: &Ctx, text: &[C]) -> Self {
        let values = if C::BITS <= 16 {
            1usize << C::BITS
        } else {
            let top = text.iter().map(|c| c.to_u64()).max().unwrap_or(0);
            ctx.comm.all_reduce_max(top) as usize + 1
        };
        let mut hist = vec![0u64; values];
        for &c in text {
            hist[c.to_u64() as usize] += 1;
        }
        let hist = ctx.comm.all_reduce_sum_vec(&hist);
        let mut code = vec![0u64; values];
        let mut sigma = 0u64;
        for c in 0..values {
            if hist[c] > 0 {
                code[c] = sigma;
                sigma += 1;
            }
        }
        let b = bits(sigma.saturating_sub(1)).max(1);
        Codes::packed(code, b, if sigma <= NARROW_ALPHABET { 64 } else { 128 })
    }

    /// Codes of `b` bits in keys of `word` bits: as many characters as fit each 64-bit half.
    pub(super) fn packed(code: Vec<u64>, b: u32, word: u32) -> Self {
        let k = (word / 64 * (64 / b)) as usize;
        Codes {
            code,
            b,
            word,
            k,
            align: word - b * k as u32,
            repunit: (0..k).fold(0u128, |acc, _| (acc << b) | 1),
        }
    }

    /// Whether a key is one character repeated k times (its suffix lies in a run).
    pub(super) fn is_run<W: KeyWord>(&self, key: W) -> bool {
        key == W::from_u128(self.repunit)
            .times(key.top(self.b))
            .shl(self.align)
    }
}

/// The integer a first-sort key is packed in ([`Codes::word`]): `u64` or `u128`.
pub(super) trait KeyWord: Copy + Ord + Send + Sync + std::fmt::Debug {
    const BITS: u32;
    /// The low `bits` bits set.
    fn ones(bits: u32) -> Self;
    /// The low bits of `x`.
    fn from_u128(x: u128) -> Self;
    /// `(self << b) | code`, for 0 < b < 64.
    fn push(self, b: u32, code: u64) -> Self;
    /// The codes of `chars` packed big-endian, `b` bits each (at most `BITS` in all).
    fn pack<C: Token>(chars: &[C], code: &[u64], b: u32) -> Self;
    fn and(self, mask: Self) -> Self;
    fn shl(self, s: u32) -> Self;
    /// The top `b` bits.
    fn top(self, b: u32) -> u64;
    /// `self · c`, wrapping.
    fn times(self, c: u64) -> Self;
}

macro_rules! key_word {
    ($t:ty) => {
        impl KeyWord for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline]
            fn ones(bits: u32) -> Self {
                if bits >= <$t>::BITS {
                    <$t>::MAX
                } else {
                    (1 << bits) - 1
                }
            }
            #[inline]
            fn from_u128(x: u128) -> Self {
                x as $t
            }
            #[inline]
            fn push(self, b: u32, code: u64) -> Self {
                // Word by word: a u128 shifted by a count the compiler cannot bound tests and
                // selects for counts past 64 at every character.
                let (hi, lo) = ((self >> (64 % <$t>::BITS)) as u64, self as u64);
                let lo2 = (lo << b) | code;
                if <$t>::BITS == 64 {
                    return lo2 as $t;
                }
                let hi2 = (hi << b) | (lo >> (64 - b));
                ((hi2 as $t) << (64 % <$t>::BITS)) | lo2 as $t
            }
            #[inline]
            fn pack<C: Token>(chars: &[C], code: &[u64], b: u32) -> Self {
                let fold = |cs: &[C]| {
                    cs.iter()
                        .fold(0u64, |key, &c| (key << b) | code[c.to_u64() as usize])
                };
                if <$t>::BITS == 64 {
                    return fold(chars) as $t;
                }
                // Two independent words (the last 64 bits' worth of characters, and the rest).
                let low = chars.len().min((64 / b) as usize);
                let (first, last) = chars.split_at(chars.len() - low);
                ((fold(first) as $t) << ((b * low as u32) % <$t>::BITS)) | fold(last) as $t
            }
            #[inline]
            fn and(self, mask: Self) -> Self {
                self & mask
            }
            #[inline]
            fn shl(self, s: u32) -> Self {
                self << s
            }
            #[inline]
            fn top(self, b: u32) -> u64 {
                (self >> (<$t>::BITS - b)) as u64
            }
            #[inline]
            fn times(self, c: u64) -> Self {
                self.wrapping_mul(c as $t)
            }
        }
    };
}
key_word!(u64);
key_word!(u128);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_words_pack_and_push_as_integers() {
        let mut rng = crate::util::SplitMix::new(3);
        let code: [u64; 256] = std::array::from_fn(|c| c as u64 % 37);
        for b in 1..=8u32 {
            let m = (1u64 << b) - 1;
            for _ in 0..200 {
                let x = (rng.next() as u128) << 64 | rng.next() as u128;
                let c = rng.next() & m;
                assert_eq!(x.push(b, c), (x << b) | c as u128);
                assert_eq!((x as u64).push(b, c), ((x as u64) << b) | c);
                for (bits, k) in [(64, 64 / b), (128, 2 * (64 / b))] {
                    let chars: Vec<u8> = (0..k).map(|_| rng.next() as u8).collect();
                    let want = chars.iter().fold(0u128, |key, &ch| {
                        (key << b) | (code[ch as usize] & m) as u128
                    });
                    let code_b: [u64; 256] = std::array::from_fn(|ch| code[ch] & m);
                    if bits == 64 {
                        assert_eq!(<u64 as KeyWord>::pack(&chars, &code_b, b) as u128, want);
                    } else {
                        assert_eq!(<u128 as KeyWord>::pack(&chars, &code_b, b), want);
                    }
                }
            }
        }
    }
}
