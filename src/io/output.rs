//! Files the run writes, made safe: nothing under a requested name until it is complete, nothing
//! replaced that is not ours to replace, and every failure we can foresee found before the build.
//!
//! A regular file (new, or replacing an old one) is written under a temporary name beside it,
//! `.NAME.psa-partial-TAG`, and renamed into place when complete ([`Staged`]). TAG is 64 random
//! bits drawn on pe 0, and the file is created exclusively (`O_EXCL`), so two runs never share
//! one. While a run lives, pe 0 holds an exclusive `flock` on its temporary file: a later run on
//! the same output removes the partial files of dead runs (unlocked, untouched for a minute) and
//! leaves a running job's alone. A character device or FIFO (`-o /dev/null`) is written through
//! in order by pe 0 ([`Dest::Through`]); any other special file, a directory, the input itself
//! and a read-only file (without `force`) are refused before anything is read.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering as AtomicOrdering};
use std::time::{Duration, SystemTime};

use rayon::prelude::*;

use crate::comm::Comm;
use crate::error::{Error, Result};

/// Where a file the run writes goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dest {
    /// A regular file, new or replaced: written as `tmp` and renamed to `target` when complete.
    Staged { tmp: PathBuf, target: PathBuf },
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

/// The longest file name most file systems take (NAME_MAX).
const NAME_MAX: usize = 255;
const PARTIAL_MARK: &str = ".psa-partial-";
/// A partial file left unlocked for this long belongs to a dead run and may be removed.
const STALE_AFTER: Duration = Duration::from_secs(60);

/// The temporary name of `name` for the run with `tag`: `.NAME.psa-partial-TAG`, NAME cut so
/// the whole stays within [`NAME_MAX`] bytes.
fn partial_name(name: &std::ffi::OsStr, tag: u64) -> std::ffi::OsString {
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

/// Decides where the file the user asked for at `requested` goes, and refuses what must not be
/// written: a directory, one of `inputs` (compared by device and inode, after resolving links),
/// a special file other than a character device or FIFO, and a read-only file unless `force`.
/// `what` names the file in messages ("output", "stats file"). Local; reads metadata only.
pub fn plan(requested: &Path, inputs: &[&Path], force: bool, what: &str, tag: u64) -> Result<Dest> {
    let shown = requested.display();
    // "dir/" names a directory whether or not it exists (Path::file_name would take "dir" for
    // the file): refused here, not at the rename after the build.
    if requested.as_os_str().as_bytes().ends_with(b"/") {
        return Err(Error::Usage(format!(
            "{what} '{shown}' ends in '/': it names a directory, not a file"
        )));
    }
    // A symbolic link is followed: the user means the file it names (as a shell's `>` does).
    let is_link = std::fs::symlink_metadata(requested).is_ok_and(|m| m.file_type().is_symlink());
    // A link to a pipe or device (`/dev/stdout`, `/proc/self/fd/N`, a shell's `>(…)`) names no
    // path to resolve, but the kernel opens it: written through as it is.
    let followed = std::fs::metadata(requested).map(|m| m.file_type());
    if is_link && followed.is_ok_and(|t| t.is_char_device() || t.is_fifo()) {
        return Ok(Dest::Through {
            target: requested.to_path_buf(),
        });
    }
    let target = if is_link {
        std::fs::canonicalize(requested).map_err(|_| {
            Error::Usage(format!(
                "{what} '{shown}' is a symbolic link to a missing file or directory: give the path itself"
            ))
        })?
    } else {
        requested.to_path_buf()
    };
    let name = target
        .file_name()
        .ok_or_else(|| Error::Usage(format!("{what} '{shown}' names no file")))?
        .to_owned();
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::metadata(&target) {
        Ok(m) => {
            for input in inputs {
                if std::fs::metadata(input).is_ok_and(|im| same_file(&m, &im)) {
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
            if ft.is_char_device() || ft.is_fifo() {
                return Ok(Dest::Through { target });
            }
            if !ft.is_file() {
                return Err(Error::Usage(format!(
                    "{what} '{shown}' is a special file (not a regular file, character device or FIFO): refusing to replace it"
                )));
            }
            if !force && !writable(&target, &m) {
                return Err(Error::Usage(format!(
                    "{what} '{shown}' is read-only (mode {:04o}): remove it, make it writable, or pass --force to replace it",
                    m.mode() & 0o7777
                )));
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::NotADirectory => {}
        Err(e) => return Err(Error::io("look at", &target, e)),
    }
    // The file is made beside the target under a temporary name: its directory must be there
    // and writable (named here, not by the first side file that fails to be made in it).
    let why = match std::fs::metadata(&dir) {
        Ok(d) if !d.is_dir() => Some(" is not a directory".to_string()),
        Ok(_) => (!may(&dir, libc::W_OK | libc::X_OK))
            .then(|| format!(": {}", std::io::Error::last_os_error())),
        Err(e) => Some(format!(": {e}")),
    };
    if let Some(why) = why {
        return Err(Error::System(format!(
            "cannot write {what} '{shown}': its directory '{}'{why}",
            dir.display()
        )));
    }
    let tmp = dir.join(partial_name(&name, tag));
    Ok(Dest::Staged { tmp, target })
}

/// Whether two requested paths end up at the same file (links followed, `.`/`..` resolved),
/// whether or not that file exists yet. Local.
pub fn same_destination(a: &Path, b: &Path) -> bool {
    fn place(p: &Path) -> Option<PathBuf> {
        if let Ok(c) = std::fs::canonicalize(p) {
            return Some(c);
        }
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
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

/// Removes the partial files of `target` that dead runs left behind: ours by name, not locked by
/// a living run, and not written for [`STALE_AFTER`]. Local; best effort (logs what it removed).
pub fn remove_stale_partials(target: &Path) {
    let Some(name) = target.file_name() else {
        return;
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let prefix = partial_prefix(name);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let fname = e.file_name();
        let b = fname.as_bytes();
        let ours = b.len() == prefix.len() + 16
            && b.starts_with(&prefix)
            && b[prefix.len()..].iter().all(|c| c.is_ascii_hexdigit());
        if !ours {
            continue;
        }
        let path = e.path();
        let Ok(f) = File::open(&path) else { continue };
        let old = f
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= STALE_AFTER);
        // SAFETY: flock on a file descriptor we own.
        let unlocked = unsafe { libc::flock(fd(&f), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if old && unlocked && std::fs::remove_file(&path).is_ok() {
            log::info!(
                "removed '{}', left behind by a run of psa that ended without cleaning up",
                path.display()
            );
        }
    }
}

fn fd(f: &File) -> libc::c_int {
    std::os::unix::io::AsRawFd::as_raw_fd(f)
}

/// Reserves `bytes` for `f` on its file system, so that a lack of room shows now and not when
/// the result is written. File systems without `fallocate` get a sparse file instead.
fn reserve(f: &File, bytes: u64, dir: &Path) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: posix_fallocate on a file descriptor we own.
    let rc = unsafe { libc::posix_fallocate(fd(f), 0, bytes as libc::off_t) };
    match rc {
        0 => Ok(()),
        libc::EOPNOTSUPP | libc::EINVAL => f
            .set_len(bytes)
            .map_err(|e| Error::io("size the output in", dir, e)),
        libc::ENOSPC | libc::EDQUOT | libc::EFBIG => Err(Error::System(format!(
            "cannot reserve {bytes} bytes for the output in '{}': {} (free some space or write elsewhere with -o)",
            dir.display(),
            std::io::Error::from_raw_os_error(rc)
        ))),
        e => Err(Error::io(
            "reserve space for the output in",
            dir,
            std::io::Error::from_raw_os_error(e),
        )),
    }
}

// ------------------------------------------------------------------------------------------------
// Removal on SIGTERM / SIGINT / panic

/// Temporary files a signal or a panic should remove (pe 0's), each a NUL-terminated path in a
/// slot that the signal handler reads without locks. A slot is taken when the file is created
/// and given back when it is committed or removed (its path is then left allocated, never freed:
/// a handler on another thread may be reading it). A job has at most 8 at once (the SA,
/// `--stats`, the index's text, records table and metadata, the BWT, its primary index and the
/// LCP array); a library caller that runs jobs one after another reuses the slots.
static PARTIALS: [AtomicPtr<libc::c_char>; 16] = [const { AtomicPtr::new(ptr::null_mut()) }; 16];

/// Removes every registered temporary file now (for the panic and out-of-memory handlers, which
/// end the job with MPI_Abort before any destructor runs). Async-signal-safe.
pub fn remove_partial_now() {
    for slot in &PARTIALS {
        let p = slot.load(AtomicOrdering::SeqCst);
        if !p.is_null() {
            // SAFETY: p is a valid NUL-terminated path that is never freed; unlink is
            // async-signal-safe.
            unsafe { libc::unlink(p) };
        }
    }
}

extern "C" fn remove_partial_and_die(sig: libc::c_int) {
    // Only async-signal-safe calls here: unlink, signal, raise.
    remove_partial_now();
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Makes SIGTERM and SIGINT (what mpirun, srun and scancel send) remove `tmp` before the process
/// dies. Installs process-wide signal handlers on first use. Returns the slot taken (None when
/// all are taken, or the path holds a NUL): give it back with [`forget_partial`].
fn remove_on_signal(tmp: &Path) -> Option<usize> {
    let c = std::ffi::CString::new(tmp.as_os_str().as_bytes()).ok()?;
    let p = c.into_raw();
    let free = |slot: &AtomicPtr<libc::c_char>| {
        let (null, order) = (ptr::null_mut(), AtomicOrdering::SeqCst);
        slot.compare_exchange(null, p, order, order).is_ok()
    };
    let Some(taken) = PARTIALS.iter().position(free) else {
        // SAFETY: p came from into_raw above and was stored nowhere.
        drop(unsafe { std::ffi::CString::from_raw(p) });
        return None;
    };
    let handler = remove_partial_and_die as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: installing a handler that only makes async-signal-safe calls.
    unsafe {
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
    Some(taken)
}

/// Gives back a slot of [`remove_on_signal`]: its file was committed or removed.
fn forget_partial(slot: Option<usize>) {
    if let Some(k) = slot {
        PARTIALS[k].store(ptr::null_mut(), AtomicOrdering::SeqCst);
    }
}

// ------------------------------------------------------------------------------------------------
// One file on pe 0

/// A file being written on pe 0 only ([`Dest::Staged`] or [`Dest::Through`]), removed again on
/// drop unless committed.
pub struct Staged {
    dest: Dest,
    file: File,
    committed: bool,
    /// Its slot among the files a signal removes ([`remove_on_signal`]).
    slot: Option<usize>,
}

impl Staged {
    /// Creates the file for `dest`: the temporary file exclusively, locked, with `reserve` bytes
    /// allocated (after removing the partial files of dead runs of the same target), or the
    /// device or FIFO opened for writing (a FIFO without a reader is an error, not a wait).
    /// `what` names the file in messages ("output", "stats file").
    pub fn create(dest: Dest, reserve_bytes: u64, what: &str) -> Result<Staged> {
        let file = match &dest {
            Dest::Staged { tmp, target } => {
                remove_stale_partials(target);
                let dir = tmp.parent().unwrap_or(Path::new("."));
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(tmp)
                    .map_err(|e| {
                        Error::System(format!(
                            "cannot create the {what} '{}' (its temporary file in '{}'): {e}",
                            target.display(),
                            dir.display()
                        ))
                    })?;
                let staged = Staged {
                    dest: dest.clone(),
                    file: f,
                    committed: false,
                    slot: remove_on_signal(tmp),
                };
                // SAFETY: flock on a file descriptor we own. Held until the file is closed.
                unsafe { libc::flock(fd(&staged.file), libc::LOCK_EX | libc::LOCK_NB) };
                reserve(&staged.file, reserve_bytes, dir)?;
                return Ok(staged);
            }
            Dest::Through { target } => {
                let f = OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(target)
                    .map_err(|e| match e.raw_os_error() {
                        Some(libc::ENXIO) => Error::System(format!(
                            "{what} '{}' is a FIFO that nobody reads: start its reader first",
                            target.display()
                        )),
                        _ => Error::System(format!(
                            "cannot open the {what} '{}': {e}",
                            target.display()
                        )),
                    })?;
                // Writes block again as usual (the reader sets the pace).
                // SAFETY: fcntl on a file descriptor we own.
                unsafe {
                    let fl = libc::fcntl(fd(&f), libc::F_GETFL);
                    libc::fcntl(fd(&f), libc::F_SETFL, fl & !libc::O_NONBLOCK);
                }
                f
            }
        };
        Ok(Staged {
            dest,
            file,
            committed: false,
            slot: None,
        })
    }

    /// Where this file goes.
    pub fn dest(&self) -> &Dest {
        &self.dest
    }

    /// Writes `bytes` at the end of what was written (the whole content of a small file).
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        let target = self.dest.target().to_path_buf();
        self.file
            .write_all(bytes)
            .map_err(|e| Error::io("write", target, e))
    }

    /// Makes the file durable (its temporary file; nothing for a written-through target).
    pub fn sync(&self) -> Result<()> {
        match &self.dest {
            Dest::Staged { tmp, .. } => {
                self.file.sync_all().map_err(|e| Error::io("write", tmp, e))
            }
            Dest::Through { .. } => Ok(()),
        }
    }

    /// Makes the file durable and puts it in place (renames a temporary file onto its target).
    pub fn commit(mut self) -> Result<()> {
        self.sync()?;
        if let Dest::Staged { tmp, target } = &self.dest {
            std::fs::rename(tmp, target).map_err(|e| Error::io("rename output to", target, e))?;
            forget_partial(self.slot.take());
            if let Some(d) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
                // The rename itself made durable; not all file systems allow it (no error then).
                let _ = File::open(d).and_then(|d| d.sync_all());
            }
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let (false, Dest::Staged { tmp, .. }) = (self.committed, &self.dest) {
            let _ = std::fs::remove_file(tmp);
        }
        forget_partial(self.slot.take());
    }
}

/// A small file written by pe 0 at the end of the run (`--stats`), planned and created at the
/// start so that a bad path fails before the build.
pub struct SideFile {
    staged: Option<Staged>,
}

impl SideFile {
    /// Plans and creates the file on pe 0 (see [`plan`]); every pe gets the same verdict.
    /// Collective.
    pub fn create(
        comm: &Comm,
        requested: &Path,
        inputs: &[&Path],
        force: bool,
        what: &str,
    ) -> Result<SideFile> {
        let mut tag = random_tag();
        comm.broadcast(&mut tag, 0);
        let staged = match comm.rank() {
            0 => plan(requested, inputs, force, what, tag)
                .and_then(|d| Staged::create(d, 0, what))
                .map(Some),
            _ => Ok(None),
        };
        Ok(SideFile {
            staged: comm.agree(staged)?,
        })
    }

    /// Writes `content` (pe 0's is used) and makes it durable, not yet in place
    /// ([`Self::commit`]). Collective.
    pub fn write(&mut self, comm: &Comm, content: &[u8]) -> Result<()> {
        let r = match &mut self.staged {
            Some(s) => s.write_all(content).and_then(|()| s.sync()),
            None => Ok(()),
        };
        comm.agree(r)
    }

    /// Puts the written file in place (renames it to the requested name). Collective.
    pub fn commit(self, comm: &Comm) -> Result<()> {
        comm.agree(self.staged.map_or(Ok(()), |s| s.commit()))
    }
}

// ------------------------------------------------------------------------------------------------
// The suffix array file, written by all pes

/// The suffix array's output file, written by every pe at its own offset (or, for a device or
/// FIFO, streamed to pe 0 in order). Created by [`OutputFile::create`]; the temporary file is
/// removed on drop unless [`OutputFile::commit`] put it in place.
pub struct OutputFile {
    /// pe 0: the file it created. Others: None.
    root: Option<Staged>,
    /// Every pe's handle to the temporary file (None for a written-through target).
    file: Option<File>,
    tmp: Option<PathBuf>,
    width: usize,
}

/// A host name for messages (the node a pe runs on).
pub fn host_name() -> String {
    let mut b = [0u8; 256];
    // SAFETY: gethostname writes at most b.len() bytes.
    let rc = unsafe { libc::gethostname(b.as_mut_ptr().cast(), b.len()) };
    if rc != 0 {
        return "?".into();
    }
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

impl OutputFile {
    /// Plans the output (see `plan`: refuses the input itself, directories, special files and,
    /// without `force`, read-only files), then creates it on pe 0 with room for `n` entries of
    /// `width` bytes reserved; every other pe opens it right away, so a directory that some
    /// node cannot see fails now. Collective; every pe gets the same verdict.
    pub fn create(
        comm: &Comm,
        requested: &Path,
        inputs: &[&Path],
        force: bool,
        n: usize,
        width: usize,
    ) -> Result<OutputFile> {
        Self::create_named(comm, requested, inputs, force, n, width, "output")
    }

    /// [`Self::create`] for a file that messages call `what` ("BWT output", "LCP output").
    /// Collective.
    pub fn create_named(
        comm: &Comm,
        requested: &Path,
        inputs: &[&Path],
        force: bool,
        n: usize,
        width: usize,
        what: &str,
    ) -> Result<OutputFile> {
        let mut tag = random_tag();
        comm.broadcast(&mut tag, 0);
        let bytes = (n as u64).saturating_mul(width as u64);
        let root = match comm.rank() {
            0 => plan(requested, inputs, force, what, tag)
                .and_then(|d| Staged::create(d, bytes, what))
                .map(Some),
            _ => Ok(None),
        };
        let root = comm.agree(root)?;
        // Every pe learns the temporary path (empty: written through on pe 0).
        let mut tmp = match root.as_ref().map(|s| s.dest()) {
            Some(Dest::Staged { tmp, .. }) => tmp.as_os_str().as_bytes().to_vec(),
            _ => Vec::new(),
        };
        comm.broadcast_bytes(&mut tmp, 0);
        let tmp = (!tmp.is_empty()).then(|| PathBuf::from(std::ffi::OsString::from_vec(tmp)));
        let file = match (&tmp, &root) {
            (Some(t), Some(s)) => s
                .file
                .try_clone()
                .map(Some)
                .map_err(|e| Error::io("open output", t, e)),
            (Some(t), None) => OpenOptions::new()
                .read(true)
                .write(true)
                .open(t)
                .map(Some)
                .map_err(|e| {
                    Error::System(format!(
                        "cannot open the output's temporary file '{}': {e} (is its directory on a file system that every node sees?)",
                        t.display()
                    ))
                }),
            (None, _) => Ok(None),
        };
        let file = comm.agree(file)?;
        Ok(OutputFile {
            root,
            file,
            tmp,
            width,
        })
    }

    /// Whether pes write their parts at their offsets themselves (a regular file); false when
    /// pe 0 writes everything in order (a device or FIFO).
    pub fn is_positional(&self) -> bool {
        self.file.is_some()
    }

    /// Writes this pe's entries, starting at entry `first`, little-endian, and makes them
    /// durable. Collective. (The suffix array and LCP array as `u64`, the BWT as bytes.)
    pub fn write<E: bytemuck::Pod + Into<u64> + Sync>(
        &self,
        comm: &Comm,
        first: usize,
        sa: &[E],
    ) -> Result<()> {
        if self.is_positional() {
            return comm.agree(self.write_part(first, sa).and_then(|()| self.sync_local()));
        }
        // Written through: pe 0 writes every pe's part as it arrives, in pe order.
        let _ = first;
        let mut failed: Option<Error> = None;
        let mut dev = self.root.as_ref().map(|s| &s.file);
        let width = self.width;
        let mut buf = Vec::new();
        comm.stream_to_root(sa, 0, 1 << 20, None, |_, part: &[E]| {
            if failed.is_some() {
                return;
            }
            buf.clear();
            encode_le(&mut buf, part, width);
            if let Some(f) = dev.as_mut() {
                let target = self.root.as_ref().map(|s| s.dest().target().to_path_buf());
                if let Err(e) = (&**f).write_all(&buf) {
                    failed = Some(Error::io("write output", target.unwrap_or_default(), e));
                }
            }
        });
        comm.agree(failed.map_or(Ok(()), Err))
    }

    /// Writes entries `first..first + sa.len()`, little-endian, on this pe's threads (a chunk
    /// each at its own offset); entries as wide as the file's are written as they are. Local;
    /// [`Self::sync_local`] makes them durable. Only for positional outputs.
    pub fn write_part<E: bytemuck::Pod + Into<u64> + Sync>(
        &self,
        first: usize,
        sa: &[E],
    ) -> Result<()> {
        let (Some(f), Some(tmp)) = (&self.file, &self.tmp) else {
            return Err(Error::Invalid(
                "internal: a positional write to an output written through".into(),
            ));
        };
        let width = self.width;
        let fail = |e| Error::io("write output", tmp, e);
        const CHUNK: usize = 1 << 20;
        if size_of::<E>() == width && cfg!(target_endian = "little") {
            return sa.par_chunks(CHUNK).enumerate().try_for_each(|(k, part)| {
                let off = ((first + k * CHUNK) * width) as u64;
                f.write_all_at(bytemuck::cast_slice(part), off)
                    .map_err(fail)
            });
        }
        sa.par_chunks(CHUNK).enumerate().try_for_each_init(
            || Vec::with_capacity(CHUNK * width),
            |buf, (k, part)| {
                buf.clear();
                encode_le(buf, part, width);
                let off = ((first + k * CHUNK) * width) as u64;
                f.write_all_at(buf, off).map_err(fail)
            },
        )
    }

    /// Reads entries `first..first + len` back from the temporary file (what the pes wrote),
    /// decoding the file's width, on this pe's threads. Local. Only for positional outputs.
    pub fn read_part(&self, first: usize, len: usize) -> Result<Vec<u64>> {
        let (Some(f), Some(tmp)) = (&self.file, &self.tmp) else {
            return Err(Error::Invalid(
                "internal: a positional read from an output written through".into(),
            ));
        };
        let width = self.width;
        let fail = |e| Error::io("read back the output", tmp, e);
        const CHUNK: usize = 1 << 20;
        let mut out = vec![0u64; len];
        if width == 8 && cfg!(target_endian = "little") {
            return out
                .par_chunks_mut(CHUNK)
                .enumerate()
                .try_for_each(|(k, part)| {
                    let off = ((first + k * CHUNK) * width) as u64;
                    f.read_exact_at(bytemuck::cast_slice_mut(part), off)
                        .map_err(fail)
                })
                .map(|()| out);
        }
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .try_for_each_init(
                || vec![0u8; CHUNK.min(len) * width],
                |buf, (k, part)| {
                    let buf = &mut buf[..part.len() * width];
                    let off = ((first + k * CHUNK) * width) as u64;
                    f.read_exact_at(buf, off).map_err(fail)?;
                    decode_le(buf, width, part);
                    Ok(())
                },
            )
            .map(|()| out)
    }

    /// Flushes what this pe wrote to the disk. Local.
    pub fn sync_local(&self) -> Result<()> {
        match (&self.file, &self.tmp) {
            (Some(f), Some(tmp)) => f.sync_data().map_err(|e| Error::io("write output", tmp, e)),
            _ => Ok(()),
        }
    }

    /// Makes the file durable, not yet in place ([`Self::commit`]). Collective.
    pub fn sync(&self, comm: &Comm) -> Result<()> {
        comm.agree(self.root.as_ref().map_or(Ok(()), |s| s.sync()))
    }

    /// Puts the finished file in place (renames it to the requested name). Collective.
    pub fn commit(self, comm: &Comm) -> Result<()> {
        let OutputFile { root, file, .. } = self;
        drop(file);
        comm.agree(root.map_or(Ok(()), |s| s.commit()))
    }
}

/// Appends `xs` to `buf` as little-endian integers of `width` bytes each (the low bytes of each
/// value). The widths an output has (1 to 8 bytes) are each compiled with their width known, so
/// that an entry is one move instead of a copy of a length known only at run time (a call per
/// entry, several times slower on the n entries of a suffix array). Local.
fn encode_le<E: Into<u64> + Copy>(buf: &mut Vec<u8>, xs: &[E], width: usize) {
    debug_assert!((1..=8).contains(&width), "entries of {width} bytes");
    fn each<E: Into<u64> + Copy, const W: usize>(buf: &mut Vec<u8>, xs: &[E]) {
        let start = buf.len();
        buf.resize(start + xs.len() * W, 0);
        for (b, &x) in buf[start..].chunks_exact_mut(W).zip(xs) {
            b.copy_from_slice(&x.into().to_le_bytes()[..W]);
        }
    }
    match width {
        1 => each::<E, 1>(buf, xs),
        2 => each::<E, 2>(buf, xs),
        3 => each::<E, 3>(buf, xs),
        4 => each::<E, 4>(buf, xs),
        5 => each::<E, 5>(buf, xs),
        6 => each::<E, 6>(buf, xs),
        7 => each::<E, 7>(buf, xs),
        _ => each::<E, 8>(buf, xs),
    }
}

/// `out[i]` = the little-endian integer of `width` bytes at `bytes[i * width..]`, for every
/// entry of `out` (`bytes` holds at least as many): [`encode_le`]'s inverse, compiled per width
/// as it is. Local.
fn decode_le(bytes: &[u8], width: usize, out: &mut [u64]) {
    debug_assert!((1..=8).contains(&width), "entries of {width} bytes");
    fn each<const W: usize>(bytes: &[u8], out: &mut [u64]) {
        for (x, b) in out.iter_mut().zip(bytes.chunks_exact(W)) {
            let mut le = [0u8; 8];
            le[..W].copy_from_slice(b);
            *x = u64::from_le_bytes(le);
        }
    }
    match width {
        1 => each::<1>(bytes, out),
        2 => each::<2>(bytes, out),
        3 => each::<3>(bytes, out),
        4 => each::<4>(bytes, out),
        5 => each::<5>(bytes, out),
        6 => each::<6>(bytes, out),
        7 => each::<7>(bytes, out),
        _ => each::<8>(bytes, out),
    }
}

#[cfg(test)]
mod tests {
    /// Every width's encoding is the low bytes of each value, little-endian, after what the
    /// buffer held, and decoding gives the values back (their low `width` bytes).
    #[test]
    fn entries_encode_and_decode_in_every_width() {
        let values: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        for width in 1..=8 {
            let mut buf = vec![7u8];
            encode_le(&mut buf, &values, width);
            let want: Vec<u8> = std::iter::once(7)
                .chain(
                    values
                        .iter()
                        .flat_map(|x| x.to_le_bytes()[..width].to_vec()),
                )
                .collect();
            assert_eq!(buf, want, "width {width}");
            let mut back = vec![0u64; values.len()];
            decode_le(&buf[1..], width, &mut back);
            let mask = if width == 8 {
                u64::MAX
            } else {
                (1 << (8 * width)) - 1
            };
            let low: Vec<u64> = values.iter().map(|x| x & mask).collect();
            assert_eq!(back, low, "width {width}");
        }
    }

    use super::*;

    /// What a test that sets up files returns: any setup error fails it.
    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn scratch(tag: &str) -> std::io::Result<PathBuf> {
        let d = std::env::temp_dir().join(format!("psa-output-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d)?;
        Ok(d)
    }

    /// Files created one after another, each committed or dropped, each get a slot among the
    /// files a signal removes (more files than slots), and give it back.
    #[test]
    fn signal_slots_are_given_back() -> TestResult {
        let d = scratch("slots")?;
        for k in 0..3 * PARTIALS.len() {
            let target = d.join(format!("f{k}"));
            let dest = plan(&target, &[], false, "test file", k as u64)?;
            let mut f = Staged::create(dest, 0, "test file")?;
            assert!(f.slot.is_some(), "file {k} got no slot");
            f.write_all(b"x")?;
            if k % 2 == 0 {
                f.commit()?;
                assert!(target.exists(), "file {k} not in place");
            } else {
                drop(f);
                assert!(!target.exists(), "file {k} left behind");
            }
        }
        std::fs::remove_dir_all(&d)?;
        Ok(())
    }

    #[test]
    fn partial_names_fit_name_max_and_differ() {
        let long = "x".repeat(243);
        let a = partial_name(std::ffi::OsStr::new(&long), random_tag());
        let b = partial_name(std::ffi::OsStr::new(&long), random_tag());
        assert!(a.len() <= NAME_MAX, "{}", a.len());
        assert_ne!(a, b, "two runs drew the same tag");
        let short = partial_name(std::ffi::OsStr::new("out.sa"), 0xab);
        assert_eq!(short, ".out.sa.psa-partial-00000000000000ab");
    }

    #[test]
    fn plan_refuses_what_is_not_ours() -> TestResult {
        let d = scratch("plan")?;
        let input = d.join("in.txt");
        std::fs::write(&input, b"abc")?;
        let link = d.join("link");
        std::os::unix::fs::symlink(&input, &link)?;
        for out in [input.clone(), link.clone(), d.join(".").join("in.txt")] {
            let e = plan(&out, &[&input], false, "output", 1).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{out:?}: {e}");
            assert!(e.to_string().contains("is the input"), "{e}");
        }
        // A hard link is the same file too.
        let hard = d.join("hard");
        std::fs::hard_link(&input, &hard)?;
        assert!(plan(&input, &[&hard], false, "output", 1).is_err());
        let e = plan(&d, &[&input], false, "output", 1).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        // A read-only file is kept unless forced.
        let ro = d.join("ro.sa");
        std::fs::write(&ro, b"old")?;
        let mut perm = std::fs::metadata(&ro)?.permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o444);
        std::fs::set_permissions(&ro, perm)?;
        let e = plan(&ro, &[&input], false, "output", 1).unwrap_err();
        assert!(e.to_string().contains("read-only"), "{e}");
        assert!(matches!(
            plan(&ro, &[&input], true, "output", 1),
            Ok(Dest::Staged { .. })
        ));
        // Devices and FIFOs are written through.
        assert_eq!(
            plan(Path::new("/dev/null"), &[&input], false, "output", 1)?,
            Dest::Through {
                target: PathBuf::from("/dev/null")
            }
        );
        // A link to a new file's place is followed: the temporary file goes beside the target.
        let fresh = d.join("sub");
        std::fs::create_dir(&fresh)?;
        let target = fresh.join("real.sa");
        std::fs::write(&target, b"old")?;
        let l2 = d.join("l2");
        std::os::unix::fs::symlink(&target, &l2)?;
        match plan(&l2, &[&input], false, "output", 7)? {
            Dest::Staged { tmp, target: t } => {
                assert_eq!(t, std::fs::canonicalize(&target)?);
                assert_eq!(tmp.parent(), t.parent());
            }
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(&d);
        Ok(())
    }

    #[test]
    fn exclusive_create_and_stale_cleanup() -> TestResult {
        let d = scratch("stale")?;
        let target = d.join("out.sa");
        let dest = plan(&target, &[], false, "output", 42)?;
        let s = Staged::create(dest.clone(), 10, "output")?;
        // The same name again (two runs with one tag) is refused, not shared.
        assert!(Staged::create(dest.clone(), 10, "output").is_err());
        // A live run's file is locked and stays; an old unlocked one goes.
        let Dest::Staged { tmp, .. } = &dest else {
            panic!()
        };
        let old = SystemTime::now() - Duration::from_secs(3600);
        File::options().write(true).open(tmp)?.set_modified(old)?;
        remove_stale_partials(&target);
        assert!(tmp.exists(), "a locked (living) partial file was removed");
        let dead = d.join(partial_name(std::ffi::OsStr::new("out.sa"), 7));
        let f = File::create(&dead)?;
        f.set_modified(old)?;
        drop(f);
        let other = d.join(partial_name(std::ffi::OsStr::new("other.sa"), 7));
        File::create(&other)?.set_modified(old)?;
        remove_stale_partials(&target);
        assert!(!dead.exists(), "a dead run's partial file stayed");
        assert!(other.exists(), "another output's partial file was removed");
        drop(s);
        assert!(!tmp.exists(), "drop left the temporary file");
        let _ = std::fs::remove_dir_all(&d);
        Ok(())
    }
}
