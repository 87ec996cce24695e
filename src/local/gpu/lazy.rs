//! [`LazyGpu`]: a GPU backend that opens its device only when first used.

use std::sync::OnceLock;

use super::state::GpuSort;
use crate::config::GpuOptions;
use crate::local::cpu::CpuSort;
use crate::local::{Alphabet, DeviceSuffixArray, HostMem, LocalSort, PooledSa};

/// A GPU backend whose device is opened at its first use (after [`GpuSort::probe`] checked that
/// it can be). With --gpu at p > 1 a text that fits pe 0's device never needs the others' devices
/// (`algo::offload::relay`); opening them anyway costs each pe a CUDA context (~0.3 s, ~280 MB of host
/// memory). If the opening fails after all, this pe sorts on the CPU, with a warning.
pub struct LazyGpu {
    rank: usize,
    threads: usize,
    opts: GpuOptions,
    cpu: CpuSort,
    gpu: OnceLock<Option<GpuSort>>,
}

impl LazyGpu {
    /// A backend for pe `rank`, whose device `probe` has accepted, with `threads` CPU threads and
    /// the settings `opts` (see [`GpuSort::open`]).
    pub fn new(rank: usize, threads: usize, opts: GpuOptions) -> LazyGpu {
        LazyGpu {
            rank,
            threads,
            opts,
            cpu: CpuSort::new(threads),
            gpu: OnceLock::new(),
        }
    }

    fn gpu(&self) -> Option<&GpuSort> {
        self.gpu
            .get_or_init(
                || match GpuSort::open(self.rank, self.threads, self.opts.clone()) {
                    Ok(g) => Some(g),
                    Err(e) => {
                        let e = crate::Error::from(e);
                        log::warn!("[pe {}] {e}; this pe sorts on the CPU", self.rank);
                        None
                    }
                },
            )
            .as_ref()
    }
}

impl LocalSort for LazyGpu {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn threads(&self) -> usize {
        self.threads.max(1)
    }

    fn sort_u64(&self, v: &mut [u64]) {
        match self.gpu() {
            Some(g) => g.sort_u64(v),
            None => self.cpu.sort_u64(v),
        }
    }

    fn sort_u128(&self, v: &mut [u128]) {
        match self.gpu() {
            Some(g) => g.sort_u128(v),
            None => self.cpu.sort_u128(v),
        }
    }

    fn sort_u128_by_high(&self, v: &mut [u128]) {
        match self.gpu() {
            Some(g) => g.sort_u128_by_high(v),
            None => self.cpu.sort_u128_by_high(v),
        }
    }

    /// On the CPU: the device sorts 64- and 128-bit keys only.
    fn sort_u192_by_high(&self, v: &mut [[u64; 3]]) {
        self.cpu.sort_u192_by_high(v);
    }

    fn host_mem(&self, bytes: usize) -> Option<Box<dyn HostMem>> {
        self.gpu()?.host_mem(bytes)
    }

    /// Always this backend: asking does not open the device, building a suffix array does.
    fn device_suffix_array(&self) -> Option<&dyn DeviceSuffixArray> {
        Some(self)
    }
}

impl DeviceSuffixArray for LazyGpu {
    fn suffix_array_bytes(&self, text: &[u8]) -> Option<Vec<u64>> {
        self.gpu()?.suffix_array_bytes(text)
    }

    fn suffix_array_ints(&self, text: &[u32]) -> Option<Vec<u64>> {
        self.gpu()?.suffix_array_ints(text)
    }

    fn pooled_sa(&self, n: usize, alphabet: &Alphabet) -> Option<Box<dyn PooledSa + '_>> {
        self.gpu()?.pooled_sa(n, alphabet)
    }

    fn suffix_array_max_len(&self) -> usize {
        self.gpu().map_or(0, |g| g.suffix_array_max_len())
    }
}
