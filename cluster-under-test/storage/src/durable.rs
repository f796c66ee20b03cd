//! Durability helpers shared by segments, checkpoints and the log manager: fsync a directory
//! (so that creates, renames and deletes survive power loss) and replace a small file atomically
//! (temp file, fsync, rename, fsync the directory). Segment data writes live in `segment.rs`.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Suffix of the temporary file used while replacing a file atomically.
pub(crate) const TEMP_SUFFIX: &str = ".tmp";

/// Fsyncs a directory so that entries created, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let handle = File::open(dir).map_err(Error::io("open dir", dir))?;
    handle.sync_all().map_err(Error::io("fsync dir", dir))
}

/// Replaces `path` with `contents` so that a crash leaves either the old or the new file, never
/// a mix: write `path.tmp`, fsync it, rename over `path`, fsync the directory.
pub(crate) fn replace_file(path: &Path, contents: &[u8]) -> Result<()> {
    let mut temp_name = path.as_os_str().to_owned();
    temp_name.push(TEMP_SUFFIX);
    let temp = Path::new(&temp_name);
    {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(temp)
            .map_err(Error::io("create", temp))?;
        file.write_all(contents).map_err(Error::io("write", temp))?;
        file.sync_all().map_err(Error::io("fsync", temp))?;
    }
    fs::rename(temp, path).map_err(Error::io("rename", path))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}
