//! Suffix array algorithms: each a short driver of named phases over the `dist` primitives.

pub mod bwt;
pub mod check;
pub mod css;
pub mod dcx;
pub mod lcp;
pub mod oracle;
pub mod pooled;
pub mod seq;
pub mod sink;

pub use dcx::{dc3, dc7};
