//! The top level of the search: keys of every `step`-th suffix in SA order (see the module
//! above), and the windows of the SA they leave a pattern's bounds in.

use rayon::prelude::*;

use super::{kernel, Sa, Text};
use crate::error::Result;

/// Keys per block of a level: a block is counted whole once the level above (its every
/// `BLOCK`-th key) has named it. 8 keys: one cache line, the one random read of the top level.
pub(super) const BLOCK: usize = 8;

/// Sampled suffixes whose places in T are asked for before their keys are read, when the top
/// level is built.
const AHEAD: usize = 32;

/// How a string's first symbols become a 64-bit key whose order is theirs: each symbol a code
/// of `bits` bits from the top, as many symbols as fit, the rest 0.
///
/// Codes keep the symbols' order. A byte's code is its rank among the bytes T holds, so DNA
/// needs 2 or 3 bits a symbol; a token's (`token` ≥ 2 bytes) is its value. A string shorter
/// than a key pads with code 0, which the smallest symbol shares: a key below a pattern's
/// (padded with 0) is then of a suffix that sorts before the pattern, and a key above the
/// pattern's padded with ones is of a suffix that sorts after every suffix starting with it.
#[derive(Clone, Debug)]
pub struct KeyCode {
    /// Bytes: each byte's code (bytes T does not hold: unused).
    code: [u8; 256],
    /// Bytes: whether T holds the byte. A pattern holding one that T does not occurs nowhere.
    present: [bool; 256],
    bits: u32,
    /// Symbols per key: `64 / bits`.
    symbols: usize,
    /// Bytes per symbol.
    token: usize,
}

impl KeyCode {
    /// The code of a text of tokens of `token` bytes, which holds the bytes `present` (tokens:
    /// ignored).
    pub fn new(present: [bool; 256], token: usize) -> KeyCode {
        let mut code = [0u8; 256];
        let mut sigma = 0usize;
        for c in 0..256 {
            code[c] = sigma as u8;
            sigma += present[c] as usize;
        }
        let bits = match token {
            1 => crate::util::bits(sigma.saturating_sub(1) as u64).max(1),
            t => 8 * t as u32,
        };
        KeyCode {
            code,
            present,
            bits,
            symbols: (64 / bits) as usize,
            token,
        }
    }

    /// Whether `pat` holds a byte T does not (bytes only): it occurs nowhere.
    #[inline]
    pub fn absent(&self, pat: &[u8]) -> bool {
        self.token == 1 && pat.iter().any(|&b| !self.present[b as usize])
    }

    /// The key of `s` (whole tokens; a suffix's first ones, or a pattern) padded with 0, and
    /// padded with ones (the same where `s` fills the key). Bytes must be ones T holds.
    #[inline]
    pub fn keys(&self, s: &[u8]) -> (u64, u64) {
        let used = self.symbols.min(s.len() / self.token);
        let mut key = 0u64;
        for i in 0..used {
            let c = match self.token {
                1 => self.code[s[i] as usize] as u64,
                t => (s[i * t..(i + 1) * t].iter().rev()).fold(0u64, |v, &x| (v << 8) | x as u64),
            };
            key |= c << (64 - self.bits * (i as u32 + 1));
        }
        match used < self.symbols {
            true => (key, key | (u64::MAX >> (self.bits * used as u32))),
            false => (key, key),
        }
    }

    /// The bytes T holds, and bytes per symbol: what [`Self::new`] made it of.
    pub(super) fn made_of(&self) -> ([bool; 256], usize) {
        (self.present, self.token)
    }

    /// Bytes a key covers.
    fn span(&self) -> usize {
        self.symbols * self.token
    }
}

/// The top level over an SA: the key of `SA[j·step]` for every j, and above them levels of
/// every [`BLOCK`]-th key of the level below, up to one of at most [`BLOCK`] keys (see the
/// module's documentation). A key's rank is counted a block per level from the top down.
pub struct Top {
    pub(super) code: KeyCode,
    /// SA entries between two sampled ones.
    pub(super) step: usize,
    /// Every level's blocks, level 0 (the sampled suffixes' keys) first.
    pub(super) lines: Lines,
    /// `levels[0]`: the sampled suffixes' keys; `levels[l + 1]`: `levels[l]`'s every
    /// [`BLOCK`]-th key.
    pub(super) levels: Vec<Level>,
    /// The SA's entries.
    pub(super) n: usize,
}

impl Top {
    /// The step between sampled entries for an SA of `width`-byte entries: 8 bytes of key per
    /// `step` entries, and the levels above them (a seventh more), stay within 2 % of the SA.
    pub fn step_for(width: usize) -> usize {
        (50 * 8 * 8 / 7 / width.max(1)).next_power_of_two()
    }

    /// Builds the top level of the SA `sa` of `text` on rayon's threads: the bytes T holds (by
    /// a search for each byte), then the sampled suffixes' keys (a read of every `step`-th SA
    /// entry and of T where it points). Errors where the SA is damaged.
    pub fn build(sa: &Sa, text: &Text) -> Result<Top> {
        let token = text.token();
        let code = KeyCode::new(bytes_held(sa, text)?, token);
        let step = Self::step_for(sa.width());
        let samples = sa.len().div_ceil(step);
        let span = code.span();
        let mut keys = vec![0u64; samples];
        (keys.par_chunks_mut(AHEAD).enumerate())
            .with_min_len(1 << 6)
            .try_for_each(|(c, keys)| {
                // The chunk's places in T first, each asked for, then their keys: the reads
                // of T overlap.
                let mut at = [0u64; AHEAD];
                for (i, at) in at.iter_mut().enumerate().take(keys.len()) {
                    *at = sa.get((c * AHEAD + i) * step)? * token as u64;
                    super::prefetch(text.addr(*at));
                }
                for (key, &at) in keys.iter_mut().zip(&at) {
                    let mut first = [0u8; 64];
                    let got = text.read(at, &mut first[..span]);
                    *key = code.keys(&first[..got]).0;
                }
                Ok::<(), crate::error::Error>(())
            })?;
        let (lines, levels) = Level::pack(&Level::stack(keys));
        Ok(Top {
            code,
            step,
            lines: Lines::Built(lines),
            levels,
            n: sa.len(),
        })
    }

    /// Bytes it takes in memory.
    pub fn bytes(&self) -> usize {
        64 * self.lines.get().len() + std::mem::size_of::<KeyCode>()
    }

    /// Its key code.
    pub fn code(&self) -> &KeyCode {
        &self.code
    }

    /// The block of the sampled keys whose keys [`Self::count_in`] counts for `key`: the keys of
    /// the level above below `key` (at most `key` with `or_equal`), counted from the top down.
    #[inline]
    pub fn block_of(&self, key: u64, or_equal: bool) -> usize {
        // The top level is one block.
        (1..self.levels.len())
            .rev()
            .fold(1, |b, l| count(self.keys(l), b, key, or_equal))
    }

    /// Asks for block `b`'s cache lines (see [`Self::block_of`]).
    #[inline]
    pub fn prefetch_block(&self, b: usize) {
        let lines = self.lines.get();
        super::prefetch(lines.as_ptr().wrapping_add(b.saturating_sub(1)) as *const u8);
    }

    /// The sampled keys below `key` (at most `key` with `or_equal`), counted in block `b` of
    /// [`Self::block_of`].
    #[inline]
    pub fn count_in(&self, b: usize, key: u64, or_equal: bool) -> usize {
        count(self.keys(0), b, key, or_equal)
    }

    /// Level `l`'s keys.
    #[inline]
    fn keys(&self, l: usize) -> &[u64] {
        let Level { start, len } = self.levels[l];
        let lines = &self.lines.get()[start..start + len.div_ceil(BLOCK)];
        &bytemuck::cast_slice::<Line, u64>(lines)[..len]
    }

    /// The keys below `key` (at most `key` with `or_equal`).
    #[inline]
    pub fn rank(&self, key: u64, or_equal: bool) -> usize {
        self.count_in(self.block_of(key, or_equal), key, or_equal)
    }

    /// Where a pattern's bound lies, given the keys below its key (`below`) and at most it
    /// (`upto`): sampled entries before `below` sort before it, those from `upto` on after it,
    /// so the bound is in `[(below - 1)·step + 1, upto·step]` (within `[0, n]`).
    #[inline]
    pub fn window(&self, below: usize, upto: usize) -> (usize, usize) {
        let start = match below {
            0 => 0,
            b => (b - 1) * self.step + 1,
        };
        let end = match upto < self.levels[0].len {
            true => upto * self.step,
            false => self.n,
        };
        (start, end)
    }
}

/// A block of keys on a cache line of its own.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub(super) struct Line(pub(super) [u64; BLOCK]);

/// Where the levels' blocks are: built in memory, or mapped from the index's file of them
/// (from a byte offset that [`super::saved`] checked is whole lines, aligned).
pub(super) enum Lines {
    Built(Vec<Line>),
    Saved(memmap2::Mmap, usize),
}

impl Lines {
    #[inline]
    pub(super) fn get(&self) -> &[Line] {
        match self {
            Lines::Built(v) => v,
            Lines::Saved(m, at) => bytemuck::cast_slice(&m[*at..]),
        }
    }
}

/// A level of the top level: its first block among [`Lines`], and its keys (the last block's
/// rest holds `u64::MAX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Level {
    pub(super) start: usize,
    pub(super) len: usize,
}

impl Level {
    /// The sampled keys and the levels above them: each level's every [`BLOCK`]-th key, up to
    /// one of at most [`BLOCK`] keys.
    fn stack(keys: Vec<u64>) -> Vec<Vec<u64>> {
        let mut levels = vec![keys];
        while levels.len() == 1 || levels[levels.len() - 1].len() > BLOCK {
            let above = levels[levels.len() - 1].iter().step_by(BLOCK).copied();
            levels.push(above.collect());
        }
        levels
    }

    /// The levels' keys in blocks one after another, and where each level starts.
    fn pack(levels: &[Vec<u64>]) -> (Vec<Line>, Vec<Level>) {
        let mut lines = Vec::new();
        let mut at = Vec::new();
        for keys in levels {
            at.push(Level {
                start: lines.len(),
                len: keys.len(),
            });
            lines.extend(keys.chunks(BLOCK).map(|block| {
                let mut line = Line([u64::MAX; BLOCK]);
                line.0[..block.len()].copy_from_slice(block);
                line
            }));
        }
        (lines, at)
    }

    /// The levels of an SA of `n` entries sampled every `step`: their lengths and starts.
    pub(super) fn plan(n: usize, step: usize) -> Vec<Level> {
        let mut levels = vec![Level {
            start: 0,
            len: n.div_ceil(step),
        }];
        while levels.len() == 1 || levels[levels.len() - 1].len > BLOCK {
            let below = levels[levels.len() - 1];
            levels.push(Level {
                start: below.start + below.len.div_ceil(BLOCK),
                len: below.len.div_ceil(BLOCK),
            });
        }
        levels
    }
}

/// The keys of `level` below `key` (at most `key` with `or_equal`), given the keys of the
/// level above that are (`b`): every key before block `b - 1` is, none from block `b` on.
#[inline]
fn count(level: &[u64], b: usize, key: u64, or_equal: bool) -> usize {
    if b == 0 {
        return 0;
    }
    let start = (b - 1) * BLOCK;
    let block = &level[start..(start + BLOCK).min(level.len())];
    start
        + match or_equal {
            true => block.iter().map(|&k| (k <= key) as usize).sum::<usize>(),
            false => block.iter().map(|&k| (k < key) as usize).sum::<usize>(),
        }
}

/// Which bytes T holds (a text of tokens: all, unused): a byte is held where the suffixes
/// starting with it are some.
fn bytes_held(sa: &Sa, text: &Text) -> Result<[bool; 256]> {
    let mut held = [true; 256];
    if text.token() == 1 {
        let singles: Vec<[u8; 1]> = (0..=255u8).map(|b| [b]).collect();
        let pats: Vec<&[u8]> = singles.iter().map(|s| &s[..]).collect();
        let mut found = vec![(0, 0); 256];
        kernel::ranges(sa, text, None, &pats, &mut found)?;
        for (h, (lo, hi)) in held.iter_mut().zip(found) {
            *h = hi > lo;
        }
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_as_strings() {
        let mut present = [false; 256];
        for b in *b"$ACGNT" {
            present[b as usize] = true;
        }
        let code = KeyCode::new(present, 1);
        assert_eq!((code.bits, code.symbols), (3, 21));
        let words: [&[u8]; 7] = [
            b"$",
            b"A",
            b"A$",
            b"AC",
            b"ACGT",
            b"T",
            b"TTTTTTTTTTTTTTTTTTTTTTTTTT",
        ];
        for w in words.windows(2) {
            assert!(code.keys(w[0]).0 <= code.keys(w[1]).0, "{w:?}");
        }
        let (lo, hi) = code.keys(b"AC");
        assert!(lo < code.keys(b"ACA").0 && code.keys(b"ACTTTT").0 <= hi);
        assert!(hi < code.keys(b"AG").0);
        assert!(code.absent(b"ACGU") && !code.absent(b"ACGT$"));
    }

    #[test]
    fn levels_are_planned_as_packed() {
        for n in [0, 1, 7, 8, 9, 64, 65, 1000, 4097] {
            let (lines, levels) = Level::pack(&Level::stack((0..n as u64).collect()));
            assert_eq!(levels, Level::plan(n, 1), "{n}");
            let last = levels[levels.len() - 1];
            assert_eq!(lines.len(), last.start + last.len.div_ceil(BLOCK));
        }
    }

    #[test]
    fn steps_keep_the_keys_within_two_percent() {
        for width in 1..=8 {
            let step = Top::step_for(width);
            let per_key = 8.0 * BLOCK as f64 / (BLOCK - 1) as f64;
            let share = per_key / (step * width) as f64;
            assert!(share <= 0.02, "width {width}: step {step}, {share}");
        }
    }
}
