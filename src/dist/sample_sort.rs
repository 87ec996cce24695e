//! Distributed sample sort of fixed-size records with unique keys.

use bytemuck::Pod;
use rayon::prelude::*;

use super::exchange;
use crate::comm::Comm;
use crate::local::LocalSort;
use crate::util::SplitMix;

/// What sample sort needs from its caller: the communicator, the local sort, and a log that
/// times its sub-phases and keeps the share of the fullest pe. The run context (`crate::Ctx`)
/// is one; the primitives know nothing else of it.
pub trait SortEnv {
    /// The communicator of the sort.
    fn comm(&self) -> &Comm;
    /// The local sort backend.
    fn sorter(&self) -> &dyn LocalSort;
    /// Runs `f` as a named (sub-)phase; every pe runs the same phases in the same order.
    fn phase<R>(&self, name: &str, f: impl FnOnce() -> R) -> R;
    /// Records this pe's share `local` of `total` records after a sort.
    fn note_imbalance(&self, local: usize, total: usize);
}

/// A reference to an environment is one (so `sample_sort(&ctx, …)` works with `ctx: &Ctx`).
impl<E: SortEnv> SortEnv for &E {
    fn comm(&self) -> &Comm {
        (**self).comm()
    }

    fn sorter(&self) -> &dyn LocalSort {
        (**self).sorter()
    }

    fn phase<R>(&self, name: &str, f: impl FnOnce() -> R) -> R {
        (**self).phase(name, f)
    }

    fn note_imbalance(&self, local: usize, total: usize) {
        (**self).note_imbalance(local, total)
    }
}

/// Records that sample sort can order: a total order (`Ord`) that is unique per record in psa
/// (every key carries a position, which is what keeps the sort balanced when the characters of
/// all keys are equal, as in aⁿ), and a local sort for this type.
pub trait SortKey: Pod + Ord + Send + Sync {
    /// Sorts one pe's records ascending.
    fn sort_local(v: &mut [Self], sorter: &dyn LocalSort);
}

impl SortKey for u64 {
    fn sort_local(v: &mut [Self], sorter: &dyn LocalSort) {
        sorter.sort_u64(v);
    }
}

impl SortKey for u128 {
    fn sort_local(v: &mut [Self], sorter: &dyn LocalSort) {
        sorter.sort_u128(v);
    }
}

/// Samples per pe (on average) used to choose splitters: with random sampling the expected excess
/// of the fullest pe shrinks like 1/sqrt(samples per pe), and the fullest pe sets the pace. At
/// most 2^18 samples in all, so the gathered sample stays small.
fn samples_per_pe(p: usize) -> usize {
    ((1usize << 18) / p).clamp(64, 1024)
}

/// Sorts a distributed sequence. Collective.
///
/// Entry: any records on any pe. Exit: every pe holds a sorted run and the runs are in pe order
/// (pe r's records are all smaller than pe r+1's). Sizes are about `n/p` each, whatever the input:
/// splitters come from a random sample proportional to each pe's share, and keys are unique, so no
/// run of equal keys can pile up on one pe. The largest share over the mean is logged (debug).
///
/// Cost: one pass to bucket (in place), one all-to-all of every record, one local sort. Memory:
/// the input and the received records (two copies at the peak) plus 4 bytes per record.
#[must_use]
pub fn sample_sort<T: SortKey>(env: &impl SortEnv, mut data: Vec<T>) -> Vec<T> {
    let comm = env.comm();
    let p = comm.size();
    if p == 1 {
        T::sort_local(&mut data, env.sorter());
        return data;
    }
    let n = comm.all_reduce_sum(data.len() as u64) as usize;
    if n == 0 {
        return data;
    }
    let splitters = env.phase("· splitters", || {
        let all = gathered_sample(comm, &[&data], n, 0x5eed);
        (1..p).map(|j| all[j * all.len() / p]).collect::<Vec<T>>()
    });

    let mut recv = env.phase("· exchange", || {
        exchange(comm, data, |x| count_below(&splitters, |s| s < x))
    });
    env.phase("· local sort", || T::sort_local(&mut recv, env.sorter()));

    {
        // Always reduce (a collective may not depend on a pe's own log level).
        let max = comm.all_reduce_max(recv.len() as u64) as f64;
        if comm.rank() == 0 {
            log::debug!(
                "sample sort of {n} records: fullest pe holds {:.3}× the mean",
                max * p as f64 / n as f64
            );
        }
    }
    env.note_imbalance(recv.len(), n);
    recv
}

/// A random sample of a distributed sequence of `n` records, of which this pe holds `parts`,
/// gathered on every pe and sorted: every pe draws from each part in proportion to its share of
/// `n`, [`samples_per_pe`] per pe on average (`seed` and the pe pick the draws). What splitters
/// of p ranges of about n/p records each are chosen from. Collective (one all-gather of the
/// sample); the same on every pe. Each pe sorts its own draws before the gather, so the gathered
/// sample is p sorted runs, which [`merge_runs`] orders in about log2(p) comparisons per record
/// instead of log2 of the sample's size (the merge's records compare by the cover's rule,
/// characters then ranks, so comparisons are what the sort costs). A general sort would not:
/// Rust's finds runs only of at least √(the sample's size), which p runs of 64 draws are not
/// past p = 4096 (`docs/scaling-model.md`).
pub fn gathered_sample<T: Pod + Ord>(comm: &Comm, parts: &[&[T]], n: usize, seed: u64) -> Vec<T> {
    let p = comm.size();
    let mut rng = SplitMix::new(seed ^ ((comm.rank() as u64) << 32) ^ n as u64);
    let mut drawn = Vec::new();
    for v in parts.iter().filter(|v| !v.is_empty()) {
        let want = (v.len() as u128 * (samples_per_pe(p) * p) as u128).div_ceil(n.max(1) as u128);
        let want = (want as usize).min(v.len());
        drawn.extend((0..want).map(|_| v[(rng.next() % v.len() as u64) as usize]));
    }
    drawn.sort_unstable();
    merge_runs(comm.all_gather_v(&drawn))
}

/// `v` sorted, for a `v` made of ascending runs (maximal, found by their descents): adjacent runs
/// merged pairwise, round after round, ⌈log2(runs)⌉ passes of at most `v.len()` comparisons each.
pub fn merge_runs<T: Copy + Ord>(mut v: Vec<T>) -> Vec<T> {
    let mut starts: Vec<usize> = std::iter::once(0)
        .chain((1..v.len()).filter(|&i| v[i - 1] > v[i]))
        .collect();
    let mut out = v.clone();
    while starts.len() > 1 {
        let at = |k: usize| starts.get(k).copied().unwrap_or(v.len());
        let mut next = Vec::with_capacity(starts.len().div_ceil(2));
        for k in (0..starts.len()).step_by(2) {
            let (lo, mid, hi) = (at(k), at(k + 1), at(k + 2).max(at(k + 1)));
            merge_into(&v[lo..mid], &v[mid..hi], &mut out[lo..hi]);
            next.push(lo);
        }
        std::mem::swap(&mut v, &mut out);
        starts = next;
    }
    v
}

/// `x` and `y` (each ascending) merged into `out` (of their total length); stable.
fn merge_into<T: Copy + Ord>(x: &[T], y: &[T], out: &mut [T]) {
    let (mut i, mut j) = (0, 0);
    for o in out.iter_mut() {
        let take_x = j == y.len() || (i < x.len() && x[i] <= y[j]);
        *o = if take_x { x[i] } else { y[j] };
        if take_x {
            i += 1;
        } else {
            j += 1;
        }
    }
}

/// Sorts records by comparison (for records without an integer key). Uses rayon.
pub fn par_sort<T: Ord + Send>(v: &mut [T]) {
    v.par_sort_unstable();
}

/// The number of leading elements of sorted `v` for which `below` holds (`below` true on a
/// prefix): up to [`LINEAR_BOUNDS`] elements all tested and counted, without a branch to
/// mispredict (a binary search guesses wrong about every other step on random records), past
/// that a binary search.
#[inline]
pub fn count_below<T>(v: &[T], below: impl Fn(&T) -> bool) -> usize {
    if v.len() <= LINEAR_BOUNDS {
        v.iter().map(|x| usize::from(below(x))).sum()
    } else {
        v.partition_point(below)
    }
}

/// Up to this many bounds a record's range is found by testing every bound ([`count_below`]).
pub(super) const LINEAR_BOUNDS: usize = 16;

#[cfg(test)]
mod tests {
    use super::merge_runs;
    use crate::util::SplitMix;

    /// The merge of a gathered sample's runs orders it as a stable sort does: runs of every
    /// length (none, one, many, of one record), ties across runs, and input that is one run.
    #[test]
    fn merged_runs_are_sorted() {
        let mut rng = SplitMix::new(7);
        for (runs, most) in [(0, 0), (1, 50), (2, 3), (7, 1), (64, 64), (1000, 5), (3, 0)] {
            let mut v: Vec<(u8, u32)> = Vec::new();
            for r in 0..runs {
                let len = (rng.next() % (most as u64 + 1)) as usize;
                let mut run: Vec<(u8, u32)> =
                    (0..len).map(|_| ((rng.next() % 8) as u8, r)).collect();
                run.sort_by_key(|x| x.0);
                v.extend(run);
            }
            // Ord on the key only, to see stability: records wrapped so that ties compare equal.
            let keyed: Vec<Key> = v.iter().map(|&(k, r)| Key(k, r)).collect();
            let mut want = keyed.clone();
            want.sort();
            let fields = |v: &[Key]| v.iter().map(|k| (k.0, k.1)).collect::<Vec<_>>();
            assert_eq!(
                fields(&merge_runs(keyed)),
                fields(&want),
                "{runs} runs of up to {most}"
            );
        }
    }

    /// A record ordered by its first field only.
    #[derive(Clone, Copy, Debug)]
    struct Key(u8, u32);
    impl PartialEq for Key {
        fn eq(&self, o: &Self) -> bool {
            self.0 == o.0
        }
    }
    impl Eq for Key {}
    impl PartialOrd for Key {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Key {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            self.0.cmp(&o.0)
        }
    }
}
