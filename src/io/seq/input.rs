//! The inputs as a run sees them and what they become: each file's [`Format`] (by `--format`,
//! else by its name), gzip or not, size and modification time ([`InputFile`], agreed by every
//! pe), the options that turn them into T ([`SeqOptions`]), T's records ([`Record`]) and each
//! pe's part of T once placed ([`Loaded`]).

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};

/// The kind of an input file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Any bytes, indexed as they are.
    Raw,
    /// FASTA: `>name description` lines, each followed by sequence lines.
    Fasta,
    /// FASTQ: records of four lines (`@name`, sequence, `+`, qualities).
    Fastq,
}

impl Format {
    /// The name used on the command line and in the index: "raw", "fasta" or "fastq".
    pub fn name(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Fasta => "fasta",
            Format::Fastq => "fastq",
        }
    }

    /// The format its name implies: `.fa .fasta .fna .ffn .faa .fas` are FASTA, `.fq .fastq`
    /// FASTQ, each optionally followed by `.gz`; anything else is raw.
    pub fn from_name(path: &Path) -> Format {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        match ext {
            "fa" | "fasta" | "fna" | "ffn" | "faa" | "fas" => Format::Fasta,
            "fq" | "fastq" => Format::Fastq,
            _ => Format::Raw,
        }
    }
}

/// How the inputs become T.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeqOptions {
    /// Every input's format; None: each file's from its name ([`Format::from_name`]).
    pub format: Option<Format>,
    /// Keep the case of sequence letters (default: upper-case them).
    pub keep_case: bool,
    /// Append the reverse complement of the records (sequence input only).
    pub revcomp: bool,
}

/// One input file as the run sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputFile {
    /// The path as given.
    pub path: PathBuf,
    /// Its format (by `--format`, else by its name).
    pub format: Format,
    /// gzip-compressed (found by its first two bytes; only sequence files are decompressed).
    pub gzip: bool,
    /// Bytes on disk.
    pub size: u64,
    /// Its modification time when opened ([`crate::io::modified_time`]), kept in the
    /// index: a raw input edited in place later keeps its size, not its time.
    pub modified: Option<crate::io::Mtime>,
}

/// One record of T: a FASTA/FASTQ record or a raw file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The first word of the header, its bytes as they are, UTF-8 or not (for a raw file, its
    /// path as given; a reverse complement's name ends in `/rc`).
    pub name: Vec<u8>,
    /// Offset of its first character in T.
    pub start: u64,
    /// Characters (the `$` after it not counted).
    pub len: u64,
}

/// T's parts on every pe and what pe 0 knows about them.
pub struct Loaded {
    /// This pe's part of T (`layout`'s block).
    pub text: Vec<u8>,
    /// The block layout of T over the pes.
    pub layout: Layout,
    /// Every record in T order (pe 0; empty elsewhere).
    pub records: Vec<Record>,
}

impl InputFile {
    /// Looks at `path` (its size and first bytes) and decides its format. Local.
    pub fn open(path: &Path, forced: Option<Format>) -> Result<InputFile> {
        let size = crate::io::input_len(path)? as u64;
        let modified = crate::io::modified_time(path);
        let format = forced.unwrap_or_else(|| Format::from_name(path));
        let mut magic = [0u8; 2];
        let gzip = format != Format::Raw
            && size >= 2
            && File::open(path)
                .and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut magic, 0))
                .map_err(|e| Error::io("read input", path, e))
                .map(|()| magic == [0x1f, 0x8b])?;
        Ok(InputFile {
            path: path.to_path_buf(),
            format,
            gzip,
            size,
            modified,
        })
    }

    /// The files of a run, the same on every pe (their sizes agreed). Collective.
    pub fn open_all(comm: &Comm, paths: &[PathBuf], opts: &SeqOptions) -> Result<Vec<InputFile>> {
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            let size = crate::io::agreed_input_len(comm, p)?;
            let f = comm.agree(InputFile::open(p, opts.format))?;
            debug_assert_eq!(f.size, size as u64);
            // Every pe must read it the same way (a gzip is streamed by pe 0, plain text parsed
            // by all): copies that differ between nodes are refused.
            if comm.all_reduce_min(u64::from(f.gzip)) != comm.all_reduce_max(u64::from(f.gzip)) {
                return comm.agree(Err(Error::BadInput(format!(
                    "{}: some pes see a gzip file and others do not: the input differs between nodes",
                    p.display()
                ))));
            }
            files.push(f);
        }
        let raw = files.iter().any(|f| f.format == Format::Raw);
        if opts.revcomp && raw {
            return comm.agree(Err(Error::Usage(
                "--revcomp needs sequence input (FASTA or FASTQ): a raw input has no strands"
                    .into(),
            )));
        }
        if opts.keep_case && !files.iter().any(|f| f.format != Format::Raw) && comm.rank() == 0 {
            log::warn!(
                "--keep-case has no effect here: a raw input's bytes are kept as they are (only FASTA and FASTQ are upper-cased)"
            );
        }
        Ok(files)
    }

    /// T's length when it is known without reading (every input raw).
    pub fn known_len(files: &[InputFile]) -> Option<usize> {
        files
            .iter()
            .all(|f| f.format == Format::Raw)
            .then(|| files.iter().map(|f| f.size as usize).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_from_names() {
        for (n, f) in [
            ("g.fa", Format::Fasta),
            ("g.FNA.gz", Format::Fasta),
            ("r.fq.gz", Format::Fastq),
            ("r.fastq", Format::Fastq),
            ("t.txt", Format::Raw),
            ("t.gz", Format::Raw),
        ] {
            assert_eq!(Format::from_name(Path::new(n)), f, "{n}");
        }
    }
}
