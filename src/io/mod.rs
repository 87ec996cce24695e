//! Reading each pe's slice of the input ([`read_distributed`]) and writing the suffix array at
//! each pe's offset ([`OutputFile`]: the output goes to a temporary file beside the requested path
//! and is renamed into place only after every pe has written its part); sequence input and
//! several inputs ([`seq`]); token input ([`tokens`]); the index files beside the SA and queries on them ([`index`],
//! [`query`]).

pub(crate) mod bgzf;
pub mod index;
pub(crate) mod output;
pub mod query;
pub mod search;
pub mod seq;
pub mod tokens;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub use output::{host_name, OutputFile};
pub(crate) use output::{remove_partial_now, SideFile};

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};

/// A modification time: seconds and nanoseconds since the epoch.
pub type Mtime = (i64, u32);

/// `path`'s modification time (seconds and nanoseconds since the epoch), where the file system
/// keeps one. Local.
pub fn modified_time(path: &Path) -> Option<Mtime> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.mtime(), u32::try_from(m.mtime_nsec()).ok()?))
}

/// Size of the input file in bytes, with clear errors for missing files and directories. Local.
pub fn input_len(path: &Path) -> Result<usize> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io("read input", path, e))?;
    if !meta.is_dir() && !meta.is_file() {
        return Err(Error::BadInput(format!(
            "input '{}' is not a regular file (pipes and devices are not supported: every pe reads its own slice with positioned reads)",
            path.display()
        )));
    }
    if meta.is_dir() {
        return Err(Error::BadInput(format!(
            "input '{}' is a directory, not a file",
            path.display()
        )));
    }
    if let Some(fs) = pseudo_file_system(path) {
        return Err(Error::BadInput(format!(
            "input '{}' is on {fs}, whose files are made as they are read and whose sizes are not their contents: copy it to a regular file first (cat '{}' > FILE)",
            path.display(),
            path.display()
        )));
    }
    usize::try_from(meta.len())
        .map_err(|_| Error::BadInput(format!("input '{}' is too large", path.display())))
}

/// The kind of file system `path` is on when its regular files are not data at rest (their
/// size, often 0 or a page, is not their content, and reading them twice may differ): the
/// kernel's proc, sysfs, debugfs, tracefs, securityfs, configfs, cgroup files. None for any
/// other. Local.
fn pseudo_file_system(path: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    const KINDS: [(i64, &str); 8] = [
        (0x9fa0, "proc (/proc)"),
        (0x6265_6572, "sysfs (/sys)"),
        (0x6462_6720, "debugfs"),
        (0x7472_6163, "tracefs"),
        (0x7363_6673, "securityfs"),
        (0x6265_6570, "configfs"),
        (0x0027_e0eb, "a cgroup file system"),
        (0x6367_7270, "a cgroup file system"),
    ];
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: a NUL-terminated path and room for one statfs.
    if unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statfs succeeded and filled it.
    let kind = unsafe { st.assume_init() }.f_type as i64;
    KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, name)| *name)
}

/// Reads bytes `[start, end)` of `path` with positioned reads. Local.
pub fn read_range(path: &Path, start: usize, end: usize) -> Result<Vec<u8>> {
    let f = File::open(path).map_err(|e| Error::io("open input", path, e))?;
    let mut buf = vec![0u8; end - start];
    f.read_exact_at(&mut buf, start as u64)
        .map_err(|e| Error::io("read input", path, e))?;
    Ok(buf)
}

/// The input's length as every pe sees it. Collective: an error on any pe is an error on all.
pub fn agreed_input_len(comm: &Comm, path: &Path) -> Result<usize> {
    let n = comm.agree(input_len(path))?;
    let lo = comm.all_reduce_min(n as u64);
    let hi = comm.all_reduce_max(n as u64);
    if lo != hi {
        return comm.agree(Err(Error::BadInput(format!(
            "input '{}' has {lo} bytes on one pe and {hi} on another (a different file on some node, or changing while being read)",
            path.display()
        ))));
    }
    Ok(n)
}

/// Every pe reads its block of the input, which must still have the `n` bytes the run planned
/// for. Collective: an error on any pe is an error on all. Returns this pe's slice and the block
/// layout of the whole text.
pub fn read_distributed(comm: &Comm, path: &Path, n: usize) -> Result<(Vec<u8>, Layout)> {
    if comm.any(input_len(path).ok() != Some(n)) {
        return comm.agree(Err(Error::BadInput(format!(
            "input '{}' changed while being read (it had {n} bytes)",
            path.display()
        ))));
    }
    let layout = Layout::block(n, comm.size());
    let me = comm.rank();
    let text = read_range(path, layout.start(me), layout.end(me));
    Ok((comm.agree(text)?, layout))
}

/// Width of an SA entry in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// 4 when every index fits 32 bits, else 5.
    Auto,
    /// This many bytes (4 to 8).
    Fixed(usize),
}

impl Width {
    /// Parses a command-line value: auto, 4, 5 or 8.
    pub fn parse(s: &str) -> std::result::Result<Width, String> {
        match s {
            "auto" => Ok(Width::Auto),
            "4" => Ok(Width::Fixed(4)),
            "5" => Ok(Width::Fixed(5)),
            "8" => Ok(Width::Fixed(8)),
            _ => Err(format!("'{s}' is not one of auto, 4, 5, 8")),
        }
    }

    /// The byte width of the entries of infini-gram's table of `n` tokens of `token_bytes`
    /// bytes each (byte offsets, up to (n − 1) × `token_bytes`): auto is infini-gram's own
    /// ([`infini_gram_width`] of the file's size); a fixed width must hold the largest offset.
    pub fn resolve_infini_gram(self, n: usize, token_bytes: usize) -> Result<usize> {
        let bytes = (n as u128) * token_bytes as u128;
        match self {
            Width::Auto => Ok(infini_gram_width(bytes)),
            Width::Fixed(w) => self.fits(w, n, bytes.saturating_sub(token_bytes as u128)),
        }
    }

    /// The byte width to use for a text of `n` characters, or an error if it cannot hold n-1.
    pub fn resolve(self, n: usize) -> Result<usize> {
        let max = n.saturating_sub(1) as u128;
        match self {
            Width::Auto => Ok(if max <= u32::MAX as u128 {
                4
            } else if max < 1u128 << 40 {
                5
            } else {
                8
            }),
            Width::Fixed(w) => self.fits(w, n, max),
        }
    }

    /// `w` if it is one of the fixed widths and holds `max`, the largest entry of a text of `n`
    /// characters; else the error to show.
    fn fits(self, w: usize, n: usize, max: u128) -> Result<usize> {
        if !matches!(w, 4 | 5 | 8) {
            return Err(Error::Invalid(format!(
                "--width must be auto, 4, 5 or 8, not {w}"
            )));
        }
        if max >= 1u128 << (8 * w) {
            return Err(Error::Invalid(format!(
                "--width {w} is too small for a text of {n} characters (largest index {max} needs {} bytes)",
                bytes_needed(max)
            )));
        }
        Ok(w)
    }
}

fn bytes_needed(max: u128) -> usize {
    (((128 - max.leading_zeros()) as usize).div_ceil(8)).max(1)
}

/// infini-gram's entry width for a file of `bytes` bytes: ceil(log2(bytes) / 8), the fewest
/// bytes b with bytes ≤ 256^b, at least 1 (its indexer's `ratio`, computed here in integers,
/// where its floating-point log2 could round down just above a power of 256). Every offset
/// below `bytes` fits. Local.
pub fn infini_gram_width(bytes: u128) -> usize {
    (1..=16).find(|&b| bytes <= 1u128 << (8 * b)).unwrap_or(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_rules() {
        assert_eq!(Width::Auto.resolve(0).ok(), Some(4));
        assert_eq!(Width::Auto.resolve(1 << 32).ok(), Some(4));
        assert_eq!(Width::Auto.resolve((1 << 32) + 1).ok(), Some(5));
        assert!(Width::Fixed(4).resolve((1 << 32) + 1).is_err());
        assert_eq!(Width::Fixed(5).resolve((1 << 32) + 1).ok(), Some(5));
        assert!(Width::Fixed(3).resolve(10).is_err());
    }

    /// infini-gram's ratio ceil(log2(size) / 8): 1 up to 256 bytes, 2 up to 65536, 4 up to
    /// 2^32, 5 above; at least 1 (an empty or one-byte file).
    #[test]
    fn infini_gram_widths() {
        let ratio = |b: u128| ((b as f64).log2() / 8.0).ceil() as usize;
        for b in [
            2u128,
            3,
            255,
            256,
            257,
            65535,
            65536,
            65537,
            1 << 24,
            (1 << 24) + 1,
        ] {
            assert_eq!(infini_gram_width(b), ratio(b), "{b} bytes");
        }
        assert_eq!(infini_gram_width(0), 1);
        assert_eq!(infini_gram_width(1), 1);
        assert_eq!(infini_gram_width(1 << 32), 4);
        assert_eq!(infini_gram_width((1 << 32) + 2), 5);
        assert_eq!(infini_gram_width(1 << 40), 5);
        // 2^16 u16 tokens: 2^17 bytes, offsets up to 2^17 - 2.
        assert_eq!(Width::Auto.resolve_infini_gram(1 << 16, 2).unwrap(), 3);
        assert_eq!(Width::Auto.resolve_infini_gram(128, 2).unwrap(), 1);
        assert_eq!(Width::Auto.resolve_infini_gram(0, 4).unwrap(), 1);
        assert_eq!(Width::Fixed(4).resolve_infini_gram(1 << 30, 4).unwrap(), 4);
        assert!(Width::Fixed(4)
            .resolve_infini_gram((1 << 30) + 1, 4)
            .is_err());
    }
}
