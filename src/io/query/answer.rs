//! A batch's answers: each task of [`TASK`] patterns makes their keys, searches them
//! together ([`Index::ranges`]) and writes their lines into one buffer; the tasks run on rayon's
//! threads and come back in order.

use std::io::Write;

use rayon::prelude::*;

use super::patterns::Batch;
use super::Query;
use crate::config::json_str;
use crate::error::{Error, Result};
use crate::io::index::{tsv_field, Index};

/// Patterns per task of a batch: a task's searches run interleaved on one thread
/// ([`Index::ranges`]) and its answers go to one buffer.
const TASK: usize = 1 << 11;

/// Buffers that answers are written into, handed back once written, so that batch after batch
/// reuses the same memory (a buffer freed and allocated anew is zeroed by the kernel again).
#[derive(Default)]
pub struct Buffers(std::sync::Mutex<Vec<Vec<u8>>>);

impl Buffers {
    /// An empty buffer, one handed back where there is one.
    fn take(&self) -> Vec<u8> {
        let mut free = self.0.lock().unwrap_or_else(|e| e.into_inner());
        free.pop().unwrap_or_default()
    }

    /// Hands `buf` back for a later task.
    pub fn give(&self, mut buf: Vec<u8>) {
        buf.clear();
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(buf);
    }
}

/// What a task searches with: its patterns' keys one after another, and their intervals (kept
/// by each of rayon's threads from task to task).
#[derive(Default)]
struct Scratch {
    keys: Vec<u8>,
    ends: Vec<usize>,
    found: Vec<(usize, usize)>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// The lines answering `batch`'s patterns, one buffer (from `buffers`) per task in order, each
/// with the matches it counts. Errors where a pattern is no key (a token index's) or the index
/// is damaged.
pub fn answer_batch(
    index: &Index,
    batch: &Batch,
    q: &Query,
    buffers: &Buffers,
) -> Result<Vec<(Vec<u8>, u64)>> {
    let tasks: Vec<usize> = (0..batch.len()).step_by(TASK).collect();
    tasks
        .par_iter()
        .map(|&first| {
            let task = first..(first + TASK).min(batch.len());
            let mut out = buffers.take();
            let matches = SCRATCH.with_borrow_mut(|s| answer(index, batch, task, q, s, &mut out));
            Ok((out, matches?))
        })
        .collect()
}

/// Appends the lines answering `batch`'s patterns `task` to `out`, in order, and returns the
/// matches they count: their keys made ([`key_of`]), searched together ([`Index::ranges`]),
/// each answer written ([`write_answer`]).
fn answer(
    index: &Index,
    batch: &Batch,
    task: std::ops::Range<usize>,
    q: &Query,
    s: &mut Scratch,
    out: &mut Vec<u8>,
) -> Result<u64> {
    s.keys.clear();
    s.ends.clear();
    for i in task.clone() {
        key_of(index, batch.get(i), &mut s.keys)?;
        s.ends.push(s.keys.len());
    }
    let starts = std::iter::once(0).chain(s.ends.iter().copied());
    let keys: Vec<&[u8]> = starts.zip(&s.ends).map(|(a, &b)| &s.keys[a..b]).collect();
    s.found.clear();
    s.found.resize(task.len(), (0, 0));
    index.ranges(&keys, &mut s.found)?;
    let mut matches = 0;
    for (i, &range) in task.zip(&s.found) {
        matches += write_answer(index, batch.get(i), range, q, out)?;
    }
    Ok(matches)
}

/// Appends the bytes the index's T holds for `pat` to `key`: folded by its case rule, or a
/// token index's ids ([`token_key`]).
fn key_of(index: &Index, pat: &[u8], key: &mut Vec<u8>) -> Result<()> {
    match index.meta.token_width {
        0 => {
            index.fold_into(pat, key);
            Ok(())
        }
        w => token_key(pat, w, key),
    }
}

/// Appends the lines answering `pat`, whose suffixes are `SA[range]`, to `out`; returns its
/// count. Errors where the index is damaged. The tab-separated lines hold the pattern's and
/// the records' names' bytes as they are; JSON, which is UTF-8, shows bytes that are not as
/// U+FFFD.
fn write_answer(
    index: &Index,
    pat: &[u8],
    range: (usize, usize),
    q: &Query,
    out: &mut Vec<u8>,
) -> Result<u64> {
    let count = (range.1 - range.0) as u64;
    let hits = match q.locate {
        true => index.locate(range, q.max_hits.unwrap_or(usize::MAX))?,
        false => Vec::new(),
    };
    let documents = index.meta.doc_sep.is_some();
    let name = |r: usize| -> std::borrow::Cow<'_, [u8]> {
        match documents {
            true => r.to_string().into_bytes().into(),
            false => (index.meta.records.get(r))
                .map_or(&[][..], |r| &r.name[..])
                .into(),
        }
    };
    let place = match documents {
        true => "document",
        false => "record",
    };
    // Writing to a vector does not fail.
    if q.json {
        let shown = String::from_utf8_lossy(pat);
        let _ = write!(
            out,
            "{{\"pattern\": {}, \"count\": {count}",
            json_str(&shown)
        );
        if q.locate {
            let list: Vec<String> = hits
                .iter()
                .map(|h| {
                    let shown = match documents {
                        true => h.record.to_string(),
                        false => json_str(&String::from_utf8_lossy(&name(h.record))),
                    };
                    format!(
                        "{{\"{place}\": {shown}, \"offset\": {}, \"text_offset\": {}}}",
                        h.offset, h.text_offset
                    )
                })
                .collect();
            let _ = write!(out, ", \"hits\": [{}]", list.join(", "));
        }
        out.extend_from_slice(b"}\n");
        return Ok(count);
    }
    let shown = tsv_field(pat);
    out.extend_from_slice(&shown);
    push_field(out, count);
    for h in &hits {
        out.extend_from_slice(&shown);
        out.push(b'\t');
        out.extend_from_slice(&tsv_field(&name(h.record)));
        push_field(out, h.offset);
    }
    Ok(count)
}

/// Appends a tab, `n` in decimal and a line break to `out` (without the formatting machinery:
/// a line per pattern, by the million).
fn push_field(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push(b'\t');
    out.extend_from_slice(&digits[at..]);
    out.push(b'\n');
}

/// Appends the bytes a token index's file holds for `pat`, decimal token ids separated by
/// whitespace, to `key`: each id little-endian in `width` bytes. Errors name the pattern and the
/// id that is not one.
fn token_key(pat: &[u8], width: u32, key: &mut Vec<u8>) -> Result<()> {
    let max = (1u64 << (8 * width)) - 1;
    for id in pat
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
    {
        let value = std::str::from_utf8(id)
            .ok()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&v| v <= max);
        let Some(value) = value else {
            return Err(Error::BadInput(format!(
                "pattern '{}': '{}' is not a token id: this index holds tokens of {width} byte(s), and takes patterns of decimal ids 0 to {max} separated by spaces",
                String::from_utf8_lossy(pat),
                String::from_utf8_lossy(id)
            )));
        };
        key.extend_from_slice(&value.to_le_bytes()[..width as usize]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_in_decimal() {
        let mut out = Vec::new();
        for n in [0, 7, 10, 4_294_967_296, u64::MAX] {
            push_field(&mut out, n);
        }
        assert_eq!(
            out,
            b"\t0\n\t7\n\t10\n\t4294967296\n\t18446744073709551615\n"
        );
    }
}
