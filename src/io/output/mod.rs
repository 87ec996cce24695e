//! Files the run writes, made safe: nothing under a requested name until it is complete, nothing
//! replaced that is not ours to replace, and every failure we can foresee found before the build.
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | [`plan`]: where a requested file goes ([`Dest`]) and what is refused |
//! | `at.rs` | file operations relative to an opened directory (`openat`, `renameat`, …) |
//! | `staged.rs` | [`Staged`]: one file created on pe 0, the partial files of dead runs, signals |
//! | `commit.rs` | [`commit_all`]: every file of a job put in place together, or none |
//! | `files.rs` | [`OutputFile`] (written by every pe at its offset) and [`SideFile`] (pe 0's) |
//!
//! A regular file (new, or replacing an old one) is written under a temporary name beside it,
//! `.NAME.psa-partial-TAG`, and renamed into place when complete ([`Staged`]). TAG is 64 random
//! bits drawn on pe 0, and the file is created exclusively (`O_EXCL`, no link followed), so two
//! runs never share one. While a run lives, pe 0 holds an exclusive `flock` on its temporary
//! file: a later run on the same output removes the partial files of dead runs (regular files of
//! the same user, unlocked, untouched for a minute) and leaves a running job's alone. pe 0
//! creates, renames and removes relative to the directory it opened at the start, so a directory
//! renamed or replaced mid-run changes nothing that psa touches.
//!
//! Shared directories (`/tmp`, a group scratch: the sticky bit set) are where other users can
//! place names: a symbolic link there made by another user (neither us nor the directory's owner)
//! is never followed, as the kernel's `fs.protected_symlinks` would refuse, and a file there of
//! another user, which the rename could not replace, is refused at the start. A file psa names
//! beside an output (`OUT.meta`, `OUT.text`, `BWT.primary`) is never followed through a link at
//! all: the link itself is replaced. A new file takes no more permission than the inputs and the
//! file it replaces have (and the umask allows): a private input gives private outputs.
//!
//! A character device or FIFO the user names (`-o /dev/null`) is written through in order by
//! pe 0 ([`Dest::Through`]); any other special file, a directory, the input itself and a
//! read-only file (without `force`) are refused before anything is read.

mod at;
mod commit;
mod files;
mod staged;

use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, Result};

pub use commit::commit_all;
pub use files::{host_name, OutputFile, SideFile};
pub(crate) use staged::remove_partial_now;
pub use staged::Staged;

/// Where a file the run writes goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dest {
    /// A regular file, new or replaced: written as `tmp` and renamed to `target` (in the same
    /// directory) when complete, created with permission bits `mode` (before the umask).
    Staged {
        tmp: PathBuf,
        target: PathBuf,
        mode: u32,
    },
    /// A character device or FIFO: written through, in order, by pe 0.
    Through { target: PathBuf },
}

impl Dest {
    /// The path the user will find the result under (symbolic links resolved).
    pub fn target(&self) -> &Path {
        match self {
            Dest::Staged { target, .. } | Dest::Through { target } => target,
        }
    }
}

/// Who chose a file's name, which decides what a symbolic link or special file there means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Named {
    /// The user (`-o`, `--bwt`, `--lcp`, `--stats`): a link is followed, as a shell's `>` does
    /// (unless another user made it in a shared directory), and a device or FIFO is written
    /// through.
    ByUser,
    /// psa, beside an output (`OUT.meta`, `OUT.text`, `OUT.records.tsv`, `BWT.primary`): a
    /// link is replaced, never followed, and a device or FIFO is refused.
    Beside,
}

/// The longest file name most file systems take (NAME_MAX).
const NAME_MAX: usize = 255;
const PARTIAL_MARK: &str = ".psa-partial-";

/// The temporary name of `name` for the run with `tag`: `.NAME.psa-partial-TAG`, NAME cut so
/// the whole stays within [`NAME_MAX`] bytes.
fn partial_name(name: &std::ffi::OsStr, tag: u64) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    let mut v = partial_prefix(name);
    v.extend_from_slice(format!("{tag:016x}").as_bytes());
    std::ffi::OsString::from_vec(v)
}

/// `.NAME.psa-partial-` with NAME cut as in [`partial_name`].
fn partial_prefix(name: &std::ffi::OsStr) -> Vec<u8> {
    let keep = NAME_MAX - 1 - PARTIAL_MARK.len() - 16;
    let b = name.as_bytes();
    let mut v = Vec::with_capacity(NAME_MAX);
    v.push(b'.');
    v.extend_from_slice(&b[..b.len().min(keep)]);
    v.extend_from_slice(PARTIAL_MARK.as_bytes());
    v
}

/// 64 random bits from the kernel (for temporary names unique across hosts and PID namespaces).
pub fn random_tag() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into b.
    let got = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 8, 0) };
    let mut x = u64::from_le_bytes(b);
    if got != 8 {
        // No getrandom: time and PID still differ between most runs; O_EXCL catches the rest.
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        x ^= t.as_nanos() as u64 ^ ((std::process::id() as u64) << 32);
    }
    x
}

/// Two metadata of one file (device and inode). Local.
pub(crate) fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// The effective user id of this process.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The directory a path's last component lives in ("." for a bare name).
fn parent_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The owner of `dir` when it is a shared directory (its sticky bit set: `/tmp`, a group
/// scratch), where other users can place names that we may neither follow nor replace.
fn sticky_owner(dir: &Path) -> Option<u32> {
    let m = std::fs::metadata(dir).ok()?;
    (m.mode() & libc::S_ISVTX != 0).then(|| m.uid())
}

/// Refuses `path` (whose own metadata, not followed, is `m`) when another user made it in a
/// shared directory: neither we nor the directory's owner own it, so it is not ours to follow
/// (a link) or replace (a file: the rename would fail at the end, after the build).
fn refuse_foreign(path: &Path, m: &std::fs::Metadata, what: &str) -> Result<()> {
    let Some(dir_owner) = sticky_owner(&parent_of(path)) else {
        return Ok(());
    };
    let me = euid();
    let link = m.file_type().is_symlink();
    // Root may replace anything (CAP_FOWNER), but follows no one's link: the link's owner
    // chose where it points.
    if m.uid() == me || m.uid() == dir_owner || (me == 0 && !link) {
        return Ok(());
    }
    let kind = if link { "a symbolic link" } else { "a file" };
    let verb = if link {
        "follow it (the file it names would be replaced)"
    } else {
        "replace it"
    };
    Err(Error::Usage(format!(
        "{what} '{}' is {kind} of another user (uid {}) in the shared directory '{}' (sticky bit): psa does not {verb}; remove it or choose another path",
        path.display(),
        m.uid(),
        parent_of(path).display()
    )))
}

/// Follows the chain of symbolic links at `requested` (at most 40), refusing any link that
/// another user made in a shared directory ([`refuse_foreign`]); returns the resolved path
/// (canonical), or the link itself when it points at a device or FIFO (written through as it
/// is: `/dev/stdout`, a shell's `>(…)`).
fn follow_user_link(requested: &Path, what: &str) -> Result<(PathBuf, bool)> {
    let shown = requested.display();
    let mut at = requested.to_path_buf();
    for _ in 0..40 {
        let Ok(m) = std::fs::symlink_metadata(&at) else {
            break;
        };
        if !m.file_type().is_symlink() {
            break;
        }
        refuse_foreign(&at, &m, what)?;
        let to = std::fs::read_link(&at).map_err(|e| Error::io("read the link", &at, e))?;
        at = parent_of(&at).join(to);
    }
    let followed = std::fs::metadata(requested).map(|m| m.file_type());
    if followed.is_ok_and(|t| t.is_char_device() || t.is_fifo()) {
        return Ok((requested.to_path_buf(), true));
    }
    let target = std::fs::canonicalize(requested).map_err(|_| {
        Error::Usage(format!(
            "{what} '{shown}' is a symbolic link to a missing file or directory: give the path itself"
        ))
    })?;
    Ok((target, false))
}

/// The permission bits for a new file: no more than the inputs allow their group and others
/// (and the file it replaces, if any), always read and write for its owner; the umask applies
/// on top. A private input (0600) gives private outputs; a rebuild never widens an output.
fn mode_for(inputs: &[&Path], old: Option<&std::fs::Metadata>) -> u32 {
    let input_modes = inputs
        .iter()
        .filter_map(|i| std::fs::metadata(i).ok())
        .map(|m| m.mode());
    let old_mode = old.filter(|m| m.is_file()).map(|m| m.mode());
    (input_modes.chain(old_mode)).fold(0o666, |acc, m| acc & (m | 0o600)) & 0o666
}

/// Decides where the file the user (or psa, beside an output: `named`) asked for at
/// `requested` goes, and refuses what must not be written: a directory, one of `inputs`
/// (compared by device and inode, after resolving links), a special file other than a
/// character device or FIFO the user named, a read-only file unless `force`, and another
/// user's link or file in a shared directory. `what` names the file in messages ("output",
/// "stats file"). Local; reads metadata only.
pub fn plan(
    requested: &Path,
    inputs: &[&Path],
    force: bool,
    what: &str,
    tag: u64,
    named: Named,
) -> Result<Dest> {
    let shown = requested.display();
    // "dir/" names a directory whether or not it exists (Path::file_name would take "dir" for
    // the file): refused here, not at the rename after the build.
    if requested.as_os_str().as_bytes().ends_with(b"/") {
        return Err(Error::Usage(format!(
            "{what} '{shown}' ends in '/': it names a directory, not a file"
        )));
    }
    let own = std::fs::symlink_metadata(requested).ok();
    let is_link = own.as_ref().is_some_and(|m| m.file_type().is_symlink());
    let target = match (is_link, named) {
        (true, Named::ByUser) => match follow_user_link(requested, what)? {
            (through, true) => return Ok(Dest::Through { target: through }),
            (target, false) => target,
        },
        _ => requested.to_path_buf(),
    };
    let name = target
        .file_name()
        .ok_or_else(|| Error::Usage(format!("{what} '{shown}' names no file")))?
        .to_owned();
    let dir = parent_of(&target);
    // What is at the target now: the file a link led to, or (beside an output) the link itself.
    let now = match named {
        Named::Beside => std::fs::symlink_metadata(&target),
        Named::ByUser => std::fs::metadata(&target),
    };
    let old = match now {
        Ok(m) => Some(m),
        Err(e) if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::NotADirectory => None,
        Err(e) => return Err(Error::io("look at", &target, e)),
    };
    if let Some(m) = &old {
        if let Some(through) = refuse_existing(requested, &target, m, inputs, force, what, named)? {
            return Ok(through);
        }
    }
    check_directory(&dir, requested, what)?;
    let tmp = dir.join(partial_name(&name, tag));
    let mode = mode_for(inputs, old.as_ref());
    Ok(Dest::Staged { tmp, target, mode })
}

/// The checks of [`plan`] on a file that exists at `target` (metadata `m`): refuses the input
/// itself, a directory, a special file (beside an output: any), a read-only one without
/// `force`, and another user's file in a shared directory; a device or FIFO the user named is
/// written through (returned).
fn refuse_existing(
    requested: &Path,
    target: &Path,
    m: &std::fs::Metadata,
    inputs: &[&Path],
    force: bool,
    what: &str,
    named: Named,
) -> Result<Option<Dest>> {
    let shown = requested.display();
    for input in inputs {
        if std::fs::metadata(input).is_ok_and(|im| same_file(m, &im)) {
            return Err(Error::Usage(format!(
                "{what} '{shown}' is the input '{}' (the same file): refusing to overwrite the input; choose another path",
                input.display()
            )));
        }
    }
    let ft = m.file_type();
    if ft.is_dir() {
        return Err(Error::Usage(format!("{what} '{shown}' is a directory")));
    }
    refuse_foreign(target, m, what)?;
    if ft.is_symlink() {
        // Beside an output, a link of ours is replaced by the file (the rename takes the link).
        return Ok(None);
    }
    if (ft.is_char_device() || ft.is_fifo()) && named == Named::ByUser {
        return Ok(Some(Dest::Through {
            target: target.to_path_buf(),
        }));
    }
    if !ft.is_file() {
        let why = match named {
            Named::Beside => {
                "psa writes a regular file there: remove it or choose another output name"
            }
            Named::ByUser => "not a regular file, character device or FIFO: refusing to replace it",
        };
        return Err(Error::Usage(format!(
            "{what} '{shown}' is a special file ({why})"
        )));
    }
    if !force && !writable(target, m) {
        return Err(Error::Usage(format!(
            "{what} '{shown}' is read-only (mode {:04o}): remove it, make it writable, or pass --force to replace it",
            m.mode() & 0o7777
        )));
    }
    Ok(None)
}

/// The file is made beside its target under a temporary name: its directory must be there and
/// writable (named here, not by the first side file that fails to be made in it).
fn check_directory(dir: &Path, requested: &Path, what: &str) -> Result<()> {
    let why = match std::fs::metadata(dir) {
        Ok(d) if !d.is_dir() => Some(" is not a directory".to_string()),
        Ok(_) => (!may(dir, libc::W_OK | libc::X_OK))
            .then(|| format!(": {}", std::io::Error::last_os_error())),
        Err(e) => Some(format!(": {e}")),
    };
    match why {
        Some(why) => Err(Error::System(format!(
            "cannot write {what} '{}': its directory '{}'{why}",
            requested.display(),
            dir.display()
        ))),
        None => Ok(()),
    }
}

/// Whether two requested paths, each named by the user or beside an output ([`Named`]: only the
/// user's links are followed), end up at the same file (`.`/`..` resolved), whether or not that
/// file exists yet. Local.
pub fn same_destination(a: (&Path, Named), b: (&Path, Named)) -> bool {
    fn place((p, named): (&Path, Named)) -> Option<PathBuf> {
        if named == Named::ByUser {
            if let Ok(c) = std::fs::canonicalize(p) {
                return Some(c);
            }
        }
        Some(
            std::fs::canonicalize(parent_of(p))
                .ok()?
                .join(p.file_name()?),
        )
    }
    match (place(a), place(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// Whether the user may write `path` (root may write anything, but a file nobody may write is
/// read-only to us too: it says "keep me").
fn writable(path: &Path, m: &std::fs::Metadata) -> bool {
    m.mode() & 0o222 != 0 && may(path, libc::W_OK)
}

/// Whether the user may do `mode` (`libc::W_OK`, …) to `path` (access(2); on false, the reason
/// is in `errno`).
fn may(path: &Path, mode: libc::c_int) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), mode) == 0 }
}

#[cfg(test)]
mod tests;
