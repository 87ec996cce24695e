use super::*;

/// What phase 4 leaves: the names (every suffix's (name, position) pair after one round; the
/// names in text order after several) and the suffixes it left tied.
pub(super) struct FirstNames<I> {
    pub(super) names: Names<I>,
    pub(super) tied: Tied<I>,
}

/// The suffixes the first sort left tied: on this pe, as records where the sort left them
/// (`list`: depth 0 inside runs of one character, for the run step, k outside); with several
/// sort ranges as marks at this pe's positions instead ([`Marks`]: a bit per position, set where
/// the suffix there shares its key, instead of a record of 3 indices; `marks` outside runs,
/// `in_runs` inside). Empty when the suffixes are not kept. `total` and `deep` count them on all
/// pes (`deep`: those outside runs).
pub(super) struct Tied<I> {
    pub(super) list: Vec<Suffix<I>>,
    pub(super) marks: Option<Marks>,
    pub(super) in_runs: Option<Marks>,
    pub(super) total: u64,
    pub(super) deep: u64,
}

/// A bit per position of this pe, set by [`send_to_owners`] (the first sort's marks: the
/// suffixes that share their key, outside or inside runs). n/p/8 bytes.
pub(super) struct Marks {
    pub(super) words: Vec<u64>,
    pub(super) len: usize,
}

impl Marks {
    /// `len` clear bits.
    pub(super) fn new(len: usize) -> Self {
        Marks {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    pub(super) fn get(&self, j: usize) -> bool {
        self.words[j / 64] >> (j % 64) & 1 == 1
    }
}

impl Slots for &mut Marks {
    type Value = ();
    /// Sets the bit of every item's position (one thread: a bit is not a slot of its own).
    fn place<T: Sync>(self, items: &[T], f: impl Fn(&T) -> (usize, ()) + Sync) {
        for x in items {
            let (j, ()) = f(x);
            assert!(j < self.len, "mark {j} out of range {}", self.len);
            self.words[j / 64] |= 1 << (j % 64);
        }
    }
}

/// The names after the first sort.
pub(super) enum Names<I> {
    /// (name, position) pairs, in no particular order (the sort ran in one round).
    Sorted(Vec<[I; 2]>),
    /// The names of this pe's positions in text order (sent round by round).
    Text(Vec<I>),
}

/// Phases 3–4, one key range at a time ([`sort_in_rounds`]): sort the records, then name their
/// groups (runs of equal key and clamped length): a suffix's name is the global index of its
/// group's first record. With one round, every suffix becomes a (name, position) pair of the
/// run's index width (made in pieces from the end, each freeing its records); with several, each
/// round's names go to the owners of the positions at once ("names to text"). With
/// `keep_unresolved` the suffixes not alone in their group are kept ([`Tied`]) with the depth
/// their group shares (k), or 0 for those inside a run of one character (for the run step): as
/// records with one round; with several as marks at their positions' owners.
/// Collective.
pub(super) fn first_sort<I: Index, R: FirstKey>(
    ctx: &Ctx,
    layout: &Layout,
    keys: &KeyGen<R>,
    held: Option<Vec<R>>,
    rounds: usize,
    keep_unresolved: bool,
) -> FirstNames<I> {
    let comm = &ctx.comm;
    let codes = keys.codes;
    let k = I::from_u64(codes.k as u64);
    let held = std::cell::RefCell::new(held);
    // With several ranges, the range of each position (a byte each, during the sort).
    let round_of = std::cell::RefCell::new(Vec::<u8>::new());
    let mut sorted_pairs: Option<Vec<[I; 2]>> = None;
    let mut name_of: Vec<I> = if rounds > 1 {
        vec![I::zeroed(); keys.len()]
    } else {
        Vec::new()
    };
    // One round: the tied suffixes as records; several: marked at their positions' owners.
    let mut list: Vec<Suffix<I>> = Vec::new();
    let marked = rounds > 1 && keep_unresolved;
    let mut marks = Marks::new(if marked { keys.len() } else { 0 });
    let mut in_runs = Marks::new(if marked { keys.len() } else { 0 });
    let (mut tied, mut tied_deep) = (0u64, 0u64);
    let mut carry = 0u64;
    let mut open = OpenEnd::default();
    sort_in_rounds(
        ctx,
        "sort keys",
        Ranges::new(rounds),
        keys.len(),
        |j| keys.at(j),
        |bounds, k| match held.borrow_mut().take() {
            Some(all) => all,
            None => ctx.phase("keys", || {
                if bounds.rounds() == 1 {
                    return keys.all();
                }
                // Keys of 64 bits (small alphabets: DNA's keys of 21 or 32 characters): a pass
                // rolling over every position per range, and no byte per position held (the
                // first sort is where such texts peak). Keys of 128 bits (16–24 characters):
                // every position's range found once costs less than a pass per range.
                if codes.word == 64 {
                    let (lo, hi) = bounds.range(k);
                    return keys.range(lo, hi);
                }
                // Every position's range found once (a byte each, the memory of a character),
                // then each range's records made from their characters, the others skipped.
                if k == 0 {
                    *round_of.borrow_mut() = keys.rounds(bounds);
                }
                let records = keys.in_round(&round_of.borrow(), k as u8);
                if k + 1 == bounds.rounds() {
                    *round_of.borrow_mut() = Vec::new();
                }
                records
            }),
        },
        |mut round| {
            let pairs = ctx.phase("names", || {
                let sorted = &round.sorted;
                let edges = Edges::of_round(&round, carry);
                let g = group_names::<I, _, _>(ctx, sorted, &edges, |a, b| a.same_group(*b));
                carry = g.carry;
                let in_run = |r: &R| codes.is_run(r.key());
                // Depth 0 marks a suffix inside a run; the others' depth (k) is not kept.
                let entry = |j: usize, r: &R| Suffix {
                    name: g.names[j],
                    pos: I::from_u64(r.pos()),
                    depth: if in_run(r) { I::zeroed() } else { k },
                };
                // Positions of the tied suffixes outside and inside runs (to be marked).
                let (mut tied_at, mut run_at): (Vec<I>, Vec<I>) = (Vec::new(), Vec::new());
                if let Some(s) = open.settle(comm, &round, &g, |j| entry(j, &sorted[j])) {
                    tied += 1;
                    tied_deep += u64::from(s.depth != I::zeroed());
                    if marked && s.depth != I::zeroed() {
                        tied_at.push(s.pos);
                    } else if marked {
                        run_at.push(s.pos);
                    } else if keep_unresolved {
                        list.push(s);
                    }
                }
                if marked {
                    let run: Vec<bool> = sorted.par_iter().map(in_run).collect();
                    let skip = |deep: bool| -> Vec<bool> {
                        g.alone
                            .par_iter()
                            .zip(&run[..])
                            .map(|(&a, &r)| a || r == deep)
                            .collect()
                    };
                    let pos = |_, r: &R| I::from_u64(r.pos());
                    let deep = collect_kept(sorted, &skip(true), pos);
                    let inside = collect_kept(sorted, &skip(false), pos);
                    tied += (deep.len() + inside.len()) as u64;
                    tied_deep += deep.len() as u64;
                    tied_at.extend_from_slice(&deep);
                    run_at.extend_from_slice(&inside);
                } else if keep_unresolved {
                    let kept = collect_kept(sorted, &g.alone, entry);
                    tied += kept.len() as u64;
                    tied_deep += kept.iter().filter(|s| s.depth != I::zeroed()).count() as u64;
                    if list.is_empty() {
                        list = kept;
                    } else {
                        list.reserve_exact(kept.len());
                        list.extend_from_slice(&kept);
                    }
                } else {
                    tied += g.alone.iter().filter(|&&a| !a).count() as u64;
                }
                drop(g.alone);
                // Pairs in any order: made from the end in pieces, each freeing its records.
                let names = g.names;
                let mut pairs: Vec<[I; 2]> = Vec::with_capacity(names.len());
                consume_from_end(std::mem::take(&mut round.sorted), |lo, rs| {
                    pairs.par_extend(
                        rs.par_iter()
                            .zip(&names[lo..])
                            .map(|(r, &nm)| [nm, I::from_u64(r.pos())]),
                    )
                });
                (pairs, tied_at, run_at)
            });
            drop(round);
            let (pairs, tied_at, run_at) = pairs;
            if rounds == 1 {
                sorted_pairs = Some(pairs);
            } else {
                ctx.phase("names to text", || {
                    names_to_text(comm, layout, pairs, &mut name_of);
                    if marked {
                        let at = |&i: &I| (i.to_u64() as usize, ());
                        send_to_owners(comm, layout, tied_at, &mut marks, at);
                        send_to_owners(comm, layout, run_at, &mut in_runs, at);
                    }
                });
            }
        },
    );
    // A group start that ends the last non-empty round is alone: what `open` holds is dropped.
    FirstNames {
        names: match sorted_pairs {
            Some(pairs) => Names::Sorted(pairs),
            None => Names::Text(name_of),
        },
        tied: Tied {
            list,
            marks: marked.then_some(marks),
            in_runs: marked.then_some(in_runs),
            total: comm.all_reduce_sum(tied),
            deep: comm.all_reduce_sum(tied_deep),
        },
    }
}

/// Writes the names of (name, position) pairs into `name_of` (this pe's positions, in text
/// order) at the owners of their positions. Collective.
pub(super) fn names_to_text<I: Index>(comm: &Comm, layout: &Layout, pairs: Vec<[I; 2]>, name_of: &mut [I]) {
    send_to_owners(comm, layout, pairs, name_of, |x| {
        (x[1].to_u64() as usize, x[0])
    });
}
