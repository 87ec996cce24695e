//! Every file of a job put in place together, or none: a failure while the outputs are renamed
//! into place (a directory made read-only mid-run, a name taken by a directory) puts back the
//! files already replaced.
//!
//! Before a file replaces an old one, the old one gets a second name beside it
//! (`.NAME.psa-old-TAG`, a hard link: no copy). When every file is in place those names go;
//! when one rename fails, the files already placed are undone in reverse order: an old file's
//! second name is renamed back onto its name (atomically), a new file is removed. A file system
//! without hard links places files without that net, and a failure then says which old files
//! are lost.

use std::ffi::OsString;
use std::fs::File;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;

use super::staged::{forget_partial, remove_on_signal, Place};
use super::{at, random_tag, Staged, NAME_MAX};
use crate::comm::Comm;
use crate::error::{Error, Result};

const OLD_MARK: &str = ".psa-old-";

/// Puts pe 0's files in place in the order given (`None` elsewhere, and for files a job does
/// not write), all or none (see the module's documentation). Collective: every pe gets pe 0's
/// verdict.
pub fn commit_all(comm: &Comm, files: Vec<Option<Staged>>) -> Result<()> {
    let mine: Vec<Staged> = files.into_iter().flatten().collect();
    let r = match mine.is_empty() {
        true => Ok(()),
        false => place_all(mine),
    };
    comm.agree(r)
}

/// What one placed file replaced: its old content's second name (None: there was none, or no
/// second name could be made, `lost` then says whether an old file was replaced for good).
struct Undo {
    index: usize,
    old: Option<(OsString, Option<usize>)>,
    lost: bool,
}

/// [`commit_all`] on pe 0: makes every file durable, renames each into place keeping what it
/// replaces, then drops those or undoes every placed file. Local.
pub(super) fn place_all(mut files: Vec<Staged>) -> Result<()> {
    for f in &files {
        f.sync()?;
    }
    let mut undo: Vec<Undo> = Vec::with_capacity(files.len());
    for k in 0..files.len() {
        match place(&mut files[k], k) {
            Ok(u) => undo.push(u),
            Err(e) => return Err(roll_back(&mut files, undo, e)),
        }
    }
    for u in undo {
        if let (Some((old, slot)), Some(p)) = (u.old, &files[u.index].place) {
            let _ = at::unlink(&p.dir, &old);
            forget_partial(slot);
        }
    }
    sync_directories(&files);
    Ok(())
}

/// Renames one file into place (the `index`-th), keeping a second name of the file it replaces.
fn place(f: &mut Staged, index: usize) -> Result<Undo> {
    let target = f.dest().target().to_path_buf();
    let Some(p) = &f.place else {
        f.placed();
        return Ok(Undo {
            index,
            old: None,
            lost: false,
        });
    };
    let existed = at::exists(&p.dir, &p.name).map_err(|e| Error::io("look at", &target, e))?;
    let appeared = || {
        Error::Usage(format!(
            "'{}' was made by another process while psa wrote it: it is left alone, and psa's is not put in place",
            target.display()
        ))
    };
    if f.keep_existing {
        // Nothing to keep aside: the file goes in only where the name is free.
        if existed {
            return Err(appeared());
        }
        return match at::rename_noreplace(&p.dir, &p.tmp, &p.name) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Err(appeared()),
            Err(e) => Err(Error::io("rename output to", &target, e)),
            Ok(()) => {
                f.placed();
                Ok(Undo {
                    index,
                    old: None,
                    lost: false,
                })
            }
        };
    }
    let old = existed.then(|| keep_old(p)).flatten();
    let lost = existed && old.is_none();
    if let Err(e) = at::rename(&p.dir, &p.tmp, &p.name) {
        if let Some((name, slot)) = &old {
            let _ = at::unlink(&p.dir, name);
            forget_partial(*slot);
        }
        return Err(Error::io("rename output to", &target, e));
    }
    f.placed();
    Ok(Undo { index, old, lost })
}

/// A second name for the file at `p.name` (registered for removal on a signal: removing it is
/// always safe, the name itself keeps the file); None when none can be made.
fn keep_old(p: &Place) -> Option<(OsString, Option<usize>)> {
    let mut v = vec![b'.'];
    let keep = NAME_MAX - 1 - OLD_MARK.len() - 16;
    v.extend_from_slice(&p.name.as_bytes()[..p.name.len().min(keep)]);
    v.extend_from_slice(format!("{OLD_MARK}{:016x}", random_tag()).as_bytes());
    let old = OsString::from_vec(v);
    match at::link(&p.dir, &p.name, &old) {
        Ok(()) => {
            let slot = remove_on_signal(&p.dir_path.join(&old));
            Some((old, slot))
        }
        Err(e) => {
            log::warn!(
                "cannot keep '{}' aside while the outputs are put in place ({e}): should a later one fail, it stays replaced",
                p.name.to_string_lossy()
            );
            None
        }
    }
}

/// Undoes the placed files in reverse order and removes the temporary files of the rest, after
/// `failed`; the error says what was put back, and what could not be.
fn roll_back(files: &mut [Staged], undo: Vec<Undo>, failed: Error) -> Error {
    let mut restored = Vec::new();
    let mut troubles = Vec::new();
    for u in undo.into_iter().rev() {
        let f = &files[u.index];
        let shown = f.dest().target().display().to_string();
        let Some(p) = &f.place else { continue };
        let r = match (&u.old, u.lost) {
            (Some((old, _)), _) => at::rename(&p.dir, old, &p.name),
            (None, false) => at::unlink(&p.dir, &p.name),
            (None, true) => {
                troubles.push(format!(
                    "'{shown}' stays replaced (its old file could not be kept)"
                ));
                continue;
            }
        };
        if let Some((_, slot)) = u.old {
            forget_partial(slot);
        }
        match r {
            Ok(()) => restored.push(format!("'{shown}'")),
            Err(e) => troubles.push(format!("'{shown}' could not be put back: {e}")),
        }
    }
    for f in files.iter_mut() {
        let tmp = f.dest().clone();
        if let (Err(e), super::Dest::Staged { tmp, .. }) = (f.discard(), tmp) {
            troubles.push(format!("remove '{}' by hand ({e})", tmp.display()));
        }
    }
    let mut msg = format!("{failed}; no output was replaced");
    if !restored.is_empty() {
        msg = format!(
            "{failed}; the outputs already put in place were put back as they were: {}",
            restored.join(", ")
        );
    }
    if !troubles.is_empty() {
        msg.push_str(&format!("; but {}", troubles.join("; ")));
    }
    Error::System(msg)
}

/// Makes the renames durable: each directory synced once (not all file systems allow it: no
/// error then).
fn sync_directories(files: &[Staged]) {
    let mut seen: Vec<(u64, u64)> = Vec::new();
    for p in files.iter().filter_map(|f| f.place.as_ref()) {
        let Ok(m) = p.dir.metadata() else { continue };
        let id = (m.dev(), m.ino());
        if !seen.contains(&id) {
            seen.push(id);
            let _ = File::sync_all(&p.dir);
        }
    }
}
