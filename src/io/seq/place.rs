//! Placing T's characters: a piece of T moved to the pes that own it in T's layout
//! ([`place`]), and T followed by its reverse complement ([`with_revcomp`], [`complement`]).

use crate::comm::Comm;
use crate::dist::Layout;

/// Moves `piece`, T's characters `[first, first + piece.len())`, to the pes that own them in
/// `target`. Collective: every pe passes one piece (possibly empty); the pieces of one call are
/// disjoint. Exit: the characters of all pieces that this pe owns, in T order. Cost: an
/// all-gather of one word, an all-to-all of counts and one of the characters (each sent once).
#[must_use]
pub(super) fn place(comm: &Comm, first: usize, piece: &[u8], target: &Layout) -> Vec<u8> {
    let p = comm.size();
    let end = first + piece.len();
    let counts: Vec<usize> = (0..p)
        .map(|d| {
            target
                .end(d)
                .min(end)
                .saturating_sub(target.start(d).max(first))
        })
        .collect();
    let firsts = comm.all_gather(first as u64);
    let (got, from) = comm.all_to_all_v_counts(piece, &counts);
    // Segments arrive in pe order; put them in T order.
    let mut segs = Vec::with_capacity(p);
    let mut off = 0;
    for (s, &c) in from.iter().enumerate() {
        segs.push((firsts[s], off, c));
        off += c;
    }
    if segs.windows(2).all(|w| w[0].0 <= w[1].0) {
        return got;
    }
    segs.sort_by_key(|s| s.0);
    let mut out = Vec::with_capacity(got.len());
    for (_, off, c) in segs {
        out.extend_from_slice(&got[off..off + c]);
    }
    out
}

/// The complement of a nucleotide code (IUPAC; case kept; U pairs with A); anything else
/// (`$`, `*`, `-`, amino acids without a complement code) stays.
pub fn complement(b: u8) -> u8 {
    let c = match b.to_ascii_uppercase() {
        b'A' => b'T',
        b'T' | b'U' => b'A',
        b'C' => b'G',
        b'G' => b'C',
        b'R' => b'Y',
        b'Y' => b'R',
        b'K' => b'M',
        b'M' => b'K',
        b'B' => b'V',
        b'V' => b'B',
        b'D' => b'H',
        b'H' => b'D',
        _ => return b,
    };
    if b.is_ascii_lowercase() {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

/// T followed by the reverse complement of `T[..n-1]` and a `$` (T ends in `$`): each pe's block
/// of `layout` (n characters) in, its block of the layout of 2n characters out. Collective.
#[must_use]
pub(super) fn with_revcomp(comm: &Comm, text: Vec<u8>, layout: &Layout) -> (Vec<u8>, Layout) {
    let n = layout.len();
    let target = Layout::block(2 * n, comm.size());
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let fwd = place(comm, lo, &text, &target);
    let upto = hi.min(n.saturating_sub(1));
    let rc: Vec<u8> = text[..upto.saturating_sub(lo).min(text.len())]
        .iter()
        .rev()
        .map(|&b| complement(b))
        .collect();
    let rc_first = if rc.is_empty() {
        2 * n
    } else {
        2 * n - 1 - upto
    };
    drop(text);
    let back = place(comm, rc_first, &rc, &target);
    let mut out = fwd;
    out.extend(back);
    if n > 0 && target.end(me) == 2 * n && target.local_len(me) > 0 {
        out.push(b'$');
    }
    debug_assert_eq!(out.len(), target.local_len(me));
    (out, target)
}
