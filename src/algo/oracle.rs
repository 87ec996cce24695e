//! The naive oracle: sort suffix start positions by comparing the suffixes as byte strings.
//! O(n² log n) in the worst case; for tests on small texts only.

/// Suffix array by direct comparison of suffixes.
pub fn naive_sa(text: &[u8]) -> Vec<u64> {
    let mut sa: Vec<usize> = (0..text.len()).collect();
    sa.sort_by(|&a, &b| text[a..].cmp(&text[b..]));
    sa.into_iter().map(|x| x as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banana() {
        assert_eq!(naive_sa(b"banana"), vec![5, 3, 1, 0, 4, 2]);
        assert_eq!(naive_sa(b""), Vec::<u64>::new());
        assert_eq!(naive_sa(b"aa"), vec![1, 0]);
    }
}
