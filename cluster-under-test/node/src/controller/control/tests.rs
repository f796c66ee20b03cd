//! Table tests of the active controller's decisions.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, AlterPartitionRequest, BrokerHeartbeatRequest,
    BrokerHeartbeatResponse, BrokerRegistrationRequest, CreateTopicsRequest,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::metadata::{
    BrokerId, LeaderRecoveryState, MetadataImage, MetadataRecord, PartitionState,
};

use super::*;

fn ids(list: &[i32]) -> Vec<BrokerId> {
    list.iter().copied().map(BrokerId).collect()
}

#[test]
fn placement_is_round_robin() {
    let placed = place_replicas(&ids(&[1, 2, 3]), 4, 2, 0);
    assert_eq!(
        placed,
        vec![ids(&[1, 2]), ids(&[2, 3]), ids(&[3, 1]), ids(&[1, 2])]
    );
}

#[test]
#[allow(clippy::type_complexity)]
fn alter_partition_validation_table() {
    let state = PartitionState {
        replicas: ids(&[1, 2, 3]),
        isr: ids(&[1, 2]),
        elr: vec![],
        last_known_elr: vec![],
        leader: BrokerId(1),
        leader_epoch: 4,
        partition_epoch: 9,
        leader_recovery_state: LeaderRecoveryState::Recovered,
    };
    let live = |b: BrokerId| b != BrokerId(3);
    let ok = Some(LeaderRecoveryState::Recovered);
    let table: &[(
        &str,
        i32,
        i32,
        i32,
        &[i32],
        Option<LeaderRecoveryState>,
        Result<bool, ResponseError>,
    )] = &[
        ("shrink accepted", 1, 4, 9, &[1], ok, Ok(true)),
        ("no-op accepted", 1, 4, 9, &[1, 2], ok, Ok(false)),
        (
            "not the leader",
            2,
            4,
            9,
            &[2],
            ok,
            Err(ResponseError::NotLeaderOrFollower),
        ),
        (
            "stale leader epoch",
            1,
            3,
            9,
            &[1],
            ok,
            Err(ResponseError::FencedLeaderEpoch),
        ),
        (
            "stale partition epoch",
            1,
            4,
            8,
            &[1],
            ok,
            Err(ResponseError::InvalidUpdateVersion),
        ),
        (
            "fenced broker cannot join",
            1,
            4,
            9,
            &[1, 2, 3],
            ok,
            Err(ResponseError::IneligibleReplica),
        ),
        (
            "non-replica cannot join",
            1,
            4,
            9,
            &[1, 7],
            ok,
            Err(ResponseError::IneligibleReplica),
        ),
        (
            "back to recovering refused",
            1,
            4,
            9,
            &[1],
            Some(LeaderRecoveryState::Recovering),
            Err(ResponseError::InvalidRequest),
        ),
    ];
    for (name, requester, leader_epoch, partition_epoch, isr, recovery, expected) in table {
        let outcome = validate_alter_partition(
            &state,
            BrokerId(*requester),
            *leader_epoch,
            *partition_epoch,
            &ids(isr),
            *recovery,
            &live,
        )
        .map(|change| change.is_some());
        assert_eq!(&outcome, expected, "{name}");
    }
}

pub(super) fn controller() -> QuorumController {
    controller_with(false, 1)
}

fn controller_with(elr_enabled: bool, min_insync_replicas: i32) -> QuorumController {
    QuorumController::new(
        MetadataImage::new(),
        ControllerConfig {
            cluster_id: "c".into(),
            session_timeout_ms: 9000,
            num_partitions: 1,
            default_replication_factor: 1,
            min_insync_replicas,
            unclean_leader_election_enable: false,
            elr_enabled,
        },
        0,
    )
}

pub(super) fn register(controller: &mut QuorumController, id: i32, offset: u64, now: u64) -> i64 {
    register_after(controller, id, -1, offset, now)
}

/// Registers a new incarnation of broker `id` claiming `previous` as its
/// `PreviousBrokerEpoch`.
fn register_after(
    controller: &mut QuorumController,
    id: i32,
    previous: i64,
    offset: u64,
    now: u64,
) -> i64 {
    use kafka_protocol::messages::broker_registration_request::Listener;
    let request = BrokerRegistrationRequest::default()
        .with_broker_id(kafka_protocol::messages::BrokerId(id))
        .with_cluster_id(StrBytes::from_static_str("c"))
        .with_previous_broker_epoch(previous)
        .with_incarnation_id(Uuid::new_v4())
        .with_listeners(vec![
            Listener::default()
                .with_host(StrBytes::from_static_str("h"))
                .with_port(9),
        ]);
    let decision = controller.register_broker(&request, offset, now);
    assert_eq!(decision.response.error_code, 0);
    decision.response.broker_epoch
}

pub(super) fn heartbeat(
    controller: &mut QuorumController,
    id: i32,
    epoch: i64,
    offset: i64,
    now: u64,
) -> BrokerHeartbeatResponse {
    let request = BrokerHeartbeatRequest::default()
        .with_broker_id(kafka_protocol::messages::BrokerId(id))
        .with_broker_epoch(epoch)
        .with_current_metadata_offset(offset);
    controller.heartbeat(&request, now).response
}

#[test]
fn broker_unfenced_when_caught_up_and_fenced_when_session_expires() {
    let mut c = controller();
    let e1 = register(&mut c, 1, 10, 0);
    let e2 = register(&mut c, 2, 11, 0);
    assert!(
        heartbeat(&mut c, 1, e1, 5, 100).is_fenced,
        "not caught up yet"
    );
    assert!(!heartbeat(&mut c, 1, e1, 10, 200).is_fenced);
    assert!(!heartbeat(&mut c, 2, e2, 11, 200).is_fenced);
    assert_eq!(
        heartbeat(&mut c, 1, e1 - 1, 10, 300).error_code,
        ResponseError::StaleBrokerEpoch.code()
    );
    // Topic with RF 2 led by one of them.
    let decision = c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
        kafka_protocol::messages::create_topics_request::CreatableTopic::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
            .with_num_partitions(2)
            .with_replication_factor(2),
    ]));
    assert_eq!(decision.response.topics[0].error_code, 0);
    let too_big = c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
        kafka_protocol::messages::create_topics_request::CreatableTopic::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("u")))
            .with_num_partitions(1)
            .with_replication_factor(3),
    ]));
    assert_eq!(
        too_big.response.topics[0].error_code,
        ResponseError::InvalidReplicationFactor.code()
    );
    // Broker 2 keeps heartbeating; broker 1 goes silent.
    assert!(c.expire_sessions(8000).is_empty());
    heartbeat(&mut c, 2, e2, 11, 8000);
    let records = c.expire_sessions(9300);
    assert!(matches!(
        records[0],
        MetadataRecord::FenceBroker {
            broker_id: BrokerId(1),
            ..
        }
    ));
    let topic = &c.image().topics["t"];
    for state in topic.partitions.values() {
        assert_eq!(state.leader, BrokerId(2));
        assert_eq!(state.isr, ids(&[2]));
    }
    // A second incarnation of broker 2 while its session lives is a duplicate.
    use kafka_protocol::messages::broker_registration_request::Listener;
    let request = BrokerRegistrationRequest::default()
        .with_broker_id(kafka_protocol::messages::BrokerId(2))
        .with_cluster_id(StrBytes::from_static_str("c"))
        .with_incarnation_id(Uuid::new_v4())
        .with_listeners(vec![Listener::default()]);
    assert_eq!(
        c.register_broker(&request, 50, 9400).response.error_code,
        ResponseError::DuplicateBrokerRegistration.code()
    );
    let elsewhere = request
        .clone()
        .with_broker_id(kafka_protocol::messages::BrokerId(9))
        .with_cluster_id(StrBytes::from_static_str("other"));
    assert_eq!(
        c.register_broker(&elsewhere, 51, 9400).response.error_code,
        ResponseError::InconsistentClusterId.code()
    );
}

#[test]
fn controlled_shutdown_moves_leadership_and_keeps_the_broker_fenced() {
    let mut c = controller();
    let e1 = register(&mut c, 1, 10, 0);
    let e2 = register(&mut c, 2, 11, 0);
    heartbeat(&mut c, 1, e1, 10, 100);
    heartbeat(&mut c, 2, e2, 11, 100);
    let decision = c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
        kafka_protocol::messages::create_topics_request::CreatableTopic::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
            .with_num_partitions(2)
            .with_replication_factor(2),
    ]));
    assert_eq!(decision.response.topics[0].error_code, 0);
    let shutdown = BrokerHeartbeatRequest::default()
        .with_broker_id(kafka_protocol::messages::BrokerId(1))
        .with_broker_epoch(e1)
        .with_current_metadata_offset(20)
        .with_want_shut_down(true);
    let response = c.heartbeat(&shutdown, 200).response;
    assert!(response.is_fenced && response.should_shut_down);
    for state in c.image().topics["t"].partitions.values() {
        assert_eq!(state.leader, BrokerId(2));
        assert_eq!(state.isr, ids(&[2]));
    }
    assert!(
        c.heartbeat(&shutdown, 300).response.is_fenced,
        "never unfenced while shutting down"
    );
}

/// The one partition of topic `t`.
fn only_partition(c: &QuorumController) -> PartitionState {
    c.image().topics["t"].partitions[&0].clone()
}

/// KIP-966's "last replica standing" on one RF 3 partition with min ISR 2: broker 3 is
/// fenced, broker 2 shuts down cleanly (controlled), then the leader, broker 1, is fenced
/// as the last ISR member and re-registers, claiming `previous` (its registered epoch for
/// a clean shutdown, -1 after a crash), and heartbeats until unfenced. Returns the state
/// then, and broker 2's registered epoch.
fn last_replica_standing(elr: bool, clean: bool) -> (QuorumController, i64) {
    let mut c = controller_with(elr, 2);
    let e1 = register(&mut c, 1, 10, 0);
    let e2 = register(&mut c, 2, 11, 0);
    let e3 = register(&mut c, 3, 12, 0);
    for (id, epoch) in [(1, e1), (2, e2), (3, e3)] {
        assert!(!heartbeat(&mut c, id, epoch, 20, 100).is_fenced);
    }
    let decision = c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
        kafka_protocol::messages::create_topics_request::CreatableTopic::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
            .with_num_partitions(1)
            .with_replication_factor(3),
    ]));
    assert_eq!(decision.response.topics[0].error_code, 0);
    assert_eq!(only_partition(&c).leader, BrokerId(1));
    heartbeat(&mut c, 1, e1, 30, 5000);
    heartbeat(&mut c, 2, e2, 30, 5000);
    c.expire_sessions(9500);
    assert_eq!(only_partition(&c).isr, ids(&[1, 2]));
    let shutdown = BrokerHeartbeatRequest::default()
        .with_broker_id(kafka_protocol::messages::BrokerId(2))
        .with_broker_epoch(e2)
        .with_current_metadata_offset(30)
        .with_want_shut_down(true);
    assert!(c.heartbeat(&shutdown, 9600).response.should_shut_down);
    heartbeat(&mut c, 1, e1, 30, 9700);
    let state = only_partition(&c);
    assert_eq!(state.isr, ids(&[1]));
    assert_eq!(state.elr, if elr { ids(&[2]) } else { vec![] });
    c.expire_sessions(19_000);
    let state = only_partition(&c);
    assert_eq!(state.leader, BrokerId::NONE);
    if elr {
        assert_eq!((state.isr, state.elr), (vec![], ids(&[2, 1])));
    } else {
        assert_eq!(state.isr, ids(&[1]), "without ELR the last member stays");
    }
    let previous = if clean { e1 } else { -1 };
    let new_e1 = register_after(&mut c, 1, previous, 100, 19_100);
    assert!(!heartbeat(&mut c, 1, new_e1, 100, 19_200).is_fenced);
    (c, e2)
}

#[test]
fn unclean_shutdown_with_elr_keeps_the_last_isr_member_from_leading() {
    let (mut c, e2) = last_replica_standing(true, false);
    let state = only_partition(&c);
    assert_eq!(
        state.leader,
        BrokerId::NONE,
        "the crashed broker is not elected"
    );
    assert_eq!(
        (state.isr, state.elr),
        (vec![], ids(&[2])),
        "it left the ELR"
    );
    // Broker 2 comes back from its clean shutdown: still an ELR member, it is elected.
    let new_e2 = register_after(&mut c, 2, e2, 200, 19_300);
    assert_eq!(
        only_partition(&c).elr,
        ids(&[2]),
        "a clean return keeps the ELR"
    );
    assert!(!heartbeat(&mut c, 2, new_e2, 200, 19_400).is_fenced);
    let state = only_partition(&c);
    assert_eq!((state.leader, state.isr), (BrokerId(2), ids(&[2])));
}

#[test]
fn clean_shutdown_with_elr_leaves_the_broker_electable() {
    let (c, _) = last_replica_standing(true, true);
    let state = only_partition(&c);
    assert_eq!((state.leader, state.isr), (BrokerId(1), ids(&[1])));
}

#[test]
fn without_elr_an_unclean_shutdown_is_handled_as_a_fencing() {
    // Kafka 4's `handleBrokerShutdown`: without ELR the ISR is never empty, so the last
    // member stays, crashed or not, and is elected again once unfenced.
    for clean in [false, true] {
        let (c, _) = last_replica_standing(false, clean);
        let state = only_partition(&c);
        assert_eq!(
            (state.leader, state.isr),
            (BrokerId(1), ids(&[1])),
            "clean: {clean}"
        );
    }
}

#[test]
fn unclean_reregistration_removes_the_broker_from_every_isr_and_moves_its_leaderships() {
    let mut c = controller_with(true, 1);
    let e1 = register(&mut c, 1, 10, 0);
    let e2 = register(&mut c, 2, 11, 0);
    for (id, epoch) in [(1, e1), (2, e2)] {
        heartbeat(&mut c, id, epoch, 20, 100);
    }
    c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
        kafka_protocol::messages::create_topics_request::CreatableTopic::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
            .with_num_partitions(2)
            .with_replication_factor(2),
    ]));
    let before: Vec<PartitionState> = c.image().topics["t"].partitions.values().cloned().collect();
    assert!(before.iter().all(|s| s.isr.len() == 2));
    assert!(before.iter().any(|s| s.leader == BrokerId(1)));
    // Broker 1 crashes and its session expires, so its next incarnation may register.
    heartbeat(&mut c, 2, e2, 20, 5000);
    let new_e1 = register_after(&mut c, 1, -1, 50, 9200);
    for (before, after) in before.iter().zip(c.image().topics["t"].partitions.values()) {
        assert_eq!(after.isr, ids(&[2]));
        assert_eq!(after.leader, BrokerId(2));
        let bumped = i32::from(before.leader == BrokerId(1));
        assert_eq!(after.leader_epoch, before.leader_epoch + bumped);
    }
    // Caught up, it is unfenced but leads nothing until the leader adds it back.
    assert!(!heartbeat(&mut c, 1, new_e1, 50, 9300).is_fenced);
    assert!(
        c.image().topics["t"]
            .partitions
            .values()
            .all(|s| s.leader == BrokerId(2) && s.isr == ids(&[2]))
    );
}

/// The leader of topic `t`'s partition 0 asks to set the ISR to `isr`.
fn alter_isr(c: &mut QuorumController, epoch: i64, isr: &[i32]) -> i16 {
    use kafka_protocol::messages::alter_partition_request::{PartitionData, TopicData};
    let state = only_partition(c);
    let request = AlterPartitionRequest::default()
        .with_broker_id(kafka_protocol::messages::BrokerId(state.leader.0))
        .with_broker_epoch(epoch)
        .with_topics(vec![
            TopicData::default()
                .with_topic_id(c.image().topics["t"].id)
                .with_partitions(vec![
                    PartitionData::default()
                        .with_leader_epoch(state.leader_epoch)
                        .with_partition_epoch(state.partition_epoch)
                        .with_new_isr(
                            isr.iter()
                                .map(|id| kafka_protocol::messages::BrokerId(*id))
                                .collect(),
                        ),
                ]),
        ]);
    c.alter_partition(&request).response.topics[0].partitions[0].error_code
}

/// Issue 17: the leader shrinking the ISR below min.insync.replicas through AlterPartition
/// moves the dropped members into the ELR (Kafka runs `maybePopulateTargetElr` on every
/// partition change), regaining min.insync.replicas clears it, and when the leader, the last
/// ISR member, is fenced an ELR member leads.
#[test]
fn alter_partition_below_min_isr_fills_the_elr_and_the_elr_leads_after_the_leader() {
    let mut c = controller_with(true, 2);
    let epochs: Vec<i64> = (1..=3).map(|id| register(&mut c, id, 10, 0)).collect();
    for (id, epoch) in (1..=3).zip(&epochs) {
        heartbeat(&mut c, id, *epoch, 20, 100);
    }
    c.create_topics(&CreateTopicsRequest::default().with_topics(vec![
        kafka_protocol::messages::create_topics_request::CreatableTopic::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
            .with_num_partitions(1)
            .with_replication_factor(3),
    ]));
    assert_eq!(only_partition(&c).leader, BrokerId(1));
    assert_eq!(alter_isr(&mut c, epochs[0], &[1, 2]), 0);
    let state = only_partition(&c);
    assert_eq!((state.isr, state.elr), (ids(&[1, 2]), vec![]), "at min ISR");
    assert_eq!(alter_isr(&mut c, epochs[0], &[1]), 0);
    let state = only_partition(&c);
    assert_eq!(
        (state.isr, state.elr),
        (ids(&[1]), ids(&[2])),
        "2 left below min ISR"
    );
    assert_eq!(alter_isr(&mut c, epochs[0], &[1, 3]), 0);
    let state = only_partition(&c);
    assert_eq!(
        (state.isr, state.elr),
        (ids(&[1, 3]), vec![]),
        "min ISR again"
    );
    assert_eq!(alter_isr(&mut c, epochs[0], &[1]), 0);
    assert_eq!(only_partition(&c).elr, ids(&[3]));
    // The leader's session expires; 2 and 3 keep theirs: the ELR member 3 leads.
    heartbeat(&mut c, 2, epochs[1], 20, 9000);
    heartbeat(&mut c, 3, epochs[2], 20, 9000);
    c.expire_sessions(9500);
    let state = only_partition(&c);
    assert_eq!((state.leader, state.isr), (BrokerId(3), ids(&[3])));
    assert_eq!(state.leader_recovery_state, LeaderRecoveryState::Recovered);
}

#[test]
fn producer_id_blocks_are_consecutive_and_need_a_current_epoch() {
    let mut c = controller();
    let epoch = register(&mut c, 1, 10, 0);
    let ask = |epoch: i64| {
        AllocateProducerIdsRequest::default()
            .with_broker_id(kafka_protocol::messages::BrokerId(1))
            .with_broker_epoch(epoch)
    };
    let first = c.allocate_producer_ids(&ask(epoch)).response;
    let second = c.allocate_producer_ids(&ask(epoch)).response;
    assert_eq!(
        (first.producer_id_start.0, first.producer_id_len),
        (0, 1000)
    );
    assert_eq!(second.producer_id_start.0, 1000);
    assert_eq!(
        c.allocate_producer_ids(&ask(epoch + 1)).response.error_code,
        ResponseError::StaleBrokerEpoch.code()
    );
}
