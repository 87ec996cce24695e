//! A global allocator that turns a failed allocation into one clear error for the whole job.
//!
//! Rust's default answer to a failed allocation is "memory allocation of N bytes failed" and
//! SIGABRT on one pe, which leaves the others waiting in their next collective. [`AbortOnOom`]
//! wraps the system allocator; when it returns nothing, the pe prints which pe and host failed,
//! in which phase (as [`crate::Ctx::phase`] names it), how many bytes it asked for, its
//! peak resident memory so far and its limit, removes the partial output file, and ends every
//! pe of the job with MPI_Abort (exit status 4, as [`crate::Error::OutOfMemory`]). The command-line tool installs it; a library
//! user may too:
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: psa::alloc::AbortOnOom = psa::alloc::AbortOnOom;
//! ```
//!
//! An out-of-memory kill by the kernel (no failed allocation, just SIGKILL) cannot be caught;
//! the run warns at its start when its pes are likely to lack the memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

/// The system allocator, with a job-wide clear error when it fails.
pub struct AbortOnOom;

/// This pe's rank, once known (usize::MAX before).
static RANK: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The current phase's name (truncated), for the message: bytes and length, written without
/// allocating and read without locks (a torn name in a message is harmless).
static PHASE: [AtomicU8; 48] = [const { AtomicU8::new(0) }; 48];
static PHASE_LEN: AtomicUsize = AtomicUsize::new(0);

/// Set by `psa query` ([`in_query`]): a failed allocation is then told as the query's.
static QUERY: AtomicBool = AtomicBool::new(false);

/// Makes a failed allocation end the process as `psa query`'s: its message names no pe, phase
/// or nodes (a query has none) but what a query holds, and the exit status is 4. Process-wide;
/// `psa query` calls it first.
pub fn in_query() {
    QUERY.store(true, Ordering::Relaxed);
}

/// Tells the allocator which pe this is (done by [`crate::Ctx::new`]).
pub(crate) fn set_rank(rank: usize) {
    RANK.store(rank, Ordering::Relaxed);
}

/// Blocks of at least this many bytes start on a huge page ([`aligned_block`]) and are asked for
/// in huge pages (usize::MAX: none). Set only together with a fixed mapping threshold at or
/// below it, so such blocks are mapped by the C library and returned when freed.
static HUGE_FROM: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Heap blocks of at least `bytes` are mapped from the kernel and unmapped when freed (glibc's
/// `M_MMAP_THRESHOLD`; a fixed threshold also stops glibc from raising it as blocks are freed),
/// and with `huge` asked for in 2 MiB pages ([`advise_huge`]). Process-wide; nothing on other C
/// libraries. See [`crate::Config::map_threshold`].
pub(crate) fn map_blocks_from(bytes: usize, huge: bool) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let c = bytes.min(i32::MAX as usize) as libc::c_int;
        // SAFETY: mallopt only changes the allocator's parameters.
        if unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, c) } == 0 {
            log::warn!("cannot set the allocator's mapping threshold to {bytes} bytes");
            return;
        }
        if huge {
            HUGE_FROM.store(bytes.max(HUGE_PAGE), Ordering::Relaxed);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = (bytes, huge);
}

/// A transparent huge page.
const HUGE_PAGE: usize = 2 << 20;

/// Whether a block of `layout` is mapped on a huge page boundary ([`aligned_block`]).
#[inline]
fn starts_huge(layout: Layout) -> bool {
    layout.size() >= HUGE_FROM.load(Ordering::Relaxed) && layout.align() <= HUGE_PAGE
}

/// A block of `size` bytes that starts on a 2 MiB boundary, from the C library (null when it has
/// none). A mapping of the C library starts 16 bytes past a 4 KiB page, so a block of a few MiB
/// would hold one huge page or none and fault the rest 4 KiB at a time: aligned, every whole
/// 2 MiB of it is one huge page (one fault, one entry to unmap). The C library maps it (the
/// block is above its fixed threshold, see [`HUGE_FROM`]) with an unused head below the start
/// that is address space only, or, rarely, serves it from its free lists; `free` and `realloc`
/// take it as any other block (a `realloc` that moves it keeps the C library's own placement).
#[inline]
fn aligned_block(size: usize) -> *mut u8 {
    // SAFETY: `size` is at least HUGE_FROM (non-zero) and a block's size, below isize::MAX;
    // HUGE_PAGE is a power of two. The system allocator takes it to posix_memalign.
    unsafe { System.alloc(Layout::from_size_align_unchecked(size, HUGE_PAGE)) }
}

/// [`aligned_block`], zeroed: a block that is a mapping of its own is zero already and its pages
/// stay untouched until written (as `calloc` does); one from the C library's free lists, which
/// a large request may still be served from, is cleared.
#[inline]
fn aligned_zeroed_block(size: usize) -> *mut u8 {
    let p = aligned_block(size);
    if !p.is_null() && !own_mapping(p) {
        // SAFETY: p points to a block of `size` writable bytes that nothing else uses yet.
        unsafe { std::ptr::write_bytes(p, 0, size) };
    }
    p
}

/// Whether the C library's block at `p` is a mapping of its own: glibc keeps a block's size in
/// the word before it, bit 1 marking a mapped chunk (what its own `calloc` and `free` test).
#[inline]
fn own_mapping(p: *mut u8) -> bool {
    const IS_MMAPPED: usize = 2;
    // SAFETY: p came from glibc's allocator, which keeps the chunk's size word right before it.
    unsafe { p.cast::<usize>().sub(1).read() & IS_MMAPPED != 0 }
}

/// Asks the kernel for huge pages on the whole 2 MiB pages inside `[p, p + size)` when `size`
/// is at least [`HUGE_FROM`]: one system call, a hint (its failure changes nothing).
#[inline]
fn advise_huge(p: *mut u8, size: usize) {
    if size < HUGE_FROM.load(Ordering::Relaxed) || p.is_null() {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let start = (p as usize).next_multiple_of(HUGE_PAGE);
        let end = (p as usize + size) / HUGE_PAGE * HUGE_PAGE;
        if end > start {
            // SAFETY: the range lies inside a block the allocator just gave us; MADV_HUGEPAGE
            // changes how its pages are backed, never their contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
}

/// The mapping that the C library's block at `p` is, as (start, end), when it is a mapping of
/// its own ([`own_mapping`]): glibc keeps such a chunk's offset from its mapping's start in the
/// word two before the block and the chunk's size (low bits flags) in the word before it; the
/// mapping is page-aligned and ends with the chunk.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[inline]
fn own_mapping_bounds(p: *mut u8) -> Option<(usize, usize)> {
    if !own_mapping(p) {
        return None;
    }
    // SAFETY: p came from glibc's allocator and is a mapped chunk: its header (offset, size)
    // is the two words before it.
    let (offset, size) = unsafe {
        let header = p.cast::<usize>().sub(2);
        (header.read(), header.add(1).read() & !7)
    };
    let chunk = p as usize - 2 * std::mem::size_of::<usize>();
    let start = chunk.checked_sub(offset)?;
    (start % 4096 == 0 && (offset + size) % 4096 == 0).then_some((start, chunk + size))
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
#[inline]
fn own_mapping_bounds(_p: *mut u8) -> Option<(usize, usize)> {
    None
}

/// Before a block of `size` bytes at `p` grows: a block advised for huge pages ([`advise_huge`])
/// that is a mapping of its own is advised whole, from the mapping's start to its end (its
/// unused head included), so that the mapping is one kernel area again. Advising only its whole
/// 2 MiB pages split it into areas of different flags, on which the kernel refuses to grow or
/// move a mapping (`mremap` fails with EFAULT), and the C library's `realloc` then copied the
/// block into a fresh mapping: a vector extended round after round was copied and faulted in
/// whole each time, and held twice while it was. Blocks that never grow keep the advice on their
/// whole 2 MiB pages alone (advised whole, two neighbouring mappings would join into one area
/// whose huge pages may straddle them).
#[inline]
fn join_mapping(p: *mut u8, size: usize) {
    if size < HUGE_FROM.load(Ordering::Relaxed) || p.is_null() {
        return;
    }
    #[cfg(target_os = "linux")]
    if let Some((start, end)) = own_mapping_bounds(p) {
        // SAFETY: the range is the block's own mapping (glibc's header says so); MADV_HUGEPAGE
        // changes how its pages are backed, never their contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Names the phase that allocations now belong to (done by [`crate::Ctx::phase`]).
pub(crate) fn set_phase(name: &str) {
    let b = name.as_bytes();
    let len = b.len().min(PHASE.len());
    for (slot, &c) in PHASE.iter().zip(&b[..len]) {
        slot.store(c, Ordering::Relaxed);
    }
    PHASE_LEN.store(len, Ordering::Relaxed);
}

/// The current phase name's bytes, to put back with [`restore_phase`] when a nested phase ends.
pub(crate) fn current_phase() -> ([u8; 48], usize) {
    let mut b = [0u8; 48];
    for (d, s) in b.iter_mut().zip(&PHASE) {
        *d = s.load(Ordering::Relaxed);
    }
    (b, PHASE_LEN.load(Ordering::Relaxed).min(48))
}

/// Puts back a phase name saved by [`current_phase`].
pub(crate) fn restore_phase(saved: ([u8; 48], usize)) {
    for (slot, &c) in PHASE.iter().zip(&saved.0) {
        slot.store(c, Ordering::Relaxed);
    }
    PHASE_LEN.store(saved.1, Ordering::Relaxed);
}

/// A message in a stack buffer (the heap is what just failed).
struct StackMsg {
    buf: [u8; 512],
    len: usize,
}

impl std::fmt::Write for StackMsg {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let take = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

/// The exit status of a pe whose allocation failed (that of [`crate::Error::OutOfMemory`]).
const OOM_EXIT: i32 = 4;

/// Prints the message of a failed allocation of `size` bytes, removes the partial output and
/// ends the job (or, before MPI is known, this process) with [`OOM_EXIT`]. Allocates nothing.
#[cold]
fn out_of_memory(size: usize) -> ! {
    use std::fmt::Write;
    let mut m = StackMsg {
        buf: [0; 512],
        len: 0,
    };
    let mut host = [0u8; 64];
    // SAFETY: gethostname writes at most host.len() bytes.
    unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len() - 1) };
    let host_len = host.iter().position(|&c| c == 0).unwrap_or(0);
    let (phase, plen) = current_phase();
    // SAFETY: getrusage fills one rusage.
    let peak_kb = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_maxrss as u64
    };
    let rank = RANK.load(Ordering::Relaxed);
    let query = QUERY.load(Ordering::Relaxed);
    let _ = write!(
        m,
        "{}",
        if query {
            "psa query: error"
        } else {
            "psa: error"
        }
    );
    if rank != usize::MAX {
        let _ = write!(m, " on pe {rank}");
    }
    let host = std::str::from_utf8(&host[..host_len]).unwrap_or("?");
    let _ = write!(m, " (host {host}): out of memory");
    if !query {
        let phase = std::str::from_utf8(&phase[..plen]).unwrap_or("?");
        let _ = write!(m, " in phase '{phase}'");
    }
    let _ = write!(
        m,
        ": an allocation of {size} bytes failed; peak resident memory so far {} MB, ",
        peak_kb / 1024,
    );
    match crate::stats::address_space_limit() {
        Some(l) => {
            let _ = write!(m, "address-space limit (ulimit -v) {} MB", l >> 20);
        }
        None => {
            let _ = write!(m, "no address-space limit");
        }
    }
    let _ = writeln!(m, "; {}", match query {
        true => "a query holds the index's records, a batch of patterns, each pattern whole and, with --locate, the occurrences it reports (--max-hits limits them): give --max-hits, or use a machine with more memory",
        false => "use more pes or nodes, or a machine with more memory",
    });
    // SAFETY: writing our stack buffer to stderr.
    unsafe { libc::write(2, m.buf.as_ptr().cast(), m.len) };
    if query {
        // SAFETY: ends the process at once, with the status of running out of memory (a failed
        // allocation leaves nothing that could be unwound or flushed safely).
        unsafe { libc::_exit(OOM_EXIT) };
    }
    crate::io::remove_partial_now();
    if rank != usize::MAX {
        crate::comm::abort_world(OOM_EXIT);
    }
    // SAFETY: ends the process at once, as abort would, with the status of running out of memory.
    unsafe { libc::_exit(OOM_EXIT) }
}

// SAFETY: every method forwards to the system allocator (a large block to its aligned
// allocation, zeroed where asked) and returns what it returned; only a null result is
// intercepted, and that path never returns; a large block also gets a paging hint
// (`advise_huge`), which leaves its contents alone.
unsafe impl GlobalAlloc for AbortOnOom {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = if starts_huge(layout) {
            aligned_block(layout.size())
        } else {
            System.alloc(layout)
        };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        advise_huge(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = if starts_huge(layout) {
            aligned_zeroed_block(layout.size())
        } else {
            System.alloc_zeroed(layout)
        };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        advise_huge(p, layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            join_mapping(ptr, layout.size());
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            out_of_memory(new_size);
        }
        advise_huge(p, new_size);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large blocks start on a huge page, zeroed ones are zero, a block grown or shrunk keeps
    /// its contents, and the chunk header tells glibc's own mappings from its heap's blocks.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn large_blocks_start_on_huge_pages() {
        map_blocks_from(1 << 20, true);
        let a = AbortOnOom;
        // SAFETY: a size below isize::MAX and an alignment that is a power of two.
        let layout_of = |size: usize| unsafe { Layout::from_size_align_unchecked(size, 8) };
        for size in [HUGE_PAGE, 3 * HUGE_PAGE / 2 + 5, 7 << 20] {
            let layout = layout_of(size);
            // SAFETY: a non-zero size; every block is freed with its own layout.
            unsafe {
                let p = a.alloc(layout);
                assert_eq!(p as usize % HUGE_PAGE, 0, "{size} bytes on a huge page");
                std::ptr::write_bytes(p, 0xff, size);
                a.dealloc(p, layout);
                let z = a.alloc_zeroed(layout);
                assert_eq!(z as usize % HUGE_PAGE, 0);
                let s = std::slice::from_raw_parts(z, size);
                assert!(s.iter().all(|&b| b == 0), "{size} bytes zeroed");
                for (j, b) in std::slice::from_raw_parts_mut(z, size)
                    .iter_mut()
                    .enumerate()
                {
                    *b = j as u8;
                }
                let g = a.realloc(z, layout, 2 * size);
                let s = std::slice::from_raw_parts(g, size);
                assert!(
                    s.iter().enumerate().all(|(j, &b)| b == j as u8),
                    "grown keeps"
                );
                let grown = layout_of(2 * size);
                let h = a.realloc(g, grown, 1000);
                let s = std::slice::from_raw_parts(h, 1000);
                assert!(
                    s.iter().enumerate().all(|(j, &b)| b == j as u8),
                    "shrunk keeps"
                );
                a.dealloc(h, layout_of(1000));
            }
        }
        // Which blocks are glibc's own mappings (zero already) and which come from its heap
        // (cleared by `aligned_zeroed_block`): read from the chunk header.
        // SAFETY: blocks of non-zero size, freed with their own layouts.
        unsafe {
            let small = layout_of(64);
            let p = System.alloc(small);
            assert!(!own_mapping(p), "a small block lives in the heap");
            System.dealloc(p, small);
            let big = layout_of(8 << 20);
            let q = a.alloc(big);
            assert!(own_mapping(q), "a large block is a mapping of its own");
            a.dealloc(q, big);
        }
    }

    /// A large block advised for huge pages grows as one kernel area, from its mapping's start
    /// to its end ([`join_mapping`]: `realloc` grows it with `mremap`; a copy into a fresh
    /// mapping would be advised on its whole 2 MiB pages alone, in three areas), and keeps its
    /// contents.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_large_block_grows_as_one_kernel_area() {
        map_blocks_from(1 << 20, true);
        let a = AbortOnOom;
        // The (start, end) of the kernel area (a line of /proc/self/maps) that holds `x`.
        let area_of = |x: usize| -> (usize, usize) {
            let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
            maps.lines()
                .filter_map(|l| {
                    let (lo, hi) = l.split_whitespace().next()?.split_once('-')?;
                    Some((
                        usize::from_str_radix(lo, 16).ok()?,
                        usize::from_str_radix(hi, 16).ok()?,
                    ))
                })
                .find(|&(lo, hi)| lo <= x && x < hi)
                .expect("an area holds the block")
        };
        // SAFETY: a size below isize::MAX and an alignment that is a power of two; every block
        // is freed with its own layout.
        unsafe {
            let layout = Layout::from_size_align_unchecked(7 << 20, 8);
            let p = a.alloc(layout);
            std::ptr::write_bytes(p, 1, layout.size());
            assert!(own_mapping(p), "a mapping of its own");
            let q = a.realloc(p, layout, 13 << 20);
            let (start, end) = own_mapping_bounds(q).expect("still a mapping of its own");
            let (lo, hi) = area_of(q as usize);
            assert!(lo <= start && end <= hi, "one area holds the grown mapping");
            let s = std::slice::from_raw_parts(q, 7 << 20);
            assert!(s.iter().all(|&b| b == 1), "grown keeps");
            a.dealloc(q, Layout::from_size_align_unchecked(13 << 20, 8));
        }
    }
}
