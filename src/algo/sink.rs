//! Where a finished suffix array goes and where it is read back from.
//!
//! [`SaSink`]: level 0 of a distributed algorithm either hands each pe its part back (held, in
//! the input's layout) or writes every entry into the positional output file as soon as it is
//! final — a merge round's part at its SA index, pCSS' placed part at its offset — and keeps
//! nothing. A recursion level hands its entries the same way to the level above, which turns
//! them into its samples' ranks at once (no level holds a recursion's suffix array). [`SaSource`]: the checker and the BWT read a finished suffix array piece by piece,
//! from memory or from that file.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Mutex;

use rayon::prelude::*;

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};
use crate::io::OutputFile;
use crate::Ctx;

/// Where a level's suffix array goes: held by the pes, written into the output file (level 0),
/// or handed to the level above (a recursion).
pub(crate) struct SaSink<'a> {
    to: Target<'a>,
    /// The first error writing the file on this pe (later writes are skipped); agreed on by
    /// [`SaSink::finish`].
    failed: Mutex<Option<Error>>,
}

impl<'a> SaSink<'a> {
    /// Every pe keeps its part (in the input's layout) and gets it back.
    pub(crate) fn hold() -> Self {
        Self::new(Target::Hold)
    }

    fn new(to: Target<'a>) -> Self {
        SaSink {
            to,
            failed: Mutex::new(None),
        }
    }

    /// Every pe writes its entries into `out` (a positional output: [`OutputFile::is_positional`])
    /// as they become final and keeps none.
    pub(crate) fn to_file(out: &'a OutputFile) -> Self {
        debug_assert!(out.is_positional());
        Self::new(Target::File(out))
    }

    /// Every pe hands its entries to `hand` as they become final (`hand(first, entries)`:
    /// entries `first..first + entries.len()` of the suffix array) and keeps none. `hand` may be
    /// collective: every pe calls it at the same points, possibly with nothing.
    pub(crate) fn to_hand(hand: &'a Hand<'a>) -> Self {
        Self::new(Target::Hand(hand))
    }

    /// The file entries are written to (None: held or handed on).
    pub(crate) fn file(&self) -> Option<&'a OutputFile> {
        match self.to {
            Target::File(out) => Some(out),
            _ => None,
        }
    }

    /// Whether entries go on as they become final (to the file or the level above), not held.
    pub(crate) fn writes(&self) -> bool {
        !matches!(self.to, Target::Hold)
    }

    /// Passes entries `first..first + sa.len()` of the suffix array on: into the file (the
    /// phase "write"; local) or to the level above (collective). Every pe calls it at the same
    /// points (possibly with nothing). A file error is kept for [`SaSink::finish`]; writes after
    /// it are skipped. Only when [`Self::writes`].
    pub(crate) fn write(&self, ctx: &Ctx, first: u64, sa: &[u64]) {
        let out = match self.to {
            Target::Hold => return,
            Target::Hand(hand) => return hand(first, sa),
            Target::File(out) => out,
        };
        self.write_file(ctx, out, first, sa);
    }

    /// Writes entries `first..first + sa.len()` of the suffix array, held in an index type of 4
    /// or 5 bytes (as pCSS places them), into the output file (the phase "write"; local).
    /// Only for a sink into a file ([`Self::file`]).
    pub(crate) fn write_narrow<E: bytemuck::Pod + Into<u64> + Sync>(
        &self,
        ctx: &Ctx,
        first: u64,
        sa: &[E],
    ) {
        let Target::File(out) = self.to else {
            unreachable!("write_narrow on a sink that is not a file")
        };
        self.write_file(ctx, out, first, sa);
    }

    /// Writes entries `first..first + sa.len()` into `out` (the phase "write"; local), keeping
    /// the first error.
    fn write_file<E: bytemuck::Pod + Into<u64> + Sync>(
        &self,
        ctx: &Ctx,
        out: &OutputFile,
        first: u64,
        sa: &[E],
    ) {
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

    /// [`Self::deliver_layout`] of entries held in a narrower index type (4 or 5 bytes, as pCSS
    /// places them): written into the file as they are, else widened (held or handed on).
    #[must_use]
    pub(crate) fn deliver_layout_of<E: bytemuck::Pod + Into<u64> + Send + Sync>(
        &self,
        ctx: &Ctx,
        sa: Vec<E>,
        layout: &Layout,
    ) -> Option<Vec<u64>> {
        if let Target::File(out) = self.to {
            self.write_file(ctx, out, layout.start(ctx.comm.rank()) as u64, &sa);
            return None;
        }
        let wide: Vec<u64> = sa.par_iter().map(|&x| x.into()).collect();
        drop(sa);
        self.deliver_layout(ctx, wide, layout)
    }

    /// Ends the writing: what this pe wrote made durable, and an error on any pe an error on
    /// all. Collective.
    pub(crate) fn finish(self, comm: &Comm) -> Result<()> {
        let file = self.file();
        let failed = self.failed.into_inner().unwrap_or_else(|e| e.into_inner());
        let r = match (failed, file) {
            (Some(e), _) => Err(e),
            (None, Some(out)) => out.sync_local(),
            (None, None) => Ok(()),
        };
        comm.agree(r)
    }
}

/// What a recursion level hands its finished entries to: `hand(first, entries)`.
pub(crate) type Hand<'a> = dyn Fn(u64, &[u64]) + 'a;

/// Where a [`SaSink`] sends its entries.
enum Target<'a> {
    /// Nowhere: every pe keeps its part.
    Hold,
    /// Into this positional output file.
    File(&'a OutputFile),
    /// To the level above.
    Hand(&'a Hand<'a>),
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
