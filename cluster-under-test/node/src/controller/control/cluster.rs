//! The cluster side of the active controller (Kafka's `ClusterControlManager` and
//! `BrokerHeartbeatManager`): broker registration (KIP-966's clean-shutdown check), heartbeats,
//! session expiry and fencing, unfencing once caught up, controlled shutdown.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse,
};

use crate::controller::election::{
    build_change, build_change_after_unclean_shutdown, isr_without_fenced,
};
use crate::metadata::{
    BrokerEpoch, BrokerId, MetadataImage, MetadataRecord, PartitionChangeRecord,
};

use super::{Decision, QuorumController};

impl QuorumController {
    /// BrokerRegistration. `next_offset` is the metadata log's next write offset, which becomes
    /// the broker epoch.
    ///
    /// A new incarnation of a known broker replaces the old one, which leaves ISRs and
    /// leaderships as on fencing. KIP-966 (`ClusterControlManager.registerBroker`,
    /// `ReplicationControlManager.handleBrokerShutdown`): the shutdown was clean only if
    /// `PreviousBrokerEpoch` equals the epoch the broker was registered with (the broker wrote
    /// it to `.kafka_cleanshutdown`). After an unclean one, with ELR enabled, the broker also
    /// leaves every ELR and leaves the ISR even as its last member, since it may have lost
    /// records it acknowledged; with ELR off it is handled as a fencing, where the last ISR
    /// member stays (the ISR is never empty without ELR), exactly as Kafka 4 does.
    pub fn register_broker(
        &mut self,
        request: &BrokerRegistrationRequest,
        next_offset: u64,
        now_ms: u64,
    ) -> Decision<BrokerRegistrationResponse> {
        let broker_id = BrokerId(request.broker_id.0);
        let fail = |error: ResponseError| Decision {
            records: Vec::new(),
            response: BrokerRegistrationResponse::default()
                .with_error_code(error.code())
                .with_broker_epoch(-1),
        };
        if request.cluster_id.as_str() != self.config.cluster_id {
            return fail(ResponseError::InconsistentClusterId);
        }
        if let Some(existing) = self.image.brokers.get(&broker_id) {
            if existing.incarnation_id == request.incarnation_id {
                // A retry of the same registration.
                return Decision {
                    records: Vec::new(),
                    response: BrokerRegistrationResponse::default()
                        .with_broker_epoch(existing.broker_epoch.0),
                };
            }
            if !existing.fenced && self.session_alive(broker_id, now_ms) {
                return fail(ResponseError::DuplicateBrokerRegistration);
            }
        }
        let Some(listener) = request.listeners.first() else {
            return fail(ResponseError::InvalidRegistration);
        };
        let broker_epoch = BrokerEpoch(next_offset as i64);
        let mut records = vec![MetadataRecord::RegisterBroker {
            broker_id,
            broker_epoch,
            incarnation_id: request.incarnation_id,
            host: listener.host.to_string(),
            port: listener.port,
            rack: request.rack.as_ref().map(ToString::to_string),
        }];
        if let Some(registered_epoch) = self.image.brokers.get(&broker_id).map(|b| b.broker_epoch) {
            let previous_broker_epoch = request.previous_broker_epoch;
            let clean = previous_broker_epoch == registered_epoch.0;
            let mut scratch = self.image.clone();
            scratch.apply(&records[0]);
            let changes = if clean || !self.config.elr_enabled {
                self.fence_changes(&scratch, broker_id)
            } else {
                self.unclean_shutdown_changes(&scratch, broker_id)
            };
            if clean {
                tracing::info!(
                    %broker_id,
                    previous_broker_epoch,
                    new_broker_epoch = broker_epoch.0,
                    partitions = changes.len(),
                    "broker re-registered after a clean shutdown"
                );
            } else {
                tracing::info!(
                    %broker_id,
                    previous_broker_epoch,
                    registered_broker_epoch = registered_epoch.0,
                    new_broker_epoch = broker_epoch.0,
                    partitions = changes.len(),
                    elr_enabled = self.config.elr_enabled,
                    "broker re-registered after an unclean shutdown; removed from ISRs{}",
                    if self.config.elr_enabled { " and ELRs" } else { " (last members stay)" }
                );
            }
            records.extend(changes);
        }
        self.last_contact_ms.insert(broker_id, now_ms);
        self.replay(&records);
        Decision {
            records,
            response: BrokerRegistrationResponse::default().with_broker_epoch(broker_epoch.0),
        }
    }

    /// BrokerHeartbeat: refreshes the session; unfences a fenced broker that has replayed the
    /// metadata up to its own registration (and elects it where partitions are leaderless);
    /// fences one that asks to be fenced.
    pub fn heartbeat(
        &mut self,
        request: &BrokerHeartbeatRequest,
        now_ms: u64,
    ) -> Decision<BrokerHeartbeatResponse> {
        let broker_id = BrokerId(request.broker_id.0);
        let Some(registration) = self.image.brokers.get(&broker_id).cloned() else {
            return Decision {
                records: Vec::new(),
                response: BrokerHeartbeatResponse::default()
                    .with_error_code(ResponseError::BrokerIdNotRegistered.code())
                    .with_is_fenced(true),
            };
        };
        if registration.broker_epoch.0 != request.broker_epoch {
            return Decision {
                records: Vec::new(),
                response: BrokerHeartbeatResponse::default()
                    .with_error_code(ResponseError::StaleBrokerEpoch.code())
                    .with_is_fenced(true),
            };
        }
        self.last_contact_ms.insert(broker_id, now_ms);
        let caught_up = request.current_metadata_offset >= registration.broker_epoch.0;
        let mut records = Vec::new();
        // Controlled shutdown is handled like a requested fence: leaderships move and the
        // broker leaves ISRs (except as the last member standing); it is never unfenced
        // while it asks to shut down, and is told to shut down once fenced.
        let want_fence = request.want_fence || request.want_shut_down;
        if registration.fenced && caught_up && !want_fence {
            let unfence = MetadataRecord::UnfenceBroker {
                broker_id,
                broker_epoch: registration.broker_epoch,
            };
            let mut scratch = self.image.clone();
            scratch.apply(&unfence);
            records.push(unfence);
            records.extend(self.unfence_changes(&scratch, broker_id));
        } else if !registration.fenced && want_fence {
            records.push(MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch: registration.broker_epoch,
            });
            let mut scratch = self.image.clone();
            scratch.apply(&records[0]);
            records.extend(self.fence_changes(&scratch, broker_id));
        }
        self.replay(&records);
        let fenced = !self.image.is_unfenced(broker_id);
        Decision {
            records,
            response: BrokerHeartbeatResponse::default()
                .with_is_caught_up(caught_up)
                .with_is_fenced(fenced)
                .with_should_shut_down(request.want_shut_down && fenced),
        }
    }

    /// Fences every unfenced broker whose session expired at `now_ms`, moving its leaderships
    /// and removing it from ISRs.
    pub fn expire_sessions(&mut self, now_ms: u64) -> Vec<MetadataRecord> {
        let expired: Vec<(BrokerId, BrokerEpoch)> = self
            .image
            .brokers
            .values()
            .filter(|broker| !broker.fenced && !self.session_alive(broker.broker_id, now_ms))
            .map(|broker| (broker.broker_id, broker.broker_epoch))
            .collect();
        let mut records = Vec::new();
        for (broker_id, broker_epoch) in expired {
            tracing::info!(%broker_id, "broker session expired; fencing");
            let fence = MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            };
            let mut scratch = self.image.clone();
            scratch.apply(&fence);
            let changes = self.fence_changes(&scratch, broker_id);
            let mut batch = vec![fence];
            batch.extend(changes);
            self.replay(&batch);
            records.extend(batch);
        }
        records
    }

    /// Partition changes after `broker` is fenced (in `image`, already marked fenced).
    fn fence_changes(&self, image: &MetadataImage, broker: BrokerId) -> Vec<MetadataRecord> {
        let acceptable = |b: BrokerId| image.is_unfenced(b);
        let mut records = Vec::new();
        for topic in image.topics.values() {
            let policy = self.policy(&topic.configs);
            for (index, state) in &topic.partitions {
                if !state.isr.contains(&broker) && state.leader != broker {
                    continue;
                }
                let target = isr_without_fenced(state, broker, policy.elr_enabled);
                if let Some(change) = build_change(state, &target, &acceptable, policy) {
                    records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                        topic_id: topic.id,
                        partition: *index,
                        ..change
                    }));
                }
            }
        }
        records
    }

    /// Partition changes after `broker` re-registered following an unclean shutdown, with ELR
    /// enabled (`handleBrokerUncleanShutdown`; `image` already holds the new, fenced
    /// registration): it leaves every ISR, even as the last member, and every ELR; where it
    /// led, a leader is elected among the others (clean candidates, ELR when the ISR is empty,
    /// unclean only if enabled).
    fn unclean_shutdown_changes(
        &self,
        image: &MetadataImage,
        broker: BrokerId,
    ) -> Vec<MetadataRecord> {
        let acceptable = |b: BrokerId| image.is_unfenced(b);
        let mut records = Vec::new();
        for topic in image.topics.values() {
            let policy = self.policy(&topic.configs);
            for (index, state) in &topic.partitions {
                if !state.isr.contains(&broker)
                    && !state.elr.contains(&broker)
                    && state.leader != broker
                {
                    continue;
                }
                let target: Vec<BrokerId> =
                    state.isr.iter().copied().filter(|b| *b != broker).collect();
                if let Some(change) = build_change_after_unclean_shutdown(
                    state,
                    &target,
                    &acceptable,
                    policy,
                    &[broker],
                ) {
                    records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                        topic_id: topic.id,
                        partition: *index,
                        ..change
                    }));
                }
            }
        }
        records
    }

    /// Elections for leaderless partitions `broker` could lead, after it is unfenced.
    fn unfence_changes(&self, image: &MetadataImage, broker: BrokerId) -> Vec<MetadataRecord> {
        let acceptable = |b: BrokerId| image.is_unfenced(b);
        let mut records = Vec::new();
        for topic in image.topics.values() {
            let policy = self.policy(&topic.configs);
            for (index, state) in &topic.partitions {
                if state.leader.is_some() || !state.replicas.contains(&broker) {
                    continue;
                }
                if let Some(change) = build_change(state, &state.isr, &acceptable, policy) {
                    records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                        topic_id: topic.id,
                        partition: *index,
                        ..change
                    }));
                }
            }
        }
        records
    }
}
