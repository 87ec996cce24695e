//! Runs `psa-selftest` (assertions on comm and dist primitives, the checker, and the library entry
//! point on uneven splits) under mpirun at p = 1, 2, 3, 4 and 7.

mod common;

use std::time::Duration;

use common::*;

fn selftest(p: usize) {
    let dir = TempDir::new(&format!("selftest-{p}"));
    let mut c = mpirun(p, SELFTEST);
    c.arg("-v");
    let o = run_with_timeout(c, dir.path(), Duration::from_secs(180));
    eprintln!("{}", o.stdout);
    let summary = o
        .stdout
        .lines()
        .find(|l| l.starts_with("selftest: ") && l.contains(" passed, "));
    assert!(
        o.success(),
        "psa-selftest failed at p = {p}: {}",
        o.describe()
    );
    let summary = summary.unwrap_or_else(|| panic!("no summary line at p = {p}: {}", o.describe()));
    assert!(
        summary.contains(" 0 failed"),
        "p = {p}: {summary}\n{}",
        o.describe()
    );
    let passed: usize = summary["selftest: ".len()..]
        .split(' ')
        .next()
        .and_then(|x| x.parse().ok())
        .expect("count");
    assert!(passed >= 20, "p = {p}: only {passed} checks ran: {summary}");
}

#[test]
fn selftest_p1() {
    selftest(1);
}

#[test]
fn selftest_p2() {
    selftest(2);
}

#[test]
fn selftest_p3() {
    selftest(3);
}

#[test]
fn selftest_p4() {
    selftest(4);
}

#[test]
fn selftest_p7() {
    selftest(7);
}
