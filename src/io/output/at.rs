//! File operations relative to an opened directory: once pe 0 has opened an output's
//! directory, what it creates, renames and removes there stays there, whatever happens to the
//! directory's path (renamed, replaced by a link) while the job runs, and no final component is
//! ever followed through a symbolic link.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A name as C wants it (a name with a NUL byte is an invalid argument).
fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `rc` as a result: -1 is the error in `errno`.
fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    match rc {
        -1 => Err(io::Error::last_os_error()),
        rc => Ok(rc),
    }
}

/// Opens the directory `path` (links in it followed: the user's path), for the operations
/// below.
pub fn open_dir(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
}

/// Creates `name` in `dir` exclusively (never through a link), for reading and writing, with
/// permission bits `mode` (less the umask).
pub fn create_new(dir: &File, name: &OsStr, mode: u32) -> io::Result<File> {
    let c = c_name(name)?;
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid directory descriptor and NUL-terminated name; the result is a new
    // descriptor that the File owns.
    let fd = check(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, mode) })?;
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Opens `name` in `dir` to look at it without side effects: read-only, never through a link,
/// never waiting (a FIFO opens at once), never becoming our terminal.
pub fn open_quietly(dir: &File, name: &OsStr) -> io::Result<File> {
    let c = c_name(name)?;
    let flags =
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: as in create_new.
    let fd = check(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) })?;
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Renames `from` to `to`, both in `dir` (a link at `to` is replaced, not followed).
pub fn rename(dir: &File, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (a, b) = (c_name(from)?, c_name(to)?);
    let d = dir.as_raw_fd();
    // SAFETY: valid descriptors and NUL-terminated names.
    check(unsafe { libc::renameat(d, a.as_ptr(), d, b.as_ptr()) }).map(|_| ())
}

/// Renames `from` to `to` in `dir` unless `to` exists (then `EEXIST`, and nothing changes):
/// `renameat2`'s `RENAME_NOREPLACE`, or where the file system has none a second name made
/// with `linkat` (which never replaces either) and the first removed.
pub fn rename_noreplace(dir: &File, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (a, b) = (c_name(from)?, c_name(to)?);
    let d = dir.as_raw_fd();
    // SAFETY: valid descriptors and NUL-terminated names.
    let r = check(unsafe { libc::renameat2(d, a.as_ptr(), d, b.as_ptr(), libc::RENAME_NOREPLACE) });
    match r.as_ref().map_err(|e| e.raw_os_error()) {
        Err(Some(libc::EINVAL | libc::ENOSYS)) => {
            link(dir, from, to)?;
            unlink(dir, from)
        }
        _ => r.map(|_| ()),
    }
}

/// Removes `name` from `dir` (a link itself, never what it names).
pub fn unlink(dir: &File, name: &OsStr) -> io::Result<()> {
    let c = c_name(name)?;
    // SAFETY: a valid descriptor and NUL-terminated name.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) }).map(|_| ())
}

/// Makes `to` a second name of `from` in `dir` (of a link: the link itself).
pub fn link(dir: &File, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (a, b) = (c_name(from)?, c_name(to)?);
    let d = dir.as_raw_fd();
    // SAFETY: valid descriptors and NUL-terminated names.
    check(unsafe { libc::linkat(d, a.as_ptr(), d, b.as_ptr(), 0) }).map(|_| ())
}

/// Whether `name` exists in `dir` (as anything, a dangling link too).
pub fn exists(dir: &File, name: &OsStr) -> io::Result<bool> {
    let c = c_name(name)?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid descriptor, a NUL-terminated name and room for one stat.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    match check(rc) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}
