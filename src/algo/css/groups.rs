use super::*;

/// A group start that ends a round of a sort in rounds ([`sort_in_rounds`]): it is alone unless
/// the first record of the next non-empty round continues its group. Held by the pe that holds
/// the record.
pub(super) struct OpenEnd<I>(pub(super) Option<Suffix<I>>);

impl<I> Default for OpenEnd<I> {
    fn default() -> Self {
        OpenEnd(None)
    }
}

impl<I: Index> OpenEnd<I> {
    /// After grouping a round into `g`: returns the suffix held open by an earlier round when this
    /// round's first record continues its group (so it is not alone after all), and holds this
    /// round's last record open when it may be alone only for want of a successor (`entry(j)`
    /// makes the suffix of record j). Collective (one reduction; none in a sort of one round).
    pub(super) fn settle<T>(
        &mut self,
        comm: &Comm,
        round: &Round<T>,
        g: &Groups<I>,
        entry: impl FnOnce(usize) -> Suffix<I>,
    ) -> Option<Suffix<I>> {
        if round.rounds == 1 {
            return None;
        }
        // Does the round's first record continue a group (1) or begin one (2)? 0: empty round.
        let first = if round.holds_first() {
            1 + u64::from(g.first_starts == Some(true))
        } else {
            0
        };
        let joined = match (comm.all_reduce_max(first), self.0.take()) {
            (1, s) => s,
            (0, s) => {
                self.0 = s;
                None
            }
            _ => None,
        };
        let last = round.sorted.len().wrapping_sub(1);
        if round.open_end() && g.alone[last] {
            self.0 = Some(entry(last));
        }
        joined
    }
}

/// Sends (name, position, depth) updates to the owners of the positions (the depth stored as
/// [`Depth`]). Collective.
pub(super) fn apply_updates<I: Index>(
    comm: &Comm,
    layout: &Layout,
    updates: Vec<Suffix<I>>,
    name_of: &mut [I],
    depth_of: &mut [Depth],
) {
    send_to_owners(comm, layout, updates, (name_of, depth_of), |s| {
        (s.pos.to_u64() as usize, (s.name, Depth::of(s.depth)))
    });
}

/// `(0..len).map(f).collect()`, on the pe's threads when it has several (a plain loop with one:
/// rayon's splitting would only add calls).
pub(super) fn collect_range<T: Send>(len: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    if rayon::current_num_threads() == 1 {
        (0..len).map(f).collect()
    } else {
        (0..len).into_par_iter().map(f).collect()
    }
}

/// Where a sorted run of records sits in the whole sorted sequence: the global index of its first
/// record, the records just before and after it (None at the sequence's ends, and `next` also
/// at the end of a round whose successor is not known yet), and the name of the group open
/// before it (the last group start of earlier rounds; 0 when there is none).
pub(super) struct Edges<T> {
    pub(super) offset: u64,
    pub(super) prev: Option<T>,
    pub(super) next: Option<T>,
    pub(super) carry: u64,
}

impl<T: bytemuck::Pod> Edges<T> {
    /// For one round of [`sort_in_rounds`], with the group start carried from earlier rounds.
    pub(super) fn of_round(round: &Round<T>, carry: u64) -> Self {
        Edges {
            offset: round.offset,
            prev: round.prev,
            next: round.next,
            carry,
        }
    }
}

/// The groups of a sorted run (see [`group_names`]), names in the run's index width.
pub(super) struct Groups<I> {
    /// Per record: the global index of the first record of its group.
    pub(super) names: Vec<I>,
    /// Per record: whether it is alone in its group (a record without a known successor counts
    /// as ending its group).
    pub(super) alone: Vec<bool>,
    /// Whether this pe's first record begins a group (None without records).
    pub(super) first_starts: Option<bool>,
    /// The group start open after the whole run on all pes (the carry for the next round).
    pub(super) carry: u64,
}

/// Groups of a globally sorted run: for each record, its name (global index of the first record
/// of its group) and whether it is alone in its group; `same` tells whether two neighbouring
/// records are in one group. Collective (a max-scan and a max-reduction).
pub(super) fn group_names<I: Index, T: bytemuck::Pod + Send + Sync, F: Fn(&T, &T) -> bool + Sync>(
    ctx: &Ctx,
    sorted: &[T],
    edges: &Edges<T>,
    same: F,
) -> Groups<I> {
    const CHUNK: usize = 1 << 16;
    let comm = &ctx.comm;
    let offset = edges.offset;
    let (prev, next) = (&edges.prev, &edges.next);
    let len = sorted.len();
    // alone[j]: does record j begin a group that the next record does not continue?
    let alone_of = |starts: &[bool]| -> Vec<bool> {
        collect_range(len, |j| {
            let ends = if j + 1 < len {
                starts[j + 1]
            } else {
                next.as_ref().is_none_or(|nx| !same(&sorted[j], nx))
            };
            starts[j] && ends
        })
    };
    // starts[j]: does record j begin a group?
    let starts: Vec<bool> = collect_range(len, |j| {
        let before = if j == 0 {
            prev.as_ref()
        } else {
            Some(&sorted[j - 1])
        };
        before.is_none_or(|b| !same(b, &sorted[j]))
    });
    let first_starts = starts.first().copied();
    if rayon::current_num_threads() == 1 {
        // One thread: a single pass (the chunked scan below costs an extra pass).
        let mut names = Vec::with_capacity(len);
        let mut cur = 0u64;
        let mut local_max = 0u64;
        for (j, &s) in starts.iter().enumerate() {
            if s {
                cur = offset + j as u64;
                local_max = cur;
            }
            names.push(I::from_u64(cur));
        }
        let carry = I::from_u64(comm.exscan_max(local_max).max(edges.carry));
        for (nm, &s) in names.iter_mut().zip(&starts) {
            if s {
                break;
            }
            *nm = carry;
        }
        let alone = alone_of(&starts);
        return Groups {
            names,
            alone,
            first_starts,
            carry: comm.all_reduce_max(local_max).max(edges.carry),
        };
    }
    // A max-scan of group starts: the last start of each chunk, carried across chunks and pes.
    let last_start: Vec<Option<u64>> = starts
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, ch)| {
            ch.iter()
                .rposition(|&s| s)
                .map(|j| offset + (c * CHUNK + j) as u64)
        })
        .collect();
    let local_max = last_start.iter().flatten().copied().max().unwrap_or(0);
    let mut carry = comm.exscan_max(local_max).max(edges.carry);
    let carries: Vec<u64> = last_start
        .iter()
        .map(|&l| {
            let c = carry;
            if let Some(l) = l {
                carry = l;
            }
            c
        })
        .collect();
    let mut names = vec![I::zeroed(); len];
    names
        .par_chunks_mut(CHUNK)
        .zip(starts.par_chunks(CHUNK))
        .zip(carries.into_par_iter())
        .enumerate()
        .for_each(|(c, ((nm, st), mut cur))| {
            for (j, (slot, &s)) in nm.iter_mut().zip(st).enumerate() {
                if s {
                    cur = offset + (c * CHUNK + j) as u64;
                }
                *slot = I::from_u64(cur);
            }
        });
    let alone = alone_of(&starts);
    Groups {
        names,
        alone,
        first_starts,
        carry: comm.all_reduce_max(local_max).max(edges.carry),
    }
}
