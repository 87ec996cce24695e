//! The top level kept beside the index (`OUT.top`), so that it is built once, by the first
//! query that has many patterns, and mapped by every later one.
//!
//! The file: a header of little-endian 64-bit words, padded to whole 64-byte lines, then every
//! level's blocks as [`Top`] holds them (level 0 first). The header's words: a magic, the
//! owner (what ties the file to one build of its index: [`Owner`]), n, the SA's entry width, the
//! step, bytes per symbol, the bytes T holds (256 bits), the levels' count, and each level's
//! first block and keys. A file whose header differs from what this index would build is not
//! used (and the next build of the top level replaces it).

use std::io::Write;
use std::path::Path;

use super::top::{KeyCode, Level, Line, Lines, Top, BLOCK};
use super::Sa;

const MAGIC: u64 = u64::from_le_bytes(*b"psatop01");

/// What ties a saved top level to its index: the SA file's size and modification time (seconds,
/// nanoseconds) and the build's random id (0 where the index keeps none).
pub type Owner = [u64; 4];

/// Header words before the levels' pairs.
const FIXED: usize = 1 + 4 + 4 + 4 + 1;

impl Top {
    /// The header `self` is saved with for `owner` and an SA of `width`-byte entries.
    fn header(&self, owner: Owner, width: usize) -> Vec<u64> {
        let (present, token) = self.code.made_of();
        let mut h = vec![MAGIC];
        h.extend(owner);
        h.extend([self.n as u64, width as u64, self.step as u64, token as u64]);
        for quarter in present.chunks(64) {
            h.push((quarter.iter().enumerate()).fold(0, |v, (i, &p)| v | (p as u64) << i));
        }
        h.push(self.levels.len() as u64);
        for l in &self.levels {
            h.extend([l.start as u64, l.len as u64]);
        }
        h.resize(h.len().next_multiple_of(8), 0);
        h
    }

    /// Writes it to `path` for `owner` with the permission bits `mode` (the SA's: never wider),
    /// under a temporary name of a random tag, renamed into place: a reader sees the whole file
    /// or none. The temporary file is made new (`O_EXCL`, no link followed), so a name planted
    /// in a shared directory fails the save instead of redirecting it.
    pub fn save(&self, path: &Path, owner: Owner, width: usize, mode: u32) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".tmp-{:016x}", crate::io::output::random_tag()));
        let tmp = std::path::PathBuf::from(name);
        let written = (|| {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .mode(mode & 0o666)
                .open(&tmp)?;
            let mut f = std::io::BufWriter::new(f);
            for w in self.header(owner, width) {
                f.write_all(&w.to_le_bytes())?;
            }
            for line in self.lines.get() {
                line.0
                    .iter()
                    .try_for_each(|k| f.write_all(&k.to_le_bytes()))?;
            }
            f.into_inner().map_err(|e| e.into_error())?.sync_all()
        })();
        match written.and_then(|()| std::fs::rename(&tmp, path)) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// The top level saved at `path` for `owner`, mapped, where it is the one this index's
    /// [`Top::build`] would make for `sa` (of tokens of `token` bytes); None where there is no
    /// such file, or it is a link, not a plain file, or not owned by `uid` (the SA's owner: a
    /// file another user left in a shared directory is not trusted), or of another build, or
    /// its header does not fit.
    pub fn open_saved(path: &Path, owner: Owner, uid: u32, sa: &Sa, token: usize) -> Option<Top> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let f = (std::fs::OpenOptions::new().read(true))
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .ok()?;
        let stat = f.metadata().ok()?;
        if !stat.is_file() || stat.uid() != uid {
            return None;
        }
        // SAFETY: read-only; a file replaced under the map is renamed over, not written in
        // place (Top::save), so the mapped bytes stay the ones checked here.
        let map = unsafe { memmap2::Mmap::map(&f) }.ok()?;
        let words = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                map.get(8 * at..8 * at + 8)?.try_into().ok()?,
            ))
        };
        let step = Top::step_for(sa.width());
        let want = [MAGIC, owner[0], owner[1], owner[2], owner[3]];
        let head = [sa.len(), sa.width(), step, token].map(|v| v as u64);
        if (0..5).any(|i| words(i) != Some(want[i]))
            || (0..4).any(|i| words(5 + i) != Some(head[i]))
        {
            return None;
        }
        let mut present = [false; 256];
        for (c, p) in present.iter_mut().enumerate() {
            *p = words(9 + c / 64)? >> (c % 64) & 1 == 1;
        }
        let levels = Level::plan(sa.len(), step);
        let saved = (0..words(13)? as usize).map(|l| {
            let (start, len) = (words(FIXED + 2 * l)?, words(FIXED + 2 * l + 1)?);
            Some(Level {
                start: start as usize,
                len: len as usize,
            })
        });
        if saved.collect::<Option<Vec<Level>>>()? != levels {
            return None;
        }
        let at = 8 * (FIXED + 2 * levels.len()).next_multiple_of(8);
        let last = levels[levels.len() - 1];
        let lines = last.start + last.len.div_ceil(BLOCK);
        let fits = map.len() == at + 64 * lines;
        let aligned = bytemuck::try_cast_slice::<u8, Line>(map.get(at..)?).is_ok();
        (fits && aligned).then(|| Top {
            code: KeyCode::new(present, token),
            step,
            lines: Lines::Saved(map, at),
            levels,
            n: sa.len(),
        })
    }
}
