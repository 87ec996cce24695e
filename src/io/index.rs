//! The index a build leaves beside its suffix array, and reading it back.
//!
//! Beside the SA at `OUT` the build writes `OUT.meta` ([`IndexMeta`], bincode after an 8-byte
//! magic: format version, n, entry width, the inputs with their sizes, the records), and
//! `OUT.records.tsv` (name, start in T, length; one record a line). For sequence input it also
//! writes `OUT.text` (T itself); a raw input's T is its files, which the metadata names.
//! [`Index::open`] maps the SA and T (memmap2, nothing read whole) and answers counts and
//! locations by binary search over the SA.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use bincode::{Decode, Encode};

use super::seq::Record;
use crate::error::{Error, Result};

/// The first bytes of `OUT.meta`.
pub const MAGIC: &[u8; 8] = b"PSAINDEX";
/// The version of [`IndexMeta`]'s encoding this build writes and reads.
pub const VERSION: u32 = 2;

/// A modification time: seconds and nanoseconds since the epoch.
pub type Mtime = (i64, u32);

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
    /// The record's name (a FASTA/FASTQ header's first word, or the file's path for raw input).
    pub name: String,
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
        IndexMeta {
            version: m.version,
            n: m.n,
            width: m.width,
            sequence: m.sequence,
            keep_case: m.keep_case,
            revcomp: m.revcomp,
            inputs,
            records: m.records,
        }
    }
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
        let bytes = std::fs::read(path).map_err(|e| Error::io("read the index", path, e))?;
        let bad = |why: &str| {
            Error::BadInput(format!(
                "'{}' is not an index written by this psa ({why})",
                path.display()
            ))
        };
        let body = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| bad("no psa magic"))?;
        let damaged = || {
            Error::BadInput(format!(
                "'{}' is damaged (cut short or changed): build the index again",
                path.display()
            ))
        };
        // The version first: an index of another version is named as such, not as damaged.
        let config = bincode::config::standard();
        let version = bincode::decode_from_slice::<u32, _>(body, config).map(|(v, _)| v);
        let (meta, used): (IndexMeta, usize) = match version {
            Ok(VERSION) => bincode::decode_from_slice(body, config).map_err(|_| damaged())?,
            Ok(1) => bincode::decode_from_slice::<IndexMetaV1, _>(body, config)
                .map(|(m, used)| (m.into(), used))
                .map_err(|_| damaged())?,
            Ok(v) if v > VERSION => {
                return Err(bad(&format!(
                    "format version {v}, written by a newer psa; this one reads 1 to {VERSION}"
                )))
            }
            _ => return Err(damaged()),
        };
        let records_in_order = meta.records.windows(2).all(|w| w[0].start <= w[1].start)
            && meta
                .records
                .iter()
                .all(|r| r.start.checked_add(r.len).is_some_and(|e| e <= meta.n));
        let raw_sum = meta
            .inputs
            .iter()
            .map(|i| i.size)
            .try_fold(0u64, u64::checked_add);
        let sizes_agree = meta.sequence || raw_sum == Some(meta.n);
        if used != body.len() || !records_in_order || !sizes_agree {
            return Err(damaged());
        }
        Ok(meta)
    }

    /// `OUT.records.tsv`: a header line, then name, start and length of each record.
    pub fn records_tsv(records: &[Record]) -> Vec<u8> {
        let mut s = String::from("name\tstart\tlength\n");
        for r in records {
            s.push_str(&format!("{}\t{}\t{}\n", tsv_field(&r.name), r.start, r.len));
        }
        s.into_bytes()
    }
}

/// A field of a tab-separated line: a backslash, tab, newline or carriage return in it (a raw
/// input's path may hold them) written as `\\`, `\t`, `\n`, `\r`, so every line keeps its fields.
pub fn tsv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(['\\', '\t', '\n', '\r']) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.into()
}

/// `path`'s modification time (seconds and nanoseconds since the epoch), where the file system
/// keeps one. Local.
pub fn modified_time(path: &Path) -> Option<Mtime> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.mtime(), u32::try_from(m.mtime_nsec()).ok()?))
}

/// A read-only memory map of a file (none for an empty file, which cannot be mapped).
fn map(path: &Path) -> Result<Option<memmap2::Mmap>> {
    let f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let len = f.metadata().map_err(|e| Error::io("open", path, e))?.len();
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: the map is read-only; a file changed under it while mapped is the user's doing
    // (the sizes are checked against the metadata when it is opened).
    let m = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| Error::io("map", path, e))?;
    Ok(Some(m))
}

/// T as one or more mapped files, one after another.
struct Text {
    parts: Vec<Option<memmap2::Mmap>>,
    /// Offset in T of each part, and n at the end.
    starts: Vec<u64>,
}

impl Text {
    fn part(&self, k: usize) -> &[u8] {
        self.parts[k].as_deref().unwrap_or(&[])
    }

    /// `T[pos..pos + pat.len()]` (shorter at the end of T) compared with `pat`: Equal when `pat`
    /// is a prefix of the suffix at `pos`.
    fn cmp_at(&self, pos: u64, pat: &[u8]) -> Ordering {
        let mut k = self.starts.partition_point(|&s| s <= pos) - 1;
        let mut off = (pos - self.starts[k]) as usize;
        let mut rest = pat;
        loop {
            let part = self.part(k);
            let take = (part.len() - off).min(rest.len());
            match part[off..off + take].cmp(&rest[..take]) {
                Ordering::Equal => {}
                o => return o,
            }
            rest = &rest[take..];
            if rest.is_empty() {
                return Ordering::Equal;
            }
            k += 1;
            off = 0;
            if k == self.parts.len() {
                // T ended first: a proper prefix of the pattern sorts before it.
                return Ordering::Less;
            }
        }
    }
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
}

/// Where a match lies: its record (index into the records) and offset in it, and its offset in T.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The record it lies in (an index into the records).
    pub record: usize,
    /// Its offset in that record.
    pub offset: u64,
    /// Its offset in T.
    pub text_offset: u64,
}

impl Index {
    /// Opens the index whose SA is `out` (reads `OUT.meta`; maps `out` and T). Checks that the
    /// files still have the sizes the build wrote.
    pub fn open(out: &Path) -> Result<Index> {
        let meta_path = side_path(out, ".meta");
        if !meta_path.exists() && out.exists() {
            return Err(Error::BadInput(format!(
                "'{}' has no index metadata '{}': build it again with this psa",
                out.display(),
                meta_path.display()
            )));
        }
        let meta = IndexMeta::read(&meta_path)?;
        if !(1..=8).contains(&meta.width) {
            return Err(Error::BadInput(format!(
                "'{}' gives {}-byte entries (1 to 8 are possible): it is damaged; build the index again",
                meta_path.display(),
                meta.width
            )));
        }
        let sa = map(out)?;
        let sa_len = sa.as_ref().map_or(0, |m| m.len()) as u64;
        if sa_len != meta.n * meta.width as u64 {
            return Err(Error::BadInput(format!(
                "'{}' has {sa_len} bytes but the index says {} entries of {} bytes: it changed since the build",
                out.display(),
                meta.n,
                meta.width
            )));
        }
        // Each file of T: its path, size and (a raw input's) modification time at the build.
        let files: Vec<(PathBuf, u64, Option<Mtime>)> = match meta.sequence {
            true => vec![(side_path(out, ".text"), meta.n, None)],
            false => meta
                .inputs
                .iter()
                .map(|i| {
                    // The path's bytes as they were, whether or not they are UTF-8.
                    let p = <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(
                        i.absolute.clone(),
                    );
                    (PathBuf::from(p), i.size, i.modified)
                })
                .collect(),
        };
        let mut parts = Vec::new();
        let mut starts = vec![0u64];
        let mut warnings = Vec::new();
        for (p, size, modified) in files {
            if modified.is_some_and(|t| modified_time(&p) != Some(t)) {
                warnings.push(format!(
                    "'{}' was modified after the index was built (its size is the same): if its bytes changed, the answers are wrong; build the index again",
                    p.display()
                ));
            }
            let m = map(&p)?;
            let len = m.as_ref().map_or(0, |m| m.len()) as u64;
            if len != size {
                return Err(Error::BadInput(format!(
                    "'{}' has {len} bytes but had {size} when the index was built: build it again",
                    p.display()
                )));
            }
            parts.push(m);
            starts.push(starts.last().copied().unwrap_or(0) + len);
        }
        Ok(Index {
            meta,
            warnings,
            sa,
            text: Text { parts, starts },
        })
    }

    /// SA[k], or an error where it is not below n (a damaged file).
    fn sa(&self, k: usize) -> Result<u64> {
        let w = self.meta.width as usize;
        let sa = self.sa.as_deref().unwrap_or(&[]);
        let mut b = [0u8; 8];
        b[..w].copy_from_slice(&sa[k * w..(k + 1) * w]);
        let v = u64::from_le_bytes(b);
        if v >= self.meta.n {
            return Err(Error::BadInput(format!(
                "entry {k} of the suffix array is {v}, not below n = {}: the file is damaged; build the index again",
                self.meta.n
            )));
        }
        Ok(v)
    }

    /// A pattern as the build's case rule has it (upper-cased for sequence input without
    /// `--keep-case`).
    pub fn fold<'a>(&self, pat: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        match self.meta.sequence && !self.meta.keep_case {
            true => std::borrow::Cow::Owned(pat.to_ascii_uppercase()),
            false => std::borrow::Cow::Borrowed(pat),
        }
    }

    /// The SA interval `[lo, hi)` of the suffixes that start with `pat` (already folded).
    /// Errors where an entry it reads is not below n (a damaged file).
    pub fn range(&self, pat: &[u8]) -> Result<(usize, usize)> {
        let n = self.meta.n as usize;
        let damaged = std::cell::Cell::new(None);
        let cmp = |k: usize| match self.sa(k) {
            Ok(pos) => self.text.cmp_at(pos, pat),
            Err(e) => {
                damaged.set(Some(e));
                Ordering::Equal
            }
        };
        let lo = partition(n, |k| cmp(k) == Ordering::Less);
        let hi = lo + partition(n - lo, |k| cmp(lo + k) != Ordering::Greater);
        match damaged.into_inner() {
            Some(e) => Err(e),
            None => Ok((lo, hi)),
        }
    }

    /// Where the suffixes `SA[lo..hi)` start, at most `max` of them, in text order. Errors where
    /// an entry is not below n (a damaged file).
    pub fn locate(&self, (lo, hi): (usize, usize), max: usize) -> Result<Vec<Hit>> {
        let mut pos: Vec<u64> = (lo..hi.min(lo.saturating_add(max)))
            .map(|k| self.sa(k))
            .collect::<Result<_>>()?;
        pos.sort_unstable();
        let recs = &self.meta.records;
        Ok(pos
            .into_iter()
            .map(|p| {
                let r = recs.partition_point(|r| r.start <= p).saturating_sub(1);
                let offset = recs.get(r).map_or(p, |rec| p - rec.start.min(p));
                Hit {
                    record: r,
                    offset,
                    text_offset: p,
                }
            })
            .collect())
    }
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
mod tests {
    use super::*;

    /// `OUT.meta` as version 1 wrote it: the magic, then the fields in order (bincode's standard
    /// encoding of a struct is its fields one after another), the inputs without times.
    fn v1_bytes(version: u32, inputs_size: u64) -> Vec<u8> {
        let fields = (
            version,
            100u64,
            4u32,
            false,
            false,
            false,
            vec![(
                "in.txt".to_string(),
                b"/data/in.txt".to_vec(),
                inputs_size,
                "raw".to_string(),
                false,
            )],
            vec![RecordMeta {
                name: "in.txt".into(),
                start: 0,
                len: 100,
            }],
        );
        let mut v = MAGIC.to_vec();
        v.extend(bincode::encode_to_vec(fields, bincode::config::standard()).unwrap());
        v
    }

    fn read_bytes(tag: &str, bytes: &[u8]) -> Result<IndexMeta> {
        let path = std::env::temp_dir().join(format!("psa-meta-{}-{tag}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let meta = IndexMeta::read(&path);
        std::fs::remove_file(&path).unwrap();
        meta
    }

    #[test]
    fn tsv_fields_keep_their_lines() {
        assert_eq!(tsv_field("chr1"), "chr1");
        assert_eq!(tsv_field("a\tb\nc\\d\r"), "a\\tb\\nc\\\\d\\r");
        let tsv = IndexMeta::records_tsv(&[Record {
            name: "dir\tx/in\n.txt".into(),
            start: 0,
            len: 3,
        }]);
        assert_eq!(tsv, b"name\tstart\tlength\ndir\\tx/in\\n.txt\t0\t3\n");
    }

    #[test]
    fn version_1_is_read_without_times() {
        let meta = read_bytes("v1", &v1_bytes(1, 100)).unwrap();
        assert_eq!((meta.version, meta.n, meta.width), (1, 100, 4));
        assert_eq!(meta.inputs.len(), 1);
        let input = &meta.inputs[0];
        assert_eq!(
            (
                &input.given[..],
                &input.absolute[..],
                input.size,
                input.modified
            ),
            ("in.txt", &b"/data/in.txt"[..], 100, None)
        );
        assert_eq!(meta.records[0].len, 100);
        // Its sizes are checked as version 2's are: a raw input of another size is damage.
        let e = read_bytes("v1-bad", &v1_bytes(1, 99)).unwrap_err();
        assert!(e.to_string().contains("is damaged"), "{e}");
        // Cut short.
        let whole = v1_bytes(1, 100);
        let e = read_bytes("v1-short", &whole[..whole.len() - 3]).unwrap_err();
        assert!(e.to_string().contains("is damaged"), "{e}");
    }

    #[test]
    fn the_current_version_round_trips_and_a_newer_one_is_named() {
        let meta = IndexMeta {
            version: VERSION,
            n: 10,
            width: 5,
            sequence: true,
            keep_case: true,
            revcomp: false,
            inputs: vec![InputMeta {
                given: "r.fa".into(),
                absolute: b"/x/r.fa".to_vec(),
                size: 20,
                modified: Some((1_700_000_000, 5)),
                format: "fasta".into(),
                gzip: false,
            }],
            records: vec![RecordMeta {
                name: "r".into(),
                start: 0,
                len: 10,
            }],
        };
        assert_eq!(read_bytes("v2", &meta.encode()).unwrap(), meta);
        let e = read_bytes("v9", &v1_bytes(9, 100)).unwrap_err();
        let newer =
            format!("format version 9, written by a newer psa; this one reads 1 to {VERSION}");
        assert!(e.to_string().contains(&newer), "{e}");
        let e = read_bytes("nomagic", b"PSAINDEY").unwrap_err();
        assert!(e.to_string().contains("no psa magic"), "{e}");
    }
}
