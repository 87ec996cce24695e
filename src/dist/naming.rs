//! Lexicographic naming by flagging key changes and a global prefix sum (Kulla–Sanders §2).

use super::{last_of_left, Round};
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
    name_after(comm, sorted, prev.as_ref(), 0, same)
}

/// Names one round of a sequence sorted in key ranges ([`super::sort_in_rounds`]), continuing
/// the names of the rounds before: `before` is the number of distinct keys in them (the sum of
/// this function's second result over the earlier rounds). Collective.
///
/// Entry: `round` as `sort_in_rounds` hands it to every pe. Exit: `names[j]` for each of this
/// pe's records of the round: 1 + the number of distinct keys smaller than its key in the whole
/// sequence; a key whose records straddle a round boundary keeps one name (the round's first
/// record is compared with [`Round::prev`], the last record of the earlier rounds). Also returns
/// the number of keys that first appear in this round. Communication: one prefix sum and one sum.
pub fn name_round<T: Pod, F>(comm: &Comm, round: &Round<T>, before: u64, same: F) -> (Vec<u64>, u64)
where
    F: Fn(&T, &T) -> bool,
{
    name_after(comm, &round.sorted, round.prev.as_ref(), before, same)
}

/// The names of `sorted` (this pe's run of a sequence sorted across pes) whose predecessor in
/// the whole sequence is `prev`, after `before` distinct keys. Collective.
fn name_after<T: Pod, F>(
    comm: &Comm,
    sorted: &[T],
    prev: Option<&T>,
    before: u64,
    same: F,
) -> (Vec<u64>, u64)
where
    F: Fn(&T, &T) -> bool,
{
    let mut names = Vec::with_capacity(sorted.len());
    let mut acc = 0u64;
    for (j, x) in sorted.iter().enumerate() {
        let left = if j == 0 { prev } else { Some(&sorted[j - 1]) };
        if left.is_none_or(|b| !same(b, x)) {
            acc += 1;
        }
        names.push(acc);
    }
    let offset = before + comm.exscan_sum(acc);
    for n in &mut names {
        *n += offset;
    }
    let distinct = comm.all_reduce_sum(acc);
    (names, distinct)
}
