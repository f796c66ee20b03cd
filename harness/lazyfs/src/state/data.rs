//! File data on a mount (part of [`State`]): opened, created, read and written through each
//! file's cache of unsynced data, which fsync writes to the backing file and power loss
//! ([`State::lose_unsynced`]) drops.

use super::*;

impl State {
    /// Opens `ino`, returning a new handle.
    pub(crate) fn open(&mut self, ino: u64) -> Res<u64> {
        let path = self.path_of(ino)?;
        let node = self.node_mut(ino)?;
        if node.file.is_none() {
            node.file = Some(open_backing(&path)?);
        }
        node.open += 1;
        Ok(self.new_handle(Handle::File(ino)))
    }

    /// Creates (or, without `O_EXCL`, opens) a regular file and opens it.
    pub(crate) fn create(
        &mut self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> Res<(FileAttr, u64)> {
        self.check_space()?;
        let rel = self.child(parent, name)?;
        let path = self.backing(&rel);
        let flags = OFlag::from_bits_truncate(flags);
        let ino = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => {
                // Set the exact mode: the kernel already applied the caller's umask, and ours
                // must not be applied twice.
                file.set_permissions(Permissions::from_mode(mode & 0o7777))?;
                let ino = self.rebind(&rel);
                self.node_mut(ino)?.file = Some(file);
                ino
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists && !flags.contains(OFlag::O_EXCL) => {
                let ino = self.bind(&rel);
                if flags.contains(OFlag::O_TRUNC) {
                    self.set_size(ino, 0)?;
                }
                ino
            }
            Err(e) => return Err(e.into()),
        };
        let fh = self.open(ino)?;
        Ok((self.getattr(ino)?, fh))
    }

    /// Reads `size` bytes at `offset`: backing bytes overlaid by cached bytes, cut at the
    /// logical size.
    pub(crate) fn read(&self, ino: u64, offset: u64, size: u32) -> Res<Vec<u8>> {
        let node = self.node(ino)?;
        let file = node.file.as_ref().ok_or(Errno::EBADF)?;
        let len = match &node.cache {
            Some(cache) => u64::from(size).min(cache.size.saturating_sub(offset)),
            None => u64::from(size),
        };
        let mut buf = vec![0; usize::try_from(len).map_err(|_| Errno::EINVAL)?];
        let from_disk = read_at_most(file, &mut buf, offset)?;
        match &node.cache {
            // Past the backing file's end the file reads as zeros unless written.
            Some(cache) => cache.extents.overlay(offset, &mut buf),
            None => buf.truncate(from_disk),
        }
        Ok(buf)
    }

    /// Writes `data` into the cache at `offset`, or at the logical end for an `O_APPEND`
    /// descriptor; a sync write (`O_SYNC`/`O_DSYNC`) then syncs the file.
    pub(crate) fn write(
        &mut self,
        ino: u64,
        offset: u64,
        data: &[u8],
        mode: WriteMode,
    ) -> Res<u32> {
        let written = u32::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
        let node = self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
        let file = node.file.as_ref().ok_or(Errno::EBADF)?;
        let size = match &node.cache {
            Some(cache) => cache.size,
            None => file.metadata()?.len(),
        };
        // The kernel computes an append's offset from its own idea of the size, which is
        // stale after a loss; ours is not.
        let offset = if mode.append { size } else { offset };
        let end = offset.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        if self.full && end > size {
            return Err(Errno::ENOSPC);
        }
        let cache = node.cache.get_or_insert_with(|| Cache {
            extents: Extents::default(),
            size,
        });
        cache.extents.write(offset, data);
        cache.size = cache.size.max(end);
        if mode.sync || self.write_through {
            sync_node(node, &self.root)?;
        }
        Ok(written)
    }

    /// fsync/fdatasync: writes the cache through to the backing file and fsyncs it.
    pub(crate) fn fsync(&mut self, ino: u64) -> Res<()> {
        let node = self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
        sync_node(node, &self.root)?;
        Ok(())
    }

    /// Sets the logical size. Shrinking below the backing file's length truncates the backing
    /// file at once; growth is cached like a write.
    pub(crate) fn set_size(&mut self, ino: u64, new_size: u64) -> Res<()> {
        let node = self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
        let file = backing_file(node, &self.root)?;
        let mut backing_len = file.metadata()?.len();
        let size = node.cache.as_ref().map_or(backing_len, |c| c.size);
        if self.full && new_size > size {
            return Err(Errno::ENOSPC);
        }
        if new_size < backing_len {
            file.set_len(new_size)?;
            backing_len = new_size;
        }
        drop(file);
        let mut cache = node.cache.take().unwrap_or_else(|| Cache {
            extents: Extents::default(),
            size,
        });
        cache.extents.truncate(new_size);
        cache.size = new_size;
        if !cache.extents.is_empty() || cache.size != backing_len {
            node.cache = Some(cache);
        }
        if self.write_through {
            sync_node(node, &self.root)?;
        }
        Ok(())
    }

    /// `fallocate`: mode 0 grows the logical size like a truncate would (cached);
    /// `FALLOC_FL_KEEP_SIZE` alone is accepted and does nothing; other modes are unsupported.
    pub(crate) fn fallocate(&mut self, ino: u64, offset: u64, length: u64, mode: i32) -> Res<()> {
        const FALLOC_FL_KEEP_SIZE: i32 = 1;
        let end = offset.checked_add(length).ok_or(Errno::EFBIG)?;
        match mode {
            0 => {
                if end > self.getattr(ino)?.size {
                    self.set_size(ino, end)?;
                }
                Ok(())
            }
            FALLOC_FL_KEEP_SIZE => Ok(()),
            _ => Err(Errno::EOPNOTSUPP),
        }
    }

    /// Releases a file or directory handle. A file's cache survives its last close; an
    /// unlinked file's node (and cache) goes away with it.
    pub(crate) fn release(&mut self, fh: u64) {
        let Some(Handle::File(ino)) = self.handles.remove(&fh) else {
            return;
        };
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.open = node.open.saturating_sub(1);
        if node.open == 0 {
            if node.linked {
                // Closed files reopen by path when needed, so a broker with thousands of
                // unsynced closed segments does not pin thousands of descriptors here.
                node.file = None;
            } else {
                self.nodes.remove(&ino);
            }
        }
    }

    // ----- whole-mount operations -----

    /// Drops every cache, as a power cut drops the page cache.
    pub(crate) fn lose_unsynced(&mut self) -> Loss {
        let mut loss = Loss::default();
        for node in self.nodes.values_mut() {
            if let Some(cache) = node.cache.take() {
                loss.files += 1;
                loss.bytes += cache.extents.bytes();
            }
        }
        loss
    }

    /// Bytes held in caches.
    pub(crate) fn unsynced_bytes(&self) -> u64 {
        self.nodes
            .values()
            .filter_map(|n| n.cache.as_ref())
            .map(|c| c.extents.bytes())
            .sum()
    }

    /// Writes every cache through to its backing file. Tries every file; returns the first
    /// failure with the backing path.
    pub(crate) fn sync_all(&mut self) -> Result<(), (PathBuf, io::Error)> {
        let mut first_error = None;
        for node in self.nodes.values_mut() {
            if node.cache.is_some()
                && let Err(e) = sync_node(node, &self.root)
            {
                first_error.get_or_insert((self.root.join(&node.path), e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
