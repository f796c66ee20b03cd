//! Real-mount tests of logjam-lazyfs: caching until fsync, loss, processes, disk full,
//! unmount, and a seeded random run against a model. Needs root and /dev/fuse: a test that
//! cannot mount fails.

use std::error::Error;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use logjam_lazyfs::{LazyFs, Loss};
use tempfile::TempDir;

type TestResult = Result<(), Box<dyn Error>>;

/// A mounted instance over a fresh backing dir, both in one tempdir.
struct Fixture {
    backing: PathBuf,
    mnt: PathBuf,
    fs: LazyFs,
    // Dropped last, after the mount is gone.
    _dir: TempDir,
}

fn mount() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let backing = dir.path().join("backing");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&backing).expect("create backing");
    fs::create_dir(&mnt).expect("create mountpoint");
    let fs = LazyFs::mount(&backing, &mnt).unwrap_or_else(|e| panic!("cannot mount: {e}"));
    assert!(
        is_mounted(fs.mountpoint()),
        "mountinfo lacks {}",
        mnt.display()
    );
    Fixture {
        backing,
        mnt,
        fs,
        _dir: dir,
    }
}

/// Whether `path` is a mount point in this process's mount namespace.
fn is_mounted(path: &Path) -> bool {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let path = path.to_str().expect("utf-8 path");
    mountinfo
        .lines()
        .any(|line| line.split_whitespace().nth(4) == Some(path))
}

fn rw(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

#[test]
fn unsynced_writes_are_visible_until_lost() -> TestResult {
    let f = mount();
    let (a, b) = (f.mnt.join("a"), f.mnt.join("b"));

    let mut fa = rw(&a)?;
    fa.write_all(b"synced-")?;
    fa.sync_all()?;
    fs::write(&b, b"volatile")?;
    fa.write_all(b"-more")?; // fa stays open across the loss

    // An overwrite in place: the loss changes no size or mtime, so only the absence of a
    // kernel page cache makes it visible through a descriptor held across the loss.
    let c = rw(&f.mnt.join("c"))?;
    c.write_all_at(b"AAAA", 0)?;
    c.sync_all()?;
    c.write_all_at(b"BBBB", 0)?;
    let mut four = [0u8; 4];
    c.read_exact_at(&mut four, 0)?;
    assert_eq!(&four, b"BBBB");

    assert_eq!(fs::read(&a)?, b"synced--more");
    assert_eq!(fs::read(&b)?, b"volatile");
    assert_eq!(f.fs.unsynced_bytes(), 13 + 4);
    assert_eq!(fs::read(f.backing.join("a"))?, b"synced-");
    assert_eq!(fs::read(f.backing.join("b"))?, b"");

    // Leave the kernel freshly cached attributes (a read marks atime stale, a stat clears it).
    assert_eq!(fa.metadata()?.len(), 12);
    assert_eq!(
        f.fs.lose_unsynced(),
        Loss {
            files: 3,
            bytes: 13 + 4
        }
    );
    // First thing after the loss, before any read refreshes the kernel's view: the size.
    assert_eq!(fa.metadata()?.len(), 7, "stale attributes after the loss");

    c.read_exact_at(&mut four, 0)?;
    assert_eq!(&four, b"AAAA", "stale page cache after the loss");

    assert_eq!(fs::read(&a)?, b"synced-");
    assert_eq!(fs::read(&b)?, b"");
    // The kernel serves nothing stale through a descriptor opened before the loss either.
    let mut buf = [0u8; 64];
    let n = fa.read_at(&mut buf, 0)?;
    assert_eq!(&buf[..n], b"synced-");
    assert_eq!(fs::read(f.backing.join("a"))?, b"synced-");
    assert_eq!(fs::read(f.backing.join("b"))?, b"");
    assert_eq!(f.fs.unsynced_bytes(), 0);
    assert_eq!(f.fs.lose_unsynced(), Loss::default());
    Ok(())
}

#[test]
fn renames_keep_cached_data_and_truncates_are_durable() -> TestResult {
    let f = mount();
    let m = |name: &str| f.mnt.join(name);

    // Written, closed without fsync, renamed: the rename is durable, the data is not.
    fs::write(m("seg.tmp"), b"checkpoint-data")?;
    fs::rename(m("seg.tmp"), m("seg"))?;
    assert_eq!(fs::read(m("seg"))?, b"checkpoint-data");
    assert!(!m("seg.tmp").exists());
    assert_eq!(fs::read(f.backing.join("seg"))?, b"");

    // The classic unsafe checkpoint: write a temp file, rename it over the old one, no fsync.
    // The old file's unsynced tail dies with it and must not count as lost (or be written back).
    let mut old = rw(&m("ckpt"))?;
    old.write_all(b"old")?;
    old.sync_all()?;
    old.write_all(b"-tail")?;
    drop(old);
    fs::write(m("ckpt.tmp"), b"new")?;
    fs::rename(m("ckpt.tmp"), m("ckpt"))?;
    assert_eq!(fs::read(m("ckpt"))?, b"new");

    // fsynced, then truncated smaller without fsync.
    let pattern: Vec<u8> = (0..100u8).collect();
    let trunc = rw(&m("trunc"))?;
    trunc.write_all_at(&pattern, 0)?;
    trunc.sync_all()?;
    trunc.set_len(10)?;
    assert_eq!(fs::read(m("trunc"))?, &pattern[..10]);

    // Directories are durable at once; their files' data is not.
    fs::create_dir(m("d"))?;
    fs::write(m("d/x"), b"abc")?;

    // An unlinked file stays readable through its descriptor until the loss.
    let mut gone = rw(&m("u"))?;
    gone.write_all(b"gone")?;
    fs::remove_file(m("u"))?;
    let mut buf = [0u8; 16];
    let n = gone.read_at(&mut buf, 0)?;
    assert_eq!(&buf[..n], b"gone");

    let loss = f.fs.lose_unsynced();
    assert_eq!(
        loss,
        Loss {
            files: 4,
            bytes: 15 + 3 + 3 + 4
        }
    );

    assert_eq!(fs::read(m("seg"))?, b"");
    assert_eq!(
        fs::read(m("ckpt"))?,
        b"",
        "the renamed-over file lost its new data, old is gone"
    );
    assert_eq!(fs::read(m("trunc"))?, &pattern[..10]);
    assert_eq!(fs::read(f.backing.join("trunc"))?, &pattern[..10]);
    assert!(m("d").is_dir());
    assert_eq!(fs::read(m("d/x"))?, b"");
    assert_eq!(gone.read_at(&mut buf, 0)?, 0);
    let mut names: Vec<_> = fs::read_dir(&f.mnt)?
        .map(|e| e.map(|e| e.file_name().into_string().unwrap_or_default()))
        .collect::<Result<_, _>>()?;
    names.sort();
    assert_eq!(names, ["ckpt", "d", "seg", "trunc"]);
    Ok(())
}

#[test]
fn appends_after_a_loss_land_at_the_new_end_and_sync_writes_survive() -> TestResult {
    let f = mount();
    let path = f.mnt.join("app");
    let mut app = OpenOptions::new().create(true).append(true).open(&path)?;
    app.write_all(b"abcdef")?;
    assert_eq!(f.fs.lose_unsynced(), Loss { files: 1, bytes: 6 });
    // The kernel still believes the file is 6 bytes long; the append must not leave a hole.
    app.write_all(b"X")?;
    assert_eq!(fs::read(&path)?, b"X");

    let dsync = OpenOptions::new()
        .create(true)
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_DSYNC.bits())
        .open(f.mnt.join("dsync"))?;
    dsync.write_all_at(b"durable", 0)?;
    assert_eq!(fs::read(f.backing.join("dsync"))?, b"durable");
    assert_eq!(f.fs.lose_unsynced(), Loss { files: 1, bytes: 1 });
    assert_eq!(fs::read(f.mnt.join("dsync"))?, b"durable");
    assert_eq!(fs::read(&path)?, b"");
    Ok(())
}

#[test]
fn directory_and_exchange_renames_carry_cached_data() -> TestResult {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    let f = mount();
    let m = |name: &str| f.mnt.join(name);

    fs::create_dir(m("dir1"))?;
    fs::write(m("dir1/f"), b"in-dir")?;
    fs::rename(m("dir1"), m("dir2"))?;
    assert!(!m("dir1").exists());
    assert_eq!(fs::read(m("dir2/f"))?, b"in-dir");

    fs::write(m("x"), b"x")?;
    fs::write(m("y"), b"y")?;
    renameat2(
        AT_FDCWD,
        &m("x"),
        AT_FDCWD,
        &m("y"),
        RenameFlags::RENAME_EXCHANGE,
    )?;
    assert_eq!(fs::read(m("x"))?, b"y");
    assert_eq!(fs::read(m("y"))?, b"x");
    let err = renameat2(
        AT_FDCWD,
        &m("x"),
        AT_FDCWD,
        &m("y"),
        RenameFlags::RENAME_NOREPLACE,
    );
    assert_eq!(err, Err(nix::errno::Errno::EEXIST));
    // fsync through a read-only descriptor syncs too.
    File::open(m("x"))?.sync_all()?;

    assert_eq!(
        f.fs.lose_unsynced(),
        Loss {
            files: 2,
            bytes: 6 + 1
        }
    );
    assert_eq!(fs::read(m("dir2/f"))?, b"");
    assert_eq!(fs::read(m("x"))?, b"y");
    assert_eq!(fs::read(m("y"))?, b"");
    Ok(())
}

#[test]
fn other_processes_write_through_the_mount_and_only_loss_loses() -> TestResult {
    let f = mount();
    let log = f.mnt.join("proc.log");

    // Appends through its own descriptor, then sleeps holding it open.
    let script = r#"exec 3>>"$1"; printf hello >&3; printf ' world' >&3; exec sleep 60"#;
    let mut writer = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(&log)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while fs::read(&log).unwrap_or_default() != b"hello world" {
        assert!(
            Instant::now() < deadline,
            "writer's data never became visible"
        );
        thread::sleep(Duration::from_millis(10));
    }

    // Process death (SIGKILL, descriptor still open) loses nothing.
    writer.kill()?;
    writer.wait()?;
    assert_eq!(fs::read(&log)?, b"hello world");
    assert_eq!(fs::read(f.backing.join("proc.log"))?, b"");

    // A writer that fsyncs keeps its data.
    let durable = f.mnt.join("durable.log");
    let status = Command::new("sh")
        .args([
            "-c",
            r#"printf durable | dd of="$1" conv=fsync status=none"#,
            "sh",
        ])
        .arg(&durable)
        .status()?;
    assert!(status.success());

    assert_eq!(
        f.fs.lose_unsynced(),
        Loss {
            files: 1,
            bytes: 11
        }
    );
    assert_eq!(fs::read(&log)?, b"");
    assert_eq!(fs::read(&durable)?, b"durable");
    Ok(())
}

#[test]
fn disk_full_fails_growth_and_creation_until_healed() -> TestResult {
    const ENOSPC: i32 = 28;
    let f = mount();
    let path = f.mnt.join("full.log");
    let mut log = OpenOptions::new().create(true).append(true).open(&path)?;
    log.write_all(b"before")?;

    f.fs.set_full(true);
    let err = log.write_all(b"more").expect_err("append while full");
    assert_eq!(err.raw_os_error(), Some(ENOSPC), "{err}");
    let err = File::create(f.mnt.join("new")).expect_err("create while full");
    assert_eq!(err.raw_os_error(), Some(ENOSPC), "{err}");
    let err = fs::create_dir(f.mnt.join("dir")).expect_err("mkdir while full");
    assert_eq!(err.raw_os_error(), Some(ENOSPC), "{err}");
    let err = rw(&path)?.set_len(100).expect_err("grow while full");
    assert_eq!(err.raw_os_error(), Some(ENOSPC), "{err}");
    // Overwriting in place needs no space.
    OpenOptions::new()
        .write(true)
        .open(&path)?
        .write_all_at(b"B", 0)?;

    f.fs.set_full(false);
    log.write_all(b"more")?;
    File::create(f.mnt.join("new"))?;
    fs::create_dir(f.mnt.join("dir"))?;
    assert_eq!(fs::read(&path)?, b"Beforemore");
    Ok(())
}

#[test]
fn unmount_writes_everything_through() -> TestResult {
    let Fixture {
        backing,
        mnt,
        fs: lazy,
        _dir,
    } = mount();
    fs::create_dir(mnt.join("d"))?;
    fs::write(mnt.join("d/seg"), b"segment bytes")?;
    fs::write(mnt.join("ckpt"), b"old, unsynced, replaced")?;
    fs::write(mnt.join("ckpt.tmp"), b"new")?;
    fs::rename(mnt.join("ckpt.tmp"), mnt.join("ckpt"))?;
    let mut open = rw(&mnt.join("open"))?;
    open.write_all(b"half")?;
    rw(&mnt.join("grown"))?.set_len(4096)?;
    drop(open);
    assert!(lazy.unsynced_bytes() > 0);

    let mountpoint = lazy.mountpoint().to_path_buf();
    lazy.unmount()?;
    assert!(!is_mounted(&mountpoint), "still mounted after unmount");
    assert_eq!(fs::read(backing.join("d/seg"))?, b"segment bytes");
    assert_eq!(fs::read(backing.join("open"))?, b"half");
    assert_eq!(fs::read(backing.join("ckpt"))?, b"new");
    assert_eq!(fs::metadata(backing.join("grown"))?.len(), 4096);

    // Drop unmounts the same way; a remount sees what the last one wrote.
    let lazy = LazyFs::mount(&backing, &mnt)?;
    assert_eq!(fs::read(mnt.join("d/seg"))?, b"segment bytes");
    fs::write(mnt.join("dropped"), b"still written")?;
    drop(lazy);
    assert!(!is_mounted(&mountpoint), "still mounted after drop");
    assert_eq!(fs::read(backing.join("dropped"))?, b"still written");
    Ok(())
}

#[test]
fn unmount_with_a_file_open_detaches_and_writes_through() -> TestResult {
    let Fixture {
        backing,
        mnt,
        fs: lazy,
        _dir,
    } = mount();
    let file = rw(&mnt.join("held"))?;
    file.write_all_at(b"cached", 0)?;
    let mountpoint = lazy.mountpoint().to_path_buf();

    match lazy.unmount() {
        // Without fusectl the open file keeps the detached session alive; its writes go
        // straight through now.
        Err(logjam_lazyfs::Error::Busy { .. }) => {
            file.write_all_at(b"!", 6)?;
            assert_eq!(fs::read(backing.join("held"))?, b"cached!");
        }
        // With fusectl the connection is aborted instead.
        Ok(()) => assert_eq!(fs::read(backing.join("held"))?, b"cached"),
        Err(e) => return Err(e.into()),
    }
    assert!(!is_mounted(&mountpoint));
    drop(file);
    Ok(())
}

/// What one file should read now and after a loss, and which bytes are unsynced.
#[derive(Default)]
struct ModelFile {
    current: Vec<u8>,
    durable: Vec<u8>,
    dirty: Vec<bool>,
}

impl ModelFile {
    fn write(&mut self, offset: usize, data: &[u8]) {
        let end = offset + data.len();
        if end > self.current.len() {
            self.current.resize(end, 0);
            self.dirty.resize(end, false);
        }
        self.current[offset..end].copy_from_slice(data);
        self.dirty[offset..end].fill(true);
    }

    fn set_len(&mut self, len: usize) {
        self.current.resize(len, 0);
        self.dirty.resize(len, false);
        // A shrink below the synced length is applied to the backing file at once.
        self.durable.truncate(len);
    }

    fn sync(&mut self) {
        self.durable.clone_from(&self.current);
        self.dirty.fill(false);
    }

    fn unsynced(&self) -> u64 {
        self.dirty.iter().filter(|d| **d).count() as u64
    }

    /// Returns whether the file had anything to lose.
    fn lose(&mut self) -> bool {
        let had = self.unsynced() > 0 || self.current.len() != self.durable.len();
        self.current.clone_from(&self.durable);
        self.dirty = vec![false; self.durable.len()];
        had
    }
}

/// xorshift64: a tiny seeded generator, enough to drive the random run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_writes_truncates_syncs_and_losses_match_a_model() -> TestResult {
    const FILES: usize = 3;
    for seed in [1u64, 0xDEAD_BEEF, 42_4242] {
        let f = mount();
        let mut rng = Rng(seed);
        let paths: Vec<PathBuf> = (0..FILES).map(|i| f.mnt.join(format!("f{i}"))).collect();
        let mut handles: Vec<Option<File>> = Vec::new();
        for path in &paths {
            handles.push(Some(rw(path)?));
        }
        let mut model: Vec<ModelFile> = (0..FILES).map(|_| ModelFile::default()).collect();

        for step in 0..300 {
            let i = rng.below(FILES);
            if handles[i].is_none() {
                handles[i] = Some(rw(&paths[i])?);
            }
            let file = handles[i].as_ref().ok_or("no handle")?;
            let len = model[i].current.len();
            let what = rng.below(100);
            match what {
                0..=39 => {
                    let offset = rng.below(len + 100);
                    let data: Vec<u8> = (0..1 + rng.below(200)).map(|_| rng.next() as u8).collect();
                    file.write_all_at(&data, offset as u64)?;
                    model[i].write(offset, &data);
                }
                40..=54 => {
                    let data: Vec<u8> = (0..1 + rng.below(300)).map(|_| rng.next() as u8).collect();
                    file.write_all_at(&data, len as u64)?;
                    model[i].write(len, &data);
                }
                55..=66 => {
                    let new_len = rng.below(len + 100);
                    file.set_len(new_len as u64)?;
                    model[i].set_len(new_len);
                }
                67..=76 => {
                    if rng.below(2) == 0 {
                        file.sync_all()?
                    } else {
                        file.sync_data()?
                    }
                    model[i].sync();
                }
                77..=89 => handles[i] = None,
                _ => {
                    let bytes: u64 = model.iter().map(ModelFile::unsynced).sum();
                    let files = model
                        .iter_mut()
                        .map(ModelFile::lose)
                        .filter(|had| *had)
                        .count();
                    let loss = f.fs.lose_unsynced();
                    assert_eq!(loss, Loss { files, bytes }, "seed {seed} step {step}: loss");
                }
            }
            check(&f, &paths, &model, &handles, seed, step)?;
        }
    }
    Ok(())
}

/// Compares the mount, the backing files and the unsynced byte count with the model.
fn check(
    f: &Fixture,
    paths: &[PathBuf],
    model: &[ModelFile],
    handles: &[Option<File>],
    seed: u64,
    step: usize,
) -> TestResult {
    let unsynced: u64 = model.iter().map(ModelFile::unsynced).sum();
    assert_eq!(
        f.fs.unsynced_bytes(),
        unsynced,
        "seed {seed} step {step}: unsynced bytes"
    );
    for (i, path) in paths.iter().enumerate() {
        let m = &model[i];
        assert!(
            fs::read(path)? == m.current,
            "seed {seed} step {step}: f{i} reads wrong"
        );
        let backing = fs::read(f.backing.join(format!("f{i}")))?;
        assert!(
            backing == m.durable,
            "seed {seed} step {step}: f{i} backing wrong"
        );
        if let Some(handle) = &handles[i] {
            assert_eq!(
                handle.metadata()?.len(),
                m.current.len() as u64,
                "seed {seed} step {step}: f{i} fstat"
            );
        }
    }
    Ok(())
}
