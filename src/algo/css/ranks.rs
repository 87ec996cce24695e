//! Phase 0, for a text of 32-bit tokens only: every value replaced by its rank among the values
//! the text uses. The ranks keep the values' order, so the suffix array is unchanged, and the
//! alphabet (`alphabet.rs`) then has a code table of σ entries rather than 2^32. A vocabulary of
//! 10^5–10^6 token ids, as 32-bit corpora have, costs every pe a few MiB; a text of more distinct
//! values than `--css-alphabet` ([`crate::config::CssOptions::alphabet`], 2^20) goes to pDC3
//! whole (`handover.rs`, [`Progress::Alphabet`]).
//!
//! Collective: each pe lists its own distinct values (a hash set, memory ∝ its distinct values),
//! sends each to the pe that owns its range of values (an all-to-all), and every pe then gathers
//! the owners' sorted lists, the alphabet in value order (4σ bytes). The ranked text is a copy:
//! 4 bytes a token more while pCSS runs.
//!
//! [`Progress::Alphabet`]: super::handover::Progress::Alphabet

use crate::token::Token;
use crate::Ctx;

/// A text's values by rank, or how many distinct values it has where they are more than `limit`.
pub(super) enum Ranked {
    Text(Vec<u32>),
    TooMany(u64),
}

/// Collective: `text` with every value replaced by its rank among the whole text's values, where
/// they are at most `limit` (every pe gets the same answer).
pub(super) fn ranked<C: Token>(ctx: &Ctx, text: &[C], limit: usize) -> Ranked {
    let comm = &ctx.comm;
    let mut local = ValueMap::with_capacity(64);
    let mut over = false;
    for &c in text {
        local.insert(c.to_u64() as u32);
        if local.len() > limit {
            over = true;
            break;
        }
    }
    if comm.any(over) {
        return Ranked::TooMany(limit as u64 + 1);
    }
    let alphabet = gathered(ctx, local.values());
    if alphabet.len() > limit {
        return Ranked::TooMany(alphabet.len() as u64);
    }
    let mut rank = ValueMap::with_capacity(alphabet.len());
    for &v in &alphabet {
        rank.insert(v);
    }
    let ranks = text
        .iter()
        .map(|c| rank.index_of(c.to_u64() as u32))
        .collect();
    Ranked::Text(ranks)
}

/// Collective: the union of every pe's `values`, sorted: each value goes to the pe owning its
/// range (pe q: [q·2^32/p, (q+1)·2^32/p)), which sorts and deduplicates what it gets; the owners'
/// lists, gathered in rank order, are then the union in order.
fn gathered(ctx: &Ctx, mut values: Vec<u32>) -> Vec<u32> {
    let comm = &ctx.comm;
    let p = comm.size();
    let owner = |v: u32| ((v as u64 * p as u64) >> 32) as usize;
    values.sort_unstable_by_key(|&v| owner(v));
    let mut counts = vec![0usize; p];
    for &v in &values {
        counts[owner(v)] += 1;
    }
    let mut mine = comm.all_to_all_v(&values, &counts);
    drop(values);
    mine.sort_unstable();
    mine.dedup();
    comm.all_gather_v(&mine)
}

/// An open-addressing hash set of u32 values that numbers them in the order they came
/// ([`ValueMap::index_of`]): Fibonacci hashing, linear probing, at most half full.
struct ValueMap {
    /// The slot's value plus one; 0 marks an empty slot (so every u32 fits: the plus one is
    /// taken in u64).
    keys: Vec<u64>,
    /// The number of the slot's value, in insertion order.
    index: Vec<u32>,
    order: Vec<u32>,
    shift: u32,
}

impl ValueMap {
    fn with_capacity(n: usize) -> Self {
        let slots = (2 * n.max(8)).next_power_of_two();
        ValueMap {
            keys: vec![0; slots],
            index: vec![0; slots],
            order: Vec::with_capacity(n),
            shift: 64 - slots.trailing_zeros(),
        }
    }

    fn len(&self) -> usize {
        self.order.len()
    }

    /// The values in the order they were inserted.
    fn values(self) -> Vec<u32> {
        self.order
    }

    #[inline]
    fn slot(&self, v: u32) -> usize {
        let mask = self.keys.len() - 1;
        let mut s = ((v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
        while self.keys[s] != 0 && self.keys[s] != v as u64 + 1 {
            s = (s + 1) & mask;
        }
        s
    }

    fn insert(&mut self, v: u32) {
        let s = self.slot(v);
        if self.keys[s] != 0 {
            return;
        }
        self.keys[s] = v as u64 + 1;
        self.index[s] = self.order.len() as u32;
        self.order.push(v);
        if 2 * self.order.len() > self.keys.len() {
            self.grow();
        }
    }

    fn grow(&mut self) {
        let order = std::mem::take(&mut self.order);
        *self = ValueMap::with_capacity(order.len() * 2);
        for v in order {
            self.insert(v);
        }
    }

    /// The number of `v`, which must have been inserted.
    #[inline]
    fn index_of(&self, v: u32) -> u32 {
        let s = self.slot(v);
        debug_assert_eq!(self.keys[s], v as u64 + 1, "a value of the alphabet");
        self.index[s]
    }
}

#[cfg(test)]
mod tests {
    use super::ValueMap;

    #[test]
    fn value_map_numbers_values_in_insertion_order_across_growth() {
        let values: Vec<u32> = (0..5000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) ^ (i >> 3))
            .chain([0, u32::MAX, u32::MAX - 1, 1])
            .collect();
        let mut m = ValueMap::with_capacity(4);
        let mut first = std::collections::HashMap::new();
        for &v in values.iter().chain(values.iter()) {
            m.insert(v);
            let next = first.len() as u32;
            first.entry(v).or_insert(next);
        }
        assert_eq!(m.len(), first.len());
        for (&v, &i) in &first {
            assert_eq!(m.index_of(v), i, "value {v}");
        }
        let order = m.values();
        assert_eq!(order.len(), first.len());
        for (i, v) in order.iter().enumerate() {
            assert_eq!(first[v], i as u32);
        }
    }
}
