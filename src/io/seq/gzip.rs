//! gzip that is not BGZF cannot be split: pe 0 decompresses it once as a stream, a piece at a
//! time, parses it and deals each piece's characters out at once in equal shares
//! ([`deal_gzip`]), placed once T's length is known.

use std::fs::File;
use std::io::Read;

use super::input::InputFile;
use super::parser::{assemble, invalid, Parsed, Parser, State};
use super::plain::Part;
use crate::comm::Comm;
use crate::error::{Error, Result};

/// Reads up to `buf.len()` decompressed bytes (fewer only at the end), and the error that
/// stopped it early, if any (the bytes before it are still good to parse).
fn fill(r: &mut impl Read, buf: &mut [u8]) -> (usize, Option<std::io::Error>) {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

/// Streams the decompressed file through the parser on pe 0, a piece at a time: `each(kept)`
/// gets every piece's T characters. Local (pe 0). Returns the records and T's characters.
fn stream_gzip(
    file: &InputFile,
    keep_case: bool,
    piece: usize,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<Part> {
    let f = File::open(&file.path).map_err(|e| Error::io("open input", &file.path, e))?;
    let mut z = flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(1 << 20, f));
    let st = State {
        at_line_start: true,
        ..State::default()
    };
    let mut parser = Parser::new(file.format, keep_case, st);
    let mut out = Parsed::default();
    let mut buf = vec![0u8; piece.max(1)];
    loop {
        let (got, failed) = fill(&mut z, &mut buf);
        parser
            .feed(&buf[..got], &mut out)
            .map_err(|e| invalid(&file.path, e.line, e.msg))?;
        if let Some(e) = failed {
            let why = match e.kind() {
                std::io::ErrorKind::UnexpectedEof => "the gzip stream is truncated".to_string(),
                _ => format!("not a valid gzip stream ({e})"),
            };
            return Err(invalid(&file.path, parser.st.line, why));
        }
        if got == 0 {
            break;
        }
        each(&out.kept)?;
        out.drained += out.kept.len() as u64;
        out.kept.clear();
    }
    parser
        .finish(&mut out)
        .map_err(|e| invalid(&file.path, e.line, e.msg))?;
    each(&out.kept)?;
    let total = out.here();
    Ok(Part {
        kept: Vec::new(),
        starts: assemble(out.frags),
        total,
    })
}

/// A gzip file's characters as pe 0 dealt them while it decompressed the file once
/// ([`deal_gzip`]): of every piece, this pe's share, at its offset in the file's span of T, one
/// share per piece (possibly empty), the same number on every pe.
pub(super) struct Dealt(pub(super) Vec<(u64, Vec<u8>)>);

/// The one pass over a gzip file: pe 0 decompresses and parses it a piece at a time
/// ([`stream_gzip`]) and deals every piece's characters out at once, an equal share to each pe in
/// pe order, so that every pe holds about its share of the file's characters (and pe 0 the
/// records) by the end, before T's layout is known; [`super::place_all`] then moves each piece's shares to
/// their owners. Collective; an error of the stream (a bad gzip, a truncated one, a parse error)
/// is an error on every pe. Cost: one decompression on pe 0; per piece one broadcast of three
/// words and one all-to-all of its characters from pe 0 (with its all-to-all of counts).
pub(super) fn deal_gzip(
    comm: &Comm,
    file: &InputFile,
    keep_case: bool,
    piece: usize,
) -> Result<(Part, Dealt)> {
    let (p, me) = (comm.size(), comm.rank());
    let mut mine = Vec::new();
    // One round per piece: pe 0 says whether a piece follows (1), or the stream ended (0) or
    // failed (2), with the piece's first character's offset and its length; then deals it.
    let deal = |kept: &[u8], at: u64, mine: &mut Vec<(u64, Vec<u8>)>| {
        let mut head = [1, at, kept.len() as u64];
        comm.broadcast(&mut head, 0);
        let [go, at, len] = head;
        if go != 1 {
            return false;
        }
        let cut = |d: usize| len as usize * d / p;
        // pe 0 sends, the others only receive.
        let counts: Vec<usize> = match me {
            0 => (0..p).map(|d| cut(d + 1) - cut(d)).collect(),
            _ => vec![0; p],
        };
        let (got, _) = comm.all_to_all_v_counts(kept, &counts);
        mine.push((at + cut(me) as u64, got));
        true
    };
    let part = if me == 0 {
        let mut at = 0u64;
        let r = stream_gzip(file, keep_case, piece, |kept| {
            if !kept.is_empty() {
                deal(kept, at, &mut mine);
                at += kept.len() as u64;
            }
            Ok(())
        });
        let mut end = [if r.is_ok() { 0u64 } else { 2 }, 0, 0];
        comm.broadcast(&mut end, 0);
        comm.agree(r)?
    } else {
        while deal(&[], 0, &mut mine) {}
        comm.agree(Ok(Part::default()))?
    };
    let mut total = part.total;
    comm.broadcast(&mut total, 0);
    Ok((Part { total, ..part }, Dealt(mine)))
}
