//! Two numbers in one record, for the (name or rank, position) pairs every algorithm moves.

use bytemuck::Pod;

use crate::index::Index;

/// Two numbers (a name or SA index, and a position) in one record: `u64` holds two 32-bit
/// halves (n ≤ 2^32: half the volume of every exchange of pairs), `u128` two 64-bit halves,
/// `[I; 2]` two values of an index width (8, 10 or 16 bytes).
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

impl<I: Index> Pair for [I; 2] {
    #[inline]
    fn pack(a: u64, b: u64) -> Self {
        [I::from_u64(a), I::from_u64(b)]
    }
    #[inline]
    fn a(&self) -> u64 {
        self[0].to_u64()
    }
    #[inline]
    fn b(&self) -> u64 {
        self[1].to_u64()
    }
}
