//! Distributed primitives shared by every algorithm. Each function documents what each pe holds
//! on entry and on exit; all of them are collective.

pub mod exchange;
pub mod layout;
pub mod naming;
pub mod pair;
pub mod rounds;
pub mod sample_sort;
pub mod shift;

pub use exchange::{
    bucket_step_into, build_by_kind, collect_kept, collect_range, collect_where, count_equal,
    each_equal, exchange, exchange_by, exchange_tail, fetch, rebalance, rebalance_into, scatter,
    send_to_owners, send_to_owners_in_pieces, PieceExchange, Select, Slots,
};
pub use layout::{Layout, OwnerCursor};
pub use naming::{name_round, name_sorted, rank_round, GroupNames, Groups};
pub use pair::Pair;
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
