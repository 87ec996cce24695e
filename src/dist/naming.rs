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

/// One round's records named by rank ([`rank_round`]).
pub struct RankedRound {
    /// Per record: 1 + the number of records of the whole sequence with smaller keys (the global
    /// rank of the key's first record, 1-based).
    pub names: Vec<u64>,
    /// Per record: whether no other record holds its key. The round's last record is counted
    /// as shared when a later round follows (its first record is not known here): unique keys
    /// may be reported shared, never the reverse.
    pub unique: Vec<bool>,
    /// The number of keys that first appear in this round.
    pub new: u64,
    /// The largest name given so far (pass it to the next round).
    pub last: u64,
}

/// Names one round of a sequence sorted in key ranges ([`super::sort_in_rounds`]) by rank, and
/// tells which keys are unique: a unique key's name is then its record's exact rank, and a
/// shared key's name is where its group of records starts. `last` is the previous round's
/// [`RankedRound::last`] (0 before the first). Collective.
///
/// Entry: `round` as `sort_in_rounds` hands it to every pe. Exit: see [`RankedRound`]; a key
/// whose records straddle a pe or round boundary keeps one name. Communication: one prefix
/// maximum, one sum and one maximum.
pub fn rank_round<T: Pod, F>(comm: &Comm, round: &Round<T>, last: u64, same: F) -> RankedRound
where
    F: Fn(&T, &T) -> bool,
{
    let sorted = &round.sorted;
    let mut names = Vec::with_capacity(sorted.len());
    let mut unique = Vec::with_capacity(sorted.len());
    // The name of the group the current record belongs to; 0 while it started on a lower pe
    // or in an earlier round.
    let mut cur = 0u64;
    let mut starts = 0u64;
    for (j, x) in sorted.iter().enumerate() {
        let left = if j == 0 {
            round.prev.as_ref()
        } else {
            Some(&sorted[j - 1])
        };
        let new = left.is_none_or(|b| !same(b, x));
        if new {
            cur = round.offset + j as u64 + 1;
            starts += 1;
        }
        names.push(cur);
        let right = sorted.get(j + 1).or(round.next.as_ref());
        let shared_right = right.map_or(!round.is_last(), |r| same(x, r));
        unique.push(new && !shared_right);
    }
    let carry = last.max(comm.exscan_max(cur));
    for n in names.iter_mut().take_while(|n| **n == 0) {
        *n = carry;
    }
    RankedRound {
        names,
        unique,
        new: comm.all_reduce_sum(starts),
        last: comm.all_reduce_max(cur).max(last),
    }
}
