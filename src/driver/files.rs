//! The job's files: the paths judged before any input is parsed (two of them at one file, the
//! input itself, a directory, a read-only file), the stats file, the index's side files and the
//! BWT's primary index file created before the input is read, the SA, BWT and LCP outputs
//! created once n is known, `OUT.text`; and the end of the job: every file written and synced,
//! then all put in place together.

use std::path::{Path, PathBuf};

use super::index_files::{index_meta, is_special, IndexFiles};
use super::job::{Job, Run};
use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};
use crate::io::index::side_path;
use crate::io::output::{commit_all, Named};
use crate::io::seq::Record;
use crate::io::{OutputFile, SideFile};
use crate::Ctx;

/// The stats file, the index's side files and the BWT's primary index file, created before the
/// input is read.
pub(super) struct EarlyFiles {
    stats: Option<SideFile>,
    /// The index's side files: None without an SA output, or beside a device or FIFO.
    pub(super) side: Option<IndexFiles>,
    primary: Option<SideFile>,
}

impl EarlyFiles {
    /// Collective.
    pub(super) fn create(
        ctx: &Ctx,
        job: &Job,
        inputs: &[&Path],
        sequence: bool,
    ) -> Result<EarlyFiles> {
        let comm = &ctx.comm;
        let clash = match comm.rank() {
            0 => same_files(job, sequence),
            _ => None,
        };
        if comm.any(clash.is_some()) {
            return comm.agree(Err(Error::Usage(clash.unwrap_or_default())));
        }
        // The outputs' paths judged now, before any input is parsed (their files are made once
        // n is known): the input itself, a directory, a read-only file are refused at once.
        let outputs = [
            job.write_sa.then_some((&job.output, "output")),
            job.bwt.as_ref().map(|p| (p, "BWT output")),
            job.lcp.as_ref().map(|p| (p, "LCP output")),
        ];
        for (path, what) in outputs.into_iter().flatten() {
            let planned = match comm.rank() {
                0 => crate::io::output::plan(path, inputs, job.force, what, 0, Named::ByUser)
                    .map(|_| ()),
                _ => Ok(()),
            };
            comm.agree(planned)?;
        }
        let stats = match &job.stats {
            Some(p) => Some(SideFile::create(
                comm,
                p,
                inputs,
                job.force,
                "stats file",
                Named::ByUser,
            )?),
            None => None,
        };
        // `psa query` reads byte texts: a token text gets no index files (yet), nor does
        // infini-gram's table (its engine takes every file named *table* for one).
        // infini-gram's table gets no index files (its engine takes every file named *table*
        // for one).
        let side = match job.write_sa && !job.infini_gram {
            true => IndexFiles::create(
                comm,
                &job.output,
                inputs,
                job.force,
                sequence,
                job.doc_sep.is_some(),
            )?,
            false => None,
        };
        let primary = match &job.bwt {
            Some(bwt) if !is_special(comm, bwt) => Some(SideFile::create(
                comm,
                &side_path(bwt, ".primary"),
                inputs,
                job.force,
                "BWT primary index file",
                Named::Beside,
            )?),
            Some(bwt) => {
                if comm.rank() == 0 {
                    log::info!(
                        "the BWT output '{}' is not a regular file: its primary index goes to the log and --stats only",
                        bwt.display()
                    );
                }
                None
            }
            None => None,
        };
        Ok(EarlyFiles {
            stats,
            side,
            primary,
        })
    }
}

/// The files a job writes, by what messages call them: the SA (unless `--no-sa`) and the index
/// files beside it (T's own only for `sequence` input), `--stats`, the BWT and its primary index
/// file, the LCP array.
fn job_files(job: &Job, sequence: bool) -> Vec<(String, PathBuf, Named)> {
    let mut v = Vec::new();
    let mut add = |what: &str, p: PathBuf, named| v.push((what.to_string(), p, named));
    if job.write_sa {
        let out = &job.output;
        add("the output", out.clone(), Named::ByUser);
        add(
            "its records table",
            side_path(out, ".records.tsv"),
            Named::Beside,
        );
        add("its index file", side_path(out, ".meta"), Named::Beside);
        if sequence {
            add("its text file", side_path(out, ".text"), Named::Beside);
        }
        if job.doc_sep.is_some() {
            add("its document table", side_path(out, ".docs"), Named::Beside);
        }
    }
    if let Some(p) = &job.stats {
        add("--stats", p.clone(), Named::ByUser);
    }
    if let Some(p) = &job.bwt {
        add("--bwt", p.clone(), Named::ByUser);
        add(
            "--bwt's primary index file",
            side_path(p, ".primary"),
            Named::Beside,
        );
    }
    if let Some(p) = &job.lcp {
        add("--lcp", p.clone(), Named::ByUser);
    }
    v
}

/// Two of the job's files that end up at one file, as a message (local; pe 0 asks). The null
/// device may take several (each discarded); any other device or FIFO would carry them one
/// after another in one stream (a pe's stdout is a terminal device under mpirun).
fn same_files(job: &Job, sequence: bool) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let null = std::fs::metadata("/dev/null").ok().map(|m| m.rdev());
    let is_null = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device() && Some(m.rdev()) == null)
    };
    let files = job_files(job, sequence);
    for (i, (what_a, a, named_a)) in files.iter().enumerate() {
        if is_null(a) {
            continue;
        }
        for (what_b, b, named_b) in &files[i + 1..] {
            if crate::io::output::same_destination((a, *named_a), (b, *named_b)) {
                return Some(format!(
                    "{what_a} '{}' and {what_b} '{}' are the same file",
                    a.display(),
                    b.display()
                ));
            }
        }
    }
    None
}

/// Writes T beside the output (`OUT.text`), every pe its block; put in place by the caller
/// with [`OutputFile::commit`] once the SA is. Collective.
pub(super) fn write_text(
    comm: &Comm,
    out: &Path,
    inputs: &[&Path],
    force: bool,
    text: &[u8],
    layout: &Layout,
) -> Result<OutputFile> {
    let path = side_path(out, ".text");
    let shape = (layout.len(), 1);
    let file = OutputFile::create_named(
        comm,
        &path,
        inputs,
        force,
        shape,
        "text file",
        Named::Beside,
    )?;
    let me = comm.rank();
    comm.agree(
        file.write_part(layout.start(me), text)
            .and_then(|()| file.sync_local()),
    )?;
    Ok(file)
}

/// Every file of the job once n is known: the early ones, the outputs, `OUT.text` once T is
/// read.
pub(super) struct Files {
    /// The suffix array's output (None with `--no-sa`).
    pub(super) sa: Option<OutputFile>,
    /// `--bwt`'s output.
    pub(super) bwt: Option<OutputFile>,
    /// `--lcp`'s output.
    pub(super) lcp: Option<OutputFile>,
    /// `OUT.text` (sequence input with an index), written by the read step.
    pub(super) text: Option<OutputFile>,
    /// `OUT.docs` (`--doc-sep` with an index), written at the end of the read step.
    pub(super) docs: Option<OutputFile>,
    /// `--stats`.
    pub(super) stats: Option<SideFile>,
    /// The index's side files.
    pub(super) side: Option<IndexFiles>,
    /// The BWT's primary index file.
    primary: Option<SideFile>,
}

impl Files {
    /// Step 1's end: the SA, BWT and LCP outputs created for n characters (their space reserved,
    /// every pe opening its temporary file) beside the early files. Collective.
    pub(super) fn create(ctx: &Ctx, run: &Run<'_>, early: EarlyFiles) -> Result<Files> {
        let (comm, job, inputs, n) = (&ctx.comm, run.job, run.inputs, run.n);
        let sa = match job.write_sa {
            true => Some(
                OutputFile::create(comm, &job.output, inputs, job.force, n, run.width)?
                    .with_scale(job.entry_scale()),
            ),
            false => None,
        };
        let named = |p: &PathBuf, width: usize, what: &str| {
            OutputFile::create_named(comm, p, inputs, job.force, (n, width), what, Named::ByUser)
        };
        let bwt = job
            .bwt
            .as_ref()
            .map(|p| named(p, job.token_width.bytes(), "BWT output"))
            .transpose()?;
        let lcp = (job.lcp.as_ref())
            .map(|p| named(p, run.width, "LCP output"))
            .transpose()?;
        let EarlyFiles {
            stats,
            side,
            primary,
        } = early;
        Ok(Files {
            sa,
            bwt,
            lcp,
            text: None,
            docs: None,
            stats,
            side,
            primary,
        })
    }

    /// Writes the BWT's primary index, makes every output durable, then writes the index's side
    /// files with the stamps of the synced SA and `OUT.text`. Collective.
    pub(super) fn write_and_sync(
        &mut self,
        comm: &Comm,
        run: &Run<'_>,
        records: &[Record],
        bwt_primary: Option<u64>,
    ) -> Result<()> {
        self.primary = match (self.primary.take(), bwt_primary) {
            (Some(mut f), Some(p)) => {
                f.write(comm, format!("{p}\n").as_bytes())?;
                Some(f)
            }
            _ => None,
        };
        for f in [&self.sa, &self.bwt, &self.lcp, &self.text, &self.docs]
            .into_iter()
            .flatten()
        {
            f.sync(comm)?;
        }
        if let Some(side) = &mut self.side {
            let (job, n, width, sequence) = (run.job, run.n, run.width, run.sequence);
            let meta = index_meta(comm, run.files, job, n, width, sequence, records);
            // Taken now that every pe has written and synced: the renames keep them.
            let stamp = |f: Option<&OutputFile>| f.map_or(Ok(None), |f| f.stamp());
            let stamps = comm.agree((|| {
                let sa = stamp(self.sa.as_ref())?;
                Ok((sa, stamp(self.text.as_ref())?, stamp(self.docs.as_ref())?))
            })())?;
            side.write(comm, records, meta, stamps)?;
        }
        Ok(())
    }

    /// Puts every file in place together, or none; the index's metadata last. Warns, once they
    /// are, of the old `OUT.text` a raw index leaves unused. Collective.
    pub(super) fn commit(self, comm: &Comm) -> Result<()> {
        let mut staged: Vec<_> = [self.sa, self.bwt, self.lcp, self.text, self.docs]
            .into_iter()
            .map(|f| f.and_then(OutputFile::into_staged))
            .collect();
        staged.extend([self.primary, self.stats].map(|f| f.and_then(SideFile::into_staged)));
        let stale_text = self.side.and_then(|s| s.into_staged(&mut staged));
        commit_all(comm, staged)?;
        if let Some(text) = stale_text {
            log::warn!(
                "'{}', the text of the sequence index this raw one replaced, is not used by the new index: remove it if nothing else reads it",
                text.display()
            );
        }
        Ok(())
    }
}
