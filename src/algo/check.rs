//! Distributed suffix array checker in O(n/p) memory per pe: besides the text it keeps only the
//! inverse (in the narrowest index width that holds n: 4, 5 or 8 bytes per character) and pieces
//! of bounded size; the suffix array itself is read once, piece by piece (from memory or from
//! the output file the build wrote: [`SaSource`]).
//!
//! SA is correct iff (1) it is a permutation of [0, n) and (2) for every two neighbours
//! SA[j], SA[j+1]: (t[SA[j]], ISA[SA[j]+1]) < (t[SA[j+1]], ISA[SA[j+1]+1]), where the rank of the
//! empty suffix at n is smaller than every other (Burkhardt & Kärkkäinen's check, as in
//! Distributed DCX' `sa_check`).

use super::sink::SaSource;
use rayon::prelude::*;

use super::steps::Pieces;
use crate::dist::{bucket_step_into, right_halo, scatter, Layout, PieceExchange};
use crate::error::{Error, Result};
use crate::index::{Index, IndexWidth, U40};
use crate::token::Token;
use crate::util::bits;
use crate::Ctx;

/// Checks a distributed suffix array. Collective. Entry: `text` is this pe's slice under
/// `layout`; `sa` is this pe's part of the suffix array under the same layout: a slice, or the
/// positional output file the build wrote it to ([`crate::io::OutputFile`], read back in
/// pieces). Returns the same verdict on every pe. Runs on the context's threads
/// ([`Ctx::install`]).
///
/// Memory per pe beside the text: the inverse (4–8 bytes per character) and one piece of
/// (SA index, position) pairs in the inverse's width (as many as take 3.5 bytes per position with
/// the entries read back: a ninth of the pe's positions in 32 bits; at most 2^22 entries, fewer
/// with `--exchange-round-bytes`), then a byte per position, a count per step and pe for each
/// thread's chunk of positions (fewer chunks where that would pass a byte per position), and one
/// step of keys with their places (one word each where they fit, else two; sent and received)
/// and keys (at most 255 steps). Communication: two all-to-alls of the n pairs, in pieces; the
/// suffix array is read once.
pub fn check<'a, T: Token>(
    ctx: &Ctx,
    text: &[T],
    sa: impl Into<SaSource<'a>>,
    layout: &Layout,
) -> Result<()> {
    let sa = sa.into();
    // The inverse in the narrowest index width that holds n (the "unset" marker), or the one
    // the configuration forces.
    let width = IndexWidth::choose(layout.len() as u64, ctx.config.forced_index_width());
    ctx.install(|ctx| {
        ctx.sampling(|| match width {
            IndexWidth::W32 => check_here::<u32, T>(ctx, text, sa, layout),
            IndexWidth::W40 => check_here::<U40, T>(ctx, text, sa, layout),
            IndexWidth::W64 => check_here::<u64, T>(ctx, text, sa, layout),
        })
    })
}

/// [`check`] on the calling thread's pool, the inverse held in `I`.
fn check_here<I: Index, T: Token>(
    ctx: &Ctx,
    text: &[T],
    sa: SaSource,
    layout: &Layout,
) -> Result<()> {
    let comm = &ctx.comm;
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    comm.agree(admissible(me, sa.len(hi - lo), hi - lo, layout.len()))?;
    // A key is a character above a rank in one word.
    if T::BITS + bits(layout.len() as u64) > 64 {
        return comm.agree(Err(Error::Unsupported(format!(
            "the checker takes at most 2^32 tokens of 4 bytes, got {}",
            layout.len()
        ))));
    }

    // Pieces of at most `piece` records per pe, so that the exchanged records stay small beside
    // the inverse, and where they can within what the build left below its peak: the fewest
    // pe's room less the inverse (and the order's step bytes), the same sizes on every pe.
    let room = room_below_peak(ctx).saturating_sub(((hi - lo) * size_of::<I>()) as u64);
    let room = comm.all_reduce_min(room) as usize;
    let isa = inverse::<I>(ctx, sa, layout, room)?;
    order(ctx, text, isa, layout, room)
}

/// Whether pe `me` may be checked: it holds the `expected` entries of its block, and the text's
/// n is below 2^56. Local.
fn admissible(me: usize, held: usize, expected: usize, n: usize) -> Result<()> {
    if held != expected {
        Err(Error::CheckFailed(format!(
            "pe {me} holds {held} entries, expected {expected}"
        )))
    } else if n as u64 >= 1 << 56 {
        Err(Error::CheckFailed(format!(
            "the checker takes texts below 2^56 characters, not {n}"
        )))
    } else {
        Ok(())
    }
}

/// (1) Permutation: sends (position, rank) to the owner of the position, piece by piece, in
/// pieces that fit `room`; returns this pe's part of the inverse. An entry not below n is
/// reported (before anything else) and not sent; a position seen twice or never fails the check.
/// Collective.
fn inverse<I: Index>(ctx: &Ctx, sa: SaSource, layout: &Layout, room: usize) -> Result<Vec<I>> {
    let comm = &ctx.comm;
    let n = layout.len();
    let (lo, hi) = (layout.start(comm.rank()), layout.end(comm.rank()));
    let piece = piece_records(
        hi - lo,
        comm.round_bytes(),
        inverse_record_bytes::<I>(),
        room,
    );
    let pieces = comm.all_reduce_max((hi - lo).div_ceil(piece) as u64) as usize;
    log::debug!("check: {room} bytes of room below the peak, {pieces} pieces of the inverse");
    let range = |k: usize| (k * piece).min(hi - lo)..((k + 1) * piece).min(hi - lo);
    // n marks a position not (yet) seen: every rank is below it.
    let unset = I::from_u64(n as u64);
    let mut isa = vec![unset; hi - lo];
    let (mut dup, mut big) = (None, None);
    ctx.phase("· inverse", || -> Result<()> {
        let mut ex = PieceExchange::<[I; 2]>::default();
        for k in 0..pieces {
            let part = comm.agree(sa.piece(lo, range(k)))?;
            if let Some(&i) = part.iter().find(|&&i| i as usize >= n) {
                big.get_or_insert(i);
            }
            // (position, rank) in the inverse's width: both are below n.
            let pairs = (part.iter().zip(range(k))).filter(|&(&i, _)| (i as usize) < n);
            ex.send(comm, pairs, |(&i, j)| {
                let pair = [I::from_u64(i), I::from_u64((lo + j) as u64)];
                (layout.owner(i as usize), pair)
            });
            drop(part);
            for &[i, r] in ex.received_by_region(lo, hi - lo) {
                let i = i.to_u64() as usize;
                let slot = &mut isa[i - lo];
                if *slot != unset {
                    dup = Some(i);
                }
                *slot = r;
            }
        }
        Ok(())
    })?;
    comm.agree(match big {
        Some(bad) => Err(Error::CheckFailed(format!(
            "entry {bad} is not below n = {n}"
        ))),
        None => Ok(()),
    })?;
    let local = match dup {
        Some(i) => Err(Error::CheckFailed(format!(
            "position {i} appears more than once"
        ))),
        None if isa.contains(&unset) => Err(Error::CheckFailed("some position is missing".into())),
        None => Ok(()),
    };
    comm.agree(local)?;
    Ok(isa)
}

/// How the order check (2) sends its keys: in one word with their places or in two, and in how
/// many steps.
struct OrderShape {
    /// A key and its place travel in one word.
    one_word: bool,
    /// Bits of a rank (of n + 1 values).
    rank_bits: u32,
    /// Bits of a character (8 for bytes, 16 or 32 for tokens).
    char_bits: u32,
    /// Steps of the order.
    steps: usize,
}

impl OrderShape {
    /// A key and its place in the receiver's piece fit one word when n and the pieces are small
    /// enough (below about 2^28 characters at p = 16), else (or with `--force-wide`) they travel
    /// as two, in twice the steps (a step's buffers then take no more memory). The same on
    /// every pe.
    fn new(ctx: &Ctx, layout: &Layout, order_room: usize, char_bits: u32) -> OrderShape {
        let round_bytes = ctx.comm.round_bytes();
        let rank_bits = bits(layout.len() as u64);
        let one_word = {
            let steps = key_steps(layout, round_bytes, ORDER_RECORD_BYTES[0], order_room);
            let piece_bits = (0..layout.pes())
                .flat_map(|q| (0..steps).map(move |s| (q, s)))
                .map(|(q, s)| {
                    let len =
                        piece_start(layout, steps, q, s + 1) - piece_start(layout, steps, q, s);
                    bits(len as u64)
                })
                .max()
                .unwrap_or(0);
            piece_bits + char_bits + rank_bits <= 64 && !ctx.config.force_wide
        };
        let record_bytes = ORDER_RECORD_BYTES[usize::from(!one_word)];
        let steps = key_steps(layout, round_bytes, record_bytes, order_room);
        OrderShape {
            one_word,
            rank_bits,
            char_bits,
            steps,
        }
    }
}

/// (2) Order: the key of every position j — (t[j], rank of j + 1 (1-based, 0 for j + 1 = n)),
/// packed into one word (n < 2^56, so the character fits above the rank) — goes to the pe
/// holding SA index isa[j], in steps (piece s of every pe's slice in step s; a byte per
/// position names its step), so each pe receives its keys in SA order piece by piece:
/// neighbours compared in the piece, with the last key of the piece before, and the last key
/// of this pe with the first of the next pe that holds any. Positions and ranks are read in
/// order; nothing is looked up at random. Frees the inverse. Collective.
fn order<I: Index, T: Token>(
    ctx: &Ctx,
    text: &[T],
    isa: Vec<I>,
    layout: &Layout,
    room: usize,
) -> Result<()> {
    let comm = &ctx.comm;
    let (p, hi) = (comm.size(), layout.end(comm.rank()));
    let next = right_halo(comm, &isa, 1);
    let order_room = room.saturating_sub((0..p).map(|q| layout.local_len(q)).max().unwrap_or(0));
    let shape = OrderShape::new(ctx, layout, order_room, T::BITS);
    log::debug!("check: {} steps of the order", shape.steps);
    let steps = StepCounts::new(ctx, &isa, layout, shape.steps);
    let mut sorted = SortedKeys::default();
    send_keys(
        ctx,
        text,
        (&isa, &next),
        layout,
        &shape,
        &steps,
        &mut sorted,
    );
    drop(steps);
    drop(isa);
    let SortedKeys {
        mut bad,
        prev,
        first_key,
    } = sorted;
    let after = right_halo(comm, &first_key.into_iter().collect::<Vec<u64>>(), 1);
    if let (None, Some(&p), Some(&a)) = (bad, prev.as_ref(), after.first()) {
        if p >= a {
            bad = Some(hi - 1);
        }
    }
    comm.agree(match bad {
        Some(j) => Err(Error::CheckFailed(format!(
            "suffixes SA[{}] and SA[{}] are out of order",
            j,
            j + 1
        ))),
        None => Ok(()),
    })
}

/// The cuts of the order check's steps: piece s of every pe's slice in step s.
fn step_cuts(layout: &Layout, steps: usize) -> Pieces {
    let piece = |q: usize, s: usize| piece_start(layout, steps, q, s);
    Pieces::new(
        layout.len(),
        (0..layout.pes()).flat_map(|q| (0..steps).map(move |s| piece(q, s))),
        steps,
    )
}

/// Per position its step, and per chunk of positions (one a thread) how many of each step's
/// keys go to each pe: a step's keys then go straight into the send buffer from one pass
/// over the positions of the step ([`bucket_step_into`]), with no list of them made first.
struct StepCounts {
    /// Each position's step.
    step: Vec<u8>,
    /// Positions per chunk.
    chunk: usize,
    /// Per chunk, its counts by step and pe (`s * p + q`).
    per_chunk: Vec<Vec<usize>>,
}

impl StepCounts {
    /// Counted from the inverse, in fewer chunks than threads where their counts (steps × p
    /// words each) would pass a byte per position. Local.
    fn new<I: Index>(ctx: &Ctx, isa: &[I], layout: &Layout, steps: usize) -> StepCounts {
        let p = layout.pes();
        let cuts = step_cuts(layout, steps);
        let len = isa.len();
        let chunks = (rayon::current_num_threads()).min((len / (8 * steps * p)).max(1));
        let chunk = len.div_ceil(chunks).max(1);
        let mut step = vec![0u8; len];
        let per_chunk: Vec<Vec<usize>> = ctx.phase("· steps", || {
            (step.par_chunks_mut(chunk).zip(isa.par_chunks(chunk)))
                .map(|(step, isa)| {
                    let mut count = vec![0usize; steps * p];
                    for (b, r) in step.iter_mut().zip(isa) {
                        let i = cuts.piece_of(r.to_u64() as usize);
                        let (q, s) = (i / steps, i % steps);
                        *b = s as u8;
                        count[s * p + q] += 1;
                    }
                    count
                })
                .collect()
        });
        StepCounts {
            step,
            chunk,
            per_chunk,
        }
    }
}

/// What the order check saw of the keys it received in SA order: the first wrong neighbour
/// (its SA index), the last key and the first.
#[derive(Default)]
struct SortedKeys {
    bad: Option<usize>,
    prev: Option<u64>,
    first_key: Option<u64>,
}

impl SortedKeys {
    /// Takes the keys of the piece of this pe's slice that starts at SA index `start`.
    fn see(&mut self, start: usize, keys: &[u64]) {
        if self.first_key.is_none() {
            self.first_key = keys.first().copied();
        }
        for (j, &kk) in keys.iter().enumerate() {
            if self.bad.is_none() && self.prev.is_some_and(|p| p >= kk) {
                self.bad = Some(start + j - 1);
            }
            self.prev = Some(kk);
        }
    }
}

/// The steps of the order check: each position's key sent with its place to the pe holding
/// its SA index (`isa` and the first rank of the next pe, `next`), each pe's received keys
/// placed in SA order and seen by `sorted`. Collective.
fn send_keys<I: Index, T: Token>(
    ctx: &Ctx,
    text: &[T],
    (isa, next): (&[I], &[I]),
    layout: &Layout,
    shape: &OrderShape,
    counted: &StepCounts,
    sorted: &mut SortedKeys,
) {
    let comm = &ctx.comm;
    let (me, p) = (comm.rank(), comm.size());
    let OrderShape {
        one_word,
        rank_bits,
        char_bits,
        steps,
    } = *shape;
    let StepCounts {
        step,
        chunk,
        per_chunk,
    } = counted;
    // The key of j with the character `shift` bits up (64 − its bits in the two-word records).
    let key = |j: usize, shift: u32| {
        let nr = match isa.get(j + 1) {
            Some(&r) => r.to_u64() + 1,
            None => next.first().map_or(0, |&r| r.to_u64() + 1),
        };
        text[j].to_u64() << shift | nr
    };
    let piece = |q: usize, s: usize| piece_start(layout, steps, q, s);
    ctx.phase("· order", || {
        let (mut send_one, mut recv_one) = (Vec::<u64>::new(), Vec::new());
        let (mut send_two, mut recv_two) = (Vec::<[u64; 2]>::new(), Vec::new());
        let mut keys: Vec<u64> = Vec::new();
        for s in 0..steps {
            let start = piece(me, s);
            keys.clear();
            keys.resize(piece(me, s + 1) - start, 0);
            // The destination of position j and its place there: the piece s of the owner of
            // its SA index.
            let starts: Vec<usize> = (0..p).map(|q| piece(q, s)).collect();
            let to = |j: usize| {
                let x = isa[j].to_u64() as usize;
                let q = layout.owner(x);
                (q, (x - starts[q]) as u64)
            };
            let counts: Vec<&[usize]> =
                (per_chunk.iter()).map(|c| &c[s * p..(s + 1) * p]).collect();
            let counted = (*chunk, &counts[..]);
            if one_word {
                let shift = char_bits + rank_bits;
                let make = |j: usize| {
                    let (q, at) = to(j);
                    (q, at << shift | key(j, rank_bits))
                };
                let sent = bucket_step_into(step, s as u8, counted, p, make, &mut send_one);
                comm.all_to_all_v_into(&send_one, &sent, &mut recv_one);
                scatter(&recv_one, &mut keys[..], |&x| {
                    ((x >> shift) as usize, x & ((1 << shift) - 1))
                });
            } else {
                let make = |j: usize| {
                    let (q, at) = to(j);
                    (q, [at, key(j, 64 - char_bits)])
                };
                let sent = bucket_step_into(step, s as u8, counted, p, make, &mut send_two);
                comm.all_to_all_v_into(&send_two, &sent, &mut recv_two);
                scatter(&recv_two, &mut keys[..], |x| (x[0] as usize, x[1]));
            }
            sorted.see(start, &keys);
        }
    });
}

/// Steps of the order check (2): as many as the fullest pe's slice takes pieces of
/// [`piece_records`] for records of `record_bytes` in `room` bytes, at most 255 (a step is a
/// byte per position). The same on every pe. Local.
fn key_steps(layout: &Layout, round_bytes: usize, record_bytes: usize, room: usize) -> usize {
    (0..layout.pes())
        .map(|q| {
            let len = layout.local_len(q);
            len.div_ceil(piece_records(len, round_bytes, record_bytes, room))
        })
        .max()
        .unwrap_or(1)
        .clamp(1, 255)
}

/// The first SA index of step s of pe q's slice, in `steps` steps.
fn piece_start(layout: &Layout, steps: usize, q: usize, s: usize) -> usize {
    layout.start(q) + layout.local_len(q) * s / steps
}

/// Bytes per record that a step of the order check (2) holds: its keys with their places sent
/// and received (one word each, or two) and the keys placed.
const ORDER_RECORD_BYTES: [usize; 2] = [3 * 8, 5 * 8];

/// Bytes per record that a piece of the inverse (1) holds in the index width `I`: the suffix
/// array's entries read back (8 bytes each, and the file's at most 8 before them) and the
/// (position, rank) pairs sent and received.
fn inverse_record_bytes<I: Index>() -> usize {
    2 * 8 + 4 * std::mem::size_of::<I>()
}

/// Records per pe in one piece of the check, for records of which a piece holds `record_bytes`
/// each: as many as take 3.5 bytes per position of the pe's `len` (so the check stays within the
/// memory plan's 6 bytes per position beside the inverse), or as fit `room` bytes (what the build
/// left below its peak) if fewer, but at least a sixteenth of `len`; at least 2^16 and at most
/// 2^22; fewer when the exchanges are limited to `round_bytes` per pe (so a small
/// `--exchange-round-bytes` forces many pieces on a small input). Every piece touches the inverse
/// all over (its positions, or its SA indices, lie anywhere in the pe's slice), so the pieces'
/// number is the number of passes over the inverse's memory: as few as the memory allows.
fn piece_records(len: usize, round_bytes: usize, record_bytes: usize, room: usize) -> usize {
    (len * 7 / (2 * record_bytes))
        .min((room / record_bytes).max(len.div_ceil(16)))
        .clamp(1 << 16, 1 << 22)
        .min(round_bytes / 16)
        .max(1)
}

/// Bytes this pe may hold beyond what it holds now without passing the most it has held in this
/// run (the build's peak, when the check follows a build). Local.
fn room_below_peak(ctx: &Ctx) -> u64 {
    ctx.log
        .run_peak_rss()
        .saturating_sub(crate::stats::rss_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A piece takes 3.5 bytes per position where the room allows, what the room holds where it
    /// holds less, never less than a sixteenth of the slice nor than 2^16 records, and what a
    /// small exchange round allows.
    #[test]
    fn pieces_fit_the_room_down_to_a_sixteenth() {
        let (len, rb, round) = (8 << 20, 32, usize::MAX);
        let by_rule = len * 7 / (2 * rb);
        assert_eq!(piece_records(len, round, rb, usize::MAX), by_rule);
        assert_eq!(piece_records(len, round, rb, 700_000 * rb), 700_000);
        assert_eq!(piece_records(len, round, rb, 0), len / 16);
        assert_eq!(piece_records(1000, round, rb, 0), 1 << 16);
        assert_eq!(piece_records(len, 16 * 100, rb, usize::MAX), 100);
        assert_eq!(piece_records(len, 8, rb, 0), 1);
    }
}
