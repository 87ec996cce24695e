//! libsais on pe 0 with every CPU of its node, as the backend of the relay
//! (`algo::offload::relay`): the pes stream their slices of a byte text to pe 0, which builds
//! the whole suffix array with libsais' OpenMP driver while the other pes wait asleep, then
//! writes it or streams each pe its part back. On one node this is the fastest way there is
//! (the distributed algorithms' all-to-alls between pes of one node cost more than they save);
//! it holds the whole text and a 32-bit suffix array on pe 0 (5 bytes per character), so the
//! memory plan takes it only where pe 0's budget holds that (`plan::relay_bytes`).

use libsais::{SuffixArrayConstruction, ThreadCount};
use rayon::prelude::*;

use super::{Alphabet, DeviceSuffixArray, PooledSa};

/// The longest text it takes: libsais' 32-bit suffix array holds positions below 2^31 − 1.
pub const MAX_LEN: usize = i32::MAX as usize - 1;

/// libsais with the CPUs `cpus` (a mask, see `crate::affinity`), at least `threads` threads.
pub struct HostSuffixArray {
    cpus: Vec<u64>,
    threads: usize,
}

impl HostSuffixArray {
    /// The backend for pe 0 of a node whose pes may run on `cpus` together.
    pub fn new(cpus: &[u64], threads: usize) -> HostSuffixArray {
        HostSuffixArray {
            cpus: cpus.to_vec(),
            threads,
        }
    }
}

impl DeviceSuffixArray for HostSuffixArray {
    fn suffix_array_max_len(&self) -> usize {
        MAX_LEN
    }

    /// A byte text of at most [`MAX_LEN`] characters; None for integers (the relay of the CPU
    /// takes whole byte texts only: recursion levels stay with the algorithms' own base cases).
    fn pooled_sa(&self, n: usize, alphabet: &Alphabet) -> Option<Box<dyn PooledSa + '_>> {
        match alphabet {
            Alphabet::Bytes(_) if n <= MAX_LEN => Some(Box::new(HostPooled {
                owner: self,
                n,
                text: Vec::with_capacity(n),
                sa: Vec::new(),
            })),
            _ => None,
        }
    }
}

/// One text on its way through libsais: its bytes as they come, then its suffix array.
struct HostPooled<'a> {
    owner: &'a HostSuffixArray,
    n: usize,
    text: Vec<u8>,
    sa: Vec<i32>,
}

impl PooledSa for HostPooled<'_> {
    fn upload(&mut self, piece: &[u8]) -> Result<(), String> {
        if self.text.len() + piece.len() > self.n {
            return Err(format!(
                "internal: more than the {} characters announced",
                self.n
            ));
        }
        self.text.extend_from_slice(piece);
        Ok(())
    }

    /// libsais' OpenMP driver on the node's CPUs (pe 0's thread may run on all of them while
    /// the build lasts); the text is freed once its suffix array is made.
    fn build(&mut self) -> Result<(), String> {
        if self.text.len() != self.n {
            return Err(format!(
                "internal: {} of {} characters arrived",
                self.text.len(),
                self.n
            ));
        }
        let _wide = crate::affinity::widen(&self.owner.cpus);
        let threads = crate::affinity::count(&self.owner.cpus).max(self.owner.threads);
        let text = std::mem::take(&mut self.text);
        if text.is_empty() {
            return Ok(());
        }
        let t0 = std::time::Instant::now();
        let c = SuffixArrayConstruction::for_text(&text).in_owned_buffer32();
        let built = match threads {
            1 => c.single_threaded().run(),
            t => c
                .multi_threaded(ThreadCount::fixed(t.min(u16::MAX as usize) as u16))
                .run(),
        };
        self.sa = built
            .map_err(|e| format!("libsais failed: {e:?}"))?
            .into_vec();
        log::debug!(
            "libsais on {} characters with {threads} threads: {:.3} s",
            self.n,
            t0.elapsed().as_secs_f64()
        );
        Ok(())
    }

    fn whole(&self) -> Option<&[u32]> {
        Some(bytemuck::cast_slice(&self.sa))
    }

    fn download(&mut self, offset: usize, out: &mut [u32]) -> Result<(), String> {
        let part = (self.sa.get(offset..offset + out.len()))
            .ok_or_else(|| format!("internal: SA[{offset}..] past its {}", self.sa.len()))?;
        // On the caller's pool (the relay writes with the node's CPUs).
        out.par_chunks_mut(1 << 16)
            .zip(part.par_chunks(1 << 16))
            .for_each(|(o, p)| o.copy_from_slice(bytemuck::cast_slice(p)));
        Ok(())
    }
}
