//! The one thin layer over rsmpi.
//!
//! Everything that talks to MPI goes through [`Comm`]. Counts are `usize` here; this is the only
//! module that narrows them to MPI's `i32` (`Count`), with checked conversions: an exchange whose
//! counts or displacements do not fit is split into rounds, never truncated.
//!
//! Records travel as bytes: any `bytemuck::Pod` type (a `#[repr(C)]` struct without padding holes,
//! checked at compile time by the derive) is sent with a contiguous datatype of its size.

use std::cell::Cell;

use bytemuck::Pod;
use mpi::collective::SystemOperation;
use mpi::datatype::{DatatypeRef, DynBuffer, DynBufferMut, Partition, PartitionMut, UserDatatype};
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
use mpi::Count;

use crate::error::{Error, Result};

/// Largest element count used in one MPI call (MPI counts and displacements are `i32`).
const MPI_COUNT_MAX: usize = i32::MAX as usize;

/// The tag of [`Comm::stream_to_root`] and [`Comm::stream_from_root`] messages (the only
/// point-to-point traffic; a tag of their own keeps any later traffic from matching them).
const STREAM_TAG: i32 = 0x5053;

/// Ends every process of the job (MPI_Abort on the world communicator) without any collective
/// call first: safe from a panic hook on any pe and any thread.
pub fn abort_world(code: i32) -> ! {
    SimpleCommunicator::world().abort(code)
}

/// This process's rank in the world communicator while MPI runs (initialised and not yet
/// finalised), else None. Local; safe from a panic hook on any thread.
pub fn world_rank_if_running() -> Option<usize> {
    let running = mpi::environment::is_initialized() && !mpi::environment::is_finalized();
    running.then(|| SimpleCommunicator::world().rank() as usize)
}

/// A communicator with byte accounting. All methods are collective unless said otherwise:
/// every pe of the communicator must call them in the same order.
pub struct Comm {
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    /// Bytes this pe has sent to other pes (self-sends excluded).
    bytes_sent: Cell<u64>,
    /// Seconds this pe spent inside all-to-all exchanges (waiting for slower pes included).
    a2a_secs: Cell<f64>,
    /// Largest volume, bytes, that a pe sends in one round of an exchange that can run in rounds
    /// ([`crate::dist::exchange`]); `usize::MAX`: one round. Set from the memory plan.
    round_bytes: Cell<usize>,
    /// Element limit per MPI call; `i32::MAX` unless lowered ([`Comm::with_max_count`]: tests
    /// lower it to exercise the chunked path).
    max_count: usize,
}

fn count(n: usize) -> Count {
    Count::try_from(n).expect("count was checked against MPI_COUNT_MAX")
}

/// A pointer MPI may take for `s`. An empty `Vec<u8>` points at address 1, which Open MPI reads
/// as `MPI_IN_PLACE` (and rejects in all-to-all): empty buffers get the address of `dummy`.
fn buf_ptr<T>(s: &[T], dummy: &u128) -> *const T {
    if s.is_empty() {
        dummy as *const u128 as *const T
    } else {
        s.as_ptr()
    }
}

fn buf_ptr_mut<T>(s: &mut [T], dummy: &mut u128) -> *mut T {
    if s.is_empty() {
        dummy as *mut u128 as *mut T
    } else {
        s.as_mut_ptr()
    }
}

fn record_type<T: Pod>() -> UserDatatype {
    let size = std::mem::size_of::<T>();
    UserDatatype::contiguous(count(size), &u8::equivalent_datatype())
}

/// The buffer where `root` of a stream holds one piece: `stage` if it holds the largest piece
/// (the other pes' lengths `lens`, at most `piece` each), else `own`, grown to that.
fn root_stage<'a, T: Pod>(
    stage: Option<&'a mut [T]>,
    own: &'a mut Vec<T>,
    lens: &[u64],
    root: usize,
    piece: usize,
) -> &'a mut [T] {
    let most = (lens.iter().enumerate())
        .filter(|&(r, _)| r != root)
        .map(|(_, &l)| l as usize)
        .max()
        .unwrap_or(0)
        .min(piece);
    match stage {
        Some(s) if s.len() >= most => s,
        _ => {
            own.resize(most, T::zeroed());
            own
        }
    }
}

impl Comm {
    /// Wraps a communicator (usually `universe.world()`). Local (no communication).
    pub fn new(world: SimpleCommunicator) -> Self {
        Self::with_max_count(world, MPI_COUNT_MAX)
    }

    /// Wraps a communicator whose MPI calls move at most `max_count` elements each (exchanges
    /// larger than that run in rounds; tests lower it to reach that path). `max_count` is clamped
    /// to `1..=i32::MAX` and raised to at least the number of pes, so that a round moves at most
    /// `max_count`; every pe must pass the same value. Local (no communication).
    pub fn with_max_count(world: SimpleCommunicator, max_count: usize) -> Self {
        let rank = world.rank() as usize;
        let size = world.size() as usize;
        Comm {
            world,
            rank,
            size,
            bytes_sent: Cell::new(0),
            a2a_secs: Cell::new(0.0),
            round_bytes: Cell::new(usize::MAX),
            max_count: max_count.clamp(1, MPI_COUNT_MAX).max(size),
        }
    }

    /// Sets the largest volume a pe sends in one exchange round (see [`Self::rounds_for`]).
    pub fn set_round_bytes(&self, bytes: usize) {
        self.round_bytes.set(bytes.max(1));
    }

    /// Runs `f` with exchange rounds of at most `bytes` (None: as they are), then puts back the
    /// rounds as they were: a run's setting for its duration (a memory plan's), leaving the
    /// communicator as it found it. Local (every pe must pass the same value).
    pub fn in_rounds_of<R>(&self, bytes: Option<usize>, f: impl FnOnce() -> R) -> R {
        let before = self.round_bytes.get();
        if let Some(b) = bytes {
            self.set_round_bytes(b);
        }
        let r = f();
        self.round_bytes.set(before);
        r
    }

    /// The largest volume a pe sends in one exchange round, bytes (`usize::MAX`: no limit).
    pub fn round_bytes(&self) -> usize {
        self.round_bytes.get()
    }

    /// How many rounds an exchange of `bytes` on this pe takes: the most any pe needs under
    /// [`Self::round_bytes`] (1 when unlimited). Collective when limited.
    pub fn rounds_for(&self, bytes: usize) -> usize {
        let per = self.round_bytes.get();
        if per == usize::MAX {
            return 1;
        }
        (self.all_reduce_max(bytes.div_ceil(per) as u64) as usize).max(1)
    }

    /// This pe's number in `0..size()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of pes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Seconds this pe has spent in all-to-all exchanges so far.
    pub fn a2a_secs(&self) -> f64 {
        self.a2a_secs.get()
    }

    /// Bytes this pe has sent to other pes so far.
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent.get()
    }

    /// The underlying rsmpi communicator.
    pub fn raw(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// Number of pes on this node (shared-memory domain).
    pub fn local_size(&self) -> usize {
        self.world.split_shared(self.rank as i32).size() as usize
    }

    /// The CPUs that the pes on this node may run on together (the union of their affinity
    /// masks), as a mask of 64-bit words. Collective.
    pub fn node_cpus(&self) -> Vec<u64> {
        let node = self.world.split_shared(self.rank as i32);
        let mine = crate::affinity::current();
        let mut all = vec![0u64; mine.len()];
        node.all_reduce_into(&mine[..], &mut all[..], SystemOperation::bitwise_or());
        all
    }

    /// Waits for every pe.
    pub fn barrier(&self) {
        self.world.barrier();
    }

    /// A barrier that waits asleep: a pe polls a non-blocking barrier with short sleeps instead
    /// of spinning in MPI, so its core is free for a pe that works meanwhile (the sequential base
    /// case on pe 0 runs with the threads of the whole node).
    pub fn quiet_barrier(&self) {
        let mut req = self.world.immediate_barrier();
        let mut nap = std::time::Duration::from_micros(20);
        loop {
            match req.test() {
                Ok(_) => return,
                Err(r) => req = r,
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(std::time::Duration::from_micros(500));
        }
    }

    /// Ends the whole job at once (MPI_Abort). Used when a pe cannot continue and cannot agree.
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    /// Makes an error on one pe an error on all. Every pe calls this with its own result; if any
    /// pe holds an error, every pe returns an error: the lowest failing pe gets its own error back
    /// (to print), the others get [`Error::Remote`] naming that pe and its exit code. Costs one
    /// reduction of one word, and a broadcast of one more when some pe failed.
    pub fn agree<T>(&self, r: Result<T>) -> Result<T> {
        let mine = if r.is_err() {
            self.rank as u64
        } else {
            u64::MAX
        };
        let first = self.all_reduce_min(mine);
        if first == u64::MAX {
            return r;
        }
        let mut code = r.as_ref().err().map_or(1, |e| e.exit_code()) as u64;
        self.broadcast(&mut code, first as usize);
        match r {
            Err(e) if first == self.rank as u64 => Err(e),
            _ => Err(Error::Remote {
                pe: first as usize,
                code: code as u8,
            }),
        }
    }

    /// Sum over all pes.
    pub fn all_reduce_sum(&self, x: u64) -> u64 {
        let mut out = 0u64;
        self.world
            .all_reduce_into(&x, &mut out, SystemOperation::sum());
        out
    }

    /// Maximum over all pes.
    pub fn all_reduce_max(&self, x: u64) -> u64 {
        let mut out = 0u64;
        self.world
            .all_reduce_into(&x, &mut out, SystemOperation::max());
        out
    }

    /// Minimum over all pes.
    pub fn all_reduce_min(&self, x: u64) -> u64 {
        let mut out = 0u64;
        self.world
            .all_reduce_into(&x, &mut out, SystemOperation::min());
        out
    }

    /// Logical or over all pes.
    pub fn any(&self, x: bool) -> bool {
        self.all_reduce_max(x as u64) != 0
    }

    /// Element-wise maximum and sum of equal-length f64 vectors (for phase statistics).
    pub fn all_reduce_f64(&self, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let mut mx = vec![0.0; x.len()];
        let mut sum = vec![0.0; x.len()];
        if !x.is_empty() {
            self.world
                .all_reduce_into(x, &mut mx[..], SystemOperation::max());
            self.world
                .all_reduce_into(x, &mut sum[..], SystemOperation::sum());
        }
        (mx, sum)
    }

    /// Exclusive prefix sum: pe r gets the sum of `x` over pes `0..r` (0 on pe 0, which MPI leaves
    /// undefined).
    pub fn exscan_sum(&self, x: u64) -> u64 {
        let mut out = 0u64;
        self.world
            .exclusive_scan_into(&x, &mut out, SystemOperation::sum());
        if self.rank == 0 {
            0
        } else {
            out
        }
    }

    /// Exclusive prefix maximum: pe r gets the maximum of `x` over pes `0..r` (0 on pe 0).
    pub fn exscan_max(&self, x: u64) -> u64 {
        let mut out = 0u64;
        self.world
            .exclusive_scan_into(&x, &mut out, SystemOperation::max());
        if self.rank == 0 {
            0
        } else {
            out
        }
    }

    /// Element-wise sum of equal-length u64 vectors over all pes.
    pub fn all_reduce_sum_vec(&self, x: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; x.len()];
        if !x.is_empty() {
            self.world
                .all_reduce_into(x, &mut out[..], SystemOperation::sum());
        }
        out
    }

    /// Element-wise bitwise or of equal-length u64 vectors over all pes, in place.
    pub fn all_reduce_or_vec(&self, x: &mut [u64]) {
        if !x.is_empty() {
            let mine = x.to_vec();
            self.world
                .all_reduce_into(&mine[..], x, SystemOperation::bitwise_or());
        }
    }

    /// Every pe's value, in pe order.
    pub fn all_gather<T: Pod>(&self, x: T) -> Vec<T> {
        let mut out = vec![x; self.size];
        let dt = record_type::<T>();
        let dref = unsafe { DatatypeRef::from_raw(dt.as_raw()) };
        let send = unsafe { DynBuffer::from_raw(&x as *const T, 1, dref) };
        let mut recv = unsafe { DynBufferMut::from_raw(out.as_mut_ptr(), count(self.size), dref) };
        self.world.all_gather_into(&send, &mut recv);
        out
    }

    /// Concatenation of every pe's slice, in pe order, on every pe. For small data only (samples,
    /// boundary records): every pe receives the sum of all lengths.
    pub fn all_gather_v<T: Pod>(&self, local: &[T]) -> Vec<T> {
        let lens = self.all_gather(local.len() as u64);
        let total: u64 = lens.iter().sum();
        // Callers gather O(p) or O(samples·p) records; MPI's i32 counts bound that, not the
        // (test-lowered) per-call limit of the all-to-all.
        assert!(
            (total as usize) <= MPI_COUNT_MAX,
            "all_gather_v is for small data"
        );
        let counts: Vec<Count> = lens.iter().map(|&l| count(l as usize)).collect();
        let displs: Vec<Count> = counts
            .iter()
            .scan(0, |acc, &c| {
                let d = *acc;
                *acc += c;
                Some(d)
            })
            .collect();
        let mut out: Vec<T> = vec![T::zeroed(); total as usize];
        let dt = record_type::<T>();
        let dref = unsafe { DatatypeRef::from_raw(dt.as_raw()) };
        let (d1, mut d2) = (0u128, 0u128);
        let send = unsafe { DynBuffer::from_raw(buf_ptr(local, &d1), count(local.len()), dref) };
        let mut recv = unsafe {
            DynBufferMut::from_raw(buf_ptr_mut(&mut out, &mut d2), count(out.len()), dref)
        };
        {
            let mut part = PartitionMut::new(&mut recv, &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(&send, &mut part);
        }
        self.add_sent(std::mem::size_of_val(local) as u64 * (self.size as u64 - 1));
        out
    }

    /// Broadcasts a byte string of any length from `root`: on exit every pe holds root's `v`.
    /// Costs two broadcasts (the length, then the bytes).
    pub fn broadcast_bytes(&self, v: &mut Vec<u8>, root: usize) {
        let mut len = v.len() as u64;
        self.broadcast(&mut len, root);
        v.resize(len as usize, 0);
        if len > 0 {
            self.world
                .process_at_rank(root as i32)
                .broadcast_into(&mut v[..]);
        }
    }

    /// Broadcasts `x` from `root` to every pe.
    pub fn broadcast<T: Pod>(&self, x: &mut T, root: usize) {
        let dt = record_type::<T>();
        let dref = unsafe { DatatypeRef::from_raw(dt.as_raw()) };
        let mut buf = unsafe { DynBufferMut::from_raw(x as *mut T, 1, dref) };
        self.world
            .process_at_rank(root as i32)
            .broadcast_into(&mut buf);
    }

    fn add_sent(&self, b: u64) {
        self.bytes_sent.set(self.bytes_sent.get() + b);
    }

    /// Personalised all-to-all with variable counts. `send` holds the records for pe 0, then those
    /// for pe 1, …; `counts[d]` is how many go to pe d. Returns the records received, ordered by
    /// source pe (the order within each source is kept).
    ///
    /// Counts are `usize`: when a count or displacement would not fit MPI's `i32`, the exchange runs
    /// in rounds with at most `max_count / p` records per destination per round (staged copies).
    /// Memory: the received records, plus staging buffers of at most `max_count` records per side
    /// in the chunked case.
    #[must_use]
    pub fn all_to_all_v<T: Pod>(&self, send: &[T], counts: &[usize]) -> Vec<T> {
        self.all_to_all_v_counts(send, counts).0
    }

    /// [`Comm::all_to_all_v`] that also returns how many records came from each pe.
    #[must_use]
    pub fn all_to_all_v_counts<T: Pod>(
        &self,
        send: &[T],
        counts: &[usize],
    ) -> (Vec<T>, Vec<usize>) {
        let mut out = Vec::new();
        let rc = self.all_to_all_v_into(send, counts, &mut out);
        (out, rc)
    }

    /// [`Comm::all_to_all_v_counts`] into `out` (its old contents replaced by the records
    /// received), reusing its capacity: a caller that exchanges piece after piece keeps one
    /// receive buffer whose pages stay resident, instead of fresh pages (zeroed by the kernel)
    /// for every piece. Returns the received counts per source pe.
    pub fn all_to_all_v_into<T: Pod>(
        &self,
        send: &[T],
        counts: &[usize],
        out: &mut Vec<T>,
    ) -> Vec<usize> {
        let t0 = std::time::Instant::now();
        let r = self.all_to_all_v_timed(send, counts, out);
        self.a2a_secs
            .set(self.a2a_secs.get() + t0.elapsed().as_secs_f64());
        r
    }

    fn all_to_all_v_timed<T: Pod>(
        &self,
        send: &[T],
        counts: &[usize],
        out: &mut Vec<T>,
    ) -> Vec<usize> {
        let p = self.size;
        assert_eq!(counts.len(), p, "all_to_all_v needs one count per pe");
        assert_eq!(
            counts.iter().sum::<usize>(),
            send.len(),
            "counts must add up to the send length"
        );
        let send_counts: Vec<u64> = counts.iter().map(|&c| c as u64).collect();
        let mut recv_counts = vec![0u64; p];
        self.world
            .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let recv_total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        let sent_away = (send.len() - counts[self.rank]) * std::mem::size_of::<T>();
        self.add_sent(sent_away as u64);

        if out.capacity() < recv_total {
            // Fresh (zeroed by the kernel as its pages are touched) rather than grown.
            *out = vec![T::zeroed(); recv_total];
        } else {
            out.clear();
            out.resize(recv_total, T::zeroed());
        }
        let fits = send.len() <= self.max_count && recv_total <= self.max_count;
        if self.all_reduce_min(fits as u64) == 1 {
            let sc: Vec<usize> = counts.to_vec();
            let rc: Vec<usize> = recv_counts.iter().map(|&c| c as usize).collect();
            self.raw_all_to_all_v(send, &sc, out, &rc);
            return rc;
        }

        // Chunked: round k moves records [k*q, (k+1)*q) of every (source, destination) pair.
        let q = (self.max_count / p).max(1);
        let longest = counts
            .iter()
            .copied()
            .chain(recv_counts.iter().map(|&c| c as usize))
            .max()
            .unwrap_or(0);
        let rounds = self.all_reduce_max(longest.div_ceil(q) as u64) as usize;
        let send_displs = exclusive_prefix(counts);
        let rc: Vec<usize> = recv_counts.iter().map(|&c| c as usize).collect();
        let recv_displs = exclusive_prefix(&rc);
        let mut stage_send: Vec<T> = Vec::new();
        let mut stage_recv: Vec<T> = Vec::new();
        for k in 0..rounds {
            let lo = k * q;
            let piece = |c: usize| c.saturating_sub(lo).min(q);
            let sc: Vec<usize> = counts.iter().map(|&c| piece(c)).collect();
            let rcs: Vec<usize> = rc.iter().map(|&c| piece(c)).collect();
            stage_send.clear();
            for d in (0..p).filter(|&d| sc[d] > 0) {
                let start = send_displs[d] + lo;
                stage_send.extend_from_slice(&send[start..start + sc[d]]);
            }
            stage_recv.clear();
            stage_recv.resize(rcs.iter().sum(), T::zeroed());
            self.raw_all_to_all_v(&stage_send, &sc, &mut stage_recv, &rcs);
            let mut off = 0;
            for s in (0..p).filter(|&s| rcs[s] > 0) {
                let dst = recv_displs[s] + lo;
                out[dst..dst + rcs[s]].copy_from_slice(&stage_recv[off..off + rcs[s]]);
                off += rcs[s];
            }
        }
        rc
    }

    /// Hands every pe's `local` records to `root`, in pe order, in pieces of at most `piece`
    /// records: on `root`, `f(src, piece)` runs for each piece of pe `src` (its own included, in
    /// its place). The other pes only send. Memory on `root`: one piece; nothing is gathered.
    /// `stage`: where `root` receives the pieces (at least `piece` records; None or shorter: a
    /// vector), e.g. page-locked memory that `f` hands to a device.
    pub fn stream_to_root<T: Pod>(
        &self,
        local: &[T],
        root: usize,
        piece: usize,
        stage: Option<&mut [T]>,
        mut f: impl FnMut(usize, &[T]),
    ) {
        let piece = piece.clamp(1, self.max_count.min(MPI_COUNT_MAX));
        let lens = self.all_gather(local.len() as u64);
        let dt = record_type::<T>();
        let dref = unsafe { DatatypeRef::from_raw(dt.as_raw()) };
        if self.rank != root {
            for c in local.chunks(piece) {
                let buf = unsafe { DynBuffer::from_raw(c.as_ptr(), count(c.len()), dref) };
                self.world
                    .process_at_rank(root as i32)
                    .send_with_tag(&buf, STREAM_TAG);
                self.add_sent(std::mem::size_of_val(c) as u64);
            }
            return;
        }
        let mut own: Vec<T> = Vec::new();
        let stage = root_stage(stage, &mut own, &lens, root, piece);
        for (src, &len) in lens.iter().enumerate() {
            if src == root {
                local.chunks(piece).for_each(|c| f(src, c));
                continue;
            }
            let mut left = len as usize;
            while left > 0 {
                let m = left.min(piece);
                let mut buf = unsafe { DynBufferMut::from_raw(stage.as_mut_ptr(), count(m), dref) };
                self.world
                    .process_at_rank(src as i32)
                    .receive_into_with_tag(&mut buf, STREAM_TAG);
                f(src, &stage[..m]);
                left -= m;
            }
        }
    }

    /// The reverse of [`Comm::stream_to_root`]: every pe receives `out.len()` records from
    /// `root`, which produces them in pe order, in pieces of at most `piece` records:
    /// `fill(dst, offset, buf)` writes records `offset..offset + buf.len()` of pe `dst`'s part
    /// (for `root` itself, straight into its `out`). Memory on `root`: one piece. `stage`:
    /// where `root` puts the other pes' pieces, as in [`Comm::stream_to_root`].
    pub fn stream_from_root<T: Pod>(
        &self,
        out: &mut [T],
        root: usize,
        piece: usize,
        stage: Option<&mut [T]>,
        mut fill: impl FnMut(usize, usize, &mut [T]),
    ) {
        let piece = piece.clamp(1, self.max_count.min(MPI_COUNT_MAX));
        let lens = self.all_gather(out.len() as u64);
        let dt = record_type::<T>();
        let dref = unsafe { DatatypeRef::from_raw(dt.as_raw()) };
        if self.rank != root {
            for c in out.chunks_mut(piece) {
                let mut buf =
                    unsafe { DynBufferMut::from_raw(c.as_mut_ptr(), count(c.len()), dref) };
                self.world
                    .process_at_rank(root as i32)
                    .receive_into_with_tag(&mut buf, STREAM_TAG);
            }
            return;
        }
        let mut own: Vec<T> = Vec::new();
        let stage = root_stage(stage, &mut own, &lens, root, piece);
        for (dst, &len) in lens.iter().enumerate() {
            if dst == root {
                for (i, c) in out.chunks_mut(piece).enumerate() {
                    fill(dst, i * piece, c);
                }
                continue;
            }
            let len = len as usize;
            let mut off = 0;
            while off < len {
                let m = (len - off).min(piece);
                fill(dst, off, &mut stage[..m]);
                let buf = unsafe { DynBuffer::from_raw(stage.as_ptr(), count(m), dref) };
                self.world
                    .process_at_rank(dst as i32)
                    .send_with_tag(&buf, STREAM_TAG);
                self.add_sent(std::mem::size_of_val(&stage[..m]) as u64);
                off += m;
            }
        }
    }

    /// All-to-all of a send buffer laid out in rounds, releasing it as it goes. Collective.
    ///
    /// Entry: `send` holds `rounds` segments one after another; segment r holds the records for
    /// pe 0, then pe 1, …, `counts[r * p + d]` for pe d. Every pe passes the same `rounds`.
    /// Exit: the records sent to this pe, ordered by source pe and within a source by round and
    /// original order (as if the segments of each source had been sent at once).
    /// Rounds run from the last segment to the first; after each, the sent tail of `send` is
    /// freed. Memory: the unsent part of `send` plus the records received so far (the result's
    /// pages become resident as they are written) plus one round's staging; so the peak is about
    /// one copy of the records and one round, where [`Self::all_to_all_v`] holds two copies.
    /// Cost: one all-to-all of `rounds` counts per pe pair, then `rounds` all-to-alls.
    pub fn all_to_all_rounds<T: Pod>(
        &self,
        mut send: Vec<T>,
        counts: &[usize],
        rounds: usize,
    ) -> Vec<T> {
        let p = self.size;
        assert_eq!(counts.len(), rounds * p, "one count per round and pe");
        assert_eq!(counts.iter().sum::<usize>(), send.len());
        let t0 = std::time::Instant::now();
        // mine[d * rounds + r] = what I send d in round r; theirs[s * rounds + r] likewise.
        let mine: Vec<u64> = (0..p * rounds)
            .map(|k| counts[(k % rounds) * p + k / rounds] as u64)
            .collect();
        let mut theirs = vec![0u64; p * rounds];
        self.world.all_to_all_into(&mine[..], &mut theirs[..]);
        let from: Vec<usize> = (0..p)
            .map(|s| theirs[s * rounds..(s + 1) * rounds].iter().sum::<u64>() as usize)
            .collect();
        let from_displs = exclusive_prefix(&from);
        let total: usize = from.iter().sum();
        // Zeroed memory from the allocator: pages become resident only as rounds fill them.
        let mut out: Vec<T> = bytemuck::allocation::zeroed_vec(total);
        let mut stage: Vec<T> = Vec::new();
        let mut end = send.len();
        for r in (0..rounds).rev() {
            let sc: Vec<usize> = counts[r * p..(r + 1) * p].to_vec();
            let rc: Vec<usize> = (0..p).map(|s| theirs[s * rounds + r] as usize).collect();
            let start = end - sc.iter().sum::<usize>();
            stage.clear();
            stage.resize(rc.iter().sum(), T::zeroed());
            let fits = (end - start) <= self.max_count && stage.len() <= self.max_count;
            if self.all_reduce_min(fits as u64) == 1 {
                self.raw_all_to_all_v(&send[start..end], &sc, &mut stage, &rc);
                self.add_sent(((end - start - sc[self.rank]) * std::mem::size_of::<T>()) as u64);
            } else {
                self.all_to_all_v_timed(&send[start..end], &sc, &mut stage);
            }
            let mut off = 0;
            for s in 0..p {
                let before: u64 = theirs[s * rounds..s * rounds + r].iter().sum();
                let dst = from_displs[s] + before as usize;
                out[dst..dst + rc[s]].copy_from_slice(&stage[off..off + rc[s]]);
                off += rc[s];
            }
            send.truncate(start);
            send.shrink_to_fit();
            end = start;
        }
        self.a2a_secs
            .set(self.a2a_secs.get() + t0.elapsed().as_secs_f64());
        out
    }

    /// Transposes per-destination counts: returns how many records each pe sends to this one.
    pub fn all_to_all_counts(&self, counts: &[u64]) -> Vec<usize> {
        let mut out = vec![0u64; self.size];
        self.world.all_to_all_into(counts, &mut out[..]);
        out.into_iter().map(|c| c as usize).collect()
    }

    /// One MPI_Alltoallv; every count and displacement must fit in `Count`.
    fn raw_all_to_all_v<T: Pod>(&self, send: &[T], sc: &[usize], recv: &mut [T], rc: &[usize]) {
        let to_counts = |v: &[usize]| -> (Vec<Count>, Vec<Count>) {
            let c: Vec<Count> = v.iter().map(|&x| count(x)).collect();
            let d: Vec<Count> = exclusive_prefix(v).into_iter().map(count).collect();
            (c, d)
        };
        let (scn, sdn) = to_counts(sc);
        let (rcn, rdn) = to_counts(rc);
        let dt = record_type::<T>();
        let dref = unsafe { DatatypeRef::from_raw(dt.as_raw()) };
        let (d1, mut d2) = (0u128, 0u128);
        let sbuf = unsafe { DynBuffer::from_raw(buf_ptr(send, &d1), count(send.len()), dref) };
        let mut rbuf =
            unsafe { DynBufferMut::from_raw(buf_ptr_mut(recv, &mut d2), count(recv.len()), dref) };
        let spart = Partition::new(&sbuf, &scn[..], &sdn[..]);
        let mut rpart = PartitionMut::new(&mut rbuf, &rcn[..], &rdn[..]);
        self.world.all_to_all_varcount_into(&spart, &mut rpart);
    }
}

/// Exclusive prefix sums of `v` (same length).
pub(crate) fn exclusive_prefix(v: &[usize]) -> Vec<usize> {
    let mut acc = 0;
    v.iter()
        .map(|&x| {
            let d = acc;
            acc += x;
            d
        })
        .collect()
}
