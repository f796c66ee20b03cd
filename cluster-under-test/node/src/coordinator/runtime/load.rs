//! The load of a coordinator partition (Kafka's `CoordinatorLoader`): its log read from the
//! start to the end it had when the load began and replayed, batches below the high watermark
//! into the committed state and the rest kept as pending. Synchronous: the runtime runs it off
//! the async workers.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{Active, Pending};
use crate::clock::now_ms;
use crate::coordinator::shard::{CoordinatorShard, decode_batches, replay_batch};
use crate::replica::Partition;

/// How many bytes one read of a load asks the log for.
const LOAD_READ_BYTES: usize = 1 << 20;

/// A load to run (off the async workers): replays the log of `partition` into `shard`.
pub struct Load<S> {
    pub(super) index: i32,
    pub(super) epoch: i32,
    pub(super) partition: Arc<Partition>,
    pub(super) shard: S,
}

/// What a finished [`Load`] hands to [`CoordinatorRuntime::complete_load`].
pub struct Loaded<S> {
    pub(super) index: i32,
    pub(super) epoch: i32,
    pub(super) outcome: Result<Box<Active<S>>, String>,
}

impl<S: CoordinatorShard> Load<S> {
    /// The partition index being loaded.
    pub fn index(&self) -> i32 {
        self.index
    }

    /// Reads the log from its start to the end it had when the load began and replays it:
    /// batches below the high watermark into the committed state, the rest as pending.
    pub fn run(self) -> Loaded<S> {
        let Load {
            index,
            epoch,
            partition,
            shard,
        } = self;
        let loaded_at_ms = now_ms();
        let outcome = replay_log(&partition, shard).map(|(committed, latest, pending)| {
            Box::new(Active {
                epoch,
                partition: Arc::clone(&partition),
                committed,
                latest,
                pending,
                write_lock: Arc::new(tokio::sync::Mutex::new(())),
                loaded_at_ms,
            })
        });
        Loaded {
            index,
            epoch,
            outcome,
        }
    }
}

fn replay_log<S: CoordinatorShard>(
    partition: &Partition,
    mut committed: S,
) -> Result<(S, S, VecDeque<Pending>), String> {
    let offsets = partition.offsets();
    let mut pending = VecDeque::new();
    let mut position = offsets.log_start_offset;
    while position < offsets.log_end_offset {
        let read = partition
            .read_to_log_end(position, LOAD_READ_BYTES)
            .map_err(|error| format!("reading offset {position}: {error:?}"))?;
        let batches = decode_batches(&read.records)?;
        let Some(last) = batches.last() else {
            return Err(format!("no whole batch at offset {position}"));
        };
        position = last.end_offset;
        for batch in batches {
            if batch.end_offset > offsets.high_watermark {
                pending.push_back(Pending {
                    end_offset: batch.end_offset,
                    kind: batch.kind,
                    records: batch.records,
                    done: None,
                });
                continue;
            }
            replay_batch(&mut committed, batch.kind, &batch.records)
                .map_err(|error| format!("batch ending at {}: {error}", batch.end_offset))?;
        }
    }
    let mut latest = committed.clone();
    for batch in &pending {
        replay_batch(&mut latest, batch.kind, &batch.records)?;
    }
    Ok((committed, latest, pending))
}
