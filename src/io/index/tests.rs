//! The index files' unit tests: the metadata's encodings, its checks, the stamps.

use super::*;

/// What a test returns: an error fails it.
type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// `x` in bincode's standard encoding.
fn encoded<T: bincode::Encode>(x: T) -> std::result::Result<Vec<u8>, bincode::error::EncodeError> {
    bincode::encode_to_vec(x, bincode::config::standard())
}

/// `OUT.meta` as version 1 wrote it: the magic, then the fields in order (bincode's standard
/// encoding of a struct is its fields one after another), the inputs without times.
fn v1_bytes(version: u32, inputs_size: u64) -> std::io::Result<Vec<u8>> {
    let fields = (
        version,
        100u64,
        4u32,
        false,
        false,
        false,
        vec![(
            "in.txt".to_string(),
            b"/data/in.txt".to_vec(),
            inputs_size,
            "raw".to_string(),
            false,
        )],
        vec![RecordMeta {
            name: "in.txt".into(),
            start: 0,
            len: 100,
        }],
    );
    let mut v = MAGIC.to_vec();
    v.extend(encoded(fields).map_err(std::io::Error::other)?);
    Ok(v)
}

/// `bytes` read as `OUT.meta` from a file of their own: the outer error is the test's (the file
/// could not be written), the inner one the reader's verdict.
fn read_bytes(tag: &str, bytes: &[u8]) -> std::io::Result<Result<IndexMeta>> {
    let path = std::env::temp_dir().join(format!("psa-meta-{}-{tag}", std::process::id()));
    std::fs::write(&path, bytes)?;
    let meta = IndexMeta::read(&path);
    std::fs::remove_file(&path)?;
    Ok(meta)
}

#[test]
fn tsv_fields_keep_their_lines() -> TestResult {
    assert_eq!(&tsv_field(b"chr1")[..], b"chr1");
    assert_eq!(&tsv_field(b"a\tb\nc\\d\r")[..], b"a\\tb\\nc\\\\d\\r");
    let tsv = IndexMeta::records_tsv(&[Record {
        name: "dir\tx/in\n.txt".into(),
        start: 0,
        len: 3,
    }]);
    assert_eq!(tsv, b"name\tstart\tlength\ndir\\tx/in\\n.txt\t0\t3\n");
    Ok(())
}

/// Names that are not UTF-8 keep their bytes in the table and the metadata (T4).
#[test]
fn names_are_kept_byte_for_byte() -> TestResult {
    let name = b"r\xff\xfe\x80x".to_vec();
    let rec = Record {
        name: name.clone(),
        start: 0,
        len: 3,
    };
    let tsv = IndexMeta::records_tsv(std::slice::from_ref(&rec));
    assert_eq!(
        tsv,
        [&b"name\tstart\tlength\n"[..], &name, b"\t0\t3\n"].concat()
    );
    let mut meta = current();
    meta.records = vec![RecordMeta {
        name: name.clone(),
        start: 0,
        len: 3,
    }];
    meta.stamps.as_mut().ok_or("stamps")?.records_size = tsv.len() as u64;
    let back = IndexMeta::decode(Path::new("m"), &meta.encode())?;
    assert_eq!(back.records[0].name, name);
    Ok(())
}

/// The room reserved for the side files (T10): the records table's exactly, the
/// metadata's at least its encoding, with at most the stamps' largest size to spare.
#[test]
fn side_files_sizes_are_known_before_the_build() -> TestResult {
    let names: Vec<Vec<u8>> = (0..300u64)
        .map(|k| format!("rec{k}\t{}", "x".repeat(k as usize % 300)).into_bytes())
        .chain([b"\xff\xfe".to_vec(), Vec::new()])
        .collect();
    let mut at = 0u64;
    let records: Vec<Record> = (names.iter().enumerate())
        .map(|(k, name)| {
            let len = (k as u64 * 977) % 70_000;
            at += len + 1;
            Record {
                name: name.clone(),
                start: at - len - 1,
                len,
            }
        })
        .collect();
    let rows = || records.iter().map(|r| (&r.name[..], false, r.start, r.len));
    let tsv = IndexMeta::records_tsv(&records);
    assert_eq!(IndexMeta::records_tsv_len_of(rows()), tsv.len() as u64);
    let mut meta = current();
    meta.n = at;
    meta.records.clear();
    let bound = meta.encoded_len_with(rows());
    meta.records = (records.iter())
        .map(|r| RecordMeta {
            name: r.name.clone(),
            start: r.start,
            len: r.len,
        })
        .collect();
    let real = meta.encode().len() as u64;
    assert!(real <= bound && bound <= real + 64, "{real} {bound}");
    // Twins: the name and "/rc".
    let twins = |twin| {
        records
            .iter()
            .map(move |r| (&r.name[..], twin, r.start, r.len))
    };
    let with_rc: Vec<Record> = (records.iter())
        .map(|r| Record {
            name: [&r.name[..], b"/rc"].concat(),
            ..r.clone()
        })
        .collect();
    assert_eq!(
        IndexMeta::records_tsv_len_of(twins(true)),
        IndexMeta::records_tsv(&with_rc).len() as u64
    );
    Ok(())
}

#[test]
fn version_1_is_read_without_times() -> TestResult {
    let meta = read_bytes("v1", &v1_bytes(1, 100)?)??;
    assert_eq!((meta.version, meta.n, meta.width), (1, 100, 4));
    assert_eq!(meta.inputs.len(), 1);
    let input = &meta.inputs[0];
    assert_eq!(
        (
            &input.given[..],
            &input.absolute[..],
            input.size,
            input.modified
        ),
        ("in.txt", &b"/data/in.txt"[..], 100, None)
    );
    assert_eq!(meta.records[0].len, 100);
    // Its sizes are checked as version 2's are: a raw input of another size is damage.
    let e = read_bytes("v1-bad", &v1_bytes(1, 99)?)?.unwrap_err();
    assert!(e.to_string().contains("is damaged"), "{e}");
    // Cut short.
    let whole = v1_bytes(1, 100)?;
    let e = read_bytes("v1-short", &whole[..whole.len() - 3])?.unwrap_err();
    assert!(e.to_string().contains("is damaged"), "{e}");
    Ok(())
}

/// A sequence index of the current version, with stamps.
fn current() -> IndexMeta {
    IndexMeta {
        version: VERSION,
        n: 10,
        width: 5,
        sequence: true,
        keep_case: true,
        revcomp: false,
        inputs: vec![InputMeta {
            given: "r.fa".into(),
            absolute: b"/x/r.fa".to_vec(),
            size: 20,
            modified: Some((1_700_000_000, 5)),
            format: "fasta".into(),
            gzip: false,
        }],
        records: vec![RecordMeta {
            name: "r".into(),
            start: 0,
            len: 10,
        }],
        stamps: Some(BuildStamps {
            build: 0x1234_5678_9abc_def0,
            sa: FileStamp {
                size: 50,
                modified: (1_700_000_001, 7),
            },
            text: Some(FileStamp {
                size: 10,
                modified: (1_700_000_002, 9),
            }),
            records_size: 28,
            docs: None,
        }),
        token_width: 0,
        doc_sep: None,
    }
}

/// A raw index of 10 u16 tokens with a document table of 3 entries, of the current version.
fn tokens_with_docs() -> IndexMeta {
    let mut m = current();
    m.sequence = false;
    m.keep_case = false;
    m.inputs[0].format = "raw".into();
    m.token_width = 2;
    m.doc_sep = Some(0xffff);
    if let Some(s) = &mut m.stamps {
        s.text = None;
        s.docs = Some(FileStamp {
            size: 15,
            modified: (1_700_000_003, 1),
        });
    }
    m
}

/// A token index with a document table round-trips; one whose fields cannot be (a separator
/// that is no token of its width, no document table's stamp, a table that is not whole
/// entries, token ids over sequence input) is damaged.
#[test]
fn token_indexes_and_their_documents_are_checked() -> TestResult {
    let meta = tokens_with_docs();
    assert_eq!(read_bytes("tok", &meta.encode())??, meta);
    let spoilt: [&dyn Fn(&mut IndexMeta); 5] = [
        &|m| m.doc_sep = Some(0x1_0000),
        &|m| m.stamps.iter_mut().for_each(|s| s.docs = None),
        &|m| {
            m.stamps
                .iter_mut()
                .for_each(|s| s.docs.iter_mut().for_each(|d| d.size = 16))
        },
        &|m| m.token_width = 3,
        &|m| m.inputs[0].size = 10,
    ];
    for (k, spoil) in spoilt.iter().enumerate() {
        let mut m = tokens_with_docs();
        spoil(&mut m);
        let e = read_bytes(&format!("tok{k}"), &m.encode())?.unwrap_err();
        assert!(e.to_string().contains("is damaged"), "{k}: {e}");
    }
    Ok(())
}

/// An index of format version 3 (no tokens, no document table) still reads, as a text of
/// characters.
#[test]
fn version_3_still_reads() -> TestResult {
    let m = current();
    let Some(s) = m.stamps else {
        return Err("the current index has stamps".into());
    };
    let v3 = (
        (3u32, m.n, m.width, m.sequence, m.keep_case, m.revcomp),
        (m.inputs.clone(), m.records.clone()),
        Some((s.build, s.sa, s.text, s.records_size)),
    );
    let mut bytes = MAGIC.to_vec();
    bytes.extend(encoded(v3)?);
    let read = read_bytes("v3", &bytes)??;
    assert_eq!(read.version, 3);
    assert_eq!((read.token_width, read.doc_sep), (0, None));
    assert_eq!(read.stamps.map(|s| (s.sa, s.docs)), Some((s.sa, None)));
    Ok(())
}

#[test]
fn the_current_version_round_trips_and_a_newer_one_is_named() -> TestResult {
    let meta = current();
    assert_eq!(read_bytes("v3", &meta.encode())??, meta);
    let e = read_bytes("v9", &v1_bytes(9, 100)?)?.unwrap_err();
    let newer = format!("format version 9, written by a newer psa; this one reads 1 to {VERSION}");
    assert!(e.to_string().contains(&newer), "{e}");
    let e = read_bytes("nomagic", b"PSAINDEY")?.unwrap_err();
    assert!(e.to_string().contains("not a psa index file"), "{e}");
    // Without stamps, or with stamps whose sizes are not the SA's and T's: damaged.
    for edit in [
        (|m: &mut IndexMeta| m.stamps = None) as fn(&mut IndexMeta),
        |m| m.stamps.iter_mut().for_each(|s| s.sa.size = 49),
        |m| m.stamps.iter_mut().for_each(|s| s.text = None),
    ] {
        let mut bad = current();
        edit(&mut bad);
        let e = read_bytes("v3-bad", &bad.encode())?.unwrap_err();
        assert!(e.to_string().contains("is damaged"), "{e}");
    }
    Ok(())
}

/// Version 2's layout (version 3's without the stamps) is read, without stamps.
#[test]
fn version_2_is_read_without_stamps() -> TestResult {
    let mut meta = current();
    meta.version = 2;
    meta.stamps = None;
    let mut bytes = meta.encode();
    // The stamps' None, then version 4's token width (0) and separator (None), end it.
    let end = bytes.split_off(bytes.len() - 3);
    assert_eq!(end, [0, 0, 0], "None, 0 and None end the encoding");
    assert_eq!(read_bytes("v2", &bytes)??, meta);
    Ok(())
}

/// Forged files: the magic and a version followed by lengths of terabytes, random bytes,
/// every cut of a true file: each is damaged (or not an index), never a panic or a huge
/// allocation, and only a sane beginning is named newer.
#[test]
fn forged_metas_are_damaged() -> TestResult {
    let huge = |version: u32| {
        let mut v = MAGIC.to_vec();
        let head = (version, 10u64, 4u32, true, false, false, u64::MAX >> 8);
        v.extend(encoded(head)?);
        Ok::<_, bincode::error::EncodeError>(v)
    };
    for version in [1, 2, VERSION] {
        let e = read_bytes("huge", &huge(version)?)?.unwrap_err();
        assert!(e.to_string().contains("is damaged"), "{e}");
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..400 {
        let mut v = MAGIC.to_vec();
        v.extend((0..len).map(|_| {
            crate::util::xorshift(&mut x);
            x as u8
        }));
        let e = read_bytes("random", &v)?.unwrap_err().to_string();
        assert!(e.contains("is damaged") || e.contains("newer psa"), "{e}");
    }
    let whole = current().encode();
    for cut in 0..whole.len() {
        let e = read_bytes("cut", &whole[..cut])?.unwrap_err().to_string();
        assert!(
            e.contains("is damaged") || e.contains("not a psa index file"),
            "{cut}: {e}"
        );
    }
    // A version above ours with entries of 9 bytes is no index of any version.
    let mut v = MAGIC.to_vec();
    v.extend(encoded((9u32, 10u64, 9u32))?);
    let e = read_bytes("v9-w9", &v)?.unwrap_err();
    assert!(e.to_string().contains("is damaged"), "{e}");
    Ok(())
}

/// An older index's side files are recognised by their sizes; a current one's by stamps.
#[test]
fn side_files_are_recognised() -> TestResult {
    let meta = current();
    let tsv = IndexMeta::records_tsv(&[Record {
        name: "r".into(),
        start: 0,
        len: 10,
    }]);
    assert_eq!(meta.records_tsv_len(), tsv.len() as u64);
    let mut old = meta.clone();
    old.stamps = None;
    let path = std::env::temp_dir().join(format!("psa-side-{}", std::process::id()));
    std::fs::write(&path, &tsv)?;
    let m = std::fs::metadata(&path)?;
    assert!(old.wrote(Side::Records, &m) && !old.wrote(Side::Text, &m));
    assert!(!meta.wrote(Side::Records, &m), "28 bytes recorded");
    std::fs::write(&path, b"0123456789")?;
    let m = std::fs::metadata(&path)?;
    assert!(old.wrote(Side::Text, &m) && !meta.wrote(Side::Text, &m));
    std::fs::remove_file(&path)?;
    Ok(())
}
