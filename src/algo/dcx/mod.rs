//! The difference-cover skeleton (Kärkkäinen, Sanders & Burkhardt's DCX, distributed as in Kulla &
//! Sanders' pDC3 and Haag, Kurpicz, Sanders & Schimek's Distributed DCX) and its instances:
//! pDC3 ([`dc3`], cover {1, 2} mod 3) and DC7 ([`dc7`], cover {1, 2, 4} mod 7).
//!
//! For a cover D of Z_X ([`cover`]) and a level of n characters distributed in a [`Layout`]:
//! 1. **name the samples**: every sample position i (i mod X in D) gets a name that orders it by
//!    its first X characters: the instance builds one key per sample, one sample sort and a
//!    prefix sum name them (`name_samples`; step 1 lives in `names.rs`), or where the windows
//!    pack into small codes a bitmap of the codes present names them without a sort
//!    (`name_by_codes`); or pCSS' prefix names stand in (`name_pairs`).
//!    When n mod X is a residue of D other than the last, a dummy sample at n (the empty window)
//!    ends that class (`Samples`);
//! 2. **recursion**: unless the names are unique, the string of names (the class of `D[0]` in
//!    position order, then `D[1]`, …) is solved by the distributed pDC3 level (`dc3::level_to`)
//!    down to a base case gathered on pe 0; its suffix array gives every sample its rank
//!    (`sample_ranks`). Sorted samples are named by rank and flagged where no other sample has
//!    their window (`rank_round`); when enough of them are, they are discarded: their names are
//!    their ranks, and the recursion solves only the string of the others
//!    (`ranks_discarding`);
//! 3. **ranks to text order**: every rank goes to the pe owning its position
//!    ([`send_to_owners_in_pieces`]) as soon as the recursion's entry is final: the deeper level
//!    hands each merge round's part up through its [`SaSink`], so no level holds a recursion's
//!    suffix array;
//! 4. **merge** (`merge::merge`): one record per position (its first X − 1 characters or its
//!    name, and the ranks of the |D| sample positions among the next X), built already split into
//!    the samples and the groups of other residues that share a deciding offset; splitters from a
//!    random sample of all records, each moved to a nearby sampled sample record where there is
//!    one, cut the final order into p ranges; every record goes once to the pe of its range (a
//!    sample's found from its rank against the splitters that are samples), where the samples
//!    are placed by rank (their ranks form one interval), each group is sorted by the instance's
//!    local sort, and one linear merge of the sorted lists gives the pe's part of the suffix
//!    array. With `merge_rounds` > 1 (a memory budget) this runs in key ranges of the final
//!    order, one after the other (Distributed DCX's rounds): each round builds only its records,
//!    merges them and sends its part of the suffix array to its place in the level's layout,
//!    then frees them.
//!
//! Every record of a level stores positions, ranks and names in one index width ([`Index`]: 32,
//! 40 or 64 bits), the narrowest that holds the level's values ([`IndexWidth::choose`]); one
//! generic definition of each record serves every width. The recursion string is stored in the
//! narrowest symbol that holds its largest name: a level's text is `u8` at the top, and below
//! `u8` (up to 256 names), `u16` (up to 65,535) or an [`Index`] type ([`Symbol`]).
//!
//! Memory per level (records per pe ≈ n/p): sample keys 8–32 B each, the rank array 4, 5 or 8 B
//! per position, merge records 16–28 B each (32–40 B past 40 bits). In one merge round every record
//! is alive at once and, while the samples are placed, their received and placed copies too
//! (about 50 B per character of the level at 32 bits: the peak of the whole run at level 0); in
//! B rounds a pe holds the ranks and one byte per position for its round throughout, and only a
//! round's records (those copies / B); level 0 writes each round's part to the output file and a
//! deeper level hands it to the level above, whose rank array fills as the parts arrive (level 0
//! holding its suffix array for a library caller keeps it in its layout, 8 B). Past about 8
//! ranges (measured: `plan::dc3_costs`) what remains at the peak is the recursion's texts held
//! under deeper levels (4 B per name below 2^32, 5 below 2^40; DC3's levels hold 2n names in all,
//! DC7's 9n/7: about 8 or 5 B per character of level 0, summed over pes), the rank array of the
//! level above while a deeper merge fills it, the names sent to the recursion string in pieces,
//! and the base case gathered on pe 0.

pub mod cover;
pub mod dc3;
pub mod dc7;
mod merge;
mod names;

use std::borrow::Cow;
use std::marker::PhantomData;

use bytemuck::Pod;
use rayon::prelude::*;

use super::offload::{DeviceChar, DeviceText, Offload};
use super::pieces;
use super::sink::SaSink;
use crate::ctx::Settings;
use crate::dist::{
    exchange, last_of_left, rebalance, right_halo, send_to_owners_in_pieces, Layout, Pair,
};
use crate::index::{Index, IndexWidth, U40};
use crate::token::Token;
use crate::util::{bits, parallel, CHUNK};
use crate::Ctx;
use cover::Cover;
use names::{name_by_codes, name_pairs, name_samples, Named, SampleKey, SampleSource, CODE_BITS};

/// A character of a level's text, as a value ≥ 1 (0 stands for "past the end"); a device takes
/// it by that value ([`DeviceChar`]).
pub trait Symbol: DeviceChar {
    fn val(self) -> u64;
    /// The symbol whose [`Symbol::val`] is `v` (≥ 1, and within the type's range).
    fn of_val(v: u64) -> Self;
    /// Sequential suffix array of a gathered text.
    fn sequential_sa(text: &[Self], threads: usize) -> Vec<u64>;
}

impl Symbol for u8 {
    #[inline]
    fn val(self) -> u64 {
        self as u64 + 1
    }
    #[inline]
    fn of_val(v: u64) -> Self {
        debug_assert!((1..=256).contains(&v), "{v} is not a byte's value");
        (v - 1) as u8
    }
    fn sequential_sa(text: &[u8], threads: usize) -> Vec<u64> {
        super::seq::sa_bytes(text, threads)
    }
}

impl DeviceChar for u8 {
    #[inline]
    fn device_val(self) -> u64 {
        self.val()
    }
    fn device_text(text: &[u8]) -> Option<DeviceText<'_>> {
        Some(DeviceText::Bytes(text))
    }
}

/// Names (the recursion's texts) in any index width, or in 16 bits: the narrowest that holds a
/// level's names ([`recurse`]; names up to 256 go in bytes, as the byte `name − 1`).
impl<I: Index> Symbol for I {
    #[inline]
    fn val(self) -> u64 {
        self.to_u64()
    }
    #[inline]
    fn of_val(v: u64) -> Self {
        I::from_u64(v)
    }
    fn sequential_sa(text: &[I], threads: usize) -> Vec<u64> {
        super::seq::sa_ints(text, threads)
    }
}

impl<I: Index> DeviceChar for I {
    #[inline]
    fn device_val(self) -> u64 {
        self.to_u64()
    }
    fn device_text(text: &[I]) -> Option<DeviceText<'_>> {
        // A 32-bit text as it is, a wider one (forced, or names past 2^32 that the device would
        // refuse anyway) narrowed if its values fit.
        if I::BITS == u32::BITS {
            return Some(DeviceText::Ints(Cow::Borrowed(bytemuck::cast_slice(text))));
        }
        let narrow: Option<Vec<u32>> = text
            .iter()
            .map(|x| u32::try_from(x.to_u64()).ok())
            .collect();
        Some(DeviceText::Ints(Cow::Owned(narrow?)))
    }
}

/// A token of the input text (`--token-width 2|4`) as a level's character: the value token + 1
/// (0 stands for "past the end"), so every token value is a character, the largest included
/// (a `u32` token's characters reach 2^32: such a level takes 40-bit records). A type of its own,
/// because the recursion's names in `u16` and `u32` are characters of their own value.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct Tok<T>(pub T);

// SAFETY: a transparent wrapper of a Pod token.
unsafe impl<T: Token> bytemuck::Zeroable for Tok<T> {}
// SAFETY: as above.
unsafe impl<T: Token> Pod for Tok<T> {}

impl<T: Token> Tok<T> {
    /// The input's tokens as level characters (no copy).
    pub fn wrap(t: &[T]) -> &[Tok<T>] {
        bytemuck::cast_slice(t)
    }
}

impl<T: Token> Symbol for Tok<T> {
    #[inline]
    fn val(self) -> u64 {
        self.0.to_u64() + 1
    }
    #[inline]
    fn of_val(v: u64) -> Self {
        Tok(T::from_u64(v - 1))
    }
    fn sequential_sa(text: &[Self], threads: usize) -> Vec<u64> {
        // libsais' integer variant on the values numbered densely from 1: its buckets grow with
        // the largest value (a u32 token of 2^32 − 1 would ask for 2^32 of them).
        super::seq::sa_ints(&dense_vals(text), threads)
    }
}

/// A token as the device takes it: its value + 1, all but the token 2^32 − 1 (a text holding it
/// stays on the CPU).
impl<T: Token> DeviceChar for Tok<T> {
    #[inline]
    fn device_val(self) -> u64 {
        self.val()
    }
}

/// A gathered token text's values renumbered 1, 2, … in order (at most 2^32 − 1 distinct
/// tokens are possible, so they fit 32 bits).
fn dense_vals<T: Token>(text: &[Tok<T>]) -> Vec<u32> {
    let mut present: Vec<T> = text.iter().map(|x| x.0).collect();
    present.par_sort_unstable();
    present.dedup();
    (text.par_iter())
        .map(|x| present.partition_point(|&v| v < x.0) as u32 + 1)
        .collect()
}

/// A suffix array as a sequence sorted across pes (pe r's entries before pe r+1's) in some
/// distribution: this pe's entries and the global SA index of the first of them.
struct SortedPart {
    sa: Vec<u64>,
    first: u64,
    /// Whether the entries are exactly this pe's part of the level's layout (the same on every
    /// pe).
    placed: bool,
}

impl SortedPart {
    /// Entries in some distribution (not known to be the level's layout).
    fn new(sa: Vec<u64>, first: u64) -> Self {
        SortedPart {
            sa,
            first,
            placed: false,
        }
    }

    /// The suffix array in `layout` (the level's own): rebalanced (the phase "rebalance")
    /// unless the merge placed it there already. Collective.
    fn into_layout(self, ctx: &Ctx, layout: &Layout) -> Vec<u64> {
        if self.placed {
            return self.sa;
        }
        ctx.phase("rebalance", || rebalance(&ctx.comm, self.sa, layout))
    }
}

/// `(0..len).map(f).collect()`, on the pe's threads when it has several.
fn map_range_maybe_par<U: Send>(len: usize, f: impl Fn(usize) -> U + Sync) -> Vec<U> {
    if parallel() && len >= CHUNK {
        (0..len).into_par_iter().map(&f).collect()
    } else {
        (0..len).map(f).collect()
    }
}

/// `v.iter().enumerate().map(f).collect()`, on the pe's threads when it has several.
fn map_maybe_par<T: Sync, U: Send>(v: &[T], f: impl Fn(usize, &T) -> U + Sync) -> Vec<U> {
    if parallel() && v.len() >= CHUNK {
        v.par_iter().enumerate().map(|(j, x)| f(j, x)).collect()
    } else {
        v.iter().enumerate().map(|(j, x)| f(j, x)).collect()
    }
}

/// The index width of a level whose positions, ranks and characters are at most `largest`: the
/// narrowest that holds them, or the forced one ([`crate::Config::forced_index_width`]).
fn index_width(ctx: &Ctx, largest: u64) -> IndexWidth {
    IndexWidth::choose(largest, ctx.config.forced_index_width())
}

/// Character access for one level: this pe's slice, the characters after it up to a halo (from
/// the right neighbours), 0 past the end.
struct Chars<'a, C: Symbol> {
    t: &'a [C],
    halo: Vec<u64>,
    lo: usize,
    hi: usize,
}

impl<'a, C: Symbol> Chars<'a, C> {
    /// With the `halo` characters after this pe's slice. Collective.
    fn new(ctx: &Ctx, t: &'a [C], layout: &Layout, halo: usize) -> Self {
        let me = ctx.comm.rank();
        let halo = right_halo(&ctx.comm, t, halo)
            .into_iter()
            .map(|c| c.val())
            .collect();
        Chars {
            t,
            halo,
            lo: layout.start(me),
            hi: layout.end(me),
        }
    }

    /// The character at global position i (from this pe's slice or its halo).
    #[inline]
    fn at(&self, i: usize) -> u64 {
        if i < self.hi {
            self.t[i - self.lo].val()
        } else {
            self.halo.get(i - self.hi).copied().unwrap_or(0)
        }
    }
}

/// Where the samples go in the recursion string: the class of residue D[s] (its positions below
/// n, in order) starts at `off[s]`, the classes in the order of D.
struct Samples<C: Cover> {
    off: Vec<usize>,
    /// Length of the recursion string.
    m: usize,
    /// Whether the string holds a dummy sample at position n (see [`Samples::new`]).
    dummy: bool,
    cover: PhantomData<C>,
}

impl<C: Cover> Samples<C> {
    /// The samples of a text of n characters. With `dummy_if_needed` (samples named by their
    /// X-character windows): when n mod X is a residue of D other than the last, that class's last
    /// sample is n − X, whose window lies inside the text and need not be unique, so it would not
    /// separate the class from the next one in the recursion string; a dummy sample at n (empty
    /// window, the smallest name) ends the class. Prefix names longer than X need none: the name
    /// of n − X is unique.
    fn new(n: usize, dummy_if_needed: bool) -> Self {
        let last = C::residue(C::S - 1);
        let dummy = dummy_if_needed && n % C::X != last && C::slot(n % C::X) < C::S;
        let count = |d: usize| {
            (if n > d { (n - d).div_ceil(C::X) } else { 0 }) + usize::from(dummy && n % C::X == d)
        };
        let mut off = Vec::with_capacity(C::S);
        let mut m = 0;
        for s in 0..C::S {
            off.push(m);
            m += count(C::residue(s));
        }
        Samples {
            off,
            m,
            dummy,
            cover: PhantomData,
        }
    }

    /// The place of sample position i in the recursion string.
    #[inline]
    fn rpos(&self, i: usize) -> usize {
        self.off[C::slot(i % C::X)] + i / C::X
    }

    /// The sample position at place q of the recursion string.
    #[inline]
    fn text_pos(&self, q: usize) -> usize {
        let mut s = C::S - 1;
        while self.off[s] > q {
            s -= 1;
        }
        C::X * (q - self.off[s]) + C::residue(s)
    }
}

/// Where a level of a difference cover stands, handed down the recursion as a value: the build's
/// setting (what the level measures itself against: [`Settings::gathers`], its key ranges), its
/// depth (0: the text; a recursion level may go whole to the device, [`Offload::level`]) and
/// the instance that runs it (its phase names; every recursion level is pDC3's). The same on
/// every pe.
#[derive(Clone, Copy)]
pub(crate) struct Level {
    set: Settings,
    depth: usize,
    phases: &'static Phases,
}

impl Level {
    /// The top level (the text) of an instance with `phases`.
    fn top(set: &Settings, phases: &'static Phases) -> Self {
        Level {
            set: *set,
            depth: 0,
            phases,
        }
    }

    /// Where this build's whole suffix arrays go to a device.
    fn offload(&self) -> Offload {
        self.set.offload
    }

    /// The recursion level below this one (pDC3's).
    fn deeper(self) -> Self {
        Level {
            depth: self.depth + 1,
            phases: &dc3::PHASES,
            ..self
        }
    }

    /// Whether a (sub)problem of `n` characters at this level is gathered on pe 0
    /// ([`Settings::gathers`]). Local.
    fn gathers(&self, ctx: &Ctx, n: usize) -> bool {
        self.set.gathers(ctx, n)
    }

    /// The key ranges this level of `n` characters merges in (fewer at the top of an instance
    /// whose top holds nothing else: [`Phases::bare_top`]). Local.
    fn merge_rounds(&self, n: usize) -> usize {
        self.set.merge_rounds_at(n, self.phases.bare_top)
    }

    /// The key ranges this level of `n` characters names its samples in. Local.
    fn name_rounds(&self, n: usize) -> usize {
        self.set.name_rounds_at(n)
    }
}

/// The names an instance gives its phases (kept stable for the phase tables and benchmarks), and
/// what its top level holds beneath its merge.
struct Phases {
    /// Making the sample keys from the text.
    sample_keys: &'static str,
    /// The sample sort of the sample keys.
    sort_samples: &'static str,
    /// Naming the sorted keys.
    name_samples: &'static str,
    /// Sending and sorting the groups of non-sample records in the merge.
    sort_groups: &'static str,
    /// Whether the instance's top level holds nothing beneath its merge but the text and its
    /// ranks (pDC3's; not DC7's, which finishes pCSS beside pCSS' names): it merges in fewer
    /// key ranges ([`Level::merge_rounds`]).
    bare_top: bool,
}

/// Steps 2–3: from the names of all samples ([`Named`]) to the rank among the real samples
/// (1-based) of every sample position this pe owns, in text order (only the sample positions:
/// entry k is the rank of this pe's k-th, see [`sample_layout`]). With `unique` the names are
/// the ranks already; otherwise the recursion string is solved ([`recurse`]), or where enough
/// samples have windows of their own only the part of it that needs solving
/// ([`ranks_discarding`]), and its suffix array comes back as it becomes final — each piece (a
/// merge round's part) turned into ranks and sent to their positions at once, so no pe holds
/// the recursion's suffix array. Collective.
///
/// Entry: any pe may hold any pairs. Exit: `sample_layout(layout).local_len(me)` ranks.
/// Communication: the recursion, and all-to-alls of m (rank, sample index) pairs in all. Memory:
/// the rank array (|D|/X of the positions; its pages resident as ranks arrive) and one piece's
/// pairs (two copies while they travel).
#[must_use]
fn sample_ranks<C: Cover, I: Index>(
    ctx: &Ctx,
    lv: Level,
    layout: &Layout,
    smp: &Samples<C>,
    named: Named<I>,
) -> Vec<I> {
    let n = layout.len();
    let comm = &ctx.comm;
    // The dummy (position n) has the smallest name and rank 1: real ranks are one less.
    let shift = u64::from(smp.dummy);
    let sl = sample_layout::<C>(layout);
    // Zeroed by the allocator: pages become resident only as ranks are written.
    let rank: Vec<I> = bytemuck::allocation::zeroed_vec(sl.local_len(comm.rank()));
    let rank = std::cell::RefCell::new(rank);
    // Ranked (rank, sample index) pairs to their owners, in up to 8 steps (see `pieces`).
    let send = |ranked: Vec<[I; 2]>| {
        let steps = pieces(ctx, ranked.len() * std::mem::size_of::<[I; 2]>());
        send_to_owners_in_pieces(comm, &sl, ranked, &mut rank.borrow_mut()[..], steps, |x| {
            (x.b() as usize, x[0])
        });
    };
    let Named {
        mut pairs,
        unique,
        ranked,
    } = named;
    let tag = u32::from(ranked);
    if unique {
        ctx.phase("ranks to text", || {
            pairs.retain_mut(|x| {
                let i = smp.text_pos(x.b() as usize);
                *x = Pair::pack((x.a() >> tag) - shift, C::sample_index(i) as u64);
                i < n
            });
            send(pairs);
        });
        return rank.into_inner();
    }
    let names = if ranked {
        let tagged = place_names(ctx, smp.m, pairs, I::from_u64);
        ranks_discarding(ctx, lv, smp, tagged, n, &send).map(Names::Tagged)
    } else {
        Some(Names::Pairs(pairs))
    };
    if let Some(names) = names {
        // The recursion hands entries first.. of its suffix array (places q in the string).
        let hand = |first: u64, sa: &[u64]| {
            ctx.shallower(|| {
                ctx.phase("ranks to text", || {
                    // Sized once (at most the dummy is left out): no block grown and copied.
                    let mut ranked: Vec<[I; 2]> = Vec::with_capacity(sa.len());
                    ranked.extend(
                        (sa.iter().enumerate())
                            .map(|(k, &q)| (first + k as u64 + 1, smp.text_pos(q as usize)))
                            .filter(|&(_, i)| i < n)
                            .map(|(r, i)| <[I; 2]>::pack(r - shift, C::sample_index(i) as u64)),
                    );
                    send(ranked);
                })
            })
        };
        recurse(ctx, lv, smp.m, names, &SaSink::to_hand(&hand));
    }
    rank.into_inner()
}

/// Steps 2–3 with discarding (Dementiev, Kärkkäinen, Mehnert & Sanders; as in Distributed
/// DCX), from ranked names ([`Named`]) in their places of the recursion string (`tagged`, block
/// layout): a sample whose window no other sample has is ordered by its window alone, so its
/// rank is its name. In the string, a run of shared names followed by one unique name (which
/// ends every comparison that reaches it) orders the same in any context, so the string of the
/// kept samples — the shared ones and the unique ones right after a shared one — keeps their
/// order; every other sample is discarded and takes its name as its rank at once. The kept
/// samples, in the order the recursion gives, take the ranks that no discarded sample took,
/// smallest first. Hands every rank to `send` as (rank − dummy, sample index). Returns the
/// string untouched, for the whole recursion, where fewer than
/// [`DcxOptions::discard_share`](crate::config::DcxOptions) of the samples would go. Collective.
///
/// Communication: one count, the discarded names to the owners of their values (block layout
/// of 0..=m), the recursion of the m' kept names, and per piece of its suffix array three
/// all-to-alls of its pairs (to the free rank's owner, the kept sample's place, its position).
/// Memory: the tagged string until the kept part is taken from it, with one step's discarded
/// pairs of [`DISCARD_STEPS`]; under the recursion one index per kept sample for its place and
/// a bit per value of 0..=m (the free ranks).
fn ranks_discarding<C: Cover, I: Index>(
    ctx: &Ctx,
    lv: Level,
    smp: &Samples<C>,
    tagged: Vec<I>,
    n: usize,
    send: &impl Fn(Vec<[I; 2]>),
) -> Option<Vec<I>> {
    let comm = &ctx.comm;
    let shift = u64::from(smp.dummy);
    let lo = Layout::block(smp.m, comm.size()).start(comm.rank());
    let shared = |x: I| x.to_u64() & 1 == 0;
    // The place before this pe's first (none before place 0: as if unique).
    let shared_before = last_of_left(comm, &tagged).is_some_and(shared);
    let kept = |t: &[I], j: usize| {
        shared(t[j])
            || if j == 0 {
                shared_before
            } else {
                shared(t[j - 1])
            }
    };
    let discarded = (0..tagged.len()).filter(|&j| !kept(&tagged, j)).count() as u64;
    let discarded = comm.all_reduce_sum(discarded);
    if discarded == 0 || (discarded as f64) < ctx.config.dcx.discard_share * smp.m as f64 {
        return Some(tagged);
    }
    // Values 0..=m: rank 0 is no rank.
    let values = Layout::block(smp.m + 1, comm.size());
    let (kept_at, kept_names, free) = ctx.phase("discard", || {
        // The discarded samples' ranks to their positions, their names to the values' owners:
        // in DISCARD_STEPS steps of this pe's places (the same count on every pe), so that
        // only a step's pairs are held.
        let mut free = FreeRanks::new(&values, comm.rank());
        let len = tagged.len();
        for step in 0..DISCARD_STEPS {
            let places = len * step / DISCARD_STEPS..len * (step + 1) / DISCARD_STEPS;
            let discards = || places.clone().filter(|&j| !kept(&tagged, j));
            let ranked: Vec<[I; 2]> = discards()
                .map(|j| (smp.text_pos(lo + j), tagged[j].to_u64() >> 1))
                .filter(|&(i, _)| i < n)
                .map(|(i, name)| Pair::pack(name - shift, C::sample_index(i) as u64))
                .collect();
            send(ranked);
            let taken: Vec<I> = discards()
                .map(|j| I::from_u64(tagged[j].to_u64() >> 1))
                .collect();
            free.take(&exchange(comm, taken, |&v| {
                values.owner(v.to_u64() as usize)
            }));
        }
        free.count_free();
        let (kept_at, kept_names): (Vec<I>, Vec<I>) = (0..tagged.len())
            .filter(|&j| kept(&tagged, j))
            .map(|j| (I::from_u64((lo + j) as u64), tagged[j]))
            .unzip();
        (kept_at, kept_names, free)
    });
    drop(tagged);
    let kept = Layout::from_local_len(comm, kept_at.len());
    if comm.rank() == 0 {
        log::debug!(
            "discarding: {} of {} samples kept in the recursion",
            kept.len(),
            smp.m
        );
    }
    let kept_names = rebalance(comm, kept_names, &Layout::block(kept.len(), comm.size()));
    let free_layout = Layout::from_local_len(comm, free.count as usize);
    let (free_lo, kept_lo) = (free_layout.start(comm.rank()), kept.start(comm.rank()));
    // The recursion hands entries first.. of its suffix array (places in the kept string): the
    // (first + k + 1)-th free rank is that of its k-th.
    let hand = |first: u64, sa: &[u64]| {
        ctx.shallower(|| {
            ctx.phase("ranks to text", || {
                let asks: Vec<[I; 2]> = (sa.iter().enumerate())
                    .map(|(k, &q)| Pair::pack(first + k as u64, q))
                    .collect();
                let mut got = exchange(comm, asks, |x| free_layout.owner(x.a() as usize));
                for x in &mut got {
                    *x = Pair::pack(free.nth(x.a() - free_lo as u64 + 1), x.b());
                }
                let got = exchange(comm, got, |x| kept.owner(x.b() as usize));
                let ranked: Vec<[I; 2]> = (got.iter())
                    .map(|x| {
                        let q = kept_at[x.b() as usize - kept_lo].to_u64() as usize;
                        (x.a(), smp.text_pos(q))
                    })
                    .filter(|&(_, i)| i < n)
                    .map(|(r, i)| Pair::pack(r - shift, C::sample_index(i) as u64))
                    .collect();
                send(ranked);
            })
        })
    };
    recurse(
        ctx,
        lv,
        kept.len(),
        Names::Tagged(kept_names),
        &SaSink::to_hand(&hand),
    );
    None
}

/// The steps in which [`ranks_discarding`] sends the discarded samples' ranks and names.
const DISCARD_STEPS: usize = 8;

/// This pe's values of a block layout of ranks that no discarded sample took
/// ([`ranks_discarding`]), handed out in order: a bitmap of the taken ones and the free ones
/// before each block of 512.
struct FreeRanks {
    first: u64,
    taken: Vec<u64>,
    free_before: Vec<u64>,
    /// The free values on this pe.
    count: u64,
}

impl FreeRanks {
    const WORDS: usize = 8;

    /// This pe's values, all free but value 0 (no rank); then [`Self::take`] the taken ones
    /// and [`Self::count_free`] before [`Self::nth`]. Local.
    fn new(values: &Layout, me: usize) -> Self {
        let (lo, hi) = (values.start(me), values.end(me));
        let mut taken = vec![0u64; (hi - lo).div_ceil(64)];
        if lo == 0 && hi > 0 {
            taken[0] |= 1;
        }
        if let Some(w) = taken.last_mut().filter(|_| (hi - lo) % 64 != 0) {
            // Past this pe's values: taken.
            *w |= !0 << ((hi - lo) % 64);
        }
        FreeRanks {
            first: lo as u64,
            taken,
            free_before: Vec::new(),
            count: 0,
        }
    }

    /// Marks these values (this pe's) taken. Local.
    fn take<I: Index>(&mut self, values: &[I]) {
        for v in values {
            let at = (v.to_u64() - self.first) as usize;
            self.taken[at >> 6] |= 1 << (at & 63);
        }
    }

    /// Counts the free values, by blocks. Local.
    fn count_free(&mut self) {
        let mut count = 0;
        self.free_before = (self.taken.chunks(Self::WORDS))
            .map(|b| {
                let before = count;
                count += b.iter().map(|w| u64::from(w.count_zeros())).sum::<u64>();
                before
            })
            .collect();
        self.count = count;
    }

    /// This pe's k-th smallest free value (1 ≤ k ≤ `count`).
    fn nth(&self, k: u64) -> u64 {
        let block = self.free_before.partition_point(|&f| f < k) - 1;
        let mut left = k - self.free_before[block];
        for (w, &x) in self.taken.iter().enumerate().skip(block * Self::WORDS) {
            let mut free = !x;
            let count = u64::from(free.count_ones());
            if left <= count {
                for _ in 1..left {
                    free &= free - 1;
                }
                return self.first + (w as u64) * 64 + u64::from(free.trailing_zeros());
            }
            left -= count;
        }
        unreachable!("free value {k} is past this pe's")
    }
}

/// A recursion string's names: (name, place) pairs anywhere, or ranked names tagged with
/// uniqueness ([`Named`]) already in their places (block layout).
enum Names<I> {
    Pairs(Vec<[I; 2]>),
    Tagged(Vec<I>),
}

/// The layout of the sample positions below n in position order (their ranks' array): pe r
/// holds those among its positions `layout.start(r)..layout.end(r)`. Local.
fn sample_layout<C: Cover>(layout: &Layout) -> Layout {
    let n = layout.len();
    Layout::from_offsets(
        layout
            .offsets()
            .iter()
            .map(|&x| C::samples_below(x.min(n)))
            .collect(),
    )
}

/// The recursion step below `lv`: the names go to their places in the recursion string (block
/// layout), and the string is solved one level deeper by pDC3, its suffix array handed to `sink`
/// as it becomes final. The string stays alive under every deeper level, so it is stored in the narrowest
/// symbol that holds its largest name: a byte up to 256 names (DNA's trigrams), 16 bits up to
/// 65,535 (English's), else an index width; a forced index width ([`index_width`]) takes that
/// width instead, so tests reach the wide strings on small inputs. Collective (one reduction for
/// the largest name).
fn recurse<I: Index>(ctx: &Ctx, lv: Level, m: usize, names: Names<I>, sink: &SaSink) {
    // Names from samples' windows are at most m; prefix names (pCSS' hand-over) up to n.
    let most = match &names {
        Names::Pairs(pairs) => pairs.iter().map(|x| x.a()).max(),
        Names::Tagged(tagged) => tagged.iter().map(|x| x.to_u64() >> 1).max(),
    };
    let largest = ctx.comm.all_reduce_max(most.unwrap_or(0));
    let forced = ctx.config.forced_index_width().is_some();
    let lv = lv.deeper();
    match index_width(ctx, largest) {
        _ if !forced && largest <= 256 && lv.offload().names_as_bytes() => {
            recurse_in::<I, u8>(ctx, lv, m, names, sink)
        }
        _ if !forced && largest <= u16::MAX as u64 => recurse_in::<I, u16>(ctx, lv, m, names, sink),
        IndexWidth::W32 => recurse_in::<I, u32>(ctx, lv, m, names, sink),
        IndexWidth::W40 => recurse_in::<I, U40>(ctx, lv, m, names, sink),
        IndexWidth::W64 => recurse_in::<I, u64>(ctx, lv, m, names, sink),
    }
}

/// The names of (name, place) pairs in their places of a string of `m` (block layout), each
/// stored as `store(name)`, in up to 8 steps (see `pieces`): the phase "build recursion".
/// Collective. Entry: any pe may hold any pairs. Exit: this pe's part of the string.
fn place_names<I: Index, T: Pod + Send + Sync>(
    ctx: &Ctx,
    m: usize,
    pairs: Vec<[I; 2]>,
    store: impl Fn(u64) -> T + Sync,
) -> Vec<T> {
    let comm = &ctx.comm;
    let rl = Layout::block(m, comm.size());
    ctx.phase("build recursion", || {
        let mut r = bytemuck::allocation::zeroed_vec(rl.local_len(comm.rank()));
        let steps = pieces(ctx, pairs.len() * std::mem::size_of::<[I; 2]>());
        send_to_owners_in_pieces(comm, &rl, pairs, &mut r[..], steps, |x| {
            (x.b() as usize, store(x.a()))
        });
        r
    })
}

/// [`recurse`] with the recursion string in symbols `N`, solved as level `lv`.
fn recurse_in<I: Index, N: Symbol>(ctx: &Ctx, lv: Level, m: usize, names: Names<I>, sink: &SaSink) {
    let comm = &ctx.comm;
    let rl = Layout::block(m, comm.size());
    let r_text: Vec<N> = match names {
        Names::Pairs(pairs) => place_names(ctx, m, pairs, N::of_val),
        Names::Tagged(tagged) => (tagged.iter())
            .map(|x| N::of_val(x.to_u64() >> 1))
            .collect(),
    };
    ctx.deeper(|| dc3::level_to(ctx, lv, &r_text, &rl, sink));
}

#[cfg(test)]
mod tests {
    use super::cover::{Dc3, Dc7};
    use super::*;

    /// The places of the samples: classes in the order of D, each in position order, and the
    /// dummy exactly where a class other than the last ends with a window inside the text.
    fn check<C: Cover>(n: usize, dummy_if_needed: bool) {
        let smp = Samples::<C>::new(n, dummy_if_needed);
        let mut want: Vec<usize> = Vec::new();
        for s in 0..C::S {
            let d = C::residue(s);
            want.extend((0..n).filter(|&i| i % C::X == d));
            if smp.dummy && n % C::X == d {
                want.push(n);
            }
        }
        assert_eq!(smp.m, want.len(), "n = {n}");
        for (q, &i) in want.iter().enumerate() {
            assert_eq!(smp.rpos(i), q, "n = {n}, i = {i}");
            assert_eq!(smp.text_pos(q), i, "n = {n}, q = {q}");
        }
        let r = n % C::X;
        let needs = C::slot(r) < C::S && r != C::residue(C::S - 1);
        assert_eq!(smp.dummy, dummy_if_needed && needs, "n = {n}");
    }

    /// samples_below counts the sample positions below x; sample_index numbers them in
    /// position order.
    fn check_sample_index<C: Cover>() {
        let samples: Vec<usize> = (0..100).filter(|&i| C::slot(i % C::X) < C::S).collect();
        for x in 0..100 {
            assert_eq!(
                C::samples_below(x),
                samples.partition_point(|&i| i < x),
                "x = {x}"
            );
        }
        for (k, &i) in samples.iter().enumerate() {
            assert_eq!(C::sample_index(i), k, "i = {i}");
        }
    }

    /// FreeRanks hands out, on every pe of a block layout of 0..=m, the values no step took,
    /// smallest first (value 0 never), with the taken values marked over several steps.
    #[test]
    fn free_ranks_are_the_values_not_taken() {
        let mut rng = crate::util::SplitMix::new(11);
        for (m, p) in [(0, 1), (1, 2), (63, 1), (64, 3), (1000, 7), (5000, 4)] {
            let values = Layout::block(m + 1, p);
            let taken: Vec<bool> = (0..=m)
                .map(|v| v == 0 || !rng.next().is_multiple_of(3))
                .collect();
            for me in 0..p {
                let (lo, hi) = (values.start(me), values.end(me));
                let mut free = FreeRanks::new(&values, me);
                for step in 0..3 {
                    let mine: Vec<u32> = (lo..hi)
                        .filter(|&v| v != 0 && taken[v] && v % 3 == step)
                        .map(|v| v as u32)
                        .collect();
                    free.take(&mine);
                }
                free.count_free();
                let want: Vec<u64> = (lo..hi).filter(|&v| !taken[v]).map(|v| v as u64).collect();
                assert_eq!(free.count, want.len() as u64, "m = {m}, p = {p}, pe {me}");
                for (k, &v) in want.iter().enumerate() {
                    assert_eq!(
                        free.nth(k as u64 + 1),
                        v,
                        "m = {m}, p = {p}, pe {me}, k = {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn sample_indices_in_position_order() {
        check_sample_index::<Dc3>();
        check_sample_index::<Dc7>();
    }

    #[test]
    fn samples_are_placed_by_class() {
        for n in 8..60 {
            for dummy in [false, true] {
                check::<Dc3>(n, dummy);
                check::<Dc7>(n, dummy);
            }
        }
        // DC3's dummy: n mod 3 = 1; DC7's: n mod 7 = 1 or 2.
        assert!(Samples::<Dc3>::new(10, true).dummy && !Samples::<Dc3>::new(11, true).dummy);
        assert!(Samples::<Dc7>::new(15, true).dummy && Samples::<Dc7>::new(16, true).dummy);
        assert!(!Samples::<Dc7>::new(18, true).dummy);
    }
}
