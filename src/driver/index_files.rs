//! The index's side files beside the SA (`OUT.records.tsv`, `OUT.meta`): planned and created
//! before the input is read, refused where psa did not write the files they replace (unless
//! `--force`), and written by pe 0 at the end with the build's stamps; the metadata they hold.

use std::path::{Path, PathBuf};

use super::job::{Job, Run};
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::io::index::{
    side_path, BuildStamps, FileStamp, IndexMeta, InputMeta, RecordMeta, Side, VERSION,
};
use crate::io::output::{random_tag, Named, Staged};
use crate::io::seq::{InputFile, Record, Scanned};
use crate::io::SideFile;

/// The index's side files (`OUT.records.tsv`, `OUT.meta`), planned and created before the
/// input is read (pe 0 writes them at the end). None when the output is a device or FIFO.
pub(super) struct IndexFiles {
    records: SideFile,
    meta: SideFile,
    /// `OUT.text` of the sequence index a raw one replaces (its `OUT.meta` says so), when it is a
    /// regular file and none of the inputs: the new index does not read it, which is said once
    /// it is in place (it is left alone: something else may read it). Pe 0's.
    stale_text: Option<PathBuf>,
}

impl IndexFiles {
    /// Collective.
    pub(super) fn create(
        comm: &Comm,
        out: &Path,
        inputs: &[&Path],
        force: bool,
        sequence: bool,
        docs: bool,
    ) -> Result<Option<IndexFiles>> {
        if is_special(comm, out) {
            if comm.rank() == 0 {
                log::info!(
                    "the output '{}' is not a regular file: no index files are written beside it",
                    out.display()
                );
            }
            return Ok(None);
        }
        let name_len = out.file_name().map_or(0, |n| n.len());
        if name_len + ".records.tsv".len() > 255 {
            if comm.rank() == 0 {
                log::warn!(
                    "the output's name is too long for the index files beside it (OUT.records.tsv, OUT.meta): none are written, and psa query cannot use this output"
                );
            }
            return Ok(None);
        }
        // T's file and the document table are made once T is read; their paths are checked
        // now.
        let later = [
            (sequence, ".text", "text file"),
            (docs, ".docs", "document table"),
        ];
        for (_, suffix, what) in later.into_iter().filter(|l| l.0) {
            let path = side_path(out, suffix);
            let planned = match comm.rank() {
                0 => crate::io::output::plan(&path, inputs, force, what, 0, Named::Beside)
                    .map(|_| ()),
                _ => Ok(()),
            };
            comm.agree(planned)?;
        }
        let records = SideFile::create(
            comm,
            &side_path(out, ".records.tsv"),
            inputs,
            force,
            "records table",
            Named::Beside,
        )?;
        let stale_text = (comm.rank() == 0 && !sequence)
            .then(|| stale_text(out, inputs))
            .flatten();
        let meta = SideFile::create(
            comm,
            &side_path(out, ".meta"),
            inputs,
            force,
            "index file",
            Named::Beside,
        )?;
        // Files beside it that psa did not write are kept, unless --force (after the checks
        // of each path above, which name a link or file of another user as such).
        let foreign = match (comm.rank(), force) {
            (0, false) => foreign_side_file(out, sequence, docs),
            _ => None,
        };
        comm.agree(foreign.map_or(Ok(()), |m| Err(Error::Usage(m))))?;
        Ok(Some(IndexFiles {
            records,
            meta,
            stale_text,
        }))
    }

    /// Writes the records table and the metadata (pe 0's), not yet in place, the metadata with
    /// the build's stamps: a fresh build id, the stamps of the SA, `OUT.text` and `OUT.docs`
    /// (pe 0's `stamps`) and the records table's size. Collective.
    pub(super) fn write(
        &mut self,
        comm: &Comm,
        records: &[Record],
        meta: Option<IndexMeta>,
        (sa, text, docs): Stamps,
    ) -> Result<()> {
        // The table is freed before the metadata is encoded (the plan counts one of them).
        let table = IndexMeta::records_tsv(records);
        self.records.write(comm, &table)?;
        let records_size = table.len() as u64;
        drop(table);
        let bytes = meta.map_or_else(Vec::new, |mut m| {
            m.stamps = sa.map(|sa| BuildStamps {
                build: random_tag(),
                sa,
                text,
                records_size,
                docs,
            });
            m.encode()
        });
        self.meta.write(comm, &bytes)
    }

    /// Reserves the room the records table and the metadata will take (pe 0's `sizes`,
    /// [`side_bytes`]), so that a full file system shows before the build. Collective.
    pub(super) fn reserve(&self, comm: &Comm, (table, meta): (u64, u64)) -> Result<()> {
        self.records.reserve(comm, table)?;
        self.meta.reserve(comm, meta)
    }

    /// Adds the records table and then the metadata to the files a job puts in place; returns
    /// the stale text to warn of once they are.
    pub(super) fn into_staged(self, staged: &mut Vec<Option<Staged>>) -> Option<PathBuf> {
        staged.push(self.records.into_staged());
        staged.push(self.meta.into_staged());
        self.stale_text
    }
}

/// The stamps of the synced SA, `OUT.text` and `OUT.docs`, where written.
pub(super) type Stamps = (Option<FileStamp>, Option<FileStamp>, Option<FileStamp>);

/// `OUT.text` beside `out` when it is a regular file, none of the `inputs`, and the `OUT.meta`
/// beside it is a sequence index's: a raw build leaves it unused (local; pe 0 asks).
fn stale_text(out: &Path, inputs: &[&Path]) -> Option<PathBuf> {
    let text = side_path(out, ".text");
    let m = std::fs::symlink_metadata(&text).ok()?;
    let is_input =
        |i: &&Path| std::fs::metadata(i).is_ok_and(|im| crate::io::output::same_file(&m, &im));
    let stale = m.is_file()
        && !inputs.iter().any(is_input)
        && IndexMeta::read(&side_path(out, ".meta")).is_ok_and(|m| m.sequence);
    stale.then_some(text)
}

/// Whether `path` is a character device or FIFO (written through: no side files beside it).
/// Collective (pe 0 looks).
pub(super) fn is_special(comm: &Comm, path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let special = comm.rank() == 0
        && std::fs::metadata(path).is_ok_and(|m| {
            let t = m.file_type();
            t.is_char_device() || t.is_fifo()
        });
    comm.any(special)
}

/// The first file beside `out` that a build would replace but psa did not write, as a message
/// (local; pe 0 asks): an `OUT.meta` that is not a psa index file (no magic), or an
/// `OUT.records.tsv` or (`sequence` input) `OUT.text` that the `OUT.meta` beside it does not
/// describe ([`IndexMeta::wrote`]: its stamps, or an older index's sizes), or that has none
/// beside it. A file that does not exist passes, and so does one beside a damaged psa index
/// (the magic, but no index: rebuilding is the remedy for the damage), and anything but a
/// regular file (which is written through or refused as such).
fn foreign_side_file(out: &Path, sequence: bool, docs: bool) -> Option<String> {
    use std::io::Read;
    let existing = |p: &Path| std::fs::metadata(p).ok().filter(|m| m.is_file());
    let meta_path = side_path(out, ".meta");
    let has_magic = existing(&meta_path).map(|_| {
        let mut head = [0u8; 8];
        let read = std::fs::File::open(&meta_path).and_then(|mut f| f.read_exact(&mut head));
        read.is_ok() && head == *crate::io::index::MAGIC
    });
    let refuse = |p: &Path, what: &str, why: String| {
        Some(format!(
            "{what} '{}' exists and {why}: refusing to replace it; remove it, choose another output (-o), or pass --force to replace it",
            p.display()
        ))
    };
    if has_magic == Some(false) {
        return refuse(
            &meta_path,
            "the index file",
            "is not a psa index file".into(),
        );
    }
    let meta = has_magic.and_then(|_| IndexMeta::read(&meta_path).ok());
    let sides = [
        (Side::Records, ".records.tsv", "the records table", true),
        (Side::Text, ".text", "the text file", sequence),
        (Side::Docs, ".docs", "the document table", docs),
    ];
    for (side, suffix, what, written) in sides {
        let path = side_path(out, suffix);
        let Some(m) = existing(&path).filter(|_| written) else {
            continue;
        };
        let shown = meta_path.display();
        let why = match (&meta, has_magic) {
            (Some(meta), _) if meta.wrote(side, &m) => continue,
            (Some(_), _) => format!("is not the one of the psa index '{shown}' beside it"),
            // psa's index, damaged: its files are taken as psa's (rebuilding is the remedy
            // `psa query` gives for the damage).
            (None, Some(true)) => continue,
            _ => format!("is not psa's (there is no psa index '{shown}' beside it)"),
        };
        return refuse(&path, what, why);
    }
    None
}

/// Warns when records share a name (paired reads, one file given twice): `psa query --locate`
/// names their hits alike. Local; by 64-bit hashes of the names, sorted (16 bytes a record).
fn warn_repeated_names(records: &[Record]) {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let hasher = BuildHasherDefault::<DefaultHasher>::default();
    let mut keyed: Vec<(u64, usize)> = (records.iter().enumerate())
        .map(|(k, r)| (hasher.hash_one(&r.name), k))
        .collect();
    keyed.sort_unstable();
    let repeated: Vec<usize> = (keyed.windows(2))
        .filter(|w| w[0].0 == w[1].0 && records[w[0].1].name == records[w[1].1].name)
        .map(|w| w[0].1.max(w[1].1))
        .collect();
    if let Some(&first) = repeated.iter().min() {
        log::warn!(
            "{} record(s) have the name of an earlier one (the first: '{}', record {}): psa query --locate names their hits alike (its --json output's text_offset tells them apart)",
            repeated.len(),
            String::from_utf8_lossy(&records[first].name),
            first + 1
        );
    }
}

/// The bytes the records table and the metadata of a job will take (pe 0's; (0, 0)
/// elsewhere): the table's exactly, the metadata's at most (its stamps counted at their
/// largest). The records are the scan's (`scanned`, with their reverse complements' twins), or
/// for raw input one a file, named by its path. Local; pe 0 holds what they need.
pub(super) fn side_bytes(comm: &Comm, run: &Run<'_>, scanned: Option<&Scanned<'_>>) -> (u64, u64) {
    use std::os::unix::ffi::OsStrExt;
    let Some(meta) = index_meta(
        comm,
        run.files,
        run.job,
        run.n,
        run.width,
        run.sequence,
        &[],
    ) else {
        return (0, 0);
    };
    let token = run.job.token_width.bytes() as u64;
    let raw = || {
        (run.files.iter()).scan(0u64, move |at, f| {
            let len = f.size / token;
            *at += len;
            Some((f.path.as_os_str().as_bytes(), false, *at - len, len))
        })
    };
    match scanned {
        Some(s) => (
            IndexMeta::records_tsv_len_of(s.rows()),
            meta.encoded_len_with(s.rows()),
        ),
        None => (
            IndexMeta::records_tsv_len_of(raw()),
            meta.encoded_len_with(raw()),
        ),
    }
}

/// The index metadata (pe 0; None elsewhere), without its stamps ([`IndexFiles::write`] adds
/// them).
pub(super) fn index_meta(
    comm: &Comm,
    files: &[InputFile],
    job: &Job,
    n: usize,
    width: usize,
    sequence: bool,
    records: &[Record],
) -> Option<IndexMeta> {
    if comm.rank() != 0 {
        return None;
    }
    // With --revcomp the second half of the records are the first half's twins.
    let forward = match job.seq.revcomp {
        true => &records[..records.len() / 2],
        false => records,
    };
    warn_repeated_names(forward);
    use std::os::unix::ffi::OsStrExt;
    let inputs = files
        .iter()
        .map(|f| InputMeta {
            given: f.path.display().to_string(),
            absolute: std::fs::canonicalize(&f.path)
                .unwrap_or_else(|_| f.path.clone())
                .as_os_str()
                .as_bytes()
                .to_vec(),
            size: f.size,
            modified: f.modified,
            format: f.format.name().into(),
            gzip: f.gzip,
        })
        .collect();
    Some(IndexMeta {
        version: VERSION,
        n: n as u64,
        width: width as u32,
        sequence,
        keep_case: job.seq.keep_case,
        revcomp: job.seq.revcomp,
        inputs,
        records: records
            .iter()
            .map(|r| RecordMeta {
                name: r.name.clone(),
                start: r.start,
                len: r.len,
            })
            .collect(),
        stamps: None,
        token_width: match job.token_ids {
            true => job.token_width.bytes() as u32,
            false => 0,
        },
        doc_sep: job.doc_sep,
    })
}
