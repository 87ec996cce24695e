//! A global allocator that turns a failed allocation into one clear error for the whole job.
//!
//! Rust's default answer to a failed allocation is "memory allocation of N bytes failed" and
//! SIGABRT on one pe, which leaves the others waiting in their next collective. [`AbortOnOom`]
//! wraps the system allocator; when it returns nothing, the pe prints which pe and host failed,
//! in which phase (as [`crate::Ctx::phase`] names it), how many bytes it asked for, its
//! peak resident memory so far and its limit, removes the partial output file, and ends every
//! pe of the job with MPI_Abort (exit status 1). The command-line tool installs it; a library
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
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// The system allocator, with a job-wide clear error when it fails.
pub struct AbortOnOom;

/// This pe's rank, once known (usize::MAX before).
static RANK: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The current phase's name (truncated), for the message: bytes and length, written without
/// allocating and read without locks (a torn name in a message is harmless).
static PHASE: [AtomicU8; 48] = [const { AtomicU8::new(0) }; 48];
static PHASE_LEN: AtomicUsize = AtomicUsize::new(0);

/// Tells the allocator which pe this is (done by [`crate::Ctx::new`]).
pub(crate) fn set_rank(rank: usize) {
    RANK.store(rank, Ordering::Relaxed);
}

/// Blocks of at least this many bytes are asked for in huge pages (usize::MAX: none).
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
    let _ = write!(m, "psa: error");
    if rank != usize::MAX {
        let _ = write!(m, " on pe {rank}");
    }
    let _ = write!(
        m,
        " (host {}): out of memory in phase '{}': an allocation of {size} bytes failed; peak resident memory so far {} MB, ",
        std::str::from_utf8(&host[..host_len]).unwrap_or("?"),
        std::str::from_utf8(&phase[..plen]).unwrap_or("?"),
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
    let _ = writeln!(m, "; use more pes or nodes, or a machine with more memory");
    // SAFETY: writing our stack buffer to stderr.
    unsafe { libc::write(2, m.buf.as_ptr().cast(), m.len) };
    crate::io::remove_partial_now();
    if rank != usize::MAX {
        crate::comm::abort_world(1);
    }
    std::process::abort()
}

// SAFETY: every method forwards to the system allocator and returns what it returned; only a
// null result is intercepted, and that path never returns; a large block also gets a paging
// hint (`advise_huge`), which leaves its contents alone.
unsafe impl GlobalAlloc for AbortOnOom {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if p.is_null() {
            out_of_memory(layout.size());
        }
        advise_huge(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
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
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            out_of_memory(new_size);
        }
        advise_huge(p, new_size);
        p
    }
}
