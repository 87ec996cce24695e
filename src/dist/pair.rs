//! Two numbers in one integer, for the (name or rank, position) pairs every algorithm moves.

use bytemuck::Pod;

/// Two numbers (a name or SA index, and a position) in one integer: `u64` holds two 32-bit
/// halves (n ≤ 2^32: half the volume of every exchange of pairs), `u128` two 64-bit halves.
pub trait Pair: Pod + Send + Sync {
    fn pack(a: u64, b: u64) -> Self;
    fn a(&self) -> u64;
    fn b(&self) -> u64;
}

impl Pair for u64 {
    #[inline]
    fn pack(a: u64, b: u64) -> Self {
        debug_assert!(a < 1 << 32 && b < 1 << 32);
        (a << 32) | b
    }
    #[inline]
    fn a(&self) -> u64 {
        self >> 32
    }
    #[inline]
    fn b(&self) -> u64 {
        self & 0xffff_ffff
    }
}

impl Pair for u128 {
    #[inline]
    fn pack(a: u64, b: u64) -> Self {
        ((a as u128) << 64) | b as u128
    }
    #[inline]
    fn a(&self) -> u64 {
        (self >> 64) as u64
    }
    #[inline]
    fn b(&self) -> u64 {
        *self as u64
    }
}
