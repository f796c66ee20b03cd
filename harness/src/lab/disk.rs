//! The lab's disk faults (part of [`Lab`]): power loss (SIGKILL, then the lazy disk drops
//! every write the node had not fsynced), a full disk, and a byte flipped or a tail cut in a
//! stopped node's segment file.

use std::fs::File;
use std::os::unix::fs::FileExt;

use anyhow::{Context, bail};
use logjam_lazyfs::Loss;
use rand::RngExt;
use rand::rngs::StdRng;

use super::Lab;

impl Lab {
    /// Power loss of node `index`: SIGKILL, then every write it had not fsynced is dropped.
    ///
    /// # Errors
    /// The node has no lazy disk.
    pub fn power_loss(&mut self, index: usize) -> anyhow::Result<Loss> {
        if self.nodes[index].disk.is_none() {
            bail!("{} has no power-loss filesystem", self.nodes[index].name());
        }
        if self.nodes[index].is_running() {
            self.kill(index)?;
        }
        let disk = self.nodes[index].disk.as_ref().context("no lazy disk")?;
        Ok(disk.0.lose_unsynced())
    }

    /// Disk full on or off for node `index`.
    ///
    /// # Errors
    /// The node has no lazy disk.
    pub fn set_disk_full(&mut self, index: usize, full: bool) -> anyhow::Result<()> {
        let node = &self.nodes[index];
        node.disk
            .as_ref()
            .with_context(|| format!("{} has no lazy disk", node.name()))?
            .0
            .set_full(full);
        Ok(())
    }

    /// Damages one segment file of stopped node `index`: flips a byte somewhere in it, or
    /// cuts a random number of bytes off its end (a torn tail). Only the workload's
    /// partitions are touched, not the KRaft metadata log. Returns what was done, for the
    /// history.
    ///
    /// # Errors
    /// The node is running, or it has no non-empty segment yet.
    pub fn corrupt(&mut self, index: usize, rng: &mut StdRng) -> anyhow::Result<serde_json::Value> {
        let node = &mut self.nodes[index];
        if node.is_running() {
            bail!(
                "{} must be stopped before its files are corrupted",
                node.name()
            );
        }
        let mut segments = Vec::new();
        for partition in std::fs::read_dir(node.data_dir())? {
            let partition = partition?;
            if partition.file_name().to_string_lossy().starts_with("__")
                || !partition.file_type()?.is_dir()
            {
                continue;
            }
            for file in std::fs::read_dir(partition.path())? {
                let file = file?;
                let len = file.metadata()?.len();
                if file.file_name().to_string_lossy().ends_with(".log") && len > 0 {
                    segments.push((file.path(), len));
                }
            }
        }
        segments.sort();
        if segments.is_empty() {
            bail!("{} has no segment to corrupt yet", node.name());
        }
        let (path, len) = segments[rng.random_range(0..segments.len())].clone();
        let relative = path
            .strip_prefix(node.data_dir())
            .unwrap_or(&path)
            .display()
            .to_string();
        let file = File::options().read(true).write(true).open(&path)?;
        if rng.random_bool(0.5) {
            let offset = rng.random_range(0..len);
            let mut byte = [0u8; 1];
            file.read_exact_at(&mut byte, offset)?;
            let flip = 1u8 << rng.random_range(0..8);
            file.write_all_at(&[byte[0] ^ flip], offset)?;
            file.sync_all()?;
            Ok(
                serde_json::json!({"file": relative, "mode": "flip", "offset": offset, "mask": flip}),
            )
        } else {
            let cut = rng.random_range(1..=len.min(4096));
            file.set_len(len - cut)?;
            file.sync_all()?;
            Ok(
                serde_json::json!({"file": relative, "mode": "truncate", "from": len, "to": len - cut}),
            )
        }
    }
}
