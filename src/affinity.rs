//! CPU affinity of the calling thread (Linux), so that pe 0 can use the cores of the pes that wait
//! for it. Open MPI binds each pe to its own core(s) when asked to (`--bind-to core`): threads
//! that pe 0 starts for the sequential base case would otherwise share its single core.

/// Words in a mask (`cpu_set_t` holds 1024 CPUs).
const WORDS: usize = 1024 / 64;

/// The calling thread's affinity mask; all CPUs when it cannot be read.
pub fn current() -> Vec<u64> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![u64::MAX; WORDS];
        }
        (0..WORDS)
            .map(|w| {
                (0..64).fold(0u64, |acc, b| {
                    acc | (u64::from(libc::CPU_ISSET(w * 64 + b, &set)) << b)
                })
            })
            .collect()
    }
}

/// Number of CPUs in a mask.
pub fn count(mask: &[u64]) -> usize {
    mask.iter().map(|w| w.count_ones() as usize).sum()
}

/// Restricts the calling thread to `mask` until the guard is dropped, then restores its old
/// mask. Threads it starts meanwhile inherit `mask`. Does nothing when the kernel refuses.
pub struct Widened {
    old: Option<Vec<u64>>,
}

fn set(mask: &[u64]) -> bool {
    // SAFETY: as in `current`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for (w, &bits) in mask.iter().enumerate().take(WORDS) {
            for b in 0..64 {
                if bits >> b & 1 == 1 {
                    libc::CPU_SET(w * 64 + b, &mut set);
                }
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Lets the calling thread (and the threads it starts) run on `mask`.
pub fn widen(mask: &[u64]) -> Widened {
    let old = current();
    if count(mask) <= count(&old) || !set(mask) {
        return Widened { old: None };
    }
    Widened { old: Some(old) }
}

impl Drop for Widened {
    fn drop(&mut self) {
        if let Some(old) = &self.old {
            set(old);
        }
    }
}
