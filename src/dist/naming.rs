//! Lexicographic naming by flagging key changes and a global prefix sum (Kulla–Sanders §2).

use super::last_of_left;
use crate::comm::Comm;
use bytemuck::Pod;

/// Names the records of a globally sorted sequence. Collective.
///
/// Entry: `sorted` is this pe's run of a sequence sorted across pes (as `sample_sort`
/// leaves it); `same(a, b)` tells whether two neighbouring records carry equal keys.
/// Exit: `names[j]` for each local record: 1 + the number of distinct keys smaller than its key,
/// i.e. names start at 1 and equal keys get equal names. Also returns the number of distinct keys
/// in the whole sequence. Communication: one record from the left, one prefix sum.
pub fn name_sorted<T: Pod, F>(comm: &Comm, sorted: &[T], same: F) -> (Vec<u64>, u64)
where
    F: Fn(&T, &T) -> bool,
{
    let prev = last_of_left(comm, sorted);
    let mut names = Vec::with_capacity(sorted.len());
    let mut acc = 0u64;
    for (j, x) in sorted.iter().enumerate() {
        let before = if j == 0 {
            prev.as_ref()
        } else {
            Some(&sorted[j - 1])
        };
        if before.is_none_or(|b| !same(b, x)) {
            acc += 1;
        }
        names.push(acc);
    }
    let offset = comm.exscan_sum(acc);
    for n in &mut names {
        *n += offset;
    }
    let distinct = comm.all_reduce_sum(acc);
    (names, distinct)
}
