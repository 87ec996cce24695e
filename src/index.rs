//! Index widths: the integer types that hold positions, ranks and names in the records the
//! algorithms move (Distributed DCX's `index_type`). A run picks the narrowest that holds every
//! value of a level ([`IndexWidth::choose`]): 32 bits below 2^32, 40 bits (5 bytes, [`U40`])
//! below 2^40, 64 bits above. Records are generic over an [`Index`] type, so one definition
//! serves every width; the 40-bit form is what keeps texts past 2^32 characters at 5 bytes per
//! field instead of 8.

use std::cmp::Ordering;
use std::fmt;

use bytemuck::{Pod, Zeroable};

/// An unsigned integer of [`Self::BITS`] bits stored in a record: positions, ranks, names.
/// Its order is the order of the numbers (`to_u64`).
pub trait Index: Pod + Ord + Eq + Send + Sync + fmt::Debug + Into<u64> + 'static {
    /// Bits of the values it holds.
    const BITS: u32;
    /// The largest value it holds.
    const MAX: u64 = if Self::BITS == 64 {
        u64::MAX
    } else {
        (1 << Self::BITS) - 1
    };
    /// `x` (at most [`Self::MAX`]; checked in debug builds, cut to the low bits otherwise).
    fn from_u64(x: u64) -> Self;
    fn to_u64(self) -> u64;
    /// `self mod m` for a small modulus (a period), in the type's own width where that is
    /// cheaper.
    #[inline]
    fn modulo(self, m: u32) -> u32 {
        (self.to_u64() % m as u64) as u32
    }
}

impl Index for u32 {
    const BITS: u32 = 32;
    #[inline]
    fn from_u64(x: u64) -> Self {
        debug_assert!(x <= <Self as Index>::MAX, "{x} does not fit 32 bits");
        x as u32
    }
    #[inline]
    fn to_u64(self) -> u64 {
        self as u64
    }
    #[inline]
    fn modulo(self, m: u32) -> u32 {
        self % m
    }
}

/// Not a record width ([`IndexWidth`] has no 16): only a recursion text whose names all fit
/// 16 bits is stored in it (pDC3's second level over a small alphabet, e.g. English's trigrams).
impl Index for u16 {
    const BITS: u32 = 16;
    #[inline]
    fn from_u64(x: u64) -> Self {
        debug_assert!(x <= <Self as Index>::MAX, "{x} does not fit 16 bits");
        x as u16
    }
    #[inline]
    fn to_u64(self) -> u64 {
        self as u64
    }
}

impl Index for u64 {
    const BITS: u32 = 64;
    #[inline]
    fn from_u64(x: u64) -> Self {
        x
    }
    #[inline]
    fn to_u64(self) -> u64 {
        self
    }
}

/// A 40-bit unsigned integer in 5 bytes (little-endian, alignment 1), so records of them pack
/// without padding: a (name, position) pair takes 10 bytes instead of 16.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
pub struct U40([u8; 5]);

impl Index for U40 {
    const BITS: u32 = 40;
    #[inline]
    fn from_u64(x: u64) -> Self {
        debug_assert!(x <= Self::MAX, "{x} does not fit 40 bits");
        let b = x.to_le_bytes();
        U40([b[0], b[1], b[2], b[3], b[4]])
    }
    #[inline]
    fn to_u64(self) -> u64 {
        let [a, b, c, d, e] = self.0;
        u64::from_le_bytes([a, b, c, d, e, 0, 0, 0])
    }
}

impl From<U40> for u64 {
    #[inline]
    fn from(x: U40) -> u64 {
        x.to_u64()
    }
}

impl Ord for U40 {
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        self.to_u64().cmp(&o.to_u64())
    }
}

impl PartialOrd for U40 {
    #[inline]
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl fmt::Debug for U40 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_u64())
    }
}

/// The width a run (or a level of it) stores its indices in: its `Index` type (32 bits, a
/// packed 5-byte 40-bit type, or 64 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum IndexWidth {
    /// `u32`.
    W32,
    /// 40 bits in 5 bytes.
    W40,
    /// `u64`.
    W64,
}

impl IndexWidth {
    /// The width of `bits` bits (32, 40 or 64).
    pub fn from_bits(bits: u32) -> Option<IndexWidth> {
        match bits {
            32 => Some(IndexWidth::W32),
            40 => Some(IndexWidth::W40),
            64 => Some(IndexWidth::W64),
            _ => None,
        }
    }

    /// Bits of an index of this width.
    pub fn bits(self) -> u32 {
        match self {
            IndexWidth::W32 => u32::BITS,
            IndexWidth::W40 => U40::BITS,
            IndexWidth::W64 => u64::BITS,
        }
    }

    /// The narrowest width that holds every value up to `largest`, and at least `at_least`
    /// (a forced width: tests reach the wider records on small inputs).
    pub fn choose(largest: u64, at_least: Option<IndexWidth>) -> IndexWidth {
        let fits = if largest <= u32::MAX as u64 {
            IndexWidth::W32
        } else if largest <= U40::MAX {
            IndexWidth::W40
        } else {
            IndexWidth::W64
        };
        fits.max(at_least.unwrap_or(IndexWidth::W32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Vec<u64> {
        let mut v = vec![
            0,
            1,
            2,
            255,
            256,
            65_535,
            1 << 32,
            (1 << 32) - 1,
            (1 << 32) + 1,
        ];
        v.extend([(1 << 39), U40::MAX - 1, U40::MAX, 0x12_3456_789a]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1000 {
            crate::util::xorshift(&mut x);
            v.push(x & U40::MAX);
            v.push(x & 0xffff_ffff);
            v.push(x & 0xff);
        }
        v
    }

    fn round_trip_and_order<I: Index>() {
        let v: Vec<u64> = values().into_iter().filter(|&x| x <= I::MAX).collect();
        for &x in &v {
            assert_eq!(I::from_u64(x).to_u64(), x, "{} bits: {x}", I::BITS);
            assert_eq!(I::from_u64(x).modulo(7) as u64, x % 7);
        }
        for w in v.windows(2) {
            let (a, b) = (I::from_u64(w[0]), I::from_u64(w[1]));
            assert_eq!(a.cmp(&b), w[0].cmp(&w[1]), "{} bits: {w:?}", I::BITS);
            assert_eq!(a == b, w[0] == w[1]);
        }
        let mut sorted: Vec<I> = v.iter().map(|&x| I::from_u64(x)).collect();
        sorted.sort_unstable();
        let mut want = v.clone();
        want.sort_unstable();
        assert!(sorted.iter().map(|x| x.to_u64()).eq(want));
        assert_eq!(I::zeroed().to_u64(), 0);
    }

    #[test]
    fn round_trip_and_order_of_every_width() {
        round_trip_and_order::<u32>();
        round_trip_and_order::<U40>();
        round_trip_and_order::<u64>();
        assert_eq!(
            (<u32 as Index>::MAX, U40::MAX, <u64 as Index>::MAX),
            (u32::MAX as u64, (1 << 40) - 1, u64::MAX)
        );
    }

    #[test]
    fn u40_is_five_packed_little_endian_bytes() {
        assert_eq!(std::mem::size_of::<U40>(), 5);
        assert_eq!(std::mem::align_of::<U40>(), 1);
        assert_eq!(std::mem::size_of::<[U40; 3]>(), 15);
        let x = U40::from_u64(0x12_3456_789a);
        assert_eq!(bytemuck::bytes_of(&x), &[0x9a, 0x78, 0x56, 0x34, 0x12]);
        let v: &[U40] = bytemuck::cast_slice(&[1u8, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!((v[0].to_u64(), v[1].to_u64()), (1, 1 << 32));
    }

    #[test]
    fn choose_takes_the_narrowest_that_fits_or_the_forced_one() {
        use IndexWidth::*;
        assert_eq!(IndexWidth::choose(0, None), W32);
        assert_eq!(IndexWidth::choose(u32::MAX as u64, None), W32);
        assert_eq!(IndexWidth::choose(1 << 32, None), W40);
        assert_eq!(IndexWidth::choose(U40::MAX, None), W40);
        assert_eq!(IndexWidth::choose(1 << 40, None), W64);
        assert_eq!(IndexWidth::choose(5, Some(W40)), W40);
        assert_eq!(IndexWidth::choose(5, Some(W64)), W64);
        // A forced width never narrows below what the values need.
        assert_eq!(IndexWidth::choose(1 << 40, Some(W32)), W64);
        for w in [W32, W40, W64] {
            assert_eq!(IndexWidth::from_bits(w.bits()), Some(w));
        }
        assert_eq!(IndexWidth::from_bits(48), None);
    }
}
