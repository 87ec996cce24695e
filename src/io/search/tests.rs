//! The search against a naive scan: every pattern's count, and its interval where it occurs,
//! with and without the top level, on texts of bytes and of tokens in one part and in several.

use super::*;
use std::os::unix::fs::MetadataExt;

use crate::util::SplitMix;

/// A read-only map holding `bytes` (None for none: an empty file cannot be mapped).
fn mapped(bytes: &[u8]) -> Option<memmap2::Mmap> {
    if bytes.is_empty() {
        return None;
    }
    let mut m = memmap2::MmapOptions::new()
        .len(bytes.len())
        .map_anon()
        .expect("an anonymous map");
    m.copy_from_slice(bytes);
    Some(m.make_read_only().expect("a read-only map"))
}

/// `t` (little-endian tokens of `token` bytes) as a text of parts cut at `cuts` (in tokens).
fn text_of(t: &[u8], token: usize, cuts: &[usize]) -> Text {
    let mut bounds: Vec<usize> = cuts.iter().map(|c| (c * token).min(t.len())).collect();
    bounds.insert(0, 0);
    bounds.push(t.len());
    bounds.sort_unstable();
    let parts = bounds.windows(2).map(|w| mapped(&t[w[0]..w[1]])).collect();
    let sizes: Vec<u64> = bounds.windows(2).map(|w| (w[1] - w[0]) as u64).collect();
    Text::new(parts, &sizes, token)
}

/// Token `i` of `t`'s value.
fn value(t: &[u8], token: usize, i: usize) -> u32 {
    (t[i * token..(i + 1) * token].iter().rev()).fold(0, |v, &x| (v << 8) | x as u32)
}

/// The suffix array of `t` by sorting its suffixes by their tokens' values; entries of 4 bytes.
fn naive_sa(t: &[u8], token: usize) -> Vec<u8> {
    let n = t.len() / token;
    let mut sa: Vec<usize> = (0..n).collect();
    let suffix = |i: usize| (i..n).map(|k| value(t, token, k)).collect::<Vec<u32>>();
    sa.sort_by_key(|&i| suffix(i));
    sa.iter().flat_map(|&i| (i as u32).to_le_bytes()).collect()
}

/// The naive interval of `pat` in `t`: suffixes before it (in token order) and those starting
/// with it.
fn naive(t: &[u8], token: usize, pat: &[u8]) -> (usize, usize) {
    let n = t.len() / token;
    let p: Vec<u32> = (0..pat.len() / token)
        .map(|k| value(pat, token, k))
        .collect();
    let suffix = |i: usize| (i..n).map(|k| value(t, token, k)).collect::<Vec<u32>>();
    let before = (0..n)
        .filter(|&i| suffix(i) < p && !suffix(i).starts_with(&p))
        .count();
    let with = (0..n).filter(|&i| suffix(i).starts_with(&p)).count();
    (before, before + with)
}

/// Patterns for `t`: pieces of it (some running past its end), all-equal runs, random words
/// over its tokens and over others, and longer ones than `t`.
fn patterns(t: &[u8], token: usize, rng: &mut SplitMix) -> Vec<Vec<u8>> {
    let n = t.len() / token;
    let mut pats = Vec::new();
    for _ in 0..60 {
        let len = 1 + (rng.next() % 12) as usize;
        let kind = rng.next() % 4;
        let pat: Vec<u8> = match (kind, n) {
            (0 | 1, 1..) => {
                let at = (rng.next() as usize) % n;
                let end = (at + len).min(n);
                let mut p = t[at * token..end * token].to_vec();
                if kind == 1 {
                    p.extend_from_slice(&t[..token.min(t.len())]);
                }
                p
            }
            (2, 1..) => (0..len).flat_map(|_| t[..token].to_vec()).collect(),
            _ => (0..len * token)
                .map(|_| (rng.next() % 4) as u8 * 85)
                .collect(),
        };
        pats.push(pat);
    }
    let mut longer = t.to_vec();
    longer.extend_from_slice(&t[..token.min(t.len())]);
    pats.push(longer);
    pats.push(t.to_vec());
    pats.retain(|p| !p.is_empty());
    pats
}

/// The texts: the hard ones, random ones over small and large alphabets, DNA.
fn texts(rng: &mut SplitMix) -> Vec<Vec<u8>> {
    let mut ts = vec![
        Vec::new(),
        b"a".to_vec(),
        vec![b'a'; 300],
        b"ab".repeat(150),
        b"ACGT$".repeat(80),
        vec![0u8, 255, 0, 255, 255, 0, 0],
    ];
    for (len, sigma) in [(500, 2), (700, 4), (900, 256), (2000, 4)] {
        ts.push(
            (0..len)
                .map(|_| b'A'.wrapping_add((rng.next() % sigma) as u8))
                .collect(),
        );
    }
    ts.push(
        (0..3000)
            .map(|_| b"ACGT"[(rng.next() % 4) as usize])
            .collect(),
    );
    ts
}

#[test]
fn intervals_are_the_naive_ones() -> Result<()> {
    let mut rng = SplitMix::new(66);
    for token in [1usize, 2, 4] {
        for t in texts(&mut rng) {
            let t = &t[..t.len() - t.len() % token];
            let n = t.len() / token;
            let sa_bytes = naive_sa(t, token);
            let sa = Sa::new(&sa_bytes, 4, n);
            let pats = patterns(t, token, &mut rng);
            let keys: Vec<&[u8]> = pats
                .iter()
                .map(|p| &p[..p.len() - p.len() % token])
                .collect();
            let keys: Vec<&[u8]> = keys.into_iter().filter(|k| !k.is_empty()).collect();
            let want: Vec<(usize, usize)> = keys.iter().map(|k| naive(t, token, k)).collect();
            for cuts in [vec![], vec![n / 3], vec![1, n / 2, n / 2]] {
                let text = text_of(t, token, &cuts);
                let top = Top::build(&sa, &text)?;
                for top in [None, Some(&top)] {
                    let mut got = vec![(0, 0); keys.len()];
                    ranges(&sa, &text, top, &keys, &mut got)?;
                    for ((k, g), w) in keys.iter().zip(&got).zip(&want) {
                        let g = match g.1 > g.0 {
                            true => *g,
                            false => (w.0, w.0),
                        };
                        assert_eq!(
                            g,
                            *w,
                            "{k:?} in {t:?} ({token}, {cuts:?}, {})",
                            top.is_some()
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn a_damaged_suffix_array_is_an_error() {
    let t = b"banana".to_vec();
    let sa_bytes = [200u8, 0, 0, 0].repeat(t.len());
    let sa = Sa::new(&sa_bytes, 4, t.len());
    let text = text_of(&t, 1, &[]);
    let mut got = vec![(0, 0); 1];
    let e = ranges(&sa, &text, None, &[b"an"], &mut got).unwrap_err();
    assert!(e.to_string().contains("damaged"), "{e}");
    assert!(Top::build(&sa, &text).is_err());
}

/// A saved top level maps back to the same searches for its owner only; one of another owner,
/// another step or a cut file is not used.
#[test]
fn a_saved_top_level_searches_as_the_built_one() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("psa-top-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("t.sa.top");
    let mut rng = SplitMix::new(67);
    for token in [1usize, 2] {
        for t in texts(&mut rng) {
            let t = &t[..t.len() - t.len() % token];
            let n = t.len() / token;
            let sa_bytes = naive_sa(t, token);
            let sa = Sa::new(&sa_bytes, 4, n);
            let text = text_of(t, token, &[]);
            let built = Top::build(&sa, &text)?;
            let owner = [n as u64, 7, 8, 9];
            built.save(&path, owner, 4, 0o640).expect("saved");
            let stat = std::fs::metadata(&path).expect("saved");
            assert_eq!(
                stat.mode() & 0o777,
                0o640 & !umask(),
                "never wider than the SA"
            );
            let uid = stat.uid();
            let other = [n as u64, 7, 8, 10];
            assert!(Top::open_saved(&path, other, uid, &sa, token).is_none());
            assert!(Top::open_saved(&path, owner, uid, &sa, 3 - token).is_none());
            assert!(
                Top::open_saved(&path, owner, uid + 1, &sa, token).is_none(),
                "another user's file is not trusted"
            );
            let link = dir.join("link.sa.top");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&path, &link).expect("a link");
            assert!(
                Top::open_saved(&link, owner, uid, &sa, token).is_none(),
                "a link is not followed"
            );
            let saved = Top::open_saved(&path, owner, uid, &sa, token).expect("mapped");
            assert_eq!(saved.bytes(), built.bytes());
            let pats = patterns(t, token, &mut rng);
            let keys: Vec<&[u8]> = (pats.iter())
                .map(|p| &p[..p.len() - p.len() % token])
                .filter(|k| !k.is_empty())
                .collect();
            let (mut a, mut b) = (vec![(0, 0); keys.len()], vec![(0, 0); keys.len()]);
            ranges(&sa, &text, Some(&built), &keys, &mut a)?;
            ranges(&sa, &text, Some(&saved), &keys, &mut b)?;
            assert_eq!(a, b, "{t:?} ({token})");
            let bytes = std::fs::read(&path).expect("read back");
            std::fs::write(&path, &bytes[..bytes.len() - 64]).expect("cut");
            assert!(Top::open_saved(&path, owner, uid, &sa, token).is_none());
        }
    }
    std::fs::remove_dir_all(&dir).expect("removed");
    Ok(())
}

/// The process's umask, read from /proc (setting it to read it would race other tests' files).
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|m| u32::from_str_radix(m.trim(), 8).ok())
        .unwrap_or(0o022)
}
