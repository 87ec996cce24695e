//! One file created on pe 0 ([`Staged`]): its temporary file made exclusively in the opened
//! directory of its target, the partial files of dead runs cleared first, and its removal on
//! SIGTERM, SIGINT and panics.

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering as AtomicOrdering};
use std::time::Duration;

use super::{at, euid, parent_of, partial_prefix, Dest};
use crate::error::{Error, Result};

/// A partial file left unlocked for this long belongs to a dead run and may be removed.
const STALE_AFTER: Duration = Duration::from_secs(60);

/// Removes the partial files of the target `name` in `dir` (at `dir_path`, for listing and
/// messages) that dead runs left behind: ours by name, regular files of this user (never opened
/// otherwise: a FIFO or another user's file of that name is left alone), not locked by a living
/// run, and not written for [`STALE_AFTER`]. Local; best effort (logs what it removed).
pub fn remove_stale_partials(dir: &File, dir_path: &Path, name: &OsStr) {
    let prefix = partial_prefix(name);
    let Ok(entries) = std::fs::read_dir(dir_path) else {
        return;
    };
    for e in entries.flatten() {
        let fname = e.file_name();
        let b = fname.as_bytes();
        let ours = b.len() == prefix.len() + 16
            && b.starts_with(&prefix)
            && b[prefix.len()..].iter().all(|c| c.is_ascii_hexdigit());
        // The entry's own type and owner (not followed), before anything is opened.
        let mine = e
            .metadata()
            .is_ok_and(|m| m.file_type().is_file() && m.uid() == euid());
        if ours && mine && is_dead(dir, &fname) && at::unlink(dir, &fname).is_ok() {
            log::info!(
                "removed '{}', left behind by a run of psa that ended without cleaning up",
                dir_path.join(&fname).display()
            );
        }
    }
}

/// Whether the regular file `name` in `dir` was left by a dead run: opened without following a
/// link or waiting, still a regular file of ours, untouched for [`STALE_AFTER`], and not locked.
fn is_dead(dir: &File, name: &OsStr) -> bool {
    let Ok(f) = at::open_quietly(dir, name) else {
        return false;
    };
    let Ok(m) = f.metadata() else { return false };
    let old = m
        .modified()
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= STALE_AFTER);
    // SAFETY: flock on a file descriptor we own (released when f closes).
    let unlocked = || unsafe { libc::flock(fd(&f), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    m.file_type().is_file() && m.uid() == euid() && old && unlocked()
}

pub(super) fn fd(f: &File) -> libc::c_int {
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
/// LCP array), and while they are put in place as many second names of the files they replace
/// ([`super::commit_all`]); a library caller that runs jobs one after another reuses the slots.
pub(super) static PARTIALS: [AtomicPtr<libc::c_char>; 16] =
    [const { AtomicPtr::new(ptr::null_mut()) }; 16];

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
pub(super) fn remove_on_signal(tmp: &Path) -> Option<usize> {
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
pub(super) fn forget_partial(slot: Option<usize>) {
    if let Some(k) = slot {
        PARTIALS[k].store(ptr::null_mut(), AtomicOrdering::SeqCst);
    }
}

// ------------------------------------------------------------------------------------------------
// One file on pe 0

/// The directory of a staged file, opened when the file was made, and the file's two names in
/// it.
pub(super) struct Place {
    pub dir: File,
    /// The directory's path as it was opened (for messages and the signal handler).
    pub dir_path: std::path::PathBuf,
    pub tmp: OsString,
    pub name: OsString,
}

/// A file being written on pe 0 only ([`Dest::Staged`] or [`Dest::Through`]), removed again on
/// drop unless committed.
pub struct Staged {
    dest: Dest,
    pub(super) file: File,
    /// Where a staged file lives (None: written through).
    pub(super) place: Option<Place>,
    pub(super) committed: bool,
    /// Its slot among the files a signal removes ([`remove_on_signal`]).
    pub(super) slot: Option<usize>,
    /// Put in place only where nothing has the name yet ([`Staged::keep_existing`]).
    pub(super) keep_existing: bool,
}

impl Staged {
    /// Creates the file for `dest`: the temporary file exclusively (never through a link), in
    /// the directory opened now, locked, with `reserve` bytes allocated (after removing the
    /// partial files of dead runs of the same target), or the device or FIFO opened for
    /// writing (a FIFO without a reader is an error, not a wait). `what` names the file in
    /// messages ("output", "stats file").
    pub fn create(dest: Dest, reserve_bytes: u64, what: &str) -> Result<Staged> {
        let (tmp, target, mode) = match &dest {
            Dest::Staged { tmp, target, mode } => (tmp, target, *mode),
            Dest::Through { target } => return Self::open_through(dest.clone(), target, what),
        };
        let dir_path = parent_of(tmp);
        let cannot = |e: std::io::Error| {
            Error::System(format!(
                "cannot create the {what} '{}' (its temporary file in '{}'): {e}",
                target.display(),
                dir_path.display()
            ))
        };
        let dir = at::open_dir(&dir_path).map_err(cannot)?;
        let (Some(tmp_name), Some(name)) = (tmp.file_name(), target.file_name()) else {
            return Err(Error::Usage(format!(
                "{what} '{}' names no file",
                target.display()
            )));
        };
        remove_stale_partials(&dir, &dir_path, name);
        let file = at::create_new(&dir, tmp_name, mode).map_err(cannot)?;
        let staged = Staged {
            dest: dest.clone(),
            file,
            place: Some(Place {
                dir,
                dir_path: dir_path.clone(),
                tmp: tmp_name.to_owned(),
                name: name.to_owned(),
            }),
            committed: false,
            slot: remove_on_signal(tmp),
            keep_existing: false,
        };
        // SAFETY: flock on a file descriptor we own. Held until the file is closed.
        unsafe { libc::flock(fd(&staged.file), libc::LOCK_EX | libc::LOCK_NB) };
        reserve(&staged.file, reserve_bytes, &dir_path)?;
        Ok(staged)
    }

    /// Opens a device or FIFO the user named, to be written through.
    fn open_through(dest: Dest, target: &Path, what: &str) -> Result<Staged> {
        let file = OpenOptions::new()
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
            let fl = libc::fcntl(fd(&file), libc::F_GETFL);
            libc::fcntl(fd(&file), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
        Ok(Staged {
            dest,
            file,
            place: None,
            committed: false,
            slot: None,
            keep_existing: false,
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

    /// Reserves `bytes` for a file written later ([`Self::write_all`] from its start), so that
    /// a lack of room shows now; [`Self::cut_to_written`] gives back what the content did not
    /// take. Nothing for a written-through target.
    pub fn reserve(&self, bytes: u64) -> Result<()> {
        match &self.dest {
            Dest::Staged { tmp, .. } => reserve(&self.file, bytes, &parent_of(tmp)),
            Dest::Through { .. } => Ok(()),
        }
    }

    /// Cuts a staged file to what was written: the end of a reservation beyond it goes.
    pub fn cut_to_written(&mut self) -> Result<()> {
        let Dest::Staged { tmp, .. } = &self.dest else {
            return Ok(());
        };
        let fail = |e| Error::io("write", tmp, e);
        let at = self.file.stream_position().map_err(fail)?;
        self.file.set_len(at).map_err(fail)
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
    pub fn commit(self) -> Result<()> {
        super::commit::place_all(vec![self])
    }

    /// Marks the file as in place: nothing to remove any more.
    /// Makes the commit leave a file that has the name by then alone (and fail), instead of
    /// replacing it: for outputs that must not replace what another process made meanwhile
    /// (infini-gram's tables, which psa writes only where none was).
    pub fn keep_existing(&mut self) {
        self.keep_existing = true;
    }

    pub(super) fn placed(&mut self) {
        self.committed = true;
        forget_partial(self.slot.take());
    }

    /// Removes the temporary file now (a file not to be put in place), saying why it could not.
    pub(super) fn discard(&mut self) -> std::io::Result<()> {
        if let (false, Some(p)) = (self.committed, &self.place) {
            self.committed = true;
            at::unlink(&p.dir, &p.tmp)?;
        }
        forget_partial(self.slot.take());
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = self.discard();
    }
}
