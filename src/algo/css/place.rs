//! Phase 7, place: every suffix's final name is its SA index, so (name, position) goes to the
//! owner of that index. Memory per pe: the SA slice in the run's index width (half of 8-byte
//! entries below 2^32 characters) until written, beside the pairs of one step (up to 8 steps,
//! [`pieces`]); into a file the slice is never held whole ([`place_names_in_pieces`]).

use rayon::prelude::*;

use crate::algo::pieces;
use crate::algo::sink::SaSink;
use crate::algo::steps::{with_step, Pieces};
use crate::dist::{
    collect_range, exchange, scatter, send_to_owners, send_to_owners_in_pieces, Layout, Pair,
};
use crate::index::Index;
use crate::Ctx;

/// Sends each (SA index, position) pair to the pe owning that SA index and returns this pe's SA
/// slice in the run's index width (half of 8-byte entries below 2^32 characters, until written),
/// in up to 8 steps ([`pieces`]: the pairs not sent yet and two copies of one step's beside the
/// SA slice). Collective.
pub(super) fn place<I: Index, P: Pair>(ctx: &Ctx, layout: &Layout, pairs: Vec<P>) -> Vec<I> {
    let comm = &ctx.comm;
    let mut sa: Vec<I> = bytemuck::allocation::zeroed_vec(layout.local_len(comm.rank()));
    let steps = pieces(ctx, std::mem::size_of_val(&pairs[..]));
    send_to_owners_in_pieces(comm, layout, pairs, &mut sa[..], steps, |x| {
        (x.a() as usize, I::from_u64(x.b()))
    });
    sa
}

/// Phase 7 for final names held in text order, and the SA slice to the sink: into a file
/// piece by piece ([`place_names_in_pieces`]), else placed whole ([`place_names`]).
/// Collective.
pub(super) fn deliver_names<I: Index>(
    ctx: &Ctx,
    layout: &Layout,
    name_of: Vec<I>,
    sink: &SaSink,
) -> Option<Vec<u64>> {
    if sink.file().is_some() {
        ctx.phase("place", || {
            place_names_in_pieces(ctx, layout, name_of, sink)
        });
        return None;
    }
    let sa = ctx.phase("place", || place_names(ctx, layout, name_of));
    sink.deliver_layout_of(ctx, sa, layout)
}

/// Phase 7 into the output file without holding the SA slice: in up to 8 steps ([`pieces`]),
/// step s sends the (name, position) pairs whose name (SA index) lies in the s-th of that many
/// equal pieces of its owner's slice, and each pe writes its piece once it is complete. Holds
/// the names (freed at the end), a step number per position (1 byte), and one step's pairs,
/// their exchange and SA piece (the run's index width). Collective.
fn place_names_in_pieces<I: Index>(ctx: &Ctx, layout: &Layout, name_of: Vec<I>, sink: &SaSink) {
    let comm = &ctx.comm;
    let me = comm.rank();
    let base = layout.start(me);
    let steps = pieces(ctx, name_of.len() * std::mem::size_of::<[I; 2]>());
    // The start of piece s of pe q's slice (s = steps: its end).
    let piece = |q: usize, s: usize| layout.start(q) + layout.local_len(q) * s / steps;
    let pieces = Pieces::new(
        layout.len(),
        (0..comm.size()).flat_map(|q| (0..steps).map(move |s| piece(q, s))),
        steps,
    );
    let step: Vec<u8> = collect_range(name_of.len(), |j| {
        pieces.step_of(name_of[j].to_u64() as usize)
    });
    for s in 0..steps {
        let pairs = with_step(&step, s as u8, |j| {
            [name_of[j], I::from_u64((base + j) as u64)]
        });
        let got = exchange(comm, pairs, |x| layout.owner(x[0].to_u64() as usize));
        let lo = piece(me, s);
        let mut sa: Vec<I> = bytemuck::allocation::zeroed_vec(piece(me, s + 1) - lo);
        scatter(&got, &mut sa[..], |x| (x[0].to_u64() as usize - lo, x[1]));
        drop(got);
        sink.write_narrow(ctx, lo as u64, &sa);
    }
}

/// Phase 7 for final names held in text order: [`place`] of (name, position) pairs, made and
/// sent in up to 8 steps from the end of `name_of`, each step's names freed once paired.
/// Collective.
fn place_names<I: Index>(ctx: &Ctx, layout: &Layout, mut name_of: Vec<I>) -> Vec<I> {
    let comm = &ctx.comm;
    let lo = layout.start(comm.rank());
    let mut sa: Vec<I> = bytemuck::allocation::zeroed_vec(layout.local_len(comm.rank()));
    let steps = pieces(ctx, name_of.len() * std::mem::size_of::<[I; 2]>());
    let piece = name_of.len().div_ceil(steps);
    for _ in 0..steps {
        let at = name_of.len().saturating_sub(piece);
        let pairs: Vec<[I; 2]> = name_of[at..]
            .par_iter()
            .enumerate()
            .map(|(j, &nm)| [nm, I::from_u64((lo + at + j) as u64)])
            .collect();
        name_of.truncate(at);
        name_of.shrink_to_fit();
        send_to_owners(comm, layout, pairs, &mut sa[..], |x| (x.a() as usize, x[1]));
    }
    sa
}
