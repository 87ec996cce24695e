//! psa: distributed suffix array construction on MPI.
//!
//! Every pe (MPI process) holds a contiguous slice of the text; no pe ever holds all of it. The
//! suffix array comes back distributed the same way: pe r gets `SA[start_r..end_r)` for the same
//! ranges as its text slice. Two algorithms give identical output: pDC3 (Kulla–Sanders) and pCSS
//! (8-character keys with prefix-doubling refinement).
//!
//! Library use from another rsmpi program:
//!
//! ```no_run
//! // Serialized: psa may call MPI from a thread of its own pool (see `Ctx`).
//! let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized).unwrap();
//! psa::abort_on_panic(); // a panic on one pe ends the job instead of hanging the others
//! let ctx = psa::Ctx::new(universe.world(), psa::Config::default());
//! let my_slice: Vec<u8> = b"banana".to_vec(); // this pe's contiguous part of the text
//! let sa_slice = psa::suffix_array(&ctx, &my_slice).unwrap();
//! ```
//!
//! Every setting is a field of [`Config`]; the library reads no environment variables. The
//! `psa` binary and its command-line dependencies (clap, env_logger) are behind the default
//! feature `cli`: a library user may build with `default-features = false`.

#![deny(missing_docs)]

// The layers, lowest first; each uses only those above it (docs/ARCHITECTURE.md).

// Settings and the one error type.
mod config;
mod error;
// Index widths of records (32, 40 or 64 bits).
mod index;
// Integer alphabets: tokens of 1, 2 or 4 bytes.
pub mod token;
// Small helpers every layer shares (bit widths, SplitMix64, the parallel loops' chunks).
mod util;

// The only rsmpi user; the local sorts (independent of MPI).
mod affinity;
pub mod comm;
pub mod local;

// Distributed primitives over `comm` and `local`.
mod dist;

// Each pe's slice of the input, the output file; phase statistics and the allocator.
pub mod io;

pub mod alloc;
pub mod stats;

// The run context the algorithms call back into.
mod ctx;

// The algorithms.
mod algo;

// The memory plan (pure: the same on every pe).
pub mod plan;

// The public entry and the file-to-file job.
pub mod driver;
mod entry;

pub use algo::bwt::{bwt, BwtPart};
pub use algo::check::check;
pub use algo::lcp::lcp;
pub use algo::sink::SaSource;
pub use config::{
    Algo, AllocOptions, Backend, CommOptions, Config, CssOptions, DcxOptions, GpuOptions, Knobs,
    LcpOptions, PinMethod, Predicted, Relay,
};
pub use ctx::Ctx;
pub use dist::Layout;
pub use entry::{
    abort_on_panic, backend_for, suffix_array, suffix_array_or_write, suffix_array_tokens,
    suffix_array_tokens_or_write,
};
pub use error::{Error, Result};
pub use index::IndexWidth;
pub use token::{Token, TokenOrder, TokenWidth};
pub use util::say;

/// Not part of the library's interface: the pieces psa's own integration tests (`tests/`) and
/// benchmark tools (`examples/sais-baseline.rs`) call directly — the distributed primitives, the
/// sequential suffix array, DC7 on its own and the naive oracle. Hidden from the documentation; may change at
/// any time.
#[doc(hidden)]
pub mod internals {
    pub use crate::algo::dc7::dc7_held as dc7;
    pub use crate::algo::lcp::PREFIX_MAX as LCP_PREFIX_MAX;
    pub use crate::algo::oracle::{naive_bwt, naive_lcp, naive_sa};
    pub use crate::algo::seq::{sa_bytes, sa_ints};
    pub use crate::config::json_str;
    pub use crate::dist::{
        exchange, exchange_by, exchange_tail, fetch, last_of_left, name_round, name_sorted,
        rank_round, rebalance, right_halo, sample_sort, send_to_owners, send_to_owners_in_pieces,
        sort_in_rounds, GroupNames, Groups, Layout, OwnerCursor, Ranges, Round, SortEnv, SortKey,
    };
    pub use crate::io::bgzf::{block as bgzf_block, read_part as bgzf_read_part, Inflated};
}
