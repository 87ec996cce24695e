//! Distributed primitives shared by every algorithm. Each function documents what each pe holds
//! on entry and on exit; all of them are collective.

//!
//! The files, lowest first (each uses only those before it): `layout.rs`, `pair.rs`,
//! `passes.rs` (local passes: scatter, keep, select by a byte, build by kind), `bucket.rs`
//! (bucketing by destination), `exchange.rs` (the collectives that move records), `owners.rs`
//! (send to the owner of an index and place it there), `shift.rs` (halos), `sample_sort.rs`,
//! `rounds.rs` (sorting in key ranges), `naming.rs`.

pub mod bucket;
pub mod exchange;
pub mod layout;
pub mod naming;
pub mod owners;
pub mod pair;
pub mod passes;
pub mod rounds;
pub mod sample_sort;
pub mod shift;

pub use bucket::bucket_step_into;
pub use exchange::{
    exchange, exchange_by, exchange_tail, fetch, rebalance, rebalance_into, PieceExchange,
};
pub use layout::{Layout, OwnerCursor};
pub use naming::{name_round, name_sorted, rank_round, GroupNames, Groups};
pub use owners::{send_to_owners, send_to_owners_in_pieces, Slots};
pub use pair::Pair;
pub use passes::{
    build_by_kind, collect_kept, collect_range, collect_where, count_equal, each_equal, scatter,
    Select,
};
pub use rounds::{
    release_freed, scramble, snap_cuts, sort_in_rounds, unscramble, Ranges, Round, RoundBounds,
    MAX_RANGES, SNAP,
};
pub use sample_sort::{gathered_sample, sample_sort, SortEnv, SortKey};
pub use shift::{last_of_left, right_halo};

/// A pool of `threads` threads, for unit tests of the local passes that split work by chunks.
#[cfg(test)]
pub(crate) fn test_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool for a test")
}
