//! Sequential parsing by the build's kernel, with no MPI (`psa query` reads its patterns files
//! with it): [`Sequences`], a stream's records as it is fed, and [`text_of`], T and its records
//! from whole files in memory.

use super::input::{Format, Record, SeqOptions};
use super::parser::{assemble, Parsed, Parser, State};
use super::place::complement;

/// The sequences of a FASTA or FASTQ stream, record by record as it is fed, by the build's
/// parser: letters as they are (case kept), names dropped (`psa query` reads its patterns
/// files with it, a chunk at a time). Holds the record in progress; local.
pub struct Sequences {
    parser: Parser,
    out: Parsed,
    /// The characters of the record in progress (its end not seen yet).
    open: Vec<u8>,
}

impl Sequences {
    /// A parser at the start of a stream in `format` (FASTA or FASTQ).
    pub fn new(format: Format) -> Sequences {
        let st = State {
            at_line_start: true,
            ..State::default()
        };
        Sequences {
            parser: Parser::new(format, true, st),
            out: Parsed::default(),
            open: Vec::new(),
        }
    }

    /// Parses `bytes`, the next bytes of the stream, and hands each record that ended in them
    /// to `done` (empty ones too). A parse error is "line N: why" (lines counted from 1).
    pub fn feed(
        &mut self,
        bytes: &[u8],
        done: &mut impl FnMut(&[u8]),
    ) -> std::result::Result<(), String> {
        let r = self.parser.feed(bytes, &mut self.out);
        self.hand_on(done);
        r.map_err(|e| format!("line {}: {}", e.line + 1, e.msg))
    }

    /// The stream ends: hands its last record to `done`.
    pub fn finish(&mut self, done: &mut impl FnMut(&[u8])) -> std::result::Result<(), String> {
        let r = self.parser.finish(&mut self.out);
        self.hand_on(done);
        r.map_err(|e| format!("line {}: {}", e.line + 1, e.msg))
    }

    /// Hands the records that the characters kept so far end (each ends in `$`, which no
    /// sequence letter is) to `done`, and keeps the rest as the record in progress.
    fn hand_on(&mut self, done: &mut impl FnMut(&[u8])) {
        let mut pieces = self.out.kept.split(|&b| b == b'$');
        let last = pieces.next_back().unwrap_or(&[]);
        for piece in pieces {
            match self.open.is_empty() {
                true => done(piece),
                false => {
                    self.open.extend_from_slice(piece);
                    done(&self.open);
                    self.open.clear();
                }
            }
        }
        self.open.extend_from_slice(last);
        self.out.kept.clear();
        self.out.frags.clear();
        self.out.cut.clear();
    }
}

/// T and its records from whole files in memory, sequentially, by the same parser (`psa query`
/// reads its patterns files with it; raw files are named `#k`). Local.
pub fn text_of(
    files: &[(Vec<u8>, Format)],
    opts: &SeqOptions,
) -> std::result::Result<(Vec<u8>, Vec<Record>), String> {
    let mut t = Vec::new();
    let mut records = Vec::new();
    for (k, (bytes, format)) in files.iter().enumerate() {
        let first = t.len() as u64;
        if *format == Format::Raw {
            t.extend_from_slice(bytes);
            records.push(Record {
                name: format!("#{k}").into_bytes(),
                start: first,
                len: bytes.len() as u64,
            });
            continue;
        }
        let st = State {
            at_line_start: true,
            ..State::default()
        };
        let mut parser = Parser::new(*format, opts.keep_case, st);
        let mut out = Parsed::default();
        parser
            .feed(bytes, &mut out)
            .and_then(|()| parser.finish(&mut out))
            .map_err(|e| format!("line {}: {}", e.line + 1, e.msg))?;
        let end = first + out.kept.len() as u64;
        let starts = assemble(out.frags);
        for (j, (name, at)) in starts.iter().enumerate() {
            let next = starts.get(j + 1).map_or(end, |s| first + s.1);
            records.push(Record {
                name: name.clone(),
                start: first + at,
                len: next - 1 - (first + at),
            });
        }
        t.extend_from_slice(&out.kept);
    }
    if opts.revcomp && !t.is_empty() {
        let n = t.len() as u64;
        let rc: Vec<u8> = t[..t.len() - 1]
            .iter()
            .rev()
            .map(|&b| complement(b))
            .collect();
        t.extend(rc);
        t.push(b'$');
        for k in (0..records.len()).rev() {
            let r = records[k].clone();
            records.push(Record {
                name: [&r.name[..], b"/rc"].concat(),
                start: 2 * n - 1 - (r.start + r.len),
                len: r.len,
            });
        }
    }
    Ok((t, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a test returns: an error fails it.
    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    /// The text and the records (name, start, length) of one input.
    fn t(bytes: &[u8], format: Format) -> Result<(Vec<u8>, Vec<(String, u64, u64)>), String> {
        let (t, r) = text_of(&[(bytes.to_vec(), format)], &SeqOptions::default())?;
        let named = |r: Record| {
            (
                String::from_utf8_lossy(&r.name).into_owned(),
                r.start,
                r.len,
            )
        };
        Ok((t, r.into_iter().map(named).collect()))
    }

    fn err(bytes: &[u8], format: Format) -> String {
        text_of(&[(bytes.to_vec(), format)], &SeqOptions::default()).unwrap_err()
    }

    #[test]
    fn fasta_text_rule() -> TestResult {
        let (text, recs) = t(b">a one\nacg\r\nT\n>b\n>c x\nNN n\n\n", Format::Fasta)?;
        assert_eq!(text, b"ACGT$$NNN$");
        assert_eq!(
            recs,
            [("a".into(), 0, 4), ("b".into(), 5, 0), ("c".into(), 6, 3)]
        );
        let (text, _) = t(b"\n\n>x", Format::Fasta)?;
        assert_eq!(text, b"$");
        assert_eq!(t(b"", Format::Fasta)?.0, b"");
        Ok(())
    }

    #[test]
    fn fastq_text_rule() -> TestResult {
        let (text, recs) = t(b"@r1 d\nacgt\n+\nIIII\n@r2\n\n+r2\n\n", Format::Fastq)?;
        assert_eq!(text, b"ACGT$$");
        assert_eq!(recs, [("r1".into(), 0, 4), ("r2".into(), 5, 0)]);
        let (text, _) = t(b"@r1\r\nAC\r\n+\r\n!!\r\n", Format::Fastq)?;
        assert_eq!(text, b"AC$");
        Ok(())
    }

    #[test]
    fn errors_name_the_line() -> TestResult {
        assert!(err(b"ACGT\n>a\n", Format::Fasta).starts_with("line 1: sequence before"));
        assert!(err(b">a\nAC\x00GT\n", Format::Fasta).starts_with("line 2: byte 0x00"));
        let e = err(b"@r\nACG\n+\nII\n", Format::Fastq);
        assert!(e.starts_with("line 4: the quality line has 2"), "{e}");
        let e = err(b"@r\nACG\n+\nIII\n@s\nA\n", Format::Fastq);
        assert!(
            e.contains("ends inside the FASTQ record that starts at line 5"),
            "{e}"
        );
        let e = err(b"@r\nACG\n-\nIII\n", Format::Fastq);
        assert!(e.starts_with("line 3:"), "{e}");
        Ok(())
    }

    #[test]
    fn revcomp_mirrors_the_records() -> TestResult {
        let opts = SeqOptions {
            revcomp: true,
            ..SeqOptions::default()
        };
        let (text, recs) = text_of(&[(b">a\nAAC\n>b\nGT\n".to_vec(), Format::Fasta)], &opts)?;
        assert_eq!(text, b"AAC$GT$AC$GTT$");
        let names = (recs.iter())
            .map(|r| Ok((std::str::from_utf8(&r.name)?, r.start, r.len)))
            .collect::<Result<Vec<_>, std::str::Utf8Error>>()?;
        assert_eq!(
            names,
            [("a", 0, 3), ("b", 4, 2), ("b/rc", 7, 2), ("a/rc", 10, 3)]
        );
        Ok(())
    }

    /// A stream fed in pieces of any size gives each record's sequence (case kept, empty ones
    /// too) as the whole file read at once does, and its errors name the same line.
    #[test]
    fn sequences_stream_in_any_pieces() -> TestResult {
        let fasta = b">a x\nACg\r\nTT\n>\n>c\nN-*\n\n>d\nGG".as_slice();
        let fastq = b"@a\nACGT\n+\nIIII\n@b\n\n+\n\n@c\ngg\n+\n!!\n".as_slice();
        let opts = SeqOptions {
            keep_case: true,
            ..SeqOptions::default()
        };
        for (bytes, format) in [(fasta, Format::Fasta), (fastq, Format::Fastq)] {
            let (t, records) = text_of(&[(bytes.to_vec(), format)], &opts)?;
            let want: Vec<Vec<u8>> = (records.iter())
                .map(|r| t[r.start as usize..(r.start + r.len) as usize].to_vec())
                .collect();
            for piece in [1, 2, 3, 7, bytes.len()] {
                let mut s = Sequences::new(format);
                let mut got: Vec<Vec<u8>> = Vec::new();
                let mut push = |r: &[u8]| got.push(r.to_vec());
                for part in bytes.chunks(piece) {
                    s.feed(part, &mut push)?;
                }
                s.finish(&mut push)?;
                assert_eq!(got, want, "{format:?} in pieces of {piece}");
            }
        }
        let mut s = Sequences::new(Format::Fastq);
        let mut drop = |_: &[u8]| {};
        s.feed(b"@a\nAC\n+\nI", &mut drop)?;
        s.feed(b"I\n@b\nA\n+\nII\n", &mut drop).unwrap_err();
        let e = err(b"@a\nAC\n+\nII\n@b\nA\n+\nII\n", Format::Fastq);
        let mut s = Sequences::new(Format::Fastq);
        let streamed = (s.feed(b"@a\nAC\n+\nII\n@b\nA\n+\nII\n", &mut drop))
            .and_then(|()| s.finish(&mut drop));
        assert_eq!(streamed.unwrap_err(), e);
        Ok(())
    }
}
