//! Token texts (`u16`, `u32`) through the library on every pe (see `common::harness`): the
//! suffix array (`suffix_array_tokens`), the checker, the BWT and the LCP array of named and
//! random token texts against the oracle (`naive_sa`, `naive_bwt`, `naive_lcp` on the tokens),
//! each pe comparing its own part; pDC3 recursing distributedly (a base case of 4 or 64
//! characters) and its 40- and 64-bit records forced (`index_width`), as more than 2^32 tokens
//! would take them; infini-gram's order (tokens read as the file's bytes) against the naive
//! table. The `psa` binary's runs are in tests/tokens.rs and tests/infini_gram.rs.

mod common;

use common::harness::{ctx_with, mpi_test};
use common::Rng;
use psa::internals::{naive_bwt, naive_lcp, naive_sa};
use psa::{Algo, IndexWidth, Layout, Token};

/// Named texts of tokens `T` and random ones: all-equal, periodic, Fibonacci, random over 2,
/// 2^16 and (u32) 2^32 − 1 symbols, the maximal token value everywhere, and short ones (n < p,
/// empty).
fn texts<T: Token>() -> Vec<(String, Vec<T>)> {
    let max = T::from_u64(if T::BITS == 16 { 0xFFFF } else { 0xFFFF_FFFF });
    let t = |v: u64| T::from_u64(v);
    let mut v: Vec<(String, Vec<T>)> = vec![
        ("empty".into(), vec![]),
        ("one".into(), vec![max]),
        ("n < p".into(), vec![max, t(0), max]),
        ("all equal".into(), vec![t(7); 500]),
        ("all maximal".into(), vec![max; 333]),
        (
            "periodic".into(),
            (0..600).map(|i| [max, t(0), t(1)][i % 3]).collect(),
        ),
    ];
    // Fibonacci over {max, 0}: f(k) = f(k-1) f(k-2).
    let (mut a, mut b) = (vec![max], vec![max, t(0)]);
    while b.len() < 900 {
        let c = [b.clone(), a].concat();
        (a, b) = (b, c);
    }
    v.push(("fibonacci".into(), b));
    let mut rng = Rng::new(T::BITS as u64);
    let mut random = |name: &str, n: usize, sigma: u64| {
        let text = (0..n).map(|_| t(rng.below(sigma))).collect::<Vec<T>>();
        (name.to_string(), text)
    };
    v.push(random("random over 2", 1500, 2));
    v.push(random("random over 2^16", 1200, 1 << 16));
    if T::BITS == 32 {
        v.push(random("random over 2^32 - 1", 1200, 0xFFFF_FFFF));
        // Values around 2^16 and the largest.
        let edge: Vec<T> = (0..700)
            .map(|i| [t(0xFFFF), t(0x10000), max, t(0xFFFF_FFFE)][i * 7 % 4])
            .collect();
        v.push(("edges".into(), edge));
    }
    v
}

/// Every text of [`texts`] built, checked and turned into BWT and LCP on every pe, against the
/// oracle: by pDC3 and pCSS (its doubling, run step and hand-overs to DC7's finish and to pDC3
/// all reached on these texts; 32-bit tokens ranked first, and with an alphabet limit of 16
/// values the texts of more handed to pDC3 whole).
fn tokens_match_the_oracle<T: Token>(comm: &psa::comm::Comm) {
    let runs = [
        (4, None),
        (64, None),
        (4, Some(IndexWidth::W40)),
        (1 << 20, Some(IndexWidth::W64)),
    ];
    for (algo, (base, width)) in [Algo::Dc3, Algo::Css]
        .into_iter()
        .flat_map(|a| runs.iter().map(move |r| (a, *r)))
    {
        let ctx = ctx_with(algo, base, |c| c.index_width = width);
        let what = format!("{algo:?}, base {base}, {width:?}");
        all_texts_match::<T>(comm, &ctx, &what);
    }
    if T::BITS == 32 {
        let ctx = ctx_with(Algo::Css, 4, |c| c.css.alphabet = 16);
        all_texts_match::<T>(comm, &ctx, "Css, alphabet limit 16");
    }
}

/// [`tokens_match_the_oracle`]'s comparisons on every text of [`texts`] under one `ctx`.
fn all_texts_match<T: Token>(comm: &psa::comm::Comm, ctx: &psa::Ctx, run: &str) {
    let (p, me) = (comm.size(), comm.rank());
    for (name, text) in texts::<T>() {
        let what = format!("{name} ({} bits, {run}, p = {p})", T::BITS);
        let layout = Layout::block(text.len(), p);
        let (lo, hi) = (layout.start(me), layout.end(me));
        let mine = &text[lo..hi];
        let sa = psa::suffix_array_tokens(ctx, mine).expect("build");
        let want = naive_sa(&text);
        assert_eq!(sa, want[lo..hi], "SA of {what}");
        psa::check(ctx, mine, &sa[..], &layout).expect("the checker passes it");
        let bwt = psa::bwt(ctx, mine, &sa[..], &layout).expect("bwt");
        let (u, primary) = naive_bwt(&text, &want);
        assert_eq!(bwt.primary, primary, "BWT primary of {what}");
        let end = bwt.first + bwt.bytes.len();
        assert_eq!(bwt.bytes, u[bwt.first..end], "BWT of {what}");
        let lcp = psa::lcp(ctx, mine, sa, &layout).expect("lcp");
        assert_eq!(lcp, naive_lcp(&text, &want)[lo..hi], "LCP of {what}");
    }
}

/// u16 token texts.
#[test]
fn u16_tokens_match_the_oracle() {
    mpi_test(tokens_match_the_oracle::<u16>);
}

/// u32 token texts.
#[test]
fn u32_tokens_match_the_oracle() {
    mpi_test(tokens_match_the_oracle::<u32>);
}

/// The checker rejects a wrong suffix array of a token text (two neighbours swapped), and u8
/// tokens are the byte path.
#[test]
fn tokens_wrong_sa_rejected() {
    mpi_test(|comm| {
        let (p, me) = (comm.size(), comm.rank());
        let ctx = ctx_with(Algo::Dc3, 4, |_| {});
        let text: Vec<u16> = (0..200).map(|i| (i * 7919 % 13) as u16 * 5000).collect();
        let layout = Layout::block(text.len(), p);
        let (lo, hi) = (layout.start(me), layout.end(me));
        let mut want = naive_sa(&text);
        want.swap(100, 101);
        let bad = psa::check(&ctx, &text[lo..hi], &want[lo..hi], &layout);
        assert!(bad.is_err(), "the checker passed a wrong SA");
        let bytes = b"abracadabra".repeat(20);
        let layout = Layout::block(bytes.len(), p);
        let (lo, hi) = (layout.start(me), layout.end(me));
        let sa = psa::suffix_array_tokens(&ctx, &bytes[lo..hi]).expect("bytes as u8 tokens");
        assert_eq!(sa, naive_sa(&bytes)[lo..hi]);
    });
}

/// infini-gram's order through the library on every pe: token files read as the file's bytes
/// (`read_tokens` with `TokenOrder::FileBytes`: each token byte-swapped) and built by
/// `suffix_array_tokens` give, times the width, the naive table — the byte offsets of the token
/// starts sorted by the file's little-endian bytes from there — on every text of [`texts`];
/// read by value they give the value order, which differs from it on random texts.
fn file_byte_order_is_the_naive_table<T: Token>(comm: &psa::comm::Comm) {
    use psa::io::seq::{InputFile, SeqOptions};
    use psa::io::tokens::read_tokens;
    use psa::TokenOrder;
    let (p, me) = (comm.size(), comm.rank());
    let w = T::WIDTH.bytes();
    let ctx = ctx_with(Algo::Dc3, 64, |_| {});
    for (k, (name, text)) in texts::<T>().into_iter().enumerate() {
        let bytes: Vec<u8> = text
            .iter()
            .flat_map(|t| t.to_u64().to_le_bytes()[..w].to_vec())
            .collect();
        let path = std::path::PathBuf::from(format!("tokens-{k}.bin"));
        if me == 0 {
            std::fs::write(&path, &bytes).expect("write the token file");
        }
        comm.barrier();
        let files = InputFile::open_all(comm, &[path], &SeqOptions::default()).expect("open");
        let mut offsets: Vec<usize> = (0..bytes.len()).step_by(w).collect();
        offsets.sort_by(|&a, &b| bytes[a..].cmp(&bytes[b..]));
        let table: Vec<u64> = offsets.iter().map(|&o| (o / w) as u64).collect();
        let by_value = naive_sa(&text);
        let what = format!("{name} ({} bits, p = {p})", T::BITS);
        for order in [TokenOrder::FileBytes, TokenOrder::Value] {
            let (mine, layout) =
                read_tokens::<T>(comm, &files, text.len(), order).expect("read the tokens");
            let sa = psa::suffix_array_tokens(&ctx, &mine).expect("build");
            let want = match order {
                TokenOrder::FileBytes => &table,
                TokenOrder::Value => &by_value,
            };
            let (lo, hi) = (layout.start(me), layout.end(me));
            assert_eq!(sa, want[lo..hi], "{order:?} SA of {what}");
            if name == "random over 2^16" {
                assert_ne!(table, by_value, "the orders differ on {what}");
            }
        }
        comm.barrier();
    }
}

/// u16 tokens in the file's byte order.
#[test]
fn u16_file_byte_order_is_the_naive_table() {
    mpi_test(file_byte_order_is_the_naive_table::<u16>);
}

/// u32 tokens in the file's byte order.
#[test]
fn u32_file_byte_order_is_the_naive_table() {
    mpi_test(file_byte_order_is_the_naive_table::<u32>);
}
