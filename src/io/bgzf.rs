//! BGZF, the blocked gzip of `bgzip` and htslib: a gzip file of independent members of at most
//! 64 KiB each, whose headers carry the member's compressed size (the `BC` extra field). Unlike a
//! plain gzip stream it can be split: every pe finds the blocks that start in its byte range of
//! the file and decompresses them itself ([`read_part`]), so a bgzipped FASTA or FASTQ file is read
//! by all pes at once, as a plain one is, instead of streamed through pe 0.
//!
//! Finding the blocks ([`walk`]): pe 0's first block starts at byte 0; every other pe takes the
//! first place in its range where a BGZF header stands (the fixed bytes of one: ID1 ID2 CM FLG,
//! XLEN = 6, the `BC` subfield of length 2) and follows the blocks' sizes from there to the first
//! block at or past its range's end. A real block's header is such a place, so a pe's first find
//! is at or before its first real block; the finds are right exactly when each pe's walk ends where
//! the next pe's begins (pe 0's is right by definition), which every pe checks from one all-gather
//! ([`chained`]). Anything else (a plain gzip, a bgzip file with other members after it, a
//! truncated file, a header's bytes inside compressed data before a pe's first block) makes every
//! pe answer `None`, and the caller streams the file as any gzip. Each block's data is then
//! inflated (on the pe's threads) and checked against its CRC and length.

use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;

use crate::comm::Comm;
use crate::dist::Layout;
use crate::error::{Error, Result};

/// The largest block, header to footer (BSIZE is 16 bits: the size less one).
const MAX_BLOCK: usize = 1 << 16;
/// The header bgzip writes: 12 bytes of gzip header, then XLEN = 6 bytes of the `BC` subfield.
const HEADER: usize = 18;
/// CRC-32 and ISIZE.
const FOOTER: usize = 8;
/// The end-of-file block bgzip writes last: empty data, 28 bytes.
const EOF_BLOCK: usize = HEADER + 2 + FOOTER;

/// The length of the block whose header starts at `buf[at]`, header to footer, when a BGZF header
/// stands there. Local.
fn block_len(buf: &[u8], at: usize) -> Option<usize> {
    let h = buf.get(at..at + HEADER)?;
    let fixed = h[..4] == [0x1f, 0x8b, 8, 4] && h[10..16] == [6, 0, b'B', b'C', 2, 0];
    let len = usize::from(u16::from_le_bytes([h[16], h[17]])) + 1;
    (fixed && len >= HEADER + FOOTER).then_some(len)
}

/// Whether `path` starts with a BGZF block (its first bytes only). Local.
fn starts_as_bgzf(path: &Path, size: u64) -> Result<bool> {
    if size < (HEADER + FOOTER) as u64 {
        return Ok(false);
    }
    let head = super::read_range(path, 0, HEADER)?;
    Ok(block_len(&head, 0).is_some())
}

/// This pe's part of a BGZF file's decompressed bytes: those of the blocks that start in its byte
/// range of the file.
pub struct Inflated {
    /// The decompressed bytes, in file order.
    pub bytes: Vec<u8>,
    /// Their offset in the whole decompressed file.
    pub offset: u64,
    /// The decompressed byte just before `offset` (None at the start of the file).
    pub before: Option<u8>,
}

/// Every pe decompresses the blocks that start in its byte range of the `size` bytes at `path`
/// (the block layout of the file). Collective; an error (a damaged block, a failed read) on one
/// pe is an error on all. Ok(None) on every pe when the file is not one chain of BGZF blocks to
/// its end (see the module doc): the caller reads it another way. Warns (the pe that holds the
/// file's end) when the last block is not bgzip's end-of-file block: the file may have been cut
/// at a block's end.
///
/// Memory per pe: its range of the file and up to one block past it, together with its
/// decompressed part (the blocks' data are inflated in place, then the range is freed). A part
/// is as large as its compressed range inflates to: pes whose range compresses better (long runs
/// of N) hold more. Communication: an all-gather of two words, two scans and a few reductions.
/// Work: one pass over the range to find the first block, the blocks inflated on the pe's threads.
pub fn read_part(comm: &Comm, path: &Path, size: u64) -> Result<Option<Inflated>> {
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
    let (ends, blocks) = walk(&buf, a, b, me == 0);
    if !chained(&comm.all_gather(ends), size) {
        return Ok(None);
    }
    if let Some(last) = blocks.last().filter(|r| (a + r.end) as u64 == size) {
        if last.len() != EOF_BLOCK || footer(&buf, last).1 != 0 {
            log::warn!(
                "{}: the last gzip block is not bgzip's end-of-file block: the file may have been cut short",
                path.display()
            );
        }
    }
    let bytes = comm.agree(inflate_all(&buf, &blocks, a, path))?;
    drop(buf);
    let offset = comm.exscan_sum(bytes.len() as u64);
    let end = offset + bytes.len() as u64;
    // The last byte of the nearest pe to the left with any: its end is this pe's offset.
    let last = bytes.last().map_or(0, |&c| (end << 8) | u64::from(c));
    let before = comm.exscan_max(last);
    Ok(Some(Inflated {
        bytes,
        offset,
        before: (offset > 0).then_some(before as u8),
    }))
}

/// This pe's blocks, in `buf` = the file from byte `a` (its range `[a, b)` and what follows, up to
/// a block's length): from byte 0 when `from_start`, else from the first header found in the
/// range, each block's size leading to the next, up to the first block at or past `b`. Returns
/// the walk's file offsets for [`chained`] — (its first block, the first block past the range);
/// `u64::MAX` twice when the range holds no header; (`u64::MAX`, 0) when a block runs past `buf`
/// (the file ends inside it) — and the blocks as ranges of `buf`. Local.
fn walk(buf: &[u8], a: usize, b: usize, from_start: bool) -> ([u64; 2], Vec<Range<usize>>) {
    let first = match from_start {
        true => Some(0),
        false => (0..b - a).find(|&k| block_len(buf, k).is_some()),
    };
    let mut blocks = Vec::new();
    let mut at = first;
    while let Some(k) = at.filter(|&k| a + k < b) {
        at = block_len(buf, k).map(|len| {
            blocks.push(k..k + len);
            k + len
        });
    }
    let ends = match (first, at) {
        (Some(s), Some(e)) if e <= buf.len() => [(a + s) as u64, (a + e) as u64],
        (None, _) => [u64::MAX; 2],
        // A header broken off by the end of what was read, or a block past it: the file ends
        // inside a block.
        (Some(_), _) => [u64::MAX, 0],
    };
    (ends, blocks)
}

/// Whether the pes' walks ([`walk`], in pe order) form one chain from byte 0 to `size`. Local;
/// the same on every pe.
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

/// A block's CRC-32 and ISIZE.
fn footer(buf: &[u8], r: &Range<usize>) -> (u32, usize) {
    let f = &buf[r.end - FOOTER..r.end];
    let word = |k: usize| u32::from_le_bytes([f[k], f[k + 1], f[k + 2], f[k + 3]]);
    (word(0), word(4) as usize)
}

/// The blocks' data inflated one after the other into one vector, each checked against its
/// footer; the blocks on the current rayon pool's threads, each into its place (the footers give
/// every block's length). Local. Memory: the decompressed bytes, reserved from the footers only
/// where each is within what its data can inflate to.
fn inflate_all(buf: &[u8], blocks: &[Range<usize>], a: usize, path: &Path) -> Result<Vec<u8>> {
    let damaged = |r: &Range<usize>, why: &str| {
        Error::BadInput(format!(
            "{}: the gzip block at byte {} is damaged ({why})",
            path.display(),
            a + r.start
        ))
    };
    // A block holds at most 64 KiB, and deflate inflates at most 1032 times: a footer beyond
    // either is damaged, not room to reserve.
    let most = |r: &Range<usize>| MAX_BLOCK.min(1032 * (r.len() - HEADER - FOOTER) + 64);
    if let Some(r) = blocks.iter().find(|r| footer(buf, r).1 > most(r)) {
        return Err(damaged(r, "its footer gives a length its data cannot hold"));
    }
    let total: usize = blocks.iter().map(|r| footer(buf, r).1).sum();
    let mut out = vec![0u8; total];
    let mut places = Vec::with_capacity(blocks.len());
    let mut rest = &mut out[..];
    for r in blocks {
        let (place, tail) = rest.split_at_mut(footer(buf, r).1);
        places.push((r, place));
        rest = tail;
    }
    places.into_par_iter().try_for_each_init(
        || flate2::Decompress::new(false),
        |z, (r, place)| {
            let (crc, len) = footer(buf, r);
            let data = &buf[r.start + HEADER..r.end - FOOTER];
            z.reset(false);
            let status = (z.decompress(data, place, flate2::FlushDecompress::Finish))
                .map_err(|e| damaged(r, &e.to_string()))?;
            let whole = status == flate2::Status::StreamEnd
                && z.total_out() as usize == len
                && z.total_in() as usize == data.len();
            if !whole {
                return Err(damaged(
                    r,
                    "its data does not inflate to the length its footer gives",
                ));
            }
            let mut sum = flate2::Crc::new();
            sum.update(place);
            match sum.sum() == crc {
                true => Ok(()),
                false => Err(damaged(r, "CRC mismatch")),
            }
        },
    )?;
    Ok(out)
}

/// One BGZF block holding `data` deflated at `level` (0: stored, the bytes as they are), as
/// bgzip writes it (the tests' files; `psa::internals::bgzf_block`). Local. Panics where the
/// block would pass 64 KiB (data of at most 65,280 bytes always fit).
pub fn block(data: &[u8], level: u32) -> Vec<u8> {
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
    std::io::Write::write_all(&mut z, data).expect("deflating into memory");
    let cdata = z.finish().expect("deflating into memory");
    let bsize =
        u16::try_from(HEADER + cdata.len() + FOOTER - 1).expect("a block of at most 64 KiB");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_recognised_by_its_fixed_bytes() {
        let b = block(b"ACGT", 1);
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
        let (x, y) = (block(b"hello ", 1), block(b"world", 1));
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
        // A footer that claims more than a block can hold is refused before any room is taken.
        let mut big = buf.clone();
        big[x.len() - 4..x.len()].copy_from_slice(&(1u32 << 30).to_le_bytes());
        let e = inflate_all(&big, &blocks, 0, path).unwrap_err().to_string();
        assert!(
            e.contains("its footer gives a length its data cannot hold"),
            "{e}"
        );
    }

    #[test]
    fn a_walk_starts_at_the_first_header_and_ends_past_the_range() {
        let blocks: Vec<Vec<u8>> = [&b"AAAA"[..], b"CC", b"GGGGGG", b""]
            .iter()
            .map(|d| block(d, 1))
            .collect();
        let file = blocks.concat();
        let mut starts = vec![0];
        for b in &blocks {
            starts.push(starts.last().unwrap() + b.len());
        }
        let size = file.len() as u64;
        // From byte 0, the range ending inside block 1: the walk ends where block 2 starts.
        let (ends, got) = walk(&file, 0, starts[1] + 1, true);
        assert_eq!(ends, [0, starts[2] as u64]);
        assert_eq!(got, vec![0..starts[1], starts[1]..starts[2]]);
        // From inside block 0 to the end: the first header found is block 1's.
        let (ends, got) = walk(&file[3..], 3, file.len(), false);
        assert_eq!(ends, [starts[1] as u64, size]);
        assert_eq!(got.len(), 3);
        assert!(chained(&[[0, starts[1] as u64], ends], size));
        // No header in the range.
        let (ends, got) = walk(&file[1..], 1, 5, false);
        assert_eq!((ends, got.len()), ([u64::MAX; 2], 0));
        // The file cut inside its last block, or inside a header: the walk breaks off.
        for cut in [file.len() - 3, starts[3] + 5] {
            let (ends, _) = walk(&file[..cut], 0, cut, true);
            assert_eq!(ends, [u64::MAX, 0], "cut at {cut}");
        }
    }

    #[test]
    fn a_header_inside_a_blocks_data_is_found_but_does_not_chain() {
        // A stored block whose data holds a header's bytes, of a block that would end where the
        // next real one starts (at 18 + 5 + 62 + 8 = 93, the fake at 25): its walk rejoins the
        // real chain, and only where it started gives it away.
        let mut fake = vec![
            0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 6, 0, b'B', b'C', 2, 0, 67, 0,
        ];
        fake.resize(60, b'x');
        let data = [&b"ab"[..], &fake].concat();
        let file = [block(&data, 0), block(b"CC", 1), block(b"", 1)].concat();
        let first = block_len(&file, 0).unwrap();
        // The fake header stands after the block's header, deflate's 5-byte stored header and "ab".
        let fake_at = HEADER + 5 + 2;
        assert_eq!(first, 93);
        assert_eq!(block_len(&file, fake_at), Some(first - fake_at));
        let (pe0, _) = walk(&file, 0, 1, true);
        assert_eq!(pe0, [0, first as u64]);
        let (pe1, _) = walk(&file[1..], 1, file.len(), false);
        assert_eq!(pe1, [fake_at as u64, file.len() as u64]);
        assert!(!chained(&[pe0, pe1], file.len() as u64));
        // The walk from the real block goes on to the end.
        let (real, got) = walk(&file[first..], first, file.len(), false);
        assert_eq!((real, got.len()), ([first as u64, file.len() as u64], 2));
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
