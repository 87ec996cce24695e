//! Reading each pe's slice of the input and writing the suffix array at each pe's offset.
//!
//! The output is written to a temporary file beside the requested path and renamed into place
//! only after every pe has written its part, so the requested path never holds a partial file.

use rayon::prelude::*;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};

/// Size of the input file in bytes, with clear errors for missing files and directories. Local.
pub fn input_len(path: &Path) -> Result<usize> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io("read input", path, e))?;
    if !meta.is_dir() && !meta.is_file() {
        return Err(Error::Invalid(format!(
            "input '{}' is not a regular file (pipes and devices are not supported: every pe reads its own slice with positioned reads)",
            path.display()
        )));
    }
    if meta.is_dir() {
        return Err(Error::Invalid(format!(
            "input '{}' is a directory, not a file",
            path.display()
        )));
    }
    usize::try_from(meta.len())
        .map_err(|_| Error::Invalid(format!("input '{}' is too large", path.display())))
}

/// Reads bytes `[start, end)` of `path` with positioned reads. Local.
pub fn read_range(path: &Path, start: usize, end: usize) -> Result<Vec<u8>> {
    let f = File::open(path).map_err(|e| Error::io("open input", path, e))?;
    let mut buf = vec![0u8; end - start];
    f.read_exact_at(&mut buf, start as u64)
        .map_err(|e| Error::io("read input", path, e))?;
    Ok(buf)
}

/// Every pe reads its block of the input. Collective: an error on any pe is an error on all.
/// Returns this pe's slice and the block layout of the whole text.
pub fn read_distributed(comm: &Comm, path: &Path) -> Result<(Vec<u8>, Layout)> {
    let n = comm.agree(input_len(path))?;
    // Every pe saw a length; make sure they agree (a file changing under us is an error).
    let lo = comm.all_reduce_min(n as u64);
    let hi = comm.all_reduce_max(n as u64);
    if lo != hi {
        return comm.agree(Err(Error::Invalid(format!(
            "input '{}' changed size while being read",
            path.display()
        ))));
    }
    let layout = Layout::block(n, comm.size());
    let me = comm.rank();
    let text = comm.agree(read_range(path, layout.start(me), layout.end(me)))?;
    Ok((text, layout))
}

/// Width of an SA entry in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    Auto,
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
            Width::Fixed(w) => {
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
    }
}

fn bytes_needed(max: u128) -> usize {
    (((128 - max.leading_zeros()) as usize).div_ceil(8)).max(1)
}

/// Removes the partial output file now, if this pe registered one with
/// [`OutputFile::remove_on_signal`] (for the panic hook, which ends the job with MPI_Abort before
/// any destructor runs).
pub fn remove_partial_now() {
    if let Some(p) = PARTIAL.get() {
        unsafe { libc::unlink(p.as_ptr()) };
    }
}

/// Path of the partial output file that a SIGTERM/SIGINT should remove (set on pe 0 by
/// [`OutputFile::remove_on_signal`]).
static PARTIAL: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

extern "C" fn remove_partial_and_die(sig: libc::c_int) {
    // Only async-signal-safe calls here: unlink, signal, raise.
    if let Some(p) = PARTIAL.get() {
        unsafe { libc::unlink(p.as_ptr()) };
    }
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// An output file being written by all pes. Created by [`OutputFile::create`]; the temporary file
/// is removed on drop unless [`OutputFile::commit`] renamed it into place.
pub struct OutputFile {
    tmp: PathBuf,
    target: PathBuf,
    width: usize,
    committed: bool,
    is_root: bool,
}

impl OutputFile {
    /// Creates the temporary file (on pe 0) sized for `n` entries of `width` bytes. Collective.
    /// Fails on every pe if the directory is missing or not writable.
    pub fn create(comm: &Comm, target: &Path, n: usize, width: usize) -> Result<OutputFile> {
        let mut tag = std::process::id() as u64;
        comm.broadcast(&mut tag, 0);
        let name = target
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let dir = target
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let tmp = dir.join(format!(".{name}.psa-partial-{tag}"));
        let is_root = comm.rank() == 0;
        let out = OutputFile {
            tmp: tmp.clone(),
            target: target.to_path_buf(),
            width,
            committed: false,
            is_root,
        };
        let r = if is_root {
            if target.is_dir() {
                Err(Error::Invalid(format!(
                    "output '{}' is a directory",
                    target.display()
                )))
            } else {
                File::create(&tmp)
                    .and_then(|f| f.set_len((n * width) as u64))
                    .map_err(|e| Error::io("create output in", dir, e))
            }
        } else {
            Ok(())
        };
        comm.agree(r)?;
        Ok(out)
    }

    /// Writes this pe's entries, starting at entry `first`, little-endian. Collective.
    pub fn write(&self, comm: &Comm, first: usize, sa: &[u64]) -> Result<()> {
        comm.agree(self.write_part(first, sa).and_then(|()| self.sync_local()))
    }

    /// Writes entries `first..first + sa.len()`, little-endian, on this pe's threads (a chunk
    /// each at its own offset); entries as wide as the file's are written as they are. Local;
    /// [`Self::sync_local`] makes them durable.
    pub fn write_part<E: bytemuck::Pod + Into<u64> + Sync>(
        &self,
        first: usize,
        sa: &[E],
    ) -> Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .open(&self.tmp)
            .map_err(|e| Error::io("open output", &self.tmp, e))?;
        let width = self.width;
        let fail = |e| Error::io("write output", &self.tmp, e);
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
                for &x in part {
                    buf.extend_from_slice(&x.into().to_le_bytes()[..width]);
                }
                let off = ((first + k * CHUNK) * width) as u64;
                f.write_all_at(buf, off).map_err(fail)
            },
        )
    }

    /// Flushes what this pe wrote to the disk. Local.
    pub fn sync_local(&self) -> Result<()> {
        OpenOptions::new()
            .write(true)
            .open(&self.tmp)
            .and_then(|f| f.sync_data())
            .map_err(|e| Error::io("write output", &self.tmp, e))
    }

    /// Renames the finished file to the requested name. Collective.
    pub fn commit(mut self, comm: &Comm) -> Result<()> {
        let r = if self.is_root {
            std::fs::rename(&self.tmp, &self.target)
                .map_err(|e| Error::io("rename output to", &self.target, e))
        } else {
            Ok(())
        };
        let r = comm.agree(r);
        if r.is_ok() {
            self.committed = true;
        }
        r
    }

    /// Makes SIGTERM and SIGINT (what mpirun and srun send when a job is cancelled) remove the
    /// partial file before the process dies, so a killed job leaves nothing behind. For the
    /// command-line tool: it installs process-wide signal handlers (once per process).
    pub fn remove_on_signal(&self) {
        if !self.is_root {
            return;
        }
        use std::os::unix::ffi::OsStrExt;
        if let Ok(c) = std::ffi::CString::new(self.tmp.as_os_str().as_bytes()) {
            if PARTIAL.set(c).is_ok() {
                let handler =
                    remove_partial_and_die as extern "C" fn(libc::c_int) as libc::sighandler_t;
                unsafe {
                    libc::signal(libc::SIGTERM, handler);
                    libc::signal(libc::SIGINT, handler);
                }
            }
        }
    }

    /// Path of the temporary file.
    pub fn tmp_path(&self) -> &Path {
        &self.tmp
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if self.is_root && !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_rules() {
        assert_eq!(Width::Auto.resolve(0).unwrap(), 4);
        assert_eq!(Width::Auto.resolve(1 << 32).unwrap(), 4);
        assert_eq!(Width::Auto.resolve((1 << 32) + 1).unwrap(), 5);
        assert!(Width::Fixed(4).resolve((1 << 32) + 1).is_err());
        assert_eq!(Width::Fixed(5).resolve((1 << 32) + 1).unwrap(), 5);
        assert!(Width::Fixed(3).resolve(10).is_err());
    }
}
