//! logjam-lazyfs: a FUSE passthrough filesystem that keeps data writes in memory until fsync.
//!
//! One [`LazyFs`] mounts a directory (`mountpoint`) that passes through to another
//! (`backing`), but emulates a page cache that a power failure loses, like
//! [LazyFS](https://github.com/dsrhaslab/lazyfs), which Jepsen uses: data written to a file is
//! held in memory until the file is fsynced, and [`LazyFs::lose_unsynced`] drops everything not
//! yet synced, as a power cut would. The harness mounts one instance under each node's data
//! directory, kills the node, calls `lose_unsynced`, and restarts it.
//!
//! # The model
//!
//! - **Metadata is durable at once.** lookup, getattr, mkdir, create/mknod, symlink, unlink,
//!   rmdir, rename, readdir, statfs and setattr of mode, owner and times go straight to the
//!   backing directory. A file created and never fsynced therefore survives a loss, empty.
//! - **Data is cached per inode.** Each file has an overlay of the bytes written since its last
//!   fsync and a logical size. A read returns the backing bytes overlaid by the cached ones, cut
//!   at the logical size; a write goes into the overlay and raises the logical size to its end.
//! - **fsync and fdatasync** (and `O_SYNC`/`O_DSYNC` writes) write the overlay to the backing
//!   file, set the backing length to the logical size, fsync the backing file and clear the
//!   overlay. **Close does not sync**: a file written and closed keeps its data only in the
//!   cache. fsyncdir fsyncs the backing directory.
//! - **Truncate** (setattr with a size, `ftruncate`, `set_len`) sets the logical size and drops
//!   the overlay beyond it; if the new size is below the backing file's length the backing
//!   file is truncated at once (a metadata operation), so a shrink survives a loss while a
//!   growth is cached like a write. `fallocate` mode 0 grows like a truncate;
//!   `FALLOC_FL_KEEP_SIZE` is accepted and does nothing; other modes are `EOPNOTSUPP`.
//! - **Loss.** `lose_unsynced` drops every overlay; each file's logical size returns to its
//!   backing length. Directory entries, modes and shrinks stay.
//! - **Rename and unlink.** The overlay belongs to the inode and follows it through a rename.
//!   An unlinked file's overlay is dropped with its last open handle (at once if none is open),
//!   since nothing can reach it any more.
//! - **Disk full.** While [`LazyFs::set_full`] is on, a write or truncate that would raise a
//!   file's logical size, and every create/mknod/mkdir/symlink, fails with `ENOSPC`.
//!   Overwrites in place, reads, fsyncs and removals still work.
//! - **No stale kernel caches.** Files are opened with `FOPEN_DIRECT_IO` (no page cache),
//!   attributes and entries have TTL 0, and writeback caching is not requested, so reads and
//!   stats after `lose_unsynced` see the loss at once, through already-open descriptors too.
//!   An `O_APPEND` write lands at the filesystem's logical end, not at the offset the kernel
//!   derived from its possibly pre-loss size. (A power cut kills every writer anyway; a
//!   harness should kill the node before calling `lose_unsynced`.)
//! - **Sync writes.** A write through an `O_SYNC`/`O_DSYNC` descriptor (or with
//!   `RWF_SYNC`/`RWF_DSYNC`) is synced before it returns.
//!
//! # Limits
//!
//! - Hard links are refused (`EPERM`): inodes are tracked by path.
//! - The backing directory must not be changed behind the mount's back while it is mounted.
//! - Mounting needs root (or a user namespace owning `/dev/fuse`): it calls `mount(2)` directly
//!   and never runs `fusermount`. Only the mounting user (root) may use the mount.
//! - One session thread serves each mount and every request runs under one mutex, which is
//!   ample for a node doing a few thousand writes a second.
//!
//! # Modules
//!
//! - `extents`: the overlay of one file, as non-overlapping byte ranges.
//! - `state`: the inode table, open handles, caches and every operation on them.
//! - `fs`: the `fuser::Filesystem` glue.

mod extents;
mod fs;
mod state;

use std::fs::OpenOptions;
use std::io;
use std::mem;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use fuser::{BackgroundSession, Config, MountOption};
use nix::mount::MntFlags;
use nix::sys::resource::{Resource, getrlimit, setrlimit};

use crate::state::State;

/// How long `unmount` waits for the session to end after detaching the mount before it
/// concludes that open files keep it alive.
const SESSION_END_TIMEOUT: Duration = Duration::from_secs(5);

/// A mounted instance. Dropping it unmounts it like [`LazyFs::unmount`], ignoring errors.
pub struct LazyFs {
    state: Arc<Mutex<State>>,
    /// `None` once unmounted.
    session: Option<BackgroundSession>,
    /// Canonical mountpoint.
    mountpoint: PathBuf,
    /// Device number of the mounted filesystem, to recognise our mount and find its fusectl
    /// connection.
    dev: u64,
}

/// What a [`LazyFs::lose_unsynced`] dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Loss {
    /// Files whose data or size differed from their backing file.
    pub files: usize,
    /// Bytes written but not fsynced (each byte counted once, however often rewritten).
    pub bytes: u64,
}

/// Why mounting or unmounting failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The backing directory or mountpoint is missing or not a directory.
    #[error("{what} {path} is not an existing directory: {source}")]
    NotADirectory {
        /// "backing directory" or "mountpoint".
        what: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Why it was rejected.
        source: io::Error,
    },
    /// One of backing and mountpoint contains the other: serving it would recurse into itself.
    #[error(
        "mountpoint {mountpoint} and backing directory {backing} must not contain each other \
         (the filesystem would recurse into itself)"
    )]
    Nested {
        /// Canonical backing directory.
        backing: PathBuf,
        /// Canonical mountpoint.
        mountpoint: PathBuf,
    },
    /// Not running as root.
    #[error(
        "mounting FUSE at {mountpoint} needs root (CAP_SYS_ADMIN): logjam-lazyfs calls mount(2) \
         itself and never uses fusermount"
    )]
    NotRoot {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// `/dev/fuse` cannot be opened.
    #[error(
        "/dev/fuse cannot be opened (needs root or a user namespace with access to /dev/fuse, \
         and the fuse module loaded): {0}"
    )]
    DevFuse(#[source] io::Error),
    /// mount(2) or the FUSE handshake failed.
    #[error("mounting FUSE at {mountpoint} failed: {source}")]
    Mount {
        /// The mountpoint.
        mountpoint: PathBuf,
        /// The mount error.
        source: io::Error,
    },
    /// Writing cached data through to a backing file failed at unmount.
    #[error("writing cached data through to backing file {path} failed: {source}")]
    Flush {
        /// The backing file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Detaching the mount failed.
    #[error("unmounting {mountpoint} failed: {source}")]
    Unmount {
        /// The mountpoint.
        mountpoint: PathBuf,
        /// The umount2 error.
        source: io::Error,
    },
    /// The mount was detached but open files or working directories still use it.
    #[error(
        "{mountpoint} was detached but is still in use (open files or a working directory \
         inside it): its session ends when they are closed; writes until then go straight to \
         the backing files"
    )]
    Busy {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// The FUSE session thread ended with an error.
    #[error("the FUSE session of {mountpoint} failed: {source}")]
    Session {
        /// The mountpoint.
        mountpoint: PathBuf,
        /// The session's error.
        source: io::Error,
    },
}

impl LazyFs {
    /// Mounts a filesystem at `mountpoint` that passes through to `backing` (both existing
    /// dirs, neither inside the other). Needs root and `/dev/fuse`; raises this process's
    /// soft open-files limit to its hard limit, since every file the node opens through the
    /// mount is also open here.
    pub fn mount(backing: &Path, mountpoint: &Path) -> Result<LazyFs, Error> {
        let backing = existing_dir("backing directory", backing)?;
        let mountpoint = existing_dir("mountpoint", mountpoint)?;
        if backing.starts_with(&mountpoint) || mountpoint.starts_with(&backing) {
            return Err(Error::Nested {
                backing,
                mountpoint,
            });
        }
        if !nix::unistd::geteuid().is_root() {
            return Err(Error::NotRoot { mountpoint });
        }
        // fuser would report a missing /dev/fuse as a failure to run fusermount; say what is
        // really missing.
        OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .map_err(Error::DevFuse)?;
        raise_open_files_limit();

        let state = Arc::new(Mutex::new(State::new(backing)));
        let server = fs::Server {
            state: Arc::clone(&state),
        };
        let session =
            fuser::spawn_mount(server, &mountpoint, &session_config()).map_err(|source| {
                Error::Mount {
                    mountpoint: mountpoint.clone(),
                    source,
                }
            })?;
        let mut lazy = LazyFs {
            state,
            session: Some(session),
            mountpoint,
            dev: 0,
        };
        // A stat of the mountpoint is served by the session just started.
        match std::fs::metadata(&lazy.mountpoint) {
            Ok(meta) => lazy.dev = meta.dev(),
            Err(source) => {
                let mountpoint = lazy.mountpoint.clone();
                drop(lazy);
                return Err(Error::Mount { mountpoint, source });
            }
        }
        Ok(lazy)
    }

    /// Power loss: drops every write not yet fsynced (all files). Returns what was lost.
    pub fn lose_unsynced(&self) -> Loss {
        self.state().lose_unsynced()
    }

    /// Disk full on/off: while on, writes that would grow data and file creation fail with
    /// ENOSPC.
    pub fn set_full(&self, full: bool) {
        self.state().full = full;
    }

    /// Bytes currently held unsynced.
    pub fn unsynced_bytes(&self) -> u64 {
        self.state().unsynced_bytes()
    }

    /// The mountpoint (canonical).
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Writes every cached byte through to the backing files (a clean shutdown of the
    /// machine) and unmounts.
    ///
    /// The mount is detached lazily; if open files keep it alive past a few seconds this
    /// returns [`Error::Busy`], and until they close their writes go straight through to the
    /// backing files.
    pub fn unmount(mut self) -> Result<(), Error> {
        self.shut_down()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Flushes, detaches and waits for the session. Idempotent.
    fn shut_down(&mut self) -> Result<(), Error> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let flushed = {
            let mut state = self.state();
            // From here on nothing is cached, so nothing written later can be lost.
            state.write_through = true;
            state
                .sync_all()
                .map_err(|(path, source)| Error::Flush { path, source })
        };
        let detached = self.detach();
        let ended = self.end_session(session);
        flushed.and(detached).and(ended)
    }

    /// Lazily detaches the mount, if it is still ours.
    fn detach(&self) -> Result<(), Error> {
        // Another device at the mountpoint means ours is already gone (and that one is not
        // ours to unmount). An error (e.g. ENOTCONN from an aborted connection) means ours is
        // still there, dead.
        if let Ok(meta) = std::fs::metadata(&self.mountpoint)
            && meta.dev() != self.dev
        {
            return Ok(());
        }
        match nix::mount::umount2(&self.mountpoint, MntFlags::MNT_DETACH) {
            Ok(()) | Err(nix::errno::Errno::EINVAL) => Ok(()),
            Err(e) => Err(Error::Unmount {
                mountpoint: self.mountpoint.clone(),
                source: e.into(),
            }),
        }
    }

    /// Waits for the session thread to end (the kernel ends it once the detached mount is no
    /// longer used), aborting the connection through fusectl if that is available.
    fn end_session(&self, session: BackgroundSession) -> Result<(), Error> {
        let mut ended = wait_for(&session, SESSION_END_TIMEOUT);
        if !ended && self.abort_connection() {
            ended = wait_for(&session, SESSION_END_TIMEOUT);
        }
        if !ended {
            // The session still serves open files. Dropping the handle would make fuser
            // unmount the mountpoint by path, which may by then be someone else's mount.
            mem::forget(session);
            return Err(Error::Busy {
                mountpoint: self.mountpoint.clone(),
            });
        }
        session.join().map_err(|source| Error::Session {
            mountpoint: self.mountpoint.clone(),
            source,
        })
    }

    /// Aborts our FUSE connection via fusectl, if mounted. Returns whether it was written.
    fn abort_connection(&self) -> bool {
        // fusectl names a connection by the kernel's device number (major << 20 | minor).
        let dev = self.dev;
        let id = (nix::sys::stat::major(dev) << 20) | nix::sys::stat::minor(dev);
        let abort = format!("/sys/fs/fuse/connections/{id}/abort");
        std::fs::write(abort, b"1").is_ok()
    }
}

impl Drop for LazyFs {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

/// Session settings: one thread, requests only from the mounting user, no auto-unmount
/// (that needs fusermount).
fn session_config() -> Config {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("logjam-lazyfs".to_string()),
        MountOption::Subtype("logjam-lazyfs".to_string()),
        MountOption::RW,
    ];
    config.n_threads = Some(1);
    config
}

/// Canonicalizes `path`, which must be an existing directory.
fn existing_dir(what: &'static str, path: &Path) -> Result<PathBuf, Error> {
    let canonical = path
        .canonicalize()
        .and_then(|p| {
            if p.is_dir() {
                Ok(p)
            } else {
                Err(io::Error::from(io::ErrorKind::NotADirectory))
            }
        })
        .map_err(|source| Error::NotADirectory {
            what,
            path: path.to_path_buf(),
            source,
        })?;
    Ok(canonical)
}

/// Raises the soft open-files limit to the hard limit; best effort.
fn raise_open_files_limit() {
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// Polls until the session thread has ended or `timeout` passes; returns whether it ended.
fn wait_for(session: &BackgroundSession, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while !session.guard.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<LazyFs>();
    }

    #[test]
    fn errors_name_the_path_and_what_is_missing() {
        let err = LazyFs::mount(Path::new("/nonexistent/backing"), Path::new("/tmp"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("/nonexistent/backing"), "{err}");
        assert!(err.contains("backing directory"), "{err}");

        let dir = tempfile::tempdir().map_err(|e| e.to_string());
        let dir = dir
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default();
        let err = LazyFs::mount(&dir, &dir)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("must not contain each other"), "{err}");
    }
}
