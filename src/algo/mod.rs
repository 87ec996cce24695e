//! Suffix array algorithms: each a short driver of named phases over the `dist` primitives.

pub mod check;
pub mod css;
pub mod dc3;
pub mod dc7;
pub mod oracle;
pub mod pooled;
pub mod seq;
