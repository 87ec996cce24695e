//! Token input (`--token-width 2|4`): raw files read as little-endian tokens, each pe its block
//! of the tokens of all inputs concatenated.

use super::read_range;
use super::seq::{Format, InputFile};
use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};
use crate::token::{decode, Token, TokenOrder, TokenWidth};

/// Bytes a pe reads at a time and decodes into tokens (so that it never holds its bytes and
/// its tokens whole at once).
const READ_PIECE: usize = 16 << 20;

/// Whether the inputs can be read as tokens of `width` bytes: raw files (no sequence format),
/// each of a size that is a multiple of the width. Judged from the sizes alone, before any byte
/// is read. Local (every pe judges the same files).
pub fn admissible(width: TokenWidth, files: &[InputFile]) -> Result<()> {
    if width == TokenWidth::W1 {
        return Ok(());
    }
    let w = width.bytes() as u64;
    for f in files {
        if f.format != Format::Raw {
            return Err(Error::Usage(format!(
                "--token-width {width} reads raw files of tokens, but '{}' is {} (leave --token-width out, or give --format raw)",
                f.path.display(),
                f.format.name().to_uppercase()
            )));
        }
        if f.size % w != 0 {
            return Err(Error::BadInput(format!(
                "'{}' has {} bytes, not a multiple of the token width {width}: it is not a file of {width}-byte tokens",
                f.path.display(),
                f.size
            )));
        }
    }
    Ok(())
}

/// This pe's block of the `n` tokens of `files` (raw, concatenated in order; see
/// [`admissible`]) in the block layout, read with positioned reads in pieces of
/// [`READ_PIECE`] bytes, each token decoded as `order` says (byte-swapped as it is read for
/// [`TokenOrder::FileBytes`]). Collective (an error on any pe is an error on all).
///
/// Memory: the pe's tokens and one piece of bytes.
pub fn read_tokens<T: Token>(
    comm: &Comm,
    files: &[InputFile],
    n: usize,
    order: TokenOrder,
) -> Result<(Vec<T>, Layout)> {
    let layout = Layout::block(n, comm.size());
    let me = comm.rank();
    let w = T::WIDTH.bytes();
    let (lo, hi) = (layout.start(me) * w, layout.end(me) * w);
    let mut text = Vec::with_capacity((hi - lo) / w);
    let mut read = || -> Result<()> {
        // Each file's bytes [at, at + size) of the concatenation.
        let mut at = 0;
        for f in files {
            let size = f.size as usize;
            let (a, b) = (lo.max(at), hi.min(at + size));
            let mut x = a;
            while x < b {
                let y = b.min(x + READ_PIECE / w * w);
                decode(&read_range(&f.path, x - at, y - at)?, order, &mut text);
                x = y;
            }
            at += size;
        }
        Ok(())
    };
    comm.agree(read())?;
    debug_assert_eq!(text.len(), layout.local_len(me));
    Ok((text, layout))
}
