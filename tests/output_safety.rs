//! Outputs in directories other users can write to, and inputs that are not data at rest,
//! through the `psa` binary: another user's link is never followed (the file it names stays as
//! it was), a FIFO named like a partial file stops nothing, outputs take no more permission
//! than the input, a FIFO where an index file goes is refused, and a kernel pseudo-file is
//! refused as input. Each at several process counts.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use common::*;

/// A directory like /tmp: writable by all, the sticky bit set.
fn shared(tag: &str) -> TempDir {
    let d = TempDir::new(tag);
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o1777)).expect("chmod 1777");
    d
}

/// Makes a link `at` -> `to` owned by uid 65534 (another user); false when this process may
/// not (not root).
fn foreign_link(to: &Path, at: &Path) -> bool {
    std::os::unix::fs::symlink(to, at).expect("symlink");
    std::os::unix::fs::lchown(at, Some(65534), Some(65534)).is_ok()
}

/// A link that another user placed in a shared directory where the SA or one of its index
/// files will go is refused before the input is read, and the file it names is untouched.
#[test]
fn another_users_link_in_a_shared_directory_is_not_followed() {
    for (p, suffix) in [(1, ""), (2, ".meta"), (3, ".text"), (1, ".records.tsv")] {
        let d = shared("foreign-link");
        fs::write(d.path().join("in.fa"), b">r\nACGTACGTTT\n").expect("input");
        let victim = d.path().join("victim");
        fs::write(&victim, b"the victim's file").expect("victim");
        let out = d.path().join("out.sa");
        let link = d.path().join(format!("out.sa{suffix}"));
        if !foreign_link(&victim, &link) {
            eprintln!("skipped: needs root to make another user's link");
            return;
        }
        let o = run_psa(p, ["-o", out.to_str().unwrap(), "in.fa"], d.path());
        let what = format!("link at out.sa{suffix}, p = {p}");
        assert_eq!(o.code, Some(2), "{what}: {}", o.describe());
        assert!(
            o.stderr.contains("another user"),
            "{what}: {}",
            o.describe()
        );
        assert_eq!(fs::read(&victim).unwrap(), b"the victim's file", "{what}");
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{what}"
        );
    }
}

/// Our own link where an index file goes is replaced by the file, never written through (with
/// `--force`: a link there is not a file psa wrote, kept without it).
#[test]
fn a_link_beside_the_output_is_replaced_not_followed() {
    for p in [1, 3] {
        let d = TempDir::new("own-link");
        fs::write(d.path().join("in.fa"), b">r\nACGTACGTTT\n").expect("input");
        let victim = d.path().join("victim");
        fs::write(&victim, b"keep").expect("victim");
        for suffix in [".meta", ".text", ".records.tsv"] {
            let _ = fs::remove_file(d.path().join(format!("out.sa{suffix}")));
            std::os::unix::fs::symlink(&victim, d.path().join(format!("out.sa{suffix}")))
                .expect("symlink");
        }
        let o = run_psa(p, ["-o", "out.sa", "in.fa"], d.path());
        assert_eq!(
            o.code,
            Some(2),
            "p = {p}: replaced without --force: {}",
            o.describe()
        );
        let o = run_psa(p, ["--force", "-o", "out.sa", "in.fa"], d.path());
        assert_eq!(o.code, Some(0), "p = {p}: {}", o.describe());
        assert_eq!(
            fs::read(&victim).unwrap(),
            b"keep",
            "p = {p}: written through a link"
        );
        for suffix in [".meta", ".text", ".records.tsv"] {
            let m = fs::symlink_metadata(d.path().join(format!("out.sa{suffix}"))).unwrap();
            assert!(
                m.is_file(),
                "p = {p}: out.sa{suffix} is not a file of its own"
            );
        }
    }
}

/// A FIFO named like a partial file of the output (what a cleanup of dead runs' files looks at)
/// neither hangs the run nor is removed.
#[test]
fn a_fifo_named_like_a_partial_file_stops_nothing() {
    for p in [1, 2] {
        let d = shared("fifo-partial");
        fs::write(d.path().join("in.txt"), b"mississippi").expect("input");
        let fifo = d.path().join(".out.sa.psa-partial-0123456789abcdef");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo");
        let o = run_psa(p, ["-o", "out.sa", "in.txt"], d.path());
        assert!(!o.timed_out, "p = {p}: hung on the FIFO: {}", o.describe());
        assert_eq!(o.code, Some(0), "p = {p}: {}", o.describe());
        assert!(fifo.exists(), "p = {p}: the FIFO was removed");
    }
}

/// A private input gives private outputs (the SA and every file beside it), and a rebuild from
/// an open input does not widen them.
#[test]
fn outputs_take_no_more_permission_than_the_input() {
    for p in [1, 3] {
        let d = TempDir::new("modes");
        let input = d.path().join("in.fa");
        fs::write(&input, b">secret\nACGTTGCAACGT\n").expect("input");
        fs::set_permissions(&input, fs::Permissions::from_mode(0o600)).expect("chmod");
        let stats = ["--stats", "s.json", "--bwt", "o.bwt"];
        let o = run_psa(p, [&["-o", "o.sa", "in.fa"][..], &stats].concat(), d.path());
        assert_eq!(o.code, Some(0), "p = {p}: {}", o.describe());
        let files = [
            "o.sa",
            "o.sa.text",
            "o.sa.meta",
            "o.sa.records.tsv",
            "s.json",
            "o.bwt",
        ];
        let mode = |f: &str| fs::metadata(d.path().join(f)).unwrap().mode() & 0o777;
        for f in files {
            assert_eq!(mode(f) & 0o077, 0, "p = {p}: {f} has mode {:o}", mode(f));
        }
        fs::set_permissions(&input, fs::Permissions::from_mode(0o644)).expect("chmod");
        let o = run_psa(p, [&["-o", "o.sa", "in.fa"][..], &stats].concat(), d.path());
        assert_eq!(o.code, Some(0), "p = {p}: {}", o.describe());
        for f in files {
            assert_eq!(
                mode(f) & 0o077,
                0,
                "p = {p}: a rebuild widened {f} to {:o}",
                mode(f)
            );
        }
    }
}

/// A FIFO where the index's text file goes is refused before the input is read, with a message
/// that names it (not written into, not an internal error).
#[test]
fn a_fifo_where_an_index_file_goes_is_refused() {
    for p in [1, 2] {
        let d = TempDir::new("fifo-text");
        fs::write(d.path().join("in.fa"), b">r\nACGT\n").expect("input");
        let c = std::ffi::CString::new(d.path().join("o.sa.text").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
        let o = run_psa(p, ["-o", "o.sa", "in.fa"], d.path());
        assert_eq!(o.code, Some(2), "p = {p}: {}", o.describe());
        assert!(
            o.stderr.contains("o.sa.text") && o.stderr.contains("special file"),
            "{}",
            o.describe()
        );
        assert!(
            !d.path().join("o.sa").exists(),
            "p = {p}: an SA was written"
        );
    }
}

/// A kernel pseudo-file (size 0 or a page, content made as it is read) is refused as input,
/// naming it, instead of giving an empty or cut suffix array.
#[test]
fn pseudo_files_are_refused_as_input() {
    for (p, input) in [
        (1, "/proc/version"),
        (2, "/proc/self/status"),
        (3, "/sys/kernel/mm/transparent_hugepage/enabled"),
    ] {
        if !Path::new(input).exists() {
            continue;
        }
        let d = TempDir::new("pseudo");
        let o = run_psa(p, ["-o", "o.sa", input], d.path());
        assert_eq!(o.code, Some(3), "{input}, p = {p}: {}", o.describe());
        assert!(
            o.stderr.contains(input) && o.stderr.contains("copy it"),
            "{}",
            o.describe()
        );
        assert!(!d.path().join("o.sa").exists());
    }
}
