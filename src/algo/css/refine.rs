use super::*;

/// How the refinement ended, after how many doubling rounds.
pub(super) enum Refined {
    /// Every name is final.
    Resolved { rounds: usize },
    /// [`hand_over`] chose the finish on the current prefix names.
    HandedOver { rounds: usize },
}

/// Phases 5–6: the run step, then doubling rounds until no suffix is unresolved or
/// [`hand_over`] chooses the finish. Entry: `name_of` holds the names of this pe's positions after
/// the first sort (their groups share k characters), `tied` the suffixes it left tied (as records,
/// or with several sort ranges marked). `depth_of` holds each position's group
/// depth, [`resolved`] once its suffix is alone. While more than n / [`LIST_BELOW`] suffixes
/// are unresolved and they were marked, a round finds them from the depths ([`Unresolved`]);
/// below, as records. Exit: `name_of` holds the final names (Resolved) or prefix names of
/// depth ≥ k (HandedOver). Collective.
pub(super) fn refine<I: Index>(
    ctx: &Ctx,
    text: &[u8],
    layout: &Layout,
    codes: &Codes,
    name_of: &mut [I],
    tied: Tied<I>,
    rounds: usize,
) -> Refined {
    let comm = &ctx.comm;
    let n = layout.len();
    let Tied {
        list: mut listed,
        marks,
        in_runs,
        total,
        deep,
    } = tied;
    let k = I::from_u64(codes.k as u64);
    let marked = marks.is_some();
    let mut depth_of = match (marks, in_runs) {
        (Some(marks), Some(in_runs)) => collect_range(marks.len, |j| {
            if in_runs.get(j) {
                Depth::IN_RUN
            } else if marks.get(j) {
                Depth::at_most(k.to_u64())
            } else {
                Depth::RESOLVED
            }
        }),
        _ => vec![Depth::at_most(k.to_u64()); name_of.len()],
    };
    // Suffixes inside runs of one character: ordered at once by (run length, next character),
    // found at their positions (listed, their positions are marked first).
    if total > deep {
        if !marked {
            let runs: Vec<I> = (listed.iter())
                .filter(|s| s.depth == I::zeroed())
                .map(|s| s.pos)
                .collect();
            listed.retain(|s| s.depth != I::zeroed());
            listed.shrink_to_fit();
            send_to_owners(comm, layout, runs, &mut depth_of[..], |&i| {
                (i.to_u64() as usize, Depth::IN_RUN)
            });
        }
        let names = (&mut *name_of, &mut depth_of[..]);
        let still = ctx.phase("runs", || {
            split_runs(ctx, text, layout, codes, names, rounds, !marked)
        });
        listed.extend_from_slice(&still);
    }
    let (mut unresolved, open) = if marked {
        drop(listed);
        let open = depth_of
            .par_iter()
            .filter(|&&d| d != Depth::RESOLVED)
            .count();
        (Unresolved::Marked, open)
    } else {
        let open = listed.len();
        (Unresolved::Listed(listed), open)
    };
    let mut remaining = comm.all_reduce_sum(open as u64);
    // Every round's ranges are as large as the first round's: later rounds, with fewer suffixes
    // left, take fewer ranges.
    let ranges = Ranges::sized(rounds, remaining);
    let (mut round, mut h, mut before) = (0, codes.k, None);
    while remaining > 0 {
        let at = Progress::Doubling {
            round,
            h,
            remaining,
            before,
        };
        if hand_over(ctx, n, at).is_some() {
            return Refined::HandedOver { rounds: round };
        }
        round += 1;
        let list = matches!(unresolved, Unresolved::Listed(_))
            || remaining <= (n as u64).div_ceil(LIST_BELOW);
        let (still, next) = ctx.phase("refine", || {
            refine_round(
                ctx,
                layout,
                unresolved,
                name_of,
                &mut depth_of,
                ranges,
                list,
            )
        });
        unresolved = next;
        before = Some(remaining);
        remaining = comm.all_reduce_sum(still);
        if comm.rank() == 0 {
            let how = if list { "listed" } else { "marked" };
            log::debug!(
                "css: round {round} (h = {h}, {how}): {remaining} suffixes still unresolved"
            );
        }
        h *= 2;
    }
    Refined::Resolved { rounds: round }
}

/// Doubling holds its unresolved suffixes as records ([`Suffix`], 3 indices each, spread evenly
/// over the pes by the last sort) once at most n / `LIST_BELOW` of them are left; above that,
/// when the first sort marked them, it finds them from the depths at their positions, at a bit
/// per position, and their records are made by their positions' owners (which is uneven where
/// they cluster, as in long repeats: the rounds with few left are the ones to balance).
pub(super) const LIST_BELOW: u64 = 8;

/// Where a doubling round finds the unresolved suffixes.
pub(super) enum Unresolved<I> {
    /// At the positions whose depth is not [`resolved`] ([`OpenPositions`]).
    Marked,
    /// This pe's list of them, where the last sort left them.
    Listed(Vec<Suffix<I>>),
}

/// One refinement round: every unresolved (name g, position i, depth d) — all members of group g
/// share their first d characters — is keyed by (g, name(i+d)); a new subgroup shares d plus the
/// depth of the group of i+d. Sorted in `ranges` of group names ([`sort_in_rounds`]; sized by
/// the first round's suffixes, so later rounds take fewer; the boundaries cut between groups, so
/// a round holds whole groups): per range, the suffixes whose
/// name lies in it are taken from the list or, when marked, from this pe's positions
/// ([`OpenPositions`]), the names of i+d fetched, the records sorted and renamed, and the updates
/// (depth [`resolved`] for a suffix alone in its new group) written to the owners of the
/// positions before the next range. A later range may thus see names already refined by an
/// earlier one: they are finer prefix names of the same order (a group's new names stay within
/// its old range, with the depths sent along), and all members of a group see the same ones; a
/// position refined by an earlier range is not taken again (its name stays in that range).
/// Returns how many of this pe's records are still unresolved and, with `list`, those suffixes
/// (else they are left marked). With one range a list is freed as its records are made.
/// Collective.
///
/// Memory per pe, u unresolved suffixes of s bytes ([`Suffix`], 12 with 32 bits), records r bytes
/// ([`Refine`], 16): the names (an index per position) and depths (2 bytes) throughout; the list (s per
/// suffix) or the marks (a bit per position); per range the range's suffixes (s), the queries
/// (1 index each) and their answers ([`Ahead`], 2), then the records (two copies in their
/// exchange), then their groups (8 + 8 + 2 bytes each) and updates (s, written over the records),
/// the still unresolved ones when listed (s) and the updates' exchange.
pub(super) fn refine_round<I: Index>(
    ctx: &Ctx,
    layout: &Layout,
    unresolved: Unresolved<I>,
    name_of: &mut [I],
    depth_of: &mut [Depth],
    ranges: Ranges,
    list: bool,
) -> (u64, Unresolved<I>) {
    let comm = &ctx.comm;
    let n = layout.len() as u64;
    let base = layout.start(comm.rank()) as u64;
    let (listed, open) = match unresolved {
        Unresolved::Listed(l) => (Some(l), None),
        Unresolved::Marked => (
            None,
            Some(OpenPositions::of(depth_of, |d| d != Depth::RESOLVED)),
        ),
    };
    let len = listed.as_ref().map_or(0, Vec::len) + open.as_ref().map_or(0, |o| o.count);
    let listed = std::cell::RefCell::new(listed);
    let names = std::cell::RefCell::new((name_of, depth_of));
    // With several ranges and marked positions: how many of each piece's lie in each range.
    let per_range = std::cell::RefCell::new(Vec::new());
    let generate = |bounds: &RoundBounds<Refine<I>>, k: usize| -> Vec<Refine<I>> {
        let (lo, hi) = bounds.range(k);
        let inside = |g: I| lo.is_none_or(|l| g >= l.group) & hi.is_none_or(|h| g < h.group);
        let names = names.borrow();
        let (name_of, depth_of) = (&*names.0, &*names.1);
        let keep = |j: usize| (depth_of[j] != Depth::RESOLVED) & inside(name_of[j]);
        let make = |j: usize| Suffix {
            name: name_of[j],
            pos: I::from_u64(base + j as u64),
            depth: I::from_u64(depth_of[j].get()),
        };
        let mine: Vec<Suffix<I>> = match (&open, bounds.rounds()) {
            (Some(open), 1) => open.listed(keep, make),
            // Every position's range counted once, in the first range: a range's positions keep
            // their depths and names until the range itself is refined (an update stays inside
            // its group, so inside its range).
            (Some(open), rounds) => {
                if k == 0 {
                    *per_range.borrow_mut() = open.count_by_range(rounds, |j| {
                        (depth_of[j] != Depth::RESOLVED)
                            .then(|| bounds.round_of(&Refine::group_start(name_of[j])))
                    });
                }
                open.listed_counted(&per_range.borrow(), rounds, k, keep, make)
            }
            // One range: the list is dead once its records are made.
            (None, 1) => listed.borrow_mut().take().unwrap_or_default(),
            (None, _) => (listed.borrow().iter().flatten())
                .filter(|s| inside(s.name))
                .copied()
                .collect(),
        };
        // One answer per suffix (those with i + d past the end ask about position 0 and ignore
        // it).
        let past = |s: &Suffix<I>| s.pos.to_u64() + s.depth.to_u64() >= n;
        let queries: Vec<I> = (mine.par_iter())
            .map(|s| {
                if past(s) {
                    I::zeroed()
                } else {
                    I::from_u64(s.pos.to_u64() + s.depth.to_u64())
                }
            })
            .collect();
        let answers = fetch(comm, layout, &queries, |j| Ahead {
            name: I::from_u64(name_of[j].to_u64() + 1),
            depth: depth_of[j].index(),
        });
        drop(queries);
        let make = |s: &Suffix<I>, a: &Ahead<I>| {
            let ahead = if past(s) { Ahead::zeroed() } else { *a };
            Refine {
                group: s.name,
                second: ahead.name,
                pos: s.pos,
                // A resolved successor's depth is not kept: its pair is unique anyway.
                depth: I::from_u64(s.depth.to_u64().saturating_add(ahead.depth.to_u64()).min(n)),
            }
        };
        // Made from the end in pieces, each freeing its suffixes and answers.
        let mut records = Vec::with_capacity(mine.len());
        consume_from_end(mine, |lo, ss| {
            records.par_extend(ss.par_iter().zip(&answers[lo..]).map(|(s, a)| make(s, a)))
        });
        records
    };
    let mut still: Vec<Suffix<I>> = Vec::new();
    let mut count = 0u64;
    let (mut gcarry, mut scarry) = (0u64, 0u64);
    let mut open_end = OpenEnd::default();
    sort_in_rounds(
        ctx,
        "· sort",
        ranges,
        len,
        // Boundaries (g, 0, 0, 0): a round holds the records of the groups from one to the next.
        |j| {
            Refine::group_start(match &open {
                Some(open) => names.borrow().0[open.nth(j)],
                None => listed.borrow().as_ref().map_or(I::zeroed(), |l| l[j].name),
            })
        },
        generate,
        |mut round| {
            let sorted = &round.sorted;
            let gstart =
                group_names::<I, _, _>(ctx, sorted, &Edges::of_round(&round, gcarry), |a, b| {
                    a.group == b.group
                });
            gcarry = gstart.carry;
            let gstart = gstart.names;
            let sub =
                group_names::<I, _, _>(ctx, sorted, &Edges::of_round(&round, scarry), |a, b| {
                    a.same_pair(b)
                });
            scarry = sub.carry;
            // The new name: the group's name + the subgroup's offset in the group.
            let update = |j: usize, r: &Refine<I>| Suffix {
                name: I::from_u64(r.group.to_u64() + sub.names[j].to_u64() - gstart[j].to_u64()),
                pos: r.pos,
                depth: r.depth,
            };
            // A suffix an earlier round held open and this one's first record joins: its update
            // (sent as resolved) is sent again with its depth.
            let joined = open_end.settle(comm, &round, &sub, |j| update(j, &sorted[j]));
            let mut updates = updates_in_place(std::mem::take(&mut round.sorted), |j, r| {
                let u = update(j, r);
                if sub.alone[j] {
                    Suffix {
                        depth: resolved(),
                        ..u
                    }
                } else {
                    u
                }
            });
            drop(round);
            drop(gstart);
            count += sub.alone.iter().filter(|&&a| !a).count() as u64;
            if list {
                let kept = collect_kept(&updates, &sub.alone, |_, u| *u);
                if still.is_empty() {
                    still = kept;
                } else {
                    still.reserve_exact(kept.len());
                    still.extend_from_slice(&kept);
                }
            }
            drop(sub);
            if let Some(s) = joined {
                count += 1;
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
    let next = if list {
        Unresolved::Listed(still)
    } else {
        Unresolved::Marked
    };
    (count, next)
}
