//! The index a build leaves beside its suffix array, and reading it back.
//!
//! Beside the SA at `OUT` the build writes `OUT.meta` ([`IndexMeta`], bincode after an 8-byte
//! magic: format version, n, entry width, the inputs with their sizes, the records, and the
//! stamps that tie the files to one build), and `OUT.records.tsv` (name, start in T, length; one
//! record a line). For sequence input it also writes `OUT.text` (T itself); a raw input's T is
//! its files, which the metadata names. A text of tokens (`--token-width`) counts n, the
//! records and the SA in tokens; with `--doc-sep` the build also writes `OUT.docs`, the
//! document table: where each document's tokens begin, in entries of the SA's width (written
//! by every pe for its block, never gathered). [`Index::open`] checks that the SA, `OUT.text`
//! and `OUT.docs` are the files their build wrote ([`BuildStamps`]), maps them (memmap2, nothing
//! read whole) and answers counts and locations through the search over the SA
//! ([`super::search`]: many patterns at a time, with a top level built for many).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bincode::{Decode, Encode};

use super::search::{self, Owner, Sa, Text, Top};
use super::seq::Record;
pub use super::{modified_time, Mtime};
use crate::error::{Error, Result};

/// The first bytes of `OUT.meta`.
pub const MAGIC: &[u8; 8] = b"PSAINDEX";
/// The version of [`IndexMeta`]'s encoding this build writes and reads. Every version begins
/// with the version, n and the entry width, so that a newer one is told from a damaged one.
pub const VERSION: u32 = 4;

/// A file's size and modification time as its build left it (fstat). A rename keeps both; a
/// write changes the time, so a file of the same size from another build, or edited in place,
/// is told apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub struct FileStamp {
    /// Bytes.
    pub size: u64,
    /// Modification time (seconds and nanoseconds since the epoch).
    pub modified: Mtime,
}

impl FileStamp {
    /// The stamp of the file `m` describes.
    pub fn of(m: &std::fs::Metadata) -> FileStamp {
        FileStamp {
            size: m.len(),
            modified: (m.mtime(), m.mtime_nsec().clamp(0, 999_999_999) as u32),
        }
    }
}

/// What ties an index's files to the build that wrote them (format version 3 on), taken on pe 0
/// once every pe has written and synced its part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub struct BuildStamps {
    /// 64 random bits the build drew.
    pub build: u64,
    /// The SA file's stamp.
    pub sa: FileStamp,
    /// `OUT.text`'s stamp (sequence input; None for raw input, whose T is its inputs).
    pub text: Option<FileStamp>,
    /// `OUT.records.tsv`'s bytes.
    pub records_size: u64,
    /// `OUT.docs`'s stamp (format version 4 on, with `--doc-sep`; None otherwise).
    pub docs: Option<FileStamp>,
}

/// [`BuildStamps`] as format version 3 wrote them: without the document table's.
#[derive(Clone, Copy, Decode)]
struct BuildStampsV3 {
    build: u64,
    sa: FileStamp,
    text: Option<FileStamp>,
    records_size: u64,
}

impl From<BuildStampsV3> for BuildStamps {
    fn from(s: BuildStampsV3) -> BuildStamps {
        BuildStamps {
            build: s.build,
            sa: s.sa,
            text: s.text,
            records_size: s.records_size,
            docs: None,
        }
    }
}

/// One input file of an index.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct InputMeta {
    /// The path as given to the build, and its absolute form (a raw index reads its T from it).
    pub given: String,
    /// The absolute path's bytes.
    pub absolute: Vec<u8>,
    /// Bytes on disk at build time.
    pub size: u64,
    /// Its modification time at build time (seconds and nanoseconds since the epoch; None where
    /// the file system keeps none): a raw input edited in place keeps its size, not its time.
    pub modified: Option<Mtime>,
    /// "raw", "fasta" or "fastq".
    pub format: String,
    /// gzip-compressed.
    pub gzip: bool,
}

/// One record of T in the index.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct RecordMeta {
    /// The record's name, its bytes as they are (a FASTA/FASTQ header's first word, or the
    /// file's path for raw input). Encoded as a string was (format versions 1 to 3 wrote
    /// strings, whose encoding is that of their bytes).
    pub name: Vec<u8>,
    /// Its first character's offset in T.
    pub start: u64,
    /// Its characters, without the `$` that ends it.
    pub len: u64,
}

/// What `psa query` needs to know about an index (`OUT.meta`).
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct IndexMeta {
    /// The encoding's version ([`VERSION`]).
    pub version: u32,
    /// Characters of T (= SA entries).
    pub n: u64,
    /// Bytes per SA entry.
    pub width: u32,
    /// T was made from sequence input (some input is FASTA or FASTQ): `OUT.text` holds it.
    pub sequence: bool,
    /// Sequence letters kept their case (patterns are then not upper-cased).
    pub keep_case: bool,
    /// Each record's reverse complement was appended as a record of its own.
    pub revcomp: bool,
    /// The input files, in T order.
    pub inputs: Vec<InputMeta>,
    /// In T order.
    pub records: Vec<RecordMeta>,
    /// What ties the SA, `OUT.text`, `OUT.docs` and the records table to the build that wrote
    /// this file (None for an index of format version 1 or 2, which recorded none).
    pub stamps: Option<BuildStamps>,
    /// A text of tokens: their bytes (1, 2 or 4; `--token-width`), and patterns are token ids;
    /// 0: a text of characters, and patterns are its bytes (format version 4 on; 0 before).
    pub token_width: u32,
    /// The token that begins each document (`--doc-sep`), whose document table is `OUT.docs`
    /// (format version 4 on).
    pub doc_sep: Option<u32>,
}

impl IndexMeta {
    /// Bytes per token of T (1 for a text of characters).
    pub fn token_bytes(&self) -> u64 {
        self.token_width.max(1) as u64
    }
}

/// [`IndexMeta`] as format version 3 wrote it: without tokens and documents.
#[derive(Decode)]
struct IndexMetaV3 {
    version: u32,
    n: u64,
    width: u32,
    sequence: bool,
    keep_case: bool,
    revcomp: bool,
    inputs: Vec<InputMeta>,
    records: Vec<RecordMeta>,
    stamps: Option<BuildStampsV3>,
}

impl From<IndexMetaV3> for IndexMeta {
    fn from(m: IndexMetaV3) -> IndexMeta {
        IndexMeta {
            version: m.version,
            n: m.n,
            width: m.width,
            sequence: m.sequence,
            keep_case: m.keep_case,
            revcomp: m.revcomp,
            inputs: m.inputs,
            records: m.records,
            stamps: m.stamps.map(Into::into),
            token_width: 0,
            doc_sep: None,
        }
    }
}

/// [`IndexMeta`] as format version 2 wrote it: without the stamps.
#[derive(Decode)]
struct IndexMetaV2 {
    version: u32,
    n: u64,
    width: u32,
    sequence: bool,
    keep_case: bool,
    revcomp: bool,
    inputs: Vec<InputMeta>,
    records: Vec<RecordMeta>,
}

impl From<IndexMetaV2> for IndexMeta {
    fn from(m: IndexMetaV2) -> IndexMeta {
        IndexMeta {
            version: m.version,
            n: m.n,
            width: m.width,
            sequence: m.sequence,
            keep_case: m.keep_case,
            revcomp: m.revcomp,
            inputs: m.inputs,
            records: m.records,
            stamps: None,
            token_width: 0,
            doc_sep: None,
        }
    }
}

/// [`IndexMeta`] as format version 1 wrote it: the inputs without their modification times
/// (given, absolute, size, format, gzip).
#[derive(Decode)]
struct IndexMetaV1 {
    version: u32,
    n: u64,
    width: u32,
    sequence: bool,
    keep_case: bool,
    revcomp: bool,
    inputs: Vec<(String, Vec<u8>, u64, String, bool)>,
    records: Vec<RecordMeta>,
}

impl From<IndexMetaV1> for IndexMeta {
    fn from(m: IndexMetaV1) -> IndexMeta {
        let inputs = (m.inputs.into_iter())
            .map(|(given, absolute, size, format, gzip)| InputMeta {
                given,
                absolute,
                size,
                modified: None,
                format,
                gzip,
            })
            .collect();
        IndexMetaV2 {
            version: m.version,
            n: m.n,
            width: m.width,
            sequence: m.sequence,
            keep_case: m.keep_case,
            revcomp: m.revcomp,
            inputs,
            records: m.records,
        }
        .into()
    }
}

/// Decodes a `T` from `body` (bincode's standard encoding), claiming at most about 64 times
/// `body`'s length of memory: every length read from the file (a vector's, a string's) is
/// bounded by that before anything is allocated, so a forged length fails as damage instead of
/// an allocation of terabytes. (A true index needs at most about 14 bytes of memory a byte.)
fn decode_bounded<T: Decode<()>>(
    body: &[u8],
) -> std::result::Result<(T, usize), bincode::error::DecodeError> {
    let need = body.len().saturating_mul(16);
    // bincode's limit is a constant: the smallest of these at or above `need`.
    macro_rules! first_limit_above {
        ($($k:literal)*) => {
            $(if need <= 1usize << $k {
                let config = bincode::config::standard().with_limit::<{ 1usize << $k }>();
                return bincode::decode_from_slice(body, config);
            })*
        };
    }
    first_limit_above!(12 14 16 18 20 22 24 26 28 30 32 34 36 38 40 42 44 46 48 50 52);
    Err(bincode::error::DecodeError::LimitExceeded)
}

/// `OUT` with `suffix` appended to its name (`OUT.text`, `OUT.meta`, `OUT.records.tsv`).
pub fn side_path(out: &Path, suffix: &str) -> PathBuf {
    let mut s = out.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

impl IndexMeta {
    /// The metadata file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        let body = bincode::encode_to_vec(self, bincode::config::standard())
            .expect("encoding into a vector does not fail");
        v.extend(body);
        v
    }

    /// Reads `path` (an `OUT.meta`).
    pub fn read(path: &Path) -> Result<IndexMeta> {
        Self::read_seen(path).map(|(meta, _)| meta)
    }

    /// Reads `path` (an `OUT.meta`) through one handle, with what fstat said of that handle (to
    /// tell later whether the file was replaced).
    fn read_seen(path: &Path) -> Result<(IndexMeta, std::fs::Metadata)> {
        let fail = |e| Error::io("read the index", path, e);
        let mut f = File::open(path).map_err(fail)?;
        let seen = f.metadata().map_err(fail)?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).map_err(fail)?;
        Ok((Self::decode(path, &bytes)?, seen))
    }

    /// The metadata in `bytes`, the contents of `path` (named in messages). A file without the
    /// magic is not a psa index file; one with it whose beginning (version, n, entry width) is
    /// sane and whose version is above [`VERSION`] was written by a newer psa; anything else
    /// that does not decode, or decodes to what cannot be (records beyond n, a raw input's
    /// sizes that are not n, missing stamps), is damaged.
    pub fn decode(path: &Path, bytes: &[u8]) -> Result<IndexMeta> {
        let Some(body) = bytes.strip_prefix(MAGIC) else {
            return Err(Error::BadInput(format!(
                "'{}' is not a psa index file (no psa magic)",
                path.display()
            )));
        };
        let damaged = || {
            Error::BadInput(format!(
                "'{}' is damaged (cut short or changed): build the index again",
                path.display()
            ))
        };
        // The beginning every version shares first: a newer index is named as such, only when
        // that beginning is sane (not one of random bytes after the magic).
        let head = decode_bounded::<(u32, u64, u32)>(body).map(|(h, _)| h);
        let (meta, used): (IndexMeta, usize) = match head {
            Ok((VERSION, ..)) => decode_bounded(body).map_err(|_| damaged())?,
            Ok((3, ..)) => decode_bounded::<IndexMetaV3>(body)
                .map(|(m, used)| (m.into(), used))
                .map_err(|_| damaged())?,
            Ok((2, ..)) => decode_bounded::<IndexMetaV2>(body)
                .map(|(m, used)| (m.into(), used))
                .map_err(|_| damaged())?,
            Ok((1, ..)) => decode_bounded::<IndexMetaV1>(body)
                .map(|(m, used)| (m.into(), used))
                .map_err(|_| damaged())?,
            Ok((v, _, width)) if v > VERSION && v < 1000 && (1..=8).contains(&width) => {
                return Err(Error::BadInput(format!(
                    "'{}' is an index of format version {v}, written by a newer psa; this one reads 1 to {VERSION}",
                    path.display()
                )))
            }
            _ => return Err(damaged()),
        };
        match used == body.len() && meta.is_sane() {
            true => Ok(meta),
            false => Err(damaged()),
        }
    }

    /// Whether the decoded fields can be those of an index: entries of 1 to 8 bytes, records in
    /// order within T, a raw index's inputs as long as T together (n tokens of their width),
    /// tokens of 1, 2 or 4 bytes of raw input, a separator that is one of them, and (format
    /// version 3 on) stamps whose sizes are those of the SA and `OUT.text` (and `OUT.docs`: a
    /// whole number of entries, with a separator only).
    fn is_sane(&self) -> bool {
        let records_in_order = self.records.windows(2).all(|w| w[0].start <= w[1].start)
            && (self.records.iter())
                .all(|r| r.start.checked_add(r.len).is_some_and(|e| e <= self.n));
        let raw_sum = (self.inputs.iter())
            .map(|i| i.size)
            .try_fold(0u64, u64::checked_add);
        let sizes_agree = self.sequence || raw_sum == self.n.checked_mul(self.token_bytes());
        let tokens_agree = matches!(self.token_width, 0 | 1 | 2 | 4)
            && (self.token_width == 0 || !self.sequence)
            && (self.doc_sep).is_none_or(|t| (t as u64) < 1u64 << (8 * self.token_bytes()));
        let width = self.width as u64;
        let stamps_agree = match (&self.stamps, self.version >= 3) {
            (None, new) => !new,
            (Some(_), false) => false,
            (Some(s), true) => {
                Some(s.sa.size) == self.n.checked_mul(width)
                    && s.text.map(|t| t.size) == self.sequence.then_some(self.n)
                    && s.docs.map(|d| d.size % width) == self.doc_sep.map(|_| 0)
            }
        };
        (1..=8).contains(&self.width)
            && records_in_order
            && sizes_agree
            && tokens_agree
            && stamps_agree
    }

    /// `OUT.records.tsv`: a header line, then name, start and length of each record.
    /// Names are written byte for byte, UTF-8 or not.
    pub fn records_tsv(records: &[Record]) -> Vec<u8> {
        let mut s = b"name\tstart\tlength\n".to_vec();
        for r in records {
            s.extend_from_slice(&tsv_field(&r.name));
            s.extend_from_slice(format!("\t{}\t{}\n", r.start, r.len).as_bytes());
        }
        s
    }

    /// The bytes of the records table ([`Self::records_tsv`]) of this index's records.
    fn records_tsv_len(&self) -> u64 {
        Self::records_tsv_len_of(
            (self.records.iter()).map(|r| (&r.name[..], false, r.start, r.len)),
        )
    }

    /// The bytes of the records table ([`Self::records_tsv`]) of `rows`: (name, whether `/rc`
    /// follows it, start, length).
    pub fn records_tsv_len_of<'a>(rows: impl Iterator<Item = Row<'a>>) -> u64 {
        let digits = |x: u64| x.checked_ilog10().unwrap_or(0) as u64 + 1;
        let rows = rows.map(|(name, twin, start, len)| {
            tsv_field(name).len() as u64 + 3 * twin as u64 + digits(start) + digits(len) + 3
        });
        rows.fold("name\tstart\tlength\n".len() as u64, u64::saturating_add)
    }

    /// At most the bytes of this metadata's file ([`Self::encode`]) once it holds `rows` (as in
    /// [`Self::records_tsv_len_of`]) besides its records and its stamps: its own with the
    /// largest stamps, and each row's (bincode's integers take 1, 3, 5 or 9 bytes).
    pub fn encoded_len_with<'a>(&self, rows: impl Iterator<Item = Row<'a>>) -> u64 {
        let varint = |x: u64| match x {
            0..=250 => 1,
            251..=0xffff => 3,
            0x1_0000..=0xffff_ffff => 5,
            _ => 9,
        };
        let widest = FileStamp {
            size: u64::MAX,
            modified: (i64::MIN, u32::MAX),
        };
        let mut own = self.clone();
        own.stamps = Some(BuildStamps {
            build: u64::MAX,
            sa: widest,
            text: Some(widest),
            records_size: u64::MAX,
            docs: Some(widest),
        });
        let mut size = bincode::enc::write::SizeWriter::default();
        bincode::encode_into_writer(&own, &mut size, bincode::config::standard())
            .expect("counting an encoding's bytes does not fail");
        let (mut count, mut bytes) = (self.records.len() as u64, 0u64);
        for (name, twin, start, len) in rows {
            let name = name.len() as u64 + 3 * twin as u64;
            bytes = bytes.saturating_add(varint(name) + name + varint(start) + varint(len));
            count += 1;
        }
        let counted = varint(count) - varint(self.records.len() as u64);
        (MAGIC.len() + size.bytes_written) as u64 + counted + bytes
    }

    /// Whether the file `m` describes is this index's `side` file as its build left it: the
    /// same stamp (format version 3 on; the records table by its size), or for an older index,
    /// which kept no stamps, the size it must have.
    pub fn wrote(&self, side: Side, m: &std::fs::Metadata) -> bool {
        match (side, &self.stamps) {
            (Side::Text, Some(s)) => s.text == Some(FileStamp::of(m)),
            (Side::Docs, Some(s)) => s.docs == Some(FileStamp::of(m)),
            (Side::Records, Some(s)) => s.records_size == m.len(),
            (Side::Text, None) => self.sequence && m.len() == self.n,
            (Side::Docs, None) => false,
            (Side::Records, None) => m.len() == self.records_tsv_len(),
        }
    }
}

/// A row of the records table: (name, whether `/rc` follows it, start in T, length).
pub type Row<'a> = (&'a [u8], bool, u64, u64);

/// A file a build writes beside the SA, besides `OUT.meta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// `OUT.text`.
    Text,
    /// `OUT.records.tsv`.
    Records,
    /// `OUT.docs`.
    Docs,
}

/// A field of a tab-separated line: a backslash, tab, newline or carriage return in it (a raw
/// input's path may hold them) written as `\\`, `\t`, `\n`, `\r`, so every line keeps its fields;
/// every other byte as it is, UTF-8 or not.
pub fn tsv_field(s: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    // Sixteen bytes at a time without a branch per byte (patterns are read by the million).
    let escaped = |b: u8| (b == b'\\') | ((b < 16) & ((1u16 << (b & 15)) & 0x2600 != 0));
    if !(s.chunks(16)).any(|c| c.iter().fold(false, |any, &b| any | escaped(b))) {
        return s.into();
    }
    let mut out = Vec::with_capacity(s.len() + 8);
    for &b in s {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b => out.push(b),
        }
    }
    out.into()
}

/// A file an index reads, as its metadata describes it.
struct Expected {
    path: PathBuf,
    /// Its bytes at the build.
    size: u64,
    /// Its stamp ([`BuildStamps`]): the SA and `OUT.text` of an index of format version 3 on.
    stamp: Option<FileStamp>,
    /// A raw input's modification time at the build (another one now is a warning: the input
    /// is the user's, not the build's).
    input_modified: Option<Mtime>,
}

/// T's files of the index at `out`: `OUT.text` for sequence input, else the raw inputs.
fn text_files(out: &Path, meta: &IndexMeta) -> Vec<Expected> {
    if meta.sequence {
        return vec![Expected {
            path: side_path(out, ".text"),
            size: meta.n,
            stamp: meta.stamps.and_then(|s| s.text),
            input_modified: None,
        }];
    }
    (meta.inputs.iter())
        .map(|i| Expected {
            // The path's bytes as they were, whether or not they are UTF-8.
            path: PathBuf::from(
                <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(
                    i.absolute.clone(),
                ),
            ),
            size: i.size,
            stamp: None,
            input_modified: i.modified,
        })
        .collect()
}

/// Opens the file `e` describes and checks the open handle against it (what is checked is what
/// will be mapped): a stamp that differs is a file of another build or one changed since (an
/// error naming it and `meta_path`), a size that differs an error, and a raw input's other
/// modification time a warning pushed to `warnings`.
fn open_checked(e: &Expected, meta_path: &Path, warnings: &mut Vec<String>) -> Result<File> {
    let path = &e.path;
    let f = File::open(path).map_err(|err| Error::io("open", path, err))?;
    let got = FileStamp::of(&f.metadata().map_err(|err| Error::io("open", path, err))?);
    let why = match e.stamp {
        Some(want) if got.size != want.size => Some(format!(
            "it has {} bytes, its build wrote {}",
            got.size, want.size
        )),
        Some(want) if got.modified != want.modified => Some(
            "it was written after its build, or by another one (its size is the same)".to_string(),
        ),
        None if got.size != e.size => Some(format!(
            "it has {} bytes but had {} when the index was built",
            got.size, e.size
        )),
        _ => None,
    };
    if let Some(why) = why {
        return Err(Error::BadInput(format!(
            "'{}' does not belong to the index '{}' ({why}): where a build is writing the index now, wait for it to finish; else build the index again (with --force, as a build keeps the files beside its output that their index does not describe)",
            path.display(),
            meta_path.display()
        )));
    }
    if e.input_modified.is_some_and(|t| t != got.modified) {
        warnings.push(format!(
            "'{}' was modified after the index was built (its size is the same): if its bytes changed, the answers are wrong; build the index again",
            path.display()
        ));
    }
    Ok(f)
}

/// Whether `m` and `n` describe one version of one file (device, inode, size, modification
/// time).
fn same_version(m: &std::fs::Metadata, n: &std::fs::Metadata) -> bool {
    (m.dev(), m.ino(), FileStamp::of(m)) == (n.dev(), n.ino(), FileStamp::of(n))
}

/// Errors unless `meta_path` still holds `meta`, which was read from a file that fstat
/// described as `seen`: unchanged, or replaced by the same metadata (a build that replaced it
/// while the index was opened has another build id).
fn still_the_same(meta_path: &Path, meta: &IndexMeta, seen: &std::fs::Metadata) -> Result<()> {
    if std::fs::metadata(meta_path).is_ok_and(|now| same_version(&now, seen)) {
        return Ok(());
    }
    match IndexMeta::read(meta_path) {
        Ok(again) if again == *meta => Ok(()),
        _ => Err(Error::BadInput(format!(
            "'{}' was replaced while the index was opened: a build is writing this index; wait for it to finish and query again",
            meta_path.display()
        ))),
    }
}

/// A read-only memory map of the open file `f` at `path` (none for an empty file, which cannot
/// be mapped).
fn map(f: &File, path: &Path) -> Result<Option<memmap2::Mmap>> {
    let len = f.metadata().map_err(|e| Error::io("open", path, e))?.len();
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: the map is read-only; a file changed under it while mapped is the user's doing
    // (its stamp or size was checked against the metadata when it was opened).
    let m = unsafe { memmap2::Mmap::map(f) }.map_err(|e| Error::io("map", path, e))?;
    // Searches read the SA and T at random places: mapped in huge pages (where the kernel
    // holds the file's pages so, or reads them in so on a fault), far fewer of those reads miss
    // the TLB. A hint: where it is refused, nothing else changes.
    let _ = m.advise(memmap2::Advice::HugePage);
    Ok(Some(m))
}

/// An index opened for queries: the SA and T mapped, the metadata read.
pub struct Index {
    /// The index's metadata (`OUT.meta`).
    pub meta: IndexMeta,
    /// What the opening found doubtful but not wrong: a raw input modified since the build
    /// (same size, another time), as messages.
    pub warnings: Vec<String>,
    sa: Option<memmap2::Mmap>,
    text: Text,
    /// The document table (`OUT.docs`) of an index built with `--doc-sep`.
    docs: Option<memmap2::Mmap>,
    /// The search's top level: mapped from `OUT.top` where that is this build's, or made by
    /// [`Self::build_top`].
    top: Option<Top>,
    /// `OUT.top`, and what ties it to this build of the index.
    top_path: PathBuf,
    owner: Owner,
    /// The SA file's owner and permission bits: `OUT.top` is trusted only from that user, and
    /// saved no wider than the SA.
    sa_user: (u32, u32),
}

/// Where a match lies: its record (index into the records; with a document table, its
/// document's number) and offset in it, and its offset in T.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The record it lies in (an index into the records), or with a document table
    /// ([`IndexMeta::doc_sep`]) the document.
    pub record: usize,
    /// Its offset in that record.
    pub offset: u64,
    /// Its offset in T.
    pub text_offset: u64,
}

impl Index {
    /// Opens the index whose SA is `out`: reads `OUT.meta`, opens the SA and T's files and
    /// checks each open handle against the metadata (the stamps of its build, or for an older
    /// index and a raw input the sizes), maps them, and reads `OUT.meta` again where it was
    /// replaced meanwhile (a build that renames its files one by one raced the opening): the
    /// files mapped are then of the build the metadata describes, or the opening fails.
    pub fn open(out: &Path) -> Result<Index> {
        let meta_path = side_path(out, ".meta");
        if !meta_path.exists() && out.exists() {
            return Err(Error::BadInput(format!(
                "'{}' has no index metadata '{}': build it again with this psa",
                out.display(),
                meta_path.display()
            )));
        }
        let (meta, seen) = IndexMeta::read_seen(&meta_path)?;
        let mut warnings = Vec::new();
        if meta.stamps.is_none() {
            warnings.push(format!(
                "'{}' is of format version {}, which keeps no stamps of the index's files: psa cannot check that '{}' and T's files are of one build; build the index again to have them checked",
                meta_path.display(),
                meta.version,
                out.display()
            ));
        }
        let sa_file = Expected {
            path: out.to_path_buf(),
            size: meta.n.saturating_mul(meta.width as u64),
            stamp: meta.stamps.map(|s| s.sa),
            input_modified: None,
        };
        let sa = open_checked(&sa_file, &meta_path, &mut warnings)?;
        let sa_stat = sa.metadata().map_err(|e| Error::io("open", out, e))?;
        let sa_stamp = FileStamp::of(&sa_stat);
        let docs_file = meta.doc_sep.map(|_| Expected {
            path: side_path(out, ".docs"),
            size: 0,
            stamp: meta.stamps.and_then(|s| s.docs),
            input_modified: None,
        });
        let docs = (docs_file.as_ref())
            .map(|e| open_checked(e, &meta_path, &mut warnings))
            .transpose()?;
        let text_files = text_files(out, &meta);
        let opened: Vec<File> = (text_files.iter())
            .map(|e| open_checked(e, &meta_path, &mut warnings))
            .collect::<Result<_>>()?;
        let sa = map(&sa, out)?;
        let docs = match (&docs, &docs_file) {
            (Some(f), Some(e)) => map(f, &e.path)?,
            _ => None,
        };
        let parts = (opened.iter().zip(&text_files))
            .map(|(f, e)| map(f, &e.path))
            .collect::<Result<_>>()?;
        let sizes: Vec<u64> = text_files.iter().map(|e| e.size).collect();
        still_the_same(&meta_path, &meta, &seen)?;
        let text = Text::new(parts, &sizes, meta.token_bytes() as usize);
        let owner = [
            sa_stamp.size,
            sa_stamp.modified.0 as u64,
            sa_stamp.modified.1 as u64,
            meta.stamps.map_or(0, |s| s.build),
        ];
        let mut index = Index {
            meta,
            warnings,
            sa,
            text,
            docs,
            top: None,
            top_path: side_path(out, ".top"),
            owner,
            sa_user: (sa_stat.uid(), sa_stat.mode()),
        };
        let token = index.text.token();
        let uid = index.sa_user.0;
        index.top = Top::open_saved(&index.top_path, owner, uid, &index.sa(), token);
        Ok(index)
    }

    /// The SA as the search reads it.
    fn sa(&self) -> Sa<'_> {
        let n = self.meta.n as usize;
        Sa::new(
            self.sa.as_deref().unwrap_or(&[]),
            self.meta.width as usize,
            n,
        )
    }

    /// Appends `pat` to `key` as the build's case rule has it (upper-cased for sequence input
    /// without `--keep-case`).
    pub fn fold_into(&self, pat: &[u8], key: &mut Vec<u8>) {
        match self.meta.sequence && !self.meta.keep_case {
            true => key.extend(pat.iter().map(u8::to_ascii_uppercase)),
            false => key.extend_from_slice(pat),
        }
    }

    /// Builds the search's top level ([`Top`]), which later searches use, and keeps it in
    /// `OUT.top` for later queries where it can (a directory it cannot write leaves it in
    /// memory only): worth it once the patterns to answer are many ([`Self::top_pays_after`]).
    /// Runs on rayon's threads. Errors where the SA is damaged.
    pub fn build_top(&mut self) -> Result<()> {
        if self.top.is_none() {
            let top = Top::build(&self.sa(), &self.text)?;
            let width = self.meta.width as usize;
            let mode = self.sa_user.1;
            if let Err(e) = top.save(&self.top_path, self.owner, width, mode) {
                log::debug!(
                    "the top level stays in memory: {}: {e}",
                    self.top_path.display()
                );
            }
            self.top = Some(top);
        }
        Ok(())
    }

    /// Whether the top level is built.
    pub fn has_top(&self) -> bool {
        self.top.is_some()
    }

    /// The patterns after which building the top level has paid for itself: building it reads
    /// T at one SA entry in [`Top::step_for`], about as many places as this many searches
    /// without it read (about 2·log2 n each; a search with it reads a few).
    pub fn top_pays_after(&self) -> usize {
        let n = self.meta.n as usize;
        let reads = 2 * (crate::util::bits(n as u64) as usize).max(1);
        n / Top::step_for(self.meta.width as usize) / reads
    }

    /// The SA interval `out[i] = (lo, hi)` of the suffixes that start with `pats[i]` (each
    /// already folded: [`Self::fold_into`]; token ids as bytes), on the calling thread; a pattern
    /// holding a byte T does not gets an empty one. Errors where an entry read is not below n
    /// (a damaged file).
    pub fn ranges(&self, pats: &[&[u8]], out: &mut [(usize, usize)]) -> Result<()> {
        search::ranges(&self.sa(), &self.text, self.top.as_ref(), pats, out)
    }

    /// Where the suffixes `SA[lo..hi)` start, at most `max` of them, in text order. Errors where
    /// an entry is not below n (a damaged file).
    pub fn locate(&self, (lo, hi): (usize, usize), max: usize) -> Result<Vec<Hit>> {
        let mut pos: Vec<u64> = (lo..hi.min(lo.saturating_add(max)))
            .map(|k| self.sa().get(k))
            .collect::<Result<_>>()?;
        pos.sort_unstable();
        Ok(pos.into_iter().map(|p| self.place(p)).collect())
    }

    /// Where the position `p` of T lies: its record, or with a document table its document,
    /// and the offset in it (a separator counts as the end of the document before it; one at
    /// T's start as the first document's start).
    fn place(&self, p: u64) -> Hit {
        let (record, start) = match &self.docs {
            Some(docs) => {
                let w = self.meta.width as usize;
                let at = |k: usize| entry(Some(docs), w, k);
                let d = partition(docs.len() / w, |k| at(k) <= p).saturating_sub(1);
                (d, (docs.len() >= w).then(|| at(d)))
            }
            None => {
                let recs = &self.meta.records;
                let r = recs.partition_point(|r| r.start <= p).saturating_sub(1);
                (r, recs.get(r).map(|rec| rec.start))
            }
        };
        Hit {
            record,
            offset: start.map_or(p, |s| p - s.min(p)),
            text_offset: p,
        }
    }
}

/// Entry `k` of the little-endian array of `w`-byte entries `file` maps.
fn entry(file: Option<&[u8]>, w: usize, k: usize) -> u64 {
    let file = file.unwrap_or(&[]);
    let mut b = [0u8; 8];
    b[..w].copy_from_slice(&file[k * w..(k + 1) * w]);
    u64::from_le_bytes(b)
}

/// The first k in `0..n` for which `pred` is false (`pred` true then false).
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests;
