//! `State`: everything one mount knows — the inode table (backing path per inode), the open
//! handles and each file's cache of unsynced data — and the filesystem operations on it.
//!
//! Every method runs under the mount's one mutex and does its backing-file I/O synchronously;
//! errors come back as the errno the kernel should see.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, File, Metadata, OpenOptions, Permissions};
use std::io::{self, ErrorKind};
use std::ops::Deref;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo, TimeOrNow};
use nix::fcntl::{AT_FDCWD, OFlag, RenameFlags};
use nix::sys::stat::{Mode, SFlag, UtimensatFlags};
use nix::sys::statvfs::Statvfs;
use nix::sys::time::TimeSpec;
use nix::unistd::AccessFlags;

use crate::Loss;
use crate::extents::Extents;

mod data;

/// Inode number of the mount's root directory.
pub(crate) const ROOT: u64 = 1;

/// Result of an operation, failing with the errno to hand to the kernel.
pub(crate) type Res<T> = Result<T, Errno>;

/// The unsynced state of one regular file. Present only while the file differs from its
/// backing file.
#[derive(Debug)]
struct Cache {
    /// Bytes written since the last fsync.
    extents: Extents,
    /// Logical size. Never below the backing file's length: shrinking truncates the backing
    /// file at once (a metadata operation), so only growth is ever unsynced.
    size: u64,
}

/// One inode, named by its path relative to the backing root.
#[derive(Debug)]
struct Node {
    path: PathBuf,
    /// False once the path no longer names this inode (unlinked or renamed over) while it is
    /// still open; the node goes away with its last handle.
    linked: bool,
    /// The backing file, opened read-write while the inode has open handles.
    file: Option<File>,
    /// Open file handles on this inode.
    open: u32,
    cache: Option<Cache>,
}

/// What an open handle refers to.
#[derive(Debug)]
enum Handle {
    File(u64),
    /// A directory listing snapshotted at opendir, so offsets stay stable while paging.
    Dir(Vec<DirEntry>),
}

/// One entry of a directory listing.
#[derive(Debug, Clone)]
pub(crate) struct DirEntry {
    pub(crate) ino: u64,
    pub(crate) kind: FileType,
    pub(crate) name: OsString,
}

/// Attribute changes requested by a setattr call.
#[derive(Debug, Default)]
pub(crate) struct SetAttr {
    pub(crate) mode: Option<u32>,
    pub(crate) uid: Option<u32>,
    pub(crate) gid: Option<u32>,
    pub(crate) size: Option<u64>,
    pub(crate) atime: Option<TimeOrNow>,
    pub(crate) mtime: Option<TimeOrNow>,
}

/// How a write's descriptor was opened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteMode {
    /// `O_APPEND`: write at the end, whatever the offset says.
    pub(crate) append: bool,
    /// `O_SYNC`/`O_DSYNC` (or `RWF_SYNC`/`RWF_DSYNC`): sync before replying.
    pub(crate) sync: bool,
}

/// The state of one mount.
#[derive(Debug)]
pub(crate) struct State {
    /// The backing directory (canonical).
    root: PathBuf,
    nodes: HashMap<u64, Node>,
    /// Path (relative to `root`) to inode, for linked nodes.
    by_path: HashMap<PathBuf, u64>,
    /// Inode numbers are never reused, so generation 0 is always right.
    next_ino: u64,
    handles: HashMap<u64, Handle>,
    next_fh: u64,
    /// Disk-full emulation: growing data and creating names fail with ENOSPC.
    pub(crate) full: bool,
    /// Set at shutdown: every write goes straight through to the backing file.
    pub(crate) write_through: bool,
}

impl State {
    /// A fresh state for a mount of `root`.
    pub(crate) fn new(root: PathBuf) -> State {
        let mut state = State {
            root,
            nodes: HashMap::new(),
            by_path: HashMap::new(),
            next_ino: ROOT,
            handles: HashMap::new(),
            next_fh: 1,
            full: false,
            write_through: false,
        };
        state.bind(Path::new(""));
        state
    }

    // ----- metadata: passed straight through, durable at once -----

    /// Looks up `name` in `parent`.
    pub(crate) fn lookup(&mut self, parent: u64, name: &OsStr) -> Res<FileAttr> {
        let rel = self.child(parent, name)?;
        let meta = fs::symlink_metadata(self.backing(&rel))?;
        let ino = self.bind(&rel);
        Ok(self.attr_of(ino, &meta))
    }

    /// The attributes of `ino`, with the logical size of a cached file.
    pub(crate) fn getattr(&self, ino: u64) -> Res<FileAttr> {
        let node = self.node(ino)?;
        let meta = match &node.file {
            Some(file) => file.metadata()?,
            None => fs::symlink_metadata(self.backing(&node.path))?,
        };
        Ok(self.attr_of(ino, &meta))
    }

    /// Applies a setattr: mode, owner and times pass through; a size goes through `set_size`.
    pub(crate) fn setattr(&mut self, ino: u64, change: SetAttr) -> Res<FileAttr> {
        if let Some(size) = change.size {
            self.set_size(ino, size)?;
        }
        let path = self.path_of(ino)?;
        if let Some(mode) = change.mode {
            fs::set_permissions(&path, Permissions::from_mode(mode & 0o7777))?;
        }
        if change.uid.is_some() || change.gid.is_some() {
            std::os::unix::fs::lchown(&path, change.uid, change.gid)?;
        }
        if change.atime.is_some() || change.mtime.is_some() {
            nix::sys::stat::utimensat(
                AT_FDCWD,
                &path,
                &timespec(change.atime),
                &timespec(change.mtime),
                UtimensatFlags::NoFollowSymlink,
            )
            .map_err(errno)?;
        }
        self.getattr(ino)
    }

    /// Reads the target of symlink `ino`.
    pub(crate) fn readlink(&self, ino: u64) -> Res<Vec<u8>> {
        let target = fs::read_link(self.path_of(ino)?)?;
        Ok(target.as_os_str().as_bytes().to_vec())
    }

    /// Creates a regular file, fifo, socket or device node.
    pub(crate) fn mknod(
        &mut self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> Res<FileAttr> {
        self.check_space()?;
        let rel = self.child(parent, name)?;
        let path = self.backing(&rel);
        let kind = SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits());
        nix::sys::stat::mknod(&path, kind, Mode::empty(), rdev.into()).map_err(errno)?;
        self.created(&rel, mode)
    }

    /// Creates a directory.
    pub(crate) fn mkdir(&mut self, parent: u64, name: &OsStr, mode: u32) -> Res<FileAttr> {
        self.check_space()?;
        let rel = self.child(parent, name)?;
        DirBuilder::new().mode(0o700).create(self.backing(&rel))?;
        self.created(&rel, mode)
    }

    /// Creates a symlink.
    pub(crate) fn symlink(&mut self, parent: u64, name: &OsStr, target: &Path) -> Res<FileAttr> {
        self.check_space()?;
        let rel = self.child(parent, name)?;
        std::os::unix::fs::symlink(target, self.backing(&rel))?;
        let meta = fs::symlink_metadata(self.backing(&rel))?;
        let ino = self.rebind(&rel);
        Ok(self.attr_of(ino, &meta))
    }

    /// Removes a file. Its cache goes with it (at once, or with its last open handle).
    pub(crate) fn unlink(&mut self, parent: u64, name: &OsStr) -> Res<()> {
        let rel = self.child(parent, name)?;
        fs::remove_file(self.backing(&rel))?;
        self.unbind(&rel);
        Ok(())
    }

    /// Removes an empty directory.
    pub(crate) fn rmdir(&mut self, parent: u64, name: &OsStr) -> Res<()> {
        let rel = self.child(parent, name)?;
        fs::remove_dir(self.backing(&rel))?;
        self.unbind(&rel);
        Ok(())
    }

    /// Renames, with `renameat2` flags (`RENAME_NOREPLACE`, `RENAME_EXCHANGE`). A file's cache
    /// belongs to its inode and follows it to the new name.
    pub(crate) fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        flags: u32,
    ) -> Res<()> {
        let from = self.child(parent, name)?;
        let to = self.child(new_parent, new_name)?;
        let flags = RenameFlags::from_bits(flags).ok_or(Errno::EINVAL)?;
        nix::fcntl::renameat2(
            AT_FDCWD,
            &self.backing(&from),
            AT_FDCWD,
            &self.backing(&to),
            flags,
        )
        .map_err(errno)?;
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            let moved_out = self.subtree(&from, &to);
            let moved_in = self.subtree(&to, &from);
            self.relocate(moved_out.into_iter().chain(moved_in).collect());
        } else if from != to {
            let moved = self.subtree(&from, &to);
            self.unbind(&to);
            self.relocate(moved);
        }
        Ok(())
    }

    /// Snapshots the listing of directory `ino` into a new handle.
    pub(crate) fn opendir(&mut self, ino: u64) -> Res<u64> {
        let rel = self.node(ino)?.path.clone();
        let parent = rel
            .parent()
            .and_then(|p| self.by_path.get(p).copied())
            .unwrap_or(ROOT);
        let mut entries = vec![
            DirEntry {
                ino,
                kind: FileType::Directory,
                name: ".".into(),
            },
            DirEntry {
                ino: parent,
                kind: FileType::Directory,
                name: "..".into(),
            },
        ];
        for entry in fs::read_dir(self.backing(&rel))? {
            let entry = entry?;
            let kind = entry
                .file_type()
                .ok()
                .and_then(FileType::from_std)
                .unwrap_or(FileType::RegularFile);
            let child = self.bind(&rel.join(entry.file_name()));
            entries.push(DirEntry {
                ino: child,
                kind,
                name: entry.file_name(),
            });
        }
        Ok(self.new_handle(Handle::Dir(entries)))
    }

    /// The listing snapshotted by `opendir`.
    pub(crate) fn readdir(&self, fh: u64) -> Res<&[DirEntry]> {
        match self.handles.get(&fh) {
            Some(Handle::Dir(entries)) => Ok(entries),
            _ => Err(Errno::EBADF),
        }
    }

    /// Fsyncs the backing directory.
    pub(crate) fn fsyncdir(&self, ino: u64) -> Res<()> {
        File::open(self.path_of(ino)?)?.sync_all()?;
        Ok(())
    }

    /// Statistics of the backing filesystem (the caller reports no free space while full).
    pub(crate) fn statfs(&self) -> Res<Statvfs> {
        nix::sys::statvfs::statvfs(&self.root).map_err(errno)
    }

    /// Checks access to `ino` as this (root) process sees it.
    pub(crate) fn access(&self, ino: u64, mask: i32) -> Res<()> {
        let flags = AccessFlags::from_bits_truncate(mask);
        nix::unistd::access(&self.path_of(ino)?, flags).map_err(errno)
    }

    // ----- inode table -----

    /// The backing path of a path relative to the root.
    fn backing(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    fn path_of(&self, ino: u64) -> Res<PathBuf> {
        Ok(self.backing(&self.node(ino)?.path))
    }

    fn node(&self, ino: u64) -> Res<&Node> {
        self.nodes.get(&ino).ok_or(Errno::ENOENT)
    }

    fn node_mut(&mut self, ino: u64) -> Res<&mut Node> {
        self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    /// The relative path of `name` in directory `parent`.
    fn child(&self, parent: u64, name: &OsStr) -> Res<PathBuf> {
        let parent = self.node(parent)?;
        if !parent.linked {
            return Err(Errno::ENOENT);
        }
        Ok(parent.path.join(name))
    }

    /// The inode named by `rel`, allocating one on first sight.
    fn bind(&mut self, rel: &Path) -> u64 {
        if let Some(&ino) = self.by_path.get(rel) {
            return ino;
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let node = Node {
            path: rel.to_path_buf(),
            linked: true,
            file: None,
            open: 0,
            cache: None,
        };
        self.nodes.insert(ino, node);
        self.by_path.insert(rel.to_path_buf(), ino);
        ino
    }

    /// A fresh inode for a just-created `rel`, retiring any stale one bound to that name.
    fn rebind(&mut self, rel: &Path) -> u64 {
        self.unbind(rel);
        self.bind(rel)
    }

    /// `rel` no longer names its inode: forget the name, and the inode too unless it is open.
    fn unbind(&mut self, rel: &Path) {
        let Some(ino) = self.by_path.remove(rel) else {
            return;
        };
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.linked = false;
            if node.open == 0 {
                self.nodes.remove(&ino);
            }
        }
    }

    /// The linked inodes at or below `from`, with the paths they get once `from` is `to`.
    fn subtree(&self, from: &Path, to: &Path) -> Vec<(u64, PathBuf)> {
        let Some(&top) = self.by_path.get(from) else {
            return Vec::new();
        };
        let mut moved = vec![(top, to.to_path_buf())];
        // Only a directory has descendants; scanning every node is fine for the rare dir rename.
        if fs::symlink_metadata(self.backing(to)).is_ok_and(|m| m.is_dir()) {
            for (path, &ino) in &self.by_path {
                if let Ok(rest) = path.strip_prefix(from)
                    && !rest.as_os_str().is_empty()
                {
                    moved.push((ino, to.join(rest)));
                }
            }
        }
        moved
    }

    /// Gives each inode its new path, in two phases so exchanged names do not collide.
    fn relocate(&mut self, moved: Vec<(u64, PathBuf)>) {
        for (ino, _) in &moved {
            if let Some(node) = self.nodes.get(ino)
                && self.by_path.get(&node.path) == Some(ino)
            {
                self.by_path.remove(&node.path);
            }
        }
        for (ino, path) in moved {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.path.clone_from(&path);
                self.by_path.insert(path, ino);
            }
        }
    }

    /// Binds a just-created node and sets its exact mode (see `create`).
    fn created(&mut self, rel: &Path, mode: u32) -> Res<FileAttr> {
        let path = self.backing(rel);
        fs::set_permissions(&path, Permissions::from_mode(mode & 0o7777))?;
        let meta = fs::symlink_metadata(&path)?;
        let ino = self.rebind(rel);
        Ok(self.attr_of(ino, &meta))
    }

    fn check_space(&self) -> Res<()> {
        if self.full {
            Err(Errno::ENOSPC)
        } else {
            Ok(())
        }
    }

    fn new_handle(&mut self, handle: Handle) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, handle);
        fh
    }

    /// Kernel attributes of `ino` from its backing metadata, with the cached logical size.
    fn attr_of(&self, ino: u64, meta: &Metadata) -> FileAttr {
        let cached = self.nodes.get(&ino).and_then(|n| n.cache.as_ref());
        let (size, blocks) = match cached {
            Some(cache) => (cache.size, cache.size.div_ceil(512)),
            None => (meta.len(), meta.blocks()),
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks,
            atime: system_time(meta.atime(), meta.atime_nsec()),
            mtime: system_time(meta.mtime(), meta.mtime_nsec()),
            ctime: system_time(meta.ctime(), meta.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile),
            perm: (meta.mode() & 0o7777) as u16,
            nlink: u32::try_from(meta.nlink()).unwrap_or(u32::MAX),
            uid: meta.uid(),
            gid: meta.gid(),
            rdev: u32::try_from(meta.rdev()).unwrap_or(0),
            blksize: u32::try_from(meta.blksize()).unwrap_or(4096),
            flags: 0,
        }
    }
}

/// A node's backing file: the open one, or one opened by path for this call.
enum BackingFile<'a> {
    Held(&'a File),
    Opened(File),
}

impl Deref for BackingFile<'_> {
    type Target = File;

    fn deref(&self) -> &File {
        match self {
            BackingFile::Held(file) => file,
            BackingFile::Opened(file) => file,
        }
    }
}

fn backing_file<'a>(node: &'a Node, root: &Path) -> io::Result<BackingFile<'a>> {
    match &node.file {
        Some(file) => Ok(BackingFile::Held(file)),
        None => open_backing(&root.join(&node.path)).map(BackingFile::Opened),
    }
}

/// Opens a backing file read-write, or read-only where writing is refused (then writes and
/// fsyncs of cached data fail with the backing error, as they should).
fn open_backing(path: &Path) -> io::Result<File> {
    match OpenOptions::new().read(true).write(true).open(path) {
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            File::open(path)
        }
        other => other,
    }
}

/// Writes a node's cache to its backing file, sets the backing length to the logical size,
/// fsyncs, and clears the cache. On failure the cache is kept.
fn sync_node(node: &mut Node, root: &Path) -> io::Result<()> {
    let file = backing_file(node, root)?;
    if let Some(cache) = &node.cache {
        for (offset, bytes) in cache.extents.iter() {
            file.write_all_at(bytes, offset)?;
        }
        if file.metadata()?.len() != cache.size {
            file.set_len(cache.size)?;
        }
    }
    file.sync_all()?;
    drop(file);
    node.cache = None;
    Ok(())
}

/// Reads into `buf` from `offset` until it is full or the file ends; returns the bytes read.
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn system_time(secs: i64, nsecs: i64) -> SystemTime {
    let nanos = Duration::from_nanos(nsecs.unsigned_abs());
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs()) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}

fn timespec(time: Option<TimeOrNow>) -> TimeSpec {
    match time {
        None => TimeSpec::UTIME_OMIT,
        Some(TimeOrNow::Now) => TimeSpec::UTIME_NOW,
        Some(TimeOrNow::SpecificTime(t)) => {
            TimeSpec::from_duration(t.duration_since(UNIX_EPOCH).unwrap_or_default())
        }
    }
}

/// The errno of a nix error, for the kernel.
pub(crate) fn errno(e: nix::errno::Errno) -> Errno {
    Errno::from_i32(e as i32)
}
