//! Sending records to the owners of their indices in a layout and storing them there: the
//! "send to the owner, then place" step of every algorithm ([`send_to_owners`], in steps off the
//! end of the records: [`send_to_owners_in_pieces`]), into one slice or two ([`Slots`]).

use bytemuck::Pod;

use super::exchange::{exchange, exchange_tail};
use super::passes::{scatter, scatter2};
use super::Layout;
use crate::comm::Comm;

/// Sends every record to the pe that owns its index in `layout` and stores it there: the
/// "send to the owner, then place" step of every algorithm (names or ranks into text order, SA
/// entries into their slots, a recursion's string into its layout). Collective.
///
/// Entry: any records on any pe; `at(record)` gives (global index below `layout.len()`, value),
/// and no two records on any pes share an index. `out` is this pe's part of `layout`
/// (`layout.local_len(me)` slots; or two such slices, written together, for a value pair).
/// Exit: `out[i - layout.start(me)]` holds the value of the record with index i, for every record
/// sent here; the other slots are untouched. Records reach their owner in no particular order.
///
/// Cost: one bucketing pass, one all-to-all of the records, one placing pass. Memory: as
/// [`exchange`] (the input is freed once bucketed: two copies of the records at the peak).
pub fn send_to_owners<T, O, F>(comm: &Comm, layout: &Layout, records: Vec<T>, out: O, at: F)
where
    T: Pod + Send + Sync,
    O: Slots,
    F: Fn(&T) -> (usize, O::Value) + Sync,
{
    let lo = layout.start(comm.rank());
    let got = exchange(comm, records, |x| layout.owner(at(x).0));
    out.place(&got, |x| {
        let (i, v) = at(x);
        (i - lo, v)
    });
}

/// [`send_to_owners`] in `pieces` steps, each taking the records at the end of `records` (about
/// 1/`pieces` of them) and freeing them before the next step. Collective: every pe passes the
/// same `pieces`. Entry and exit as [`send_to_owners`] into one slice.
///
/// Cost: `pieces` all-to-alls. Memory: the records not yet sent plus two copies of one step's
/// (instead of two copies of all of them).
pub fn send_to_owners_in_pieces<T, U, F>(
    comm: &Comm,
    layout: &Layout,
    mut records: Vec<T>,
    out: &mut [U],
    pieces: usize,
    at: F,
) where
    T: Pod + Send + Sync,
    U: Copy + Send + Sync,
    F: Fn(&T) -> (usize, U) + Sync,
{
    let pieces = pieces.max(1);
    let piece = records.len().div_ceil(pieces);
    let lo = layout.start(comm.rank());
    for _ in 0..pieces {
        let from = records.len().saturating_sub(piece);
        let got = exchange_tail(comm, &mut records, from, |x| layout.owner(at(x).0));
        scatter(&got, &mut *out, |x| {
            let (i, v) = at(x);
            (i - lo, v)
        });
    }
}

/// Where [`send_to_owners`] stores its values: one slice, or two slices written together.
pub trait Slots {
    /// The value stored in one slot.
    type Value;
    /// `self[i] = v` for `(i, v) = f(item)`, every item (see [`scatter`]).
    fn place<T: Sync>(self, items: &[T], f: impl Fn(&T) -> (usize, Self::Value) + Sync);
}

impl<U: Copy + Send + Sync> Slots for &mut [U] {
    type Value = U;
    fn place<T: Sync>(self, items: &[T], f: impl Fn(&T) -> (usize, U) + Sync) {
        scatter(items, self, f);
    }
}

impl<U: Copy + Send + Sync, V: Copy + Send + Sync> Slots for (&mut [U], &mut [V]) {
    type Value = (U, V);
    fn place<T: Sync>(self, items: &[T], f: impl Fn(&T) -> (usize, (U, V)) + Sync) {
        scatter2(items, self.0, self.1, |x| {
            let (i, (u, v)) = f(x);
            (i, u, v)
        });
    }
}
