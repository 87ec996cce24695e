//! Where a finished suffix array goes and where it is read back from.
//!
//! [`SaSink`]: level 0 of a distributed algorithm either hands each pe its part back (held, in
//! the input's layout) or writes every entry into the positional output file as soon as it is
//! final — a merge round's part at its SA index, pCSS' placed part at its offset — and keeps
//! nothing. [`SaSource`]: the checker and the BWT read a finished suffix array piece by piece,
//! from memory or from that file.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Mutex;

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};
use crate::io::OutputFile;
use crate::Ctx;

/// Where level 0's suffix array goes. Passed down only to level 0; deeper levels return their
/// parts as before.
pub(crate) struct SaSink<'a> {
    /// None: held (returned to the caller). Some: written into this positional file.
    file: Option<&'a OutputFile>,
    /// The first error writing the file on this pe (later writes are skipped); agreed on by
    /// [`SaSink::finish`].
    failed: Mutex<Option<Error>>,
}

impl<'a> SaSink<'a> {
    /// Every pe keeps its part (in the input's layout) and gets it back.
    pub(crate) fn hold() -> Self {
        SaSink {
            file: None,
            failed: Mutex::new(None),
        }
    }

    /// Every pe writes its entries into `out` (a positional output: [`OutputFile::is_positional`])
    /// as they become final and keeps none.
    pub(crate) fn to_file(out: &'a OutputFile) -> Self {
        debug_assert!(out.is_positional());
        SaSink {
            file: Some(out),
            failed: Mutex::new(None),
        }
    }

    /// The file entries are written to (None: held).
    pub(crate) fn file(&self) -> Option<&'a OutputFile> {
        self.file
    }

    /// Whether entries are written to the file (not held).
    pub(crate) fn writes(&self) -> bool {
        self.file.is_some()
    }

    /// Writes entries `first..first + sa.len()` of the suffix array into the file (the phase
    /// "write"): local, every pe calls it at the same points (possibly with nothing). An error
    /// is kept for [`SaSink::finish`]; writes after it are skipped. Only when [`Self::writes`].
    pub(crate) fn write(&self, ctx: &Ctx, first: u64, sa: &[u64]) {
        let Some(out) = self.file else {
            return;
        };
        ctx.phase("write", || {
            let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
            if failed.is_none() && !sa.is_empty() {
                if let Err(e) = out.write_part(first as usize, sa) {
                    *failed = Some(e);
                }
            }
        });
    }

    /// Level 0's result in the input's `layout` (this pe's part): held and returned, or written
    /// at its offset and freed (None). Collective (local when written).
    #[must_use]
    pub(crate) fn deliver_layout(
        &self,
        ctx: &Ctx,
        sa: Vec<u64>,
        layout: &Layout,
    ) -> Option<Vec<u64>> {
        if !self.writes() {
            return Some(sa);
        }
        self.write(ctx, layout.start(ctx.comm.rank()) as u64, &sa);
        None
    }

    /// Ends the writing: what this pe wrote made durable, and an error on any pe an error on
    /// all. Collective.
    pub(crate) fn finish(self, comm: &Comm) -> Result<()> {
        let failed = self.failed.into_inner().unwrap_or_else(|e| e.into_inner());
        let r = match (failed, self.file) {
            (Some(e), _) => Err(e),
            (None, Some(out)) => out.sync_local(),
            (None, None) => Ok(()),
        };
        comm.agree(r)
    }
}

/// Where this pe's part of a finished suffix array (its block of the layout) is read from.
#[derive(Clone, Copy)]
pub enum SaSource<'a> {
    /// Held in memory: this pe's entries.
    Held(&'a [u64]),
    /// In the positional output file the build wrote, read back in pieces
    /// ([`OutputFile::read_part`]).
    File(&'a OutputFile),
}

impl<'a> From<&'a [u64]> for SaSource<'a> {
    fn from(sa: &'a [u64]) -> Self {
        SaSource::Held(sa)
    }
}

impl<'a> From<&'a Vec<u64>> for SaSource<'a> {
    fn from(sa: &'a Vec<u64>) -> Self {
        SaSource::Held(sa)
    }
}

impl<'a> From<&'a OutputFile> for SaSource<'a> {
    fn from(out: &'a OutputFile) -> Self {
        SaSource::File(out)
    }
}

impl SaSource<'_> {
    /// How many entries this pe has: the slice's length, or its block `len` of the file.
    pub(crate) fn len(&self, block: usize) -> usize {
        match self {
            SaSource::Held(sa) => sa.len(),
            SaSource::File(_) => block,
        }
    }

    /// Entries `range` of this pe's part, whose first entry is the suffix array's entry `lo`:
    /// borrowed when held, read from the file otherwise. Local.
    pub(crate) fn piece(&self, lo: usize, range: Range<usize>) -> Result<Cow<'_, [u64]>> {
        match self {
            SaSource::Held(sa) => Ok(Cow::Borrowed(&sa[range])),
            SaSource::File(out) => out.read_part(lo + range.start, range.len()).map(Cow::Owned),
        }
    }
}
