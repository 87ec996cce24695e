//! The naive oracle: sort suffix start positions by comparing the suffixes as strings of
//! symbols (bytes or tokens, compared by value). O(n² log n) in the worst case; for tests on
//! small texts only. With it, the BWT and LCP array by their definitions.

/// Suffix array by direct comparison of suffixes.
pub fn naive_sa<S: Ord>(text: &[S]) -> Vec<u64> {
    let mut sa: Vec<usize> = (0..text.len()).collect();
    sa.sort_by(|&a, &b| text[a..].cmp(&text[b..]));
    sa.into_iter().map(|x| x as u64).collect()
}

/// The BWT of T$ without the `$` and its primary index (libsais' convention, see
/// `algo::bwt`), from the suffix array `sa` of `text`.
pub fn naive_bwt<S: Copy>(text: &[S], sa: &[u64]) -> (Vec<S>, u64) {
    let Some(&last) = text.last() else {
        return (Vec::new(), 0);
    };
    let r0 = sa.iter().position(|&x| x == 0).unwrap_or(0);
    let mut u = vec![last];
    u.extend(
        (sa.iter())
            .filter(|&&x| x > 0)
            .map(|&x| text[x as usize - 1]),
    );
    (u, r0 as u64 + 1)
}

/// The LCP array (LCP[0] = 0) from the suffix array `sa` of `text`, by direct comparison.
pub fn naive_lcp<S: Eq>(text: &[S], sa: &[u64]) -> Vec<u64> {
    let common = |a: usize, b: usize| {
        (text[a..].iter().zip(&text[b..]))
            .take_while(|(x, y)| x == y)
            .count() as u64
    };
    (0..sa.len())
        .map(|i| match i {
            0 => 0,
            _ => common(sa[i - 1] as usize, sa[i] as usize),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banana() {
        assert_eq!(naive_sa(b"banana"), vec![5, 3, 1, 0, 4, 2]);
        assert_eq!(naive_sa::<u8>(b""), Vec::<u64>::new());
        assert_eq!(naive_sa(b"aa"), vec![1, 0]);
        // Tokens compare by value, not by their little-endian bytes.
        assert_eq!(naive_sa(&[0x0100u16, 0x00ff]), vec![1, 0]);
        let sa = naive_sa(b"banana");
        assert_eq!(naive_bwt(b"banana", &sa), (b"annbaa".to_vec(), 4));
        assert_eq!(naive_lcp(b"banana", &sa), vec![0, 1, 3, 0, 0, 2]);
    }
}
