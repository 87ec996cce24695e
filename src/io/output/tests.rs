//! The unit tests of the output module: planning, creation, stale partial files, commits.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::staged::{remove_stale_partials, PARTIALS};
use super::*;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
/// What a test that sets up files returns: any setup error fails it.
type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn scratch(tag: &str) -> std::io::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("psa-output-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// Files created one after another, each committed or dropped, each get a slot among the
/// files a signal removes (more files than slots), and give it back.
#[test]
fn signal_slots_are_given_back() -> TestResult {
    let d = scratch("slots")?;
    for k in 0..3 * PARTIALS.len() {
        let target = d.join(format!("f{k}"));
        let dest = plan(&target, &[], false, "test file", k as u64, Named::ByUser)?;
        let mut f = Staged::create(dest, 0, "test file")?;
        assert!(f.slot.is_some(), "file {k} got no slot");
        f.write_all(b"x")?;
        if k % 2 == 0 {
            f.commit()?;
            assert!(target.exists(), "file {k} not in place");
        } else {
            drop(f);
            assert!(!target.exists(), "file {k} left behind");
        }
    }
    std::fs::remove_dir_all(&d)?;
    Ok(())
}

#[test]
fn partial_names_fit_name_max_and_differ() {
    let long = "x".repeat(243);
    let a = partial_name(std::ffi::OsStr::new(&long), random_tag());
    let b = partial_name(std::ffi::OsStr::new(&long), random_tag());
    assert!(a.len() <= NAME_MAX, "{}", a.len());
    assert_ne!(a, b, "two runs drew the same tag");
    let short = partial_name(std::ffi::OsStr::new("out.sa"), 0xab);
    assert_eq!(short, ".out.sa.psa-partial-00000000000000ab");
}

#[test]
fn plan_refuses_what_is_not_ours() -> TestResult {
    let d = scratch("plan")?;
    let input = d.join("in.txt");
    std::fs::write(&input, b"abc")?;
    let link = d.join("link");
    std::os::unix::fs::symlink(&input, &link)?;
    for out in [input.clone(), link.clone(), d.join(".").join("in.txt")] {
        let e = plan(&out, &[&input], false, "output", 1, Named::ByUser).unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{out:?}: {e}");
        assert!(e.to_string().contains("is the input"), "{e}");
    }
    // A hard link is the same file too.
    let hard = d.join("hard");
    std::fs::hard_link(&input, &hard)?;
    assert!(plan(&input, &[&hard], false, "output", 1, Named::ByUser).is_err());
    let e = plan(&d, &[&input], false, "output", 1, Named::ByUser).unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");
    // A read-only file is kept unless forced.
    let ro = d.join("ro.sa");
    std::fs::write(&ro, b"old")?;
    let mut perm = std::fs::metadata(&ro)?.permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o444);
    std::fs::set_permissions(&ro, perm)?;
    let e = plan(&ro, &[&input], false, "output", 1, Named::ByUser).unwrap_err();
    assert!(e.to_string().contains("read-only"), "{e}");
    assert!(matches!(
        plan(&ro, &[&input], true, "output", 1, Named::ByUser),
        Ok(Dest::Staged { .. })
    ));
    // Devices and FIFOs are written through.
    assert_eq!(
        plan(
            Path::new("/dev/null"),
            &[&input],
            false,
            "output",
            1,
            Named::ByUser
        )?,
        Dest::Through {
            target: PathBuf::from("/dev/null")
        }
    );
    // A link to a new file's place is followed: the temporary file goes beside the target.
    let fresh = d.join("sub");
    std::fs::create_dir(&fresh)?;
    let target = fresh.join("real.sa");
    std::fs::write(&target, b"old")?;
    let l2 = d.join("l2");
    std::os::unix::fs::symlink(&target, &l2)?;
    match plan(&l2, &[&input], false, "output", 7, Named::ByUser)? {
        Dest::Staged { tmp, target: t, .. } => {
            assert_eq!(t, std::fs::canonicalize(&target)?);
            assert_eq!(tmp.parent(), t.parent());
        }
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_dir_all(&d);
    Ok(())
}

#[test]
fn exclusive_create_and_stale_cleanup() -> TestResult {
    let d = scratch("stale")?;
    let target = d.join("out.sa");
    let dest = plan(&target, &[], false, "output", 42, Named::ByUser)?;
    let s = Staged::create(dest.clone(), 10, "output")?;
    // The same name again (two runs with one tag) is refused, not shared.
    assert!(Staged::create(dest.clone(), 10, "output").is_err());
    // A live run's file is locked and stays; an old unlocked one goes.
    let Dest::Staged { tmp, .. } = &dest else {
        panic!()
    };
    let old = SystemTime::now() - Duration::from_secs(3600);
    File::options().write(true).open(tmp)?.set_modified(old)?;
    clear(&target);
    assert!(tmp.exists(), "a locked (living) partial file was removed");
    let dead = d.join(partial_name(std::ffi::OsStr::new("out.sa"), 7));
    let f = File::create(&dead)?;
    f.set_modified(old)?;
    drop(f);
    let other = d.join(partial_name(std::ffi::OsStr::new("other.sa"), 7));
    File::create(&other)?.set_modified(old)?;
    clear(&target);
    assert!(!dead.exists(), "a dead run's partial file stayed");
    assert!(other.exists(), "another output's partial file was removed");
    drop(s);
    assert!(!tmp.exists(), "drop left the temporary file");
    let _ = std::fs::remove_dir_all(&d);
    Ok(())
}

/// Runs the stale-partial cleanup for `target`, as a new run's [`Staged::create`] does.
fn clear(target: &Path) {
    let dir = parent_of(target);
    let opened = at::open_dir(&dir).expect("open the test directory");
    remove_stale_partials(&opened, &dir, target.file_name().expect("a file name"));
}

/// Makes `path` (a file or link) belong to uid 65534 (nobody); false when this process may not
/// (not root): the caller then skips what needs another user.
fn give_away(path: &Path) -> bool {
    std::os::unix::fs::lchown(path, Some(65534), Some(65534)).is_ok()
}

/// A directory with the sticky bit, writable by all (as /tmp).
fn shared_dir(tag: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch(tag)?;
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777))?;
    Ok(d)
}

/// A FIFO, or anything that is not a regular file of ours, named like a partial file is never
/// opened by the cleanup (opening a FIFO for reading would wait for a writer for ever).
#[test]
fn stale_cleanup_never_opens_a_fifo() -> TestResult {
    let d = scratch("fifo")?;
    let target = d.join("out.sa");
    let fifo = d.join(partial_name(std::ffi::OsStr::new("out.sa"), 9));
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
    let (tx, rx) = std::sync::mpsc::channel();
    let t = target.clone();
    std::thread::spawn(move || {
        clear(&t);
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "the cleanup hung on a FIFO named like a partial file"
    );
    assert!(
        fifo.exists(),
        "the FIFO was removed: it is not ours to remove"
    );
    // A link named like a partial file is not followed nor removed either.
    let victim = d.join("victim");
    std::fs::write(&victim, b"keep")?;
    let link = d.join(partial_name(std::ffi::OsStr::new("out.sa"), 10));
    std::os::unix::fs::symlink(&victim, &link)?;
    clear(&target);
    assert!(
        std::fs::symlink_metadata(&link).is_ok(),
        "a link was removed"
    );
    assert_eq!(std::fs::read(&victim)?, b"keep");
    let _ = std::fs::remove_dir_all(&d);
    Ok(())
}

/// In a shared (sticky) directory another user's link is never followed, and another user's
/// file (which the final rename could not replace) is refused at the start.
#[test]
fn others_links_and_files_in_shared_directories_are_refused() -> TestResult {
    let d = shared_dir("sticky")?;
    let victim = d.join("victim");
    std::fs::write(&victim, b"keep")?;
    let link = d.join("out.sa");
    std::os::unix::fs::symlink(&victim, &link)?;
    if !give_away(&link) {
        eprintln!("skipped: needs root to make a link of another user");
        return Ok(());
    }
    for named in [Named::ByUser, Named::Beside] {
        let e = plan(&link, &[], false, "output", 1, named).unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{named:?}: {e}");
        assert!(e.to_string().contains("another user"), "{e}");
    }
    // Our own link there is followed (named by the user) or replaced (beside an output).
    let mine = d.join("mine.sa");
    std::os::unix::fs::symlink(&victim, &mine)?;
    let by_user = plan(&mine, &[], false, "output", 1, Named::ByUser)?;
    assert_eq!(by_user.target(), std::fs::canonicalize(&victim)?);
    let beside = plan(&mine, &[], false, "index file", 1, Named::Beside)?;
    assert_eq!(beside.target(), mine);
    // A regular file of another user: refused by a user that is not root, who could not
    // replace it; root may (CAP_FOWNER).
    let theirs = d.join("theirs.sa");
    std::fs::write(&theirs, b"theirs")?;
    assert!(give_away(&theirs));
    assert!(plan(&theirs, &[], false, "output", 1, Named::Beside).is_ok());
    let _ = std::fs::remove_dir_all(&d);
    Ok(())
}

/// Beside an output, a link of ours is replaced by the file and what it named is untouched; a
/// FIFO or device there is refused (psa would write its index into it).
#[test]
fn beside_an_output_links_are_replaced_and_fifos_refused() -> TestResult {
    let d = scratch("beside")?;
    let victim = d.join("victim");
    std::fs::write(&victim, b"keep")?;
    let meta = d.join("out.sa.meta");
    std::os::unix::fs::symlink(&victim, &meta)?;
    let mut f = Staged::create(
        plan(&meta, &[], false, "index file", 3, Named::Beside)?,
        0,
        "x",
    )?;
    f.write_all(b"new")?;
    f.commit()?;
    assert!(
        std::fs::symlink_metadata(&meta)?.is_file(),
        "the link is still there"
    );
    assert_eq!(std::fs::read(&meta)?, b"new");
    assert_eq!(
        std::fs::read(&victim)?,
        b"keep",
        "the link's file was written"
    );
    let text = d.join("out.sa.text");
    let c = std::ffi::CString::new(text.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
    let e = plan(&text, &[], false, "text file", 3, Named::Beside).unwrap_err();
    assert!(
        matches!(e, Error::Usage(_)) && e.to_string().contains("special file"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
    Ok(())
}

/// A new file takes no more permission than its inputs give their group and others, nor more
/// than the file it replaces had.
#[test]
fn outputs_never_widen_permissions() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("modes")?;
    let set = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.mode() & 0o777);
    let private = d.join("private.txt");
    std::fs::write(&private, b"secret")?;
    set(&private, 0o600)?;
    let open = d.join("open.txt");
    std::fs::write(&open, b"text")?;
    set(&open, 0o644)?;
    let write = |out: &Path, inputs: &[&Path]| -> Result<()> {
        let mut f = Staged::create(
            plan(out, inputs, false, "output", random_tag(), Named::ByUser)?,
            0,
            "x",
        )?;
        f.write_all(b"sa")?;
        f.commit()
    };
    let out = d.join("a.sa");
    write(&out, &[&private])?;
    assert_eq!(
        mode(&out)?,
        0o600,
        "a private input's output is readable by others"
    );
    // A rebuild from an open input keeps the old output's narrower mode.
    write(&out, &[&open])?;
    assert_eq!(mode(&out)?, 0o600, "a rebuild widened the output");
    let open_out = d.join("b.sa");
    write(&open_out, &[&open])?;
    assert_eq!(
        mode(&open_out)? & 0o077 & !0o044,
        0,
        "more than the input allows"
    );
    let _ = std::fs::remove_dir_all(&d);
    Ok(())
}

/// A rename that fails while a job's files are put in place undoes the ones already placed: an
/// old file is back as it was, a new one gone, and no temporary file stays.
#[test]
fn a_failed_commit_puts_back_what_was_placed() -> TestResult {
    let d = scratch("rollback")?;
    let (a, b, c) = (d.join("a.sa"), d.join("b.bwt"), d.join("c.lcp"));
    std::fs::write(&a, b"old a")?;
    let made = |p: &Path, k: u64| -> Result<Staged> {
        let mut f = Staged::create(plan(p, &[], false, "output", k, Named::ByUser)?, 0, "x")?;
        f.write_all(b"new")?;
        Ok(f)
    };
    let files = vec![made(&a, 1)?, made(&b, 2)?, made(&c, 3)?];
    // c's name is taken by a non-empty directory after planning: its rename fails.
    std::fs::create_dir(&c)?;
    std::fs::write(c.join("x"), b"x")?;
    let e = super::commit::place_all(files).unwrap_err();
    assert!(e.to_string().contains("put back"), "{e}");
    assert_eq!(
        std::fs::read(&a)?,
        b"old a",
        "the old file was not put back"
    );
    assert!(!b.exists(), "the new file stayed");
    let left: Vec<_> = std::fs::read_dir(&d)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".psa-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // All placed when nothing fails, with no second names left.
    std::fs::remove_dir_all(&c)?;
    super::commit::place_all(vec![made(&a, 4)?, made(&b, 5)?, made(&c, 6)?])?;
    for p in [&a, &b, &c] {
        assert_eq!(std::fs::read(p)?, b"new");
    }
    assert_eq!(std::fs::read_dir(&d)?.count(), 3);
    let _ = std::fs::remove_dir_all(&d);
    Ok(())
}

/// A file kept where it exists ([`Staged::keep_existing`]) is not replaced by one made after the
/// planning: the commit fails naming it, the other file is left as it was, psa's is removed; with
/// the name free it is put in place.
#[test]
fn a_file_made_meanwhile_is_kept() -> TestResult {
    let d = scratch("keep")?;
    let t = d.join("table.0");
    let made = |k: u64| -> Result<Staged> {
        let mut f = Staged::create(plan(&t, &[], false, "output", k, Named::ByUser)?, 0, "x")?;
        f.write_all(b"psa")?;
        f.keep_existing();
        Ok(f)
    };
    let f = made(1)?;
    std::fs::write(&t, b"theirs")?;
    let e = super::commit::place_all(vec![f]).unwrap_err();
    assert!(e.to_string().contains("made by another process"), "{e}");
    assert_eq!(std::fs::read(&t)?, b"theirs");
    assert_eq!(std::fs::read_dir(&d)?.count(), 1, "a temporary file stayed");
    std::fs::remove_file(&t)?;
    super::commit::place_all(vec![made(2)?])?;
    assert_eq!(std::fs::read(&t)?, b"psa");
    let _ = std::fs::remove_dir_all(&d);
    Ok(())
}
