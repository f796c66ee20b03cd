//! The transaction coordinator (Kafka's `TransactionCoordinator`, KIP-98 with KIP-360,
//! KIP-447 and KIP-890): transactional ids' states on the partitions of
//! `__transaction_state`, served through the [`CoordinatorRuntime`].
//!
//! - [`record`]: Kafka's `TransactionLogKey`/`TransactionLogValue` format; [`metadata`]: one
//!   id's state; [`transitions`]: every decision, pure and table-tested; [`shard`]: the
//!   replayed state of one partition.
//! - [`TxnCoordinator`] (this file): the thin shell. It creates `__transaction_state` on
//!   first use, routes an id to its partition (`abs(javaHashCode(id)) % partitions`, as
//!   Kafka's `partitionFor`), runs a decision on the partition's latest state through the
//!   runtime (which answers only once the written state is replicated), and asks
//!   [`markers`] to write the markers of prepared transactions.
//! - [`markers`]: the marker sender and the periodic work (resume after failover, expiry).

pub mod markers;
pub mod metadata;
pub mod record;
pub mod shard;
pub mod transitions;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;

use crate::clock::now_ms;
use crate::config::Config;
pub use crate::coordinator::internal_topic::CoordinatorAddress;
use crate::coordinator::internal_topic::{self, InternalTopic, partition_for};
use crate::coordinator::txn::metadata::TransactionMetadata;
use crate::coordinator::txn::shard::{TxnShard, record_of};
use crate::coordinator::txn::transitions::{
    EndOutcome, InitOutcome, InitRequest, Rules, TopicPartition,
};
use crate::coordinator::{CoordinatorRuntime, ProducerIdManager};
use crate::replica::ReplicaManager;
use crate::topics::TopicCreator;

/// The internal topic of transaction states.
pub const TOPIC: &str = internal_topic::TRANSACTION_STATE;

/// How long a write waits to be replicated before `REQUEST_TIMED_OUT` (Kafka's
/// `request.timeout.ms` for coordinator appends).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The node settings of the coordinator.
#[derive(Debug, Clone, Copy)]
pub struct TxnSettings {
    /// `transaction.state.log.num.partitions`.
    pub partitions: i32,
    /// `transaction.state.log.replication.factor` (default 3; FindCoordinator and
    /// InitProducerId are `COORDINATOR_NOT_AVAILABLE` until that many brokers are live).
    pub replication_factor: i16,
    /// `transaction.state.log.min.isr`.
    pub min_isr: i32,
    /// The decisions' rules.
    pub rules: Rules,
}

impl TxnSettings {
    /// The settings of `config`.
    pub fn from_config(config: &Config) -> TxnSettings {
        TxnSettings {
            partitions: config.int("transaction.state.log.num.partitions") as i32,
            replication_factor: config
                .int("transaction.state.log.replication.factor")
                .clamp(1, i64::from(i16::MAX)) as i16,
            min_isr: config.int("transaction.state.log.min.isr") as i32,
            rules: Rules {
                max_timeout_ms: config.int("transaction.max.timeout.ms") as i32,
                tv2: config.transaction_version >= 2,
                canaries: config.canaries,
            },
        }
    }
}

/// What a write's decision wants answered.
enum Reply<T> {
    Done(T),
    NeedProducerId,
    Fenced,
}

/// The transaction coordinator of one broker.
pub struct TxnCoordinator {
    runtime: Arc<CoordinatorRuntime<TxnShard>>,
    replicas: Arc<ReplicaManager>,
    topics: TopicCreator,
    producer_ids: Arc<ProducerIdManager>,
    settings: TxnSettings,
    markers: markers::MarkerSender,
}

impl std::fmt::Debug for TxnCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnCoordinator")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl TxnCoordinator {
    /// A coordinator over `replicas`; nothing runs until [`TxnCoordinator::run`].
    pub fn new(
        replicas: Arc<ReplicaManager>,
        topics: TopicCreator,
        producer_ids: Arc<ProducerIdManager>,
        settings: TxnSettings,
    ) -> TxnCoordinator {
        let runtime = Arc::new(CoordinatorRuntime::new(
            Arc::clone(&replicas),
            TOPIC,
            |_| TxnShard::default(),
        ));
        TxnCoordinator {
            markers: markers::MarkerSender::new(Arc::clone(&replicas)),
            runtime,
            replicas,
            topics,
            producer_ids,
            settings,
        }
    }

    /// The runtime and the marker sender's periodic work; returns when the node stops.
    pub async fn run(self: Arc<Self>) {
        let runtime = tokio::spawn(Arc::clone(&self.runtime).run());
        markers::run(Arc::clone(&self)).await;
        runtime.abort();
    }

    /// The settings.
    pub fn settings(&self) -> &TxnSettings {
        &self.settings
    }

    /// The partition of `transactional_id`.
    pub fn partition_of(&self, transactional_id: &str) -> i32 {
        partition_for(transactional_id, self.settings.partitions)
    }

    /// Creates `__transaction_state` when it does not exist yet, as Kafka's brokers do on
    /// the first FindCoordinator or InitProducerId with a transactional id.
    ///
    /// # Errors
    /// `COORDINATOR_NOT_AVAILABLE` while the topic does not exist.
    pub async fn ensure_topic(&self) -> Result<(), ResponseError> {
        let configs = [
            ("min.insync.replicas", self.settings.min_isr.to_string()),
            ("segment.bytes", "104857600".to_owned()),
            ("unclean.leader.election.enable", "false".to_owned()),
            ("compression.type", "uncompressed".to_owned()),
        ];
        let topic = InternalTopic {
            name: TOPIC,
            partitions: self.settings.partitions,
            replication_factor: self.settings.replication_factor,
            configs: &configs,
        };
        internal_topic::ensure(&self.replicas, &self.topics, &topic).await
    }

    /// The coordinator of `transactional_id`: the leader of its partition.
    ///
    /// # Errors
    /// `COORDINATOR_NOT_AVAILABLE` while the topic is created or the partition has no
    /// leader.
    pub async fn find(&self, transactional_id: &str) -> Result<CoordinatorAddress, ResponseError> {
        self.ensure_topic().await?;
        internal_topic::coordinator_of(&self.replicas, TOPIC, self.partition_of(transactional_id))
    }

    /// InitProducerId with a transactional id: the producer id and epoch to use.
    ///
    /// # Errors
    /// The decision's errors ([`transitions::init_producer_id`]), `CONCURRENT_TRANSACTIONS`
    /// after fencing an open transaction, and the runtime's (`NOT_COORDINATOR`, ...).
    pub async fn init_producer_id(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ResponseError> {
        record::check_transactional_id(transactional_id)?;
        if !self.replicas.image().topics.contains_key(TOPIC) {
            self.ensure_topic().await?;
        }
        let index = self.partition_of(transactional_id);
        let mut fresh = None;
        for _ in 0..3 {
            let request = InitRequest {
                timeout_ms,
                expected,
                fresh_producer_id: fresh,
                now_ms: now_ms(),
            };
            let rules = self.settings.rules;
            let reply = self
                .runtime
                .write(index, WRITE_TIMEOUT, |shard| {
                    let current = shard.get(transactional_id);
                    Ok(
                        match transitions::init_producer_id(current, &request, &rules)? {
                            InitOutcome::Write(next) => (
                                vec![record_of(transactional_id, &next)],
                                Reply::Done((next.producer_id, next.producer_epoch)),
                            ),
                            InitOutcome::Answer(id, epoch) => (vec![], Reply::Done((id, epoch))),
                            InitOutcome::NeedProducerId => (vec![], Reply::NeedProducerId),
                            InitOutcome::FenceAndAbort(next) => {
                                (vec![record_of(transactional_id, &next)], Reply::Fenced)
                            }
                        },
                    )
                })
                .await
                .map_err(|error| internal_topic::append_error(TOPIC, error))?;
            match reply {
                Reply::Done(answer) => return Ok(answer),
                Reply::Fenced => {
                    self.markers.wake();
                    return Err(ResponseError::ConcurrentTransactions);
                }
                Reply::NeedProducerId => {
                    fresh = Some(self.producer_ids.next_producer_id().await?.0);
                }
            }
        }
        Err(ResponseError::ConcurrentTransactions)
    }

    /// Runs `decide` on the latest state of `transactional_id` and writes the state it
    /// returns (if any), answering once that is replicated.
    async fn transit<T>(
        &self,
        transactional_id: &str,
        decide: impl FnOnce(
            Option<&TransactionMetadata>,
        ) -> Result<(Option<TransactionMetadata>, T), ResponseError>,
    ) -> Result<T, ResponseError> {
        record::check_transactional_id(transactional_id)?;
        let index = self.partition_of(transactional_id);
        self.runtime
            .write(index, WRITE_TIMEOUT, |shard| {
                let (next, answer) = decide(shard.get(transactional_id))?;
                let records = next
                    .iter()
                    .map(|next| record_of(transactional_id, next))
                    .collect();
                Ok((records, answer))
            })
            .await
            .map_err(|error| internal_topic::append_error(TOPIC, error))
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition).
    ///
    /// # Errors
    /// As [`transitions::add_partitions`], and the runtime's.
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Result<(), ResponseError> {
        let now = now_ms();
        self.transit(transactional_id, |current| {
            let next = transitions::add_partitions(current, producer_id, epoch, partitions, now)?;
            Ok((next, ()))
        })
        .await
    }

    /// AddPartitionsToTxn v4+ `verify_only`: which partitions are in the open transaction.
    ///
    /// # Errors
    /// As [`transitions::verify_partitions`], and the runtime's.
    pub async fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        self.transit(transactional_id, |current| {
            Ok((
                None,
                transitions::verify_partitions(current, producer_id, epoch, partitions)?,
            ))
        })
        .await
    }

    /// EndTxn: the producer id and epoch to answer (TV2 bumps the epoch). The markers are
    /// written after the answer.
    ///
    /// # Errors
    /// As [`transitions::end_txn`], and the runtime's.
    pub async fn end_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        version: i16,
    ) -> Result<(i64, i16), ResponseError> {
        let now = now_ms();
        let bump = self.settings.rules.tv2 && version >= 5;
        let mut fresh = None;
        for _ in 0..3 {
            let decided = transitions::end_txn;
            let answer = self
                .transit(transactional_id, |current| {
                    match decided(current, producer_id, epoch, commit, bump, now, fresh)? {
                        EndOutcome::Write(next) => {
                            // A rotation answers the new producer id at epoch 0 (KIP-890).
                            let answer = if next.next_producer_id == -1 {
                                (next.producer_id, next.producer_epoch)
                            } else {
                                (next.next_producer_id, 0)
                            };
                            Ok((Some(next), Some(answer)))
                        }
                        EndOutcome::Answer(id, epoch) => Ok((None, Some((id, epoch)))),
                        EndOutcome::NeedProducerId => Ok((None, None)),
                    }
                })
                .await?;
            match answer {
                Some(answer) => {
                    self.markers.wake();
                    return Ok(answer);
                }
                None => fresh = Some(self.producer_ids.next_producer_id().await?.0),
            }
        }
        Err(ResponseError::ConcurrentTransactions)
    }

    /// The committed state of `transactional_id`.
    ///
    /// # Errors
    /// `NOT_COORDINATOR` / `COORDINATOR_LOAD_IN_PROGRESS`.
    pub fn describe(
        &self,
        transactional_id: &str,
    ) -> Result<Option<TransactionMetadata>, ResponseError> {
        self.runtime
            .read(self.partition_of(transactional_id), |shard| {
                shard.get(transactional_id).cloned()
            })
    }

    /// Every id of every partition this node has loaded, with its committed state.
    pub fn list(&self) -> Vec<(String, TransactionMetadata)> {
        (0..self.settings.partitions)
            .filter_map(|index| {
                self.runtime
                    .read(index, |shard| {
                        shard
                            .iter()
                            .map(|(id, meta)| (id.to_owned(), meta.clone()))
                            .collect::<Vec<_>>()
                    })
                    .ok()
            })
            .flatten()
            .collect()
    }
}
