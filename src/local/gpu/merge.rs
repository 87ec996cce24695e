//! Parallel k-way merge of sorted runs on the CPU (for inputs sorted on the GPU in chunks).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

/// Merges the sorted runs `src[bounds[i]..bounds[i+1])` into `dst` (same length as `src`).
///
/// The output is cut into parts by splitter keys taken from a sample of every run; part `p` gets,
/// from every run, the keys in `[s_{p-1}, s_p)`, so equal keys never straddle a cut and the
/// parts can be merged independently with the rayon pool.
pub fn merge_runs<K: Ord + Copy + Send + Sync>(src: &[K], bounds: &[usize], dst: &mut [K]) {
    assert_eq!(src.len(), dst.len());
    let runs: Vec<&[K]> = bounds.windows(2).map(|w| &src[w[0]..w[1]]).collect();
    let n = src.len();
    let parts = (rayon::current_num_threads() * 4).min(n / 4096).max(1);
    // Splitters: sort a regular sample of every run, take every parts-th.
    let per_run = 16 * parts;
    let mut sample: Vec<K> = runs
        .iter()
        .flat_map(|r| (0..per_run.min(r.len())).map(move |j| r[j * r.len() / per_run.min(r.len())]))
        .collect();
    sample.sort_unstable();
    sample.dedup();
    let splitters: Vec<K> = (1..parts)
        .map(|p| sample[p * sample.len() / parts])
        .collect::<Vec<_>>();
    let mut splitters = splitters;
    splitters.dedup();
    // cuts[i][p]: where part p starts in run i.
    let cuts: Vec<Vec<usize>> = runs
        .iter()
        .map(|r| {
            let mut c = Vec::with_capacity(splitters.len() + 2);
            c.push(0);
            c.extend(splitters.iter().map(|s| r.partition_point(|x| x < s)));
            c.push(r.len());
            c
        })
        .collect();
    let nparts = splitters.len() + 1;
    let mut jobs: Vec<(Vec<&[K]>, &mut [K])> = Vec::with_capacity(nparts);
    let mut rest = dst;
    for p in 0..nparts {
        let pieces: Vec<&[K]> = runs
            .iter()
            .zip(&cuts)
            .map(|(r, c)| &r[c[p]..c[p + 1]])
            .filter(|s| !s.is_empty())
            .collect();
        let len: usize = pieces.iter().map(|s| s.len()).sum();
        let (out, tail) = rest.split_at_mut(len);
        rest = tail;
        jobs.push((pieces, out));
    }
    debug_assert!(rest.is_empty());
    jobs.into_par_iter()
        .for_each(|(pieces, out)| merge_into(&pieces, out));
}

/// Sequential merge of sorted `pieces` into `out`.
fn merge_into<K: Ord + Copy>(pieces: &[&[K]], out: &mut [K]) {
    match pieces.len() {
        0 => {}
        1 => out.copy_from_slice(pieces[0]),
        2 => {
            let (a, b) = (pieces[0], pieces[1]);
            let (mut i, mut j) = (0, 0);
            for o in out.iter_mut() {
                if j >= b.len() || (i < a.len() && a[i] <= b[j]) {
                    *o = a[i];
                    i += 1;
                } else {
                    *o = b[j];
                    j += 1;
                }
            }
        }
        _ => {
            let mut heap: BinaryHeap<Reverse<(K, usize)>> = pieces
                .iter()
                .enumerate()
                .map(|(i, p)| Reverse((p[0], i)))
                .collect();
            let mut pos = vec![1usize; pieces.len()];
            for o in out.iter_mut() {
                let Reverse((k, i)) = heap.pop().expect("heap holds the remaining keys");
                *o = k;
                if pos[i] < pieces[i].len() {
                    heap.push(Reverse((pieces[i][pos[i]], i)));
                    pos[i] += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_runs_with_duplicates() {
        let mut x = 12345u64;
        let mut next = || crate::util::xorshift(&mut x);
        for (n, k) in [
            (0usize, 1usize),
            (10, 3),
            (100_000, 2),
            (100_000, 7),
            (300_000, 40),
        ] {
            let mut src: Vec<u64> = (0..n).map(|_| next() % 5000).collect();
            let len = n.div_ceil(k).max(1);
            let mut bounds = vec![0];
            for c in src.chunks_mut(len) {
                c.sort();
                bounds.push(bounds.last().unwrap() + c.len());
            }
            let mut want = src.clone();
            want.sort();
            let mut dst = vec![0u64; n];
            merge_runs(&src, &bounds, &mut dst);
            assert_eq!(dst, want, "n={n} k={k}");
        }
    }
}
