//! The files a job writes through [`Staged`]: the suffix array, BWT, LCP array and T
//! ([`OutputFile`], every pe at its own offset) and small files pe 0 writes at the end
//! ([`SideFile`]: `--stats`, the index's records table and metadata, the BWT's primary index).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::{plan, random_tag, Dest, Named, Staged};
use crate::comm::Comm;
use crate::error::{Error, Result};

/// A small file written by pe 0 at the end of the run (`--stats`), planned and created at the
/// start so that a bad path fails before the build.
pub struct SideFile {
    staged: Option<Staged>,
}

impl SideFile {
    /// Plans and creates the file on pe 0 (see [`plan`]; `named`: whether the user named it or
    /// psa did, beside an output); every pe gets the same verdict. Collective.
    pub fn create(
        comm: &Comm,
        requested: &Path,
        inputs: &[&Path],
        force: bool,
        what: &str,
        named: Named,
    ) -> Result<SideFile> {
        let mut tag = random_tag();
        comm.broadcast(&mut tag, 0);
        let staged = match comm.rank() {
            0 => plan(requested, inputs, force, what, tag, named)
                .and_then(|d| Staged::create(d, 0, what))
                .map(Some),
            _ => Ok(None),
        };
        Ok(SideFile {
            staged: comm.agree(staged)?,
        })
    }

    /// Reserves `bytes` (pe 0's count) for the content written later, so that a full file
    /// system shows before the build ([`Staged::reserve`]). Collective.
    pub fn reserve(&self, comm: &Comm, bytes: u64) -> Result<()> {
        comm.agree(self.staged.as_ref().map_or(Ok(()), |s| s.reserve(bytes)))
    }

    /// Writes `content` (pe 0's is used), cut to it (a reservation's rest given back), and
    /// makes it durable, not yet in place ([`Self::commit`]). Collective.
    pub fn write(&mut self, comm: &Comm, content: &[u8]) -> Result<()> {
        let r = match &mut self.staged {
            Some(s) => (s.write_all(content))
                .and_then(|()| s.cut_to_written())
                .and_then(|()| s.sync()),
            None => Ok(()),
        };
        comm.agree(r)
    }

    /// The written file, to be put in place with the job's others ([`super::commit_all`]):
    /// pe 0's; None elsewhere.
    pub fn into_staged(self) -> Option<Staged> {
        self.staged
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
    /// Every entry is written as its value times this (1; the token width for infini-gram's
    /// byte offsets, [`OutputFile::with_scale`]) and read back divided by it.
    scale: u64,
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
        Self::create_named(
            comm,
            requested,
            inputs,
            force,
            (n, width),
            "output",
            Named::ByUser,
        )
    }

    /// [`Self::create`] for `n` entries of `width` bytes in a file that messages call `what`
    /// ("BWT output", "LCP output", "text file"), named by the user or by psa beside an output
    /// (`named`). Collective.
    pub fn create_named(
        comm: &Comm,
        requested: &Path,
        inputs: &[&Path],
        force: bool,
        (n, width): (usize, usize),
        what: &str,
        named: Named,
    ) -> Result<OutputFile> {
        let mut tag = random_tag();
        comm.broadcast(&mut tag, 0);
        let bytes = (n as u64).saturating_mul(width as u64);
        let root = match comm.rank() {
            0 => plan(requested, inputs, force, what, tag, named)
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
                .custom_flags(libc::O_NOFOLLOW)
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
            scale: 1,
        })
    }

    /// The file with every entry written as its value times `scale` (at least 1) and read back
    /// ([`Self::read_part`]) divided by it: token positions written as byte offsets (infini-gram's
    /// tables, `scale` the token width). The entries' width must hold the scaled values. Local.
    #[must_use]
    pub fn with_scale(mut self, scale: u64) -> OutputFile {
        self.scale = scale.max(1);
        self
    }

    /// The file put in place only where nothing has its name by then (pe 0's root,
    /// [`Staged::keep_existing`]) when `keep`. Local.
    #[must_use]
    pub fn keeping_existing(mut self, keep: bool) -> OutputFile {
        if let (true, Some(root)) = (keep, &mut self.root) {
            root.keep_existing();
        }
        self
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
        let (width, scale) = (self.width, self.scale);
        let mut buf = Vec::new();
        comm.stream_to_root(sa, 0, 1 << 20, None, |_, part: &[E]| {
            if failed.is_some() {
                return;
            }
            buf.clear();
            encode_le(&mut buf, part, width, scale);
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
    /// each at its own offset); entries as wide as the file's (and no scale) are written as they
    /// are. Local;
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
        let (width, scale) = (self.width, self.scale);
        let fail = |e| Error::io("write output", tmp, e);
        const CHUNK: usize = 1 << 20;
        if size_of::<E>() == width && scale == 1 && cfg!(target_endian = "little") {
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
                encode_le(buf, part, width, scale);
                let off = ((first + k * CHUNK) * width) as u64;
                f.write_all_at(buf, off).map_err(fail)
            },
        )
    }

    /// Reads entries `first..first + len` back from the temporary file (what the pes wrote),
    /// decoding the file's width (and dividing by its scale), on this pe's threads. Local. Only
    /// for positional outputs.
    pub fn read_part(&self, first: usize, len: usize) -> Result<Vec<u64>> {
        let (Some(f), Some(tmp)) = (&self.file, &self.tmp) else {
            return Err(Error::Invalid(
                "internal: a positional read from an output written through".into(),
            ));
        };
        let (width, scale) = (self.width, self.scale);
        let fail = |e| Error::io("read back the output", tmp, e);
        const CHUNK: usize = 1 << 20;
        let mut out = vec![0u64; len];
        if width == 8 && scale == 1 && cfg!(target_endian = "little") {
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
                    if scale != 1 {
                        part.iter_mut().for_each(|x| *x /= scale);
                    }
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
        super::commit_all(comm, vec![self.into_staged()])
    }

    /// The finished file, to be put in place with the job's others ([`super::commit_all`]):
    /// pe 0's; None elsewhere. Every pe closes its handle.
    pub fn into_staged(self) -> Option<Staged> {
        self.root
    }

    /// pe 0: the size and modification time of the temporary file as written (None for a
    /// target written through); call it once every pe has written and synced its part. The
    /// file is opened anew by its path for this (on NFS an open revalidates what the client
    /// knows of it, which other nodes' writes changed), never through a link. Others: None.
    /// Local.
    pub fn stamp(&self) -> Result<Option<crate::io::index::FileStamp>> {
        let Some(Dest::Staged { tmp, .. }) = self.root.as_ref().map(|s| s.dest()) else {
            return Ok(None);
        };
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(tmp);
        let m = opened.and_then(|f| f.metadata());
        let m = m.map_err(|e| Error::io("look at the written output", tmp, e))?;
        Ok(Some(crate::io::index::FileStamp::of(&m)))
    }
}

/// Appends `xs` to `buf` as little-endian integers of `width` bytes each (the low bytes of each
/// value times `scale`). The widths an output has (1 to 8 bytes) are each compiled with their
/// width known, so that an entry is one move instead of a copy of a length known only at run time
/// (a call per entry, several times slower on the n entries of a suffix array). Local.
fn encode_le<E: Into<u64> + Copy>(buf: &mut Vec<u8>, xs: &[E], width: usize, scale: u64) {
    debug_assert!((1..=8).contains(&width), "entries of {width} bytes");
    fn each<E: Into<u64> + Copy, const W: usize>(buf: &mut Vec<u8>, xs: &[E], scale: u64) {
        let start = buf.len();
        buf.resize(start + xs.len() * W, 0);
        for (b, &x) in buf[start..].chunks_exact_mut(W).zip(xs) {
            b.copy_from_slice(&(x.into() * scale).to_le_bytes()[..W]);
        }
    }
    match width {
        1 => each::<E, 1>(buf, xs, scale),
        2 => each::<E, 2>(buf, xs, scale),
        3 => each::<E, 3>(buf, xs, scale),
        4 => each::<E, 4>(buf, xs, scale),
        5 => each::<E, 5>(buf, xs, scale),
        6 => each::<E, 6>(buf, xs, scale),
        7 => each::<E, 7>(buf, xs, scale),
        _ => each::<E, 8>(buf, xs, scale),
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
    use super::*;

    /// Every width's encoding is the low bytes of each value, little-endian, after what the
    /// buffer held, and decoding gives the values back (their low `width` bytes).
    #[test]
    fn entries_encode_and_decode_in_every_width() {
        let values: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        for width in 1..=8 {
            let mut buf = vec![7u8];
            encode_le(&mut buf, &values, width, 1);
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

    /// A scale multiplies each entry before its low bytes are taken (token positions as byte
    /// offsets), in every width.
    #[test]
    fn scaled_entries_are_multiplied() {
        let values: Vec<u32> = vec![0, 1, 2, 127, 1000];
        for (width, scale) in [(1, 2), (2, 4), (3, 2), (5, 4), (8, 4)] {
            let mut buf = Vec::new();
            encode_le(&mut buf, &values, width, scale);
            let mut back = vec![0u64; values.len()];
            decode_le(&buf, width, &mut back);
            let mask = u64::MAX >> (64 - 8 * width);
            let want: Vec<u64> = values.iter().map(|&x| (x as u64 * scale) & mask).collect();
            assert_eq!(back, want, "width {width}, scale {scale}");
        }
    }
}
