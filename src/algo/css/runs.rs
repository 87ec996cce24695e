use super::*;

/// The run step. Suffixes whose key is one character c repeated k times lie inside a run of c of
/// length r ≥ k followed by a character x ≠ c (or the end): S_i = c^r x…. Among themselves they
/// are ordered by whether x < c (or the end; these come first, shorter runs first) or x > c
/// (longer runs first), and only suffixes with equal (x < c, r) need more: they share exactly r
/// characters, so their depth is r and the next round compares the suffixes after the runs.
/// Takes the tied suffixes inside runs at this pe's positions whose depth is [`Depth::IN_RUN`]
/// (`names`: this pe's names and depths) and writes the new name and depth of each (depth
/// [`resolved`] for those now alone) at the owner of its position. Sorted in up to `rounds` key
/// ranges ([`sort_in_rounds`]), as many as keep a range within n / `rounds` keys and each pe's
/// part of it within about n / p / `rounds` (aⁿ: all of them), each range's updates written
/// before the next; returns, with `list`, this pe's share of the suffixes still unresolved.
/// Collective.
///
/// Memory per pe beside the names and depths: a bit per position (where the run suffixes are)
/// and the long runs' ends (16 B per run of at least [`LONG_RUN`]), and per range its keys (16 B
/// each, two copies in their exchange), groups (two indices and two flags each) and updates (3
/// indices each). Cost per range: a scan of this pe's run positions, making the key of each.
pub(super) fn split_runs<I: Index>(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    codes: &Codes,
    names: (&mut [I], &mut [Depth]),
    rounds: usize,
    list: bool,
) -> Vec<Suffix<I>> {
    let comm = &ctx.comm;
    let n = layout.len();
    let me = comm.rank();
    let (lo, hi) = (layout.start(me), layout.end(me));
    let bi = bits(n as u64);
    let (name_of, depth_of) = names;
    if 3 * bi + 1 > 128 {
        // Too wide to pack (n ≥ 2^42): leave them to plain doubling (depth k).
        let k = codes.k as u64;
        let mut still = Vec::new();
        for (j, d) in depth_of.iter_mut().enumerate() {
            if *d == Depth::IN_RUN {
                *d = Depth::at_most(k);
                if list {
                    let (name, pos) = (name_of[j], I::from_u64((lo + j) as u64));
                    let depth = I::from_u64(k);
                    still.push(Suffix { name, pos, depth });
                }
            }
        }
        return still;
    }
    // Each pe's first run, for the runs that reach the end of a slice on the left (256: none).
    const END: u64 = 256;
    let edge = if text.is_empty() {
        RunEdge {
            first: END,
            prefix: 0,
            len: 0,
            after: END,
        }
    } else {
        let c0 = text[0];
        let pre = text.iter().take_while(|&&c| c == c0).count();
        RunEdge {
            first: c0 as u64,
            prefix: pre as u64,
            len: text.len() as u64,
            after: text.get(pre).map_or(END, |&c| c as u64),
        }
    };
    let all = comm.all_gather(edge);
    // The answer for a local position j: where the run through it ends (the first later position
    // with another character, or n) | whether that character is larger << 63. Runs that reach the
    // slice's end continue on the pes to the right (`tail`); the local runs of at least
    // LONG_RUN characters are listed, shorter ones found by a scan of fewer steps (no array of
    // one end per position).
    let code = &codes.code;
    let flag = |c: u64, x: u64| u64::from(x != END && code[x as usize] > code[c as usize]);
    let len = hi - lo;
    let tail = if len > 0 {
        let c = text[len - 1] as u64;
        let (mut e, mut x) = (n as u64, END);
        for (q, edge) in all.iter().enumerate().skip(me + 1) {
            if edge.len == 0 {
                continue;
            }
            let start = layout.start(q) as u64;
            if edge.first != c {
                (e, x) = (start, edge.first);
                break;
            }
            if edge.prefix < edge.len {
                (e, x) = (start + edge.prefix, edge.after);
                break;
            }
        }
        e | flag(c, x) << 63
    } else {
        0
    };
    let long = long_runs(text);
    let end_of = |j: usize| -> u64 {
        let c = text[j];
        let k = long.partition_point(|r| r[0] <= j);
        let b = match k.checked_sub(1).map(|k| long[k]) {
            Some([_, b]) if b > j => b,
            _ => (j + 1..len).find(|&b| text[b] != c).unwrap_or(len),
        };
        if b == len {
            tail
        } else {
            (lo + b) as u64 | flag(c as u64, text[b] as u64) << 63
        }
    };
    // Sort key (g, flag, s, i) of local position j in a group g, s = r for x < c, max − r for
    // x > c.
    let w = bi as u128;
    let max = (1u128 << w) - 1;
    let key = |g: I, j: usize| {
        let ans = end_of(j);
        let flag = (ans >> 63) as u128;
        let pos = (lo + j) as u64;
        let r = ((ans & !(1u64 << 63)) - pos) as u128;
        let s = if flag == 1 { max - r } else { r };
        ((g.to_u64() as u128) << (2 * w + 1)) | (flag << (2 * w)) | (s << w) | pos as u128
    };
    let open = OpenPositions::of(depth_of, |d| d == Depth::IN_RUN);
    // A range holds at most n / rounds keys (the suffixes outside runs are sorted in as many),
    // and at most about n / p / rounds of a pe's (runs cluster: a pe may own many more than its
    // share, and a long run's keys follow text order).
    let total = comm.all_reduce_sum(open.count as u64);
    let most = comm.all_reduce_max(open.count as u64);
    let share = (n as u64).div_ceil((comm.size() * rounds.max(1)) as u64);
    let rounds = if most > share {
        ((total as u128 * rounds as u128).div_ceil(n.max(1) as u128) as usize)
            .clamp(2, rounds.max(2))
    } else {
        1
    };
    // With several ranges, the first and last range of the keys in each word of positions (a
    // name changes only with an update, which takes its position out of the run step): a range
    // visits only the words that may hold its keys, so keys that follow text order (long runs),
    // which take many ranges, are each made about once. Found in the first range.
    let word_ranges: std::cell::RefCell<Vec<[u8; 2]>> = Default::default();
    let names = std::cell::RefCell::new((name_of, depth_of));
    let mut still: Vec<Suffix<I>> = Vec::new();
    let (mut gcarry, mut scarry) = (0u64, 0u64);
    let mut open_end = OpenEnd::default();
    sort_in_rounds(
        ctx,
        "· sort",
        Ranges {
            count: rounds,
            per_pe: Some(share),
            of: None,
        },
        open.count,
        |j| {
            let at = open.nth(j);
            key(names.borrow().0[at], at)
        },
        // The keys of the range's positions not yet updated by an earlier range (an update's
        // name may fall in a later range); none without a scan when the range misses this pe's
        // keys (clustered keys take many ranges, each pe's few of them).
        |bounds, k| {
            let (lo, hi) = bounds.range(k);
            let inside = |x: &u128| lo.is_none_or(|l| *x >= l) && hi.is_none_or(|h| *x < h);
            let names = names.borrow();
            let (name_of, depth_of) = (&*names.0, &*names.1);
            if rounds > 1 && k == 0 {
                *word_ranges.borrow_mut() = collect_range(open.words.len(), |w| {
                    let (mut a, mut b) = (u8::MAX, 0u8);
                    let mut x = open.words[w];
                    while x != 0 {
                        let j = 64 * w + x.trailing_zeros() as usize;
                        x &= x - 1;
                        let r = bounds.round_of(&key(name_of[j], j)) as u8;
                        (a, b) = (a.min(r), b.max(r));
                    }
                    [a, b]
                });
            }
            let word_ranges = word_ranges.borrow();
            let word_ranges: &[[u8; 2]] = &word_ranges;
            let here = |w: usize| {
                word_ranges
                    .get(w)
                    .is_none_or(|&[a, b]| (a as usize..=b as usize).contains(&k))
            };
            if rayon::current_num_threads() > 1 {
                return open.listed_in(
                    here,
                    |j| depth_of[j] == Depth::IN_RUN && inside(&key(name_of[j], j)),
                    |j| key(name_of[j], j),
                );
            }
            // One thread: each key made once.
            let mut keys = Vec::new();
            open.each_in(here, |j| {
                if depth_of[j] == Depth::IN_RUN {
                    let x = key(name_of[j], j);
                    if inside(&x) {
                        keys.push(x);
                    }
                }
            });
            keys.shrink_to_fit();
            keys
        },
        |mut round| {
            let sorted = &round.sorted;
            let g =
                group_names::<I, _, _>(ctx, sorted, &Edges::of_round(&round, gcarry), |a, b| {
                    a >> (2 * w + 1) == b >> (2 * w + 1)
                });
            gcarry = g.carry;
            let gstart = g.names;
            drop(g.alone);
            let sub =
                group_names::<I, _, _>(ctx, sorted, &Edges::of_round(&round, scarry), |a, b| {
                    a >> w == b >> w
                });
            scarry = sub.carry;
            let update = |j: usize, x: u128| {
                let g = (x >> (2 * w + 1)) as u64;
                let flag = (x >> (2 * w)) & 1;
                let s = (x >> w) & max;
                let r = if flag == 1 { max - s } else { s } as u64;
                Suffix {
                    name: I::from_u64(g + (sub.names[j].to_u64() - gstart[j].to_u64())),
                    pos: I::from_u64((x & max) as u64),
                    depth: I::from_u64(r),
                }
            };
            // A suffix an earlier range held open and this one's first key joins: its update
            // (sent as resolved) is sent again with its depth.
            let joined = open_end.settle(comm, &round, &sub, |j| update(j, sorted[j]));
            // Made from the end in pieces, each freeing its keys (the updates go out in any
            // order).
            let mut updates = Vec::with_capacity(sorted.len());
            consume_from_end(std::mem::take(&mut round.sorted), |lo, xs| {
                updates.par_extend(xs.par_iter().enumerate().map(|(j, &x)| {
                    let u = update(lo + j, x);
                    if sub.alone[lo + j] {
                        Suffix {
                            depth: resolved(),
                            ..u
                        }
                    } else {
                        u
                    }
                }))
            });
            drop(round);
            drop(gstart);
            drop(sub);
            if list {
                still.extend(updates.iter().filter(|u| u.depth != resolved()));
            }
            if let Some(s) = joined {
                if list {
                    still.push(s);
                }
                updates.push(s);
            }
            ctx.phase("update names", || {
                let mut names = names.borrow_mut();
                let (name_of, depth_of) = &mut *names;
                apply_updates(comm, layout, updates, name_of, depth_of)
            });
        },
    );
    still
}

/// Runs of one character at least this long are listed by [`long_runs`]; the end of a shorter
/// one is found by a scan.
pub(super) const LONG_RUN: usize = 16;

/// The runs of one character of at least [`LONG_RUN`] characters in `text`, as (start, end)
/// offsets in increasing order: at most 1 byte per character. Local.
pub(super) fn long_runs(text: &[u8]) -> Vec<[usize; 2]> {
    let mut out = Vec::new();
    let mut a = 0;
    while a < text.len() {
        let c = text[a];
        let b = text[a..]
            .iter()
            .position(|&x| x != c)
            .map_or(text.len(), |d| a + d);
        if b - a >= LONG_RUN {
            out.push([a, b]);
        }
        a = b;
    }
    out
}

/// What the run step needs to know of a pe's slice: its first character, how many characters
/// the run it starts with has there, the slice's length, and the character after that run (256
/// for none).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub(super) struct RunEdge {
    pub(super) first: u64,
    pub(super) prefix: u64,
    pub(super) len: u64,
    pub(super) after: u64,
}
