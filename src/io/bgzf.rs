//! BGZF, the blocked gzip of `bgzip` and htslib: a gzip file of independent members of at most
//! 64 KiB each, whose headers carry the member's compressed size (the `BC` extra field). Unlike a
//! plain gzip stream it can be split: every pe finds the blocks that start in its byte range of
//! the file and decompresses them itself ([`read_part`]), so a bgzipped FASTA or FASTQ file is read
//! by all pes at once, as a plain one is, instead of streamed through pe 0.
//!
//! Finding the blocks: pe 0's first block starts at byte 0; every other pe takes the first place
//! in its range where a BGZF header stands (the fixed bytes of one: ID1 ID2 CM FLG, XLEN = 6, the
//! `BC` subfield of length 2) and follows the blocks' sizes from there to the first block at or
//! past its range's end. A real block's header is such a place, so a pe's first find is at or
//! before its first real block; the finds are right exactly when each pe's walk ends where the
//! next pe's begins (pe 0's is right by definition), which every pe checks from one all-gather.
//! Anything else (a plain gzip, a bgzip file with other members after it, a truncated file, a
//! header's bytes inside compressed data) makes every pe answer `None`, and the caller streams the
//! file as any gzip. Each block's data is then inflated and checked against its CRC and length.

use std::path::Path;

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};

/// The largest block, header to footer (BSIZE is 16 bits: the size less one).
const MAX_BLOCK: usize = 1 << 16;
/// The header bgzip writes: 12 bytes of gzip header, then XLEN = 6 bytes of the `BC` subfield.
const HEADER: usize = 18;
/// CRC-32 and ISIZE.
const FOOTER: usize = 8;

/// The length of the block whose header starts at `buf[at]`, header to footer, when a BGZF header
/// stands there. Local.
fn block_len(buf: &[u8], at: usize) -> Option<usize> {
    let h = buf.get(at..at + HEADER)?;
    let fixed = h[..4] == [0x1f, 0x8b, 8, 4] && h[10..16] == [6, 0, b'B', b'C', 2, 0];
    let len = usize::from(u16::from_le_bytes([h[16], h[17]])) + 1;
    (fixed && len >= HEADER + FOOTER).then_some(len)
}

/// Whether `path` starts with a BGZF block (its first bytes only). Local.
pub(super) fn starts_as_bgzf(path: &Path, size: u64) -> Result<bool> {
    if size < (HEADER + FOOTER) as u64 {
        return Ok(false);
    }
    let head = super::read_range(path, 0, HEADER)?;
    Ok(block_len(&head, 0).is_some())
}

/// This pe's part of a BGZF file's decompressed bytes: those of the blocks that start in its byte
/// range of the file.
pub(super) struct Part {
    /// The decompressed bytes, in file order.
    pub bytes: Vec<u8>,
    /// Their offset in the whole decompressed file.
    pub first: u64,
    /// The decompressed byte just before `first` (None at the start of the file).
    pub before: Option<u8>,
}

/// Every pe decompresses the blocks that start in its byte range of the `size` bytes at `path`
/// (the block layout of the file). Collective; an error (a damaged block, a failed read) on one
/// pe is an error on all. Ok(None) on every pe when the file is not one chain of BGZF blocks to
/// its end (see the module doc): the caller reads it another way.
///
/// Memory per pe: its range of the file and up to one block past it, then its decompressed part.
/// Communication: an all-gather of two words, two scans and a few reductions.
pub(super) fn read_part(comm: &Comm, path: &Path, size: u64) -> Result<Option<Part>> {
    let is_bgzf = comm.agree(starts_as_bgzf(path, size))?;
    if comm.all_reduce_min(u64::from(is_bgzf)) == 0 {
        return Ok(None);
    }
    let me = comm.rank();
    let layout = Layout::block(size as usize, comm.size());
    let (a, b) = (layout.start(me), layout.end(me));
    // A block that starts before b ends before b + MAX_BLOCK.
    let buf = comm.agree(super::read_range(
        path,
        a,
        (b + MAX_BLOCK).min(size as usize),
    ))?;
    let first = match me {
        0 => Some(0),
        _ => (0..b - a).find(|&k| block_len(&buf, k).is_some()),
    };
    // Walk from the first find to the first block at or past b (or the file's end).
    let mut blocks = Vec::new();
    let mut at = first;
    while let Some(k) = at.filter(|&k| a + k < b) {
        at = block_len(&buf, k).map(|len| {
            blocks.push(k..k + len);
            k + len
        });
    }
    let walk = match (first, at) {
        (Some(s), Some(e)) => [(a + s) as u64, (a + e) as u64],
        (None, _) => [u64::MAX; 2],
        // A header broken off by the end of the range read: the file ends inside a block.
        (Some(_), None) => [u64::MAX, 0],
    };
    let walks = comm.all_gather(walk);
    if !chained(&walks, size) {
        return Ok(None);
    }
    let bytes = comm.agree(inflate_all(&buf, &blocks, a, path))?;
    drop(buf);
    let first = comm.exscan_sum(bytes.len() as u64);
    let end = first + bytes.len() as u64;
    // The last byte of the nearest pe to the left with any: its end is this pe's first.
    let last = bytes.last().map_or(0, |&c| (end << 8) | u64::from(c));
    let before = comm.exscan_max(last);
    Ok(Some(Part {
        bytes,
        first,
        before: (first > 0).then_some(before as u8),
    }))
}

/// Whether the pes' walks (first block, first block past the range; `u64::MAX` for a pe with no
/// block) form one chain from byte 0 to `size`. Local; the same on every pe.
fn chained(walks: &[[u64; 2]], size: u64) -> bool {
    let mut next = 0;
    for &[start, end] in walks {
        if start == u64::MAX {
            if end != u64::MAX {
                return false;
            }
            continue;
        }
        if start != next || end < start {
            return false;
        }
        next = end;
    }
    next == size
}

/// The blocks' data inflated one after the other, each checked against its footer. Local.
fn inflate_all(
    buf: &[u8],
    blocks: &[std::ops::Range<usize>],
    a: usize,
    path: &Path,
) -> Result<Vec<u8>> {
    let footer = |r: &std::ops::Range<usize>| {
        let f = &buf[r.end - FOOTER..r.end];
        let word = |k: usize| u32::from_le_bytes([f[k], f[k + 1], f[k + 2], f[k + 3]]);
        (word(0), word(4) as usize)
    };
    let damaged = |r: &std::ops::Range<usize>, why: &str| {
        Error::Invalid(format!(
            "{}: the gzip block at byte {} is damaged ({why})",
            path.display(),
            a + r.start
        ))
    };
    // A block holds at most 64 KiB: a larger length is a damaged footer, not room to reserve.
    if let Some(r) = blocks.iter().find(|r| footer(r).1 > MAX_BLOCK) {
        return Err(damaged(r, "its footer gives a length over 64 KiB"));
    }
    let total: usize = blocks.iter().map(|r| footer(r).1).sum();
    let mut out = Vec::with_capacity(total);
    let mut z = flate2::Decompress::new(false);
    for r in blocks {
        let (crc, len) = footer(r);
        let damaged = |why: &str| damaged(r, why);
        let data = &buf[r.start + HEADER..r.end - FOOTER];
        let at = out.len();
        z.reset(false);
        let status = z
            .decompress_vec(data, &mut out, flate2::FlushDecompress::Finish)
            .map_err(|e| damaged(&e.to_string()))?;
        let got = out.len() - at;
        if status != flate2::Status::StreamEnd || got != len || z.total_in() as usize != data.len()
        {
            return Err(damaged(
                "its data does not inflate to the length its footer gives",
            ));
        }
        let mut sum = flate2::Crc::new();
        sum.update(&out[at..]);
        if sum.sum() != crc {
            return Err(damaged("CRC mismatch"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One BGZF block holding `data` (as bgzip writes it).
    fn block(data: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, data).unwrap();
        let cdata = z.finish().unwrap();
        let bsize = (HEADER + cdata.len() + FOOTER - 1) as u16;
        let mut out = vec![
            0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 6, 0, b'B', b'C', 2, 0,
        ];
        out.extend(bsize.to_le_bytes());
        out.extend(&cdata);
        let mut crc = flate2::Crc::new();
        crc.update(data);
        out.extend(crc.sum().to_le_bytes());
        out.extend((data.len() as u32).to_le_bytes());
        out
    }

    #[test]
    fn a_block_is_recognised_by_its_fixed_bytes() {
        let b = block(b"ACGT");
        assert_eq!(block_len(&b, 0), Some(b.len()));
        assert_eq!(block_len(&b[..HEADER - 1], 0), None);
        let mut plain = b.clone();
        plain[3] = 0; // no extra field: a plain gzip member
        assert_eq!(block_len(&plain, 0), None);
        let mut other = b.clone();
        other[12] = b'X'; // another subfield
        assert_eq!(block_len(&other, 0), None);
    }

    #[test]
    fn blocks_inflate_and_a_damaged_one_is_named() {
        let (x, y) = (block(b"hello "), block(b"world"));
        let buf = [&x[..], &y[..]].concat();
        let blocks = [0..x.len(), x.len()..buf.len()];
        let path = Path::new("f.gz");
        assert_eq!(inflate_all(&buf, &blocks, 0, path).unwrap(), b"hello world");
        let mut bad = buf.clone();
        let crc_at = x.len() - FOOTER;
        bad[crc_at] ^= 1;
        let e = inflate_all(&bad, &blocks, 100, path)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("f.gz: the gzip block at byte 100 is damaged (CRC mismatch)"),
            "{e}"
        );
    }

    #[test]
    fn walks_chain_only_from_zero_to_the_end() {
        const NONE: [u64; 2] = [u64::MAX; 2];
        assert!(chained(&[[0, 10], NONE, [10, 30]], 30));
        assert!(chained(&[[0, 30], NONE, NONE], 30));
        // A pe's first find before the block the walk to its left reached: a false header.
        assert!(!chained(&[[0, 10], [8, 30]], 30));
        // Short of the end, or past it.
        assert!(!chained(&[[0, 10], [10, 20]], 30));
        assert!(!chained(&[[0, 40]], 30));
        // A walk broken off inside a block.
        assert!(!chained(&[[0, 10], [u64::MAX, 0]], 30));
        assert!(!chained(&[[5, 30]], 30));
    }
}
