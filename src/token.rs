//! Integer alphabets: a text of little-endian unsigned tokens of 1, 2 or 4 bytes (nanoGPT's
//! `train.bin`, infini-gram's `tokenized.N`), read as one symbol per token ([`TokenWidth`],
//! [`Token`]). Suffixes compare token by token, by the tokens' numeric values; the suffix array,
//! the BWT and the LCP array count in tokens.

use std::fmt;

use bytemuck::Pod;

/// Bytes per token of the input (`--token-width 1|2|4`): every input is read as little-endian
/// unsigned tokens of this width. 1 (the default) is the byte path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TokenWidth {
    /// Bytes (the default).
    #[default]
    W1,
    /// 16-bit tokens (`u16`).
    W2,
    /// 32-bit tokens (`u32`).
    W4,
}

impl TokenWidth {
    /// Bytes per token: 1, 2 or 4.
    pub fn bytes(self) -> usize {
        match self {
            TokenWidth::W1 => 1,
            TokenWidth::W2 => 2,
            TokenWidth::W4 => 4,
        }
    }

    /// The width of `b` bytes per token, if it is 1, 2 or 4.
    pub fn from_bytes(b: usize) -> Option<TokenWidth> {
        match b {
            1 => Some(TokenWidth::W1),
            2 => Some(TokenWidth::W2),
            4 => Some(TokenWidth::W4),
            _ => None,
        }
    }

    /// Parses `--token-width`'s value.
    pub fn parse(s: &str) -> Result<TokenWidth, String> {
        s.parse::<usize>()
            .ok()
            .and_then(TokenWidth::from_bytes)
            .ok_or_else(|| format!("token width must be 1, 2 or 4 bytes, got '{s}'"))
    }
}

impl fmt::Display for TokenWidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bytes())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
}

/// A token type: `u8`, `u16` or `u32`. Every value is a valid token, the largest included.
pub trait Token:
    Pod + Ord + Into<u64> + Send + Sync + fmt::Debug + sealed::Sealed + 'static
{
    /// Bytes per token.
    const WIDTH: TokenWidth;
    /// Bits per token.
    const BITS: u32;
    /// The token's value.
    fn to_u64(self) -> u64;
    /// The token of value `v` (within the type's range).
    fn from_u64(v: u64) -> Self;
    /// The token of the little-endian bytes `b` (`WIDTH` of them).
    fn from_le(b: &[u8]) -> Self;
    /// The token of the big-endian bytes `b` (`WIDTH` of them): the little-endian token
    /// byte-swapped.
    fn from_be(b: &[u8]) -> Self;
    /// Appends the token's little-endian bytes to `out`.
    fn put_le(self, out: &mut Vec<u8>);
}

macro_rules! token {
    ($t:ty, $w:expr) => {
        impl Token for $t {
            const WIDTH: TokenWidth = $w;
            const BITS: u32 = <$t>::BITS;
            #[inline]
            fn to_u64(self) -> u64 {
                self as u64
            }
            #[inline]
            fn from_u64(v: u64) -> Self {
                debug_assert!(v <= <$t>::MAX as u64, "{v} is not a token of this width");
                v as $t
            }
            #[inline]
            fn from_le(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            #[inline]
            fn from_be(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_be_bytes(a)
            }
            #[inline]
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}

token!(u8, TokenWidth::W1);
token!(u16, TokenWidth::W2);
token!(u32, TokenWidth::W4);

/// How the tokens of a file compare, and so what their suffix array sorts by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TokenOrder {
    /// By value: each token is read as the little-endian number it is (the default).
    #[default]
    Value,
    /// As the file's bytes (infini-gram's tables): each token is read byte-swapped
    /// (big-endian), so that comparing the values compares the tokens' little-endian bytes in
    /// file order. Since a suffix starts at a token and the file is whole tokens, the suffixes
    /// then sort as the byte strings of the file from their token's first byte.
    FileBytes,
}

/// Appends the tokens of little-endian bytes (a multiple of `T::WIDTH` of them) to `out`,
/// each read as `order` says (byte-swapped for [`TokenOrder::FileBytes`]). Local.
pub fn decode<T: Token>(bytes: &[u8], order: TokenOrder, out: &mut Vec<T>) {
    let w = T::WIDTH.bytes();
    debug_assert_eq!(bytes.len() % w, 0);
    match order {
        TokenOrder::Value => out.extend(bytes.chunks_exact(w).map(T::from_le)),
        TokenOrder::FileBytes => out.extend(bytes.chunks_exact(w).map(T::from_be)),
    }
}

/// The tokens of little-endian bytes (a multiple of `T::WIDTH` of them), by value. Local.
pub fn decode_le<T: Token>(bytes: &[u8], out: &mut Vec<T>) {
    decode(bytes, TokenOrder::Value, out)
}

/// The little-endian bytes of tokens.
pub fn encode_le<T: Token>(tokens: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(tokens.len() * T::WIDTH.bytes());
    for &t in tokens {
        t.put_le(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_parse_and_tokens_round_trip() {
        assert_eq!(TokenWidth::parse("2"), Ok(TokenWidth::W2));
        assert!(TokenWidth::parse("3").unwrap_err().contains("1, 2 or 4"));
        let t: Vec<u32> = vec![0, 1, 0xFFFF_FFFF, 0x0102_0304];
        let b = encode_le(&t);
        assert_eq!(&b[12..], &[4, 3, 2, 1]);
        let mut back = Vec::new();
        decode_le::<u32>(&b, &mut back);
        assert_eq!(back, t);
        let mut h = Vec::new();
        decode_le::<u16>(&[0xff, 0xff, 1, 0], &mut h);
        assert_eq!(h, vec![0xFFFF, 1]);
    }

    /// In the file's byte order a token is its bytes swapped, so values compare as the bytes
    /// do: 0x0100 (bytes 00 01) sorts before 0x00FF (bytes FF 00).
    #[test]
    fn file_byte_order_swaps_each_token() {
        let bytes = [0x00, 0x01, 0xFF, 0x00, 0x04, 0x03, 0x02, 0x01];
        let mut h: Vec<u16> = Vec::new();
        decode(&bytes[..4], TokenOrder::FileBytes, &mut h);
        assert_eq!(h, vec![0x0001, 0xFF00]);
        assert!(h[0] < h[1] && bytes[..2] < bytes[2..4]);
        let mut w: Vec<u32> = Vec::new();
        decode(&bytes, TokenOrder::FileBytes, &mut w);
        assert_eq!(w, vec![0x0001_FF00, 0x0403_0201]);
        let mut b: Vec<u8> = Vec::new();
        decode(&bytes, TokenOrder::FileBytes, &mut b);
        assert_eq!(b, bytes);
    }
}
