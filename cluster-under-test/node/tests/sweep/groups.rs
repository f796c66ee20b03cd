//! The group APIs' part of the version sweep: a group's FindCoordinator (this node, once
//! `__consumer_offsets` exists), OffsetCommit of a simple group at every version (accepted)
//! and OffsetFetch at every version seeing the offset committed before the sweep; JoinGroup
//! of a new member at every version (its own group, no initial delay: v0-v3 answered with
//! generation 1 and the member as leader, v4+ with MEMBER_ID_REQUIRED and an id), SyncGroup
//! and Heartbeat of a member joined before the sweep (its assignment; no error), LeaveGroup of
//! an unknown member (UNKNOWN_MEMBER_ID, per member from v3); DescribeGroups of that group
//! (Stable, its member, v5 the last rebalance's cause `join` in logjam's tag) and ListGroups
//! listing it (v4+ through a states filter); DeleteGroups of a simple group per version
//! (deleted), of `SYNCED` (NON_EMPTY_GROUP) and of a group never seen (GROUP_ID_NOT_FOUND);
//! OffsetDelete of the simple group's offset (deleted); ConsumerGroupHeartbeat of a new KIP-848
//! member in its own group per version (epoch 1, the topic's partition assigned) and
//! ConsumerGroupDescribe of that group (Stable at epoch 1, its member and assignment).

use std::sync::OnceLock;

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    OffsetCommitRequest, OffsetFetchRequest, RequestKind, ResponseKind, SyncGroupRequest,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, DeleteGroupsRequest,
    DescribeGroupsRequest, ListGroupsRequest, OffsetDeleteRequest, offset_delete_request,
};

use super::{Connection, Context, TOPIC, name, text};

/// The sweep's group.
pub const GROUP: &str = "sweep-group";
/// The offset every commit of the sweep writes (and the one committed before it).
const OFFSET: i64 = 77;

/// The group SyncGroup and Heartbeat are swept on, and its member (joined by `prepare`).
const SYNCED: &str = "sweep-synced";
static MEMBER: OnceLock<String> = OnceLock::new();
const ASSIGNMENT: &[u8] = b"sweep-assignment";

fn join_request(group: &str, member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_session_timeout_ms(60_000)
        .with_rebalance_timeout_ms(60_000)
        .with_member_id(text(member_id))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(bytes::Bytes::from_static(b"sub")),
        ])
}

/// Waits for the group's coordinator (creating `__consumer_offsets`) and commits `OFFSET`
/// once, so every OffsetFetch version has something to see; joins `SYNCED`'s member.
pub fn prepare(client: &mut Connection) {
    commit_first(client);
    for version in 0..=2 {
        match client.call(ApiKey::OffsetCommit, 8, &commit_to(&deleted(version))) {
            Ok(ResponseKind::OffsetCommit(r)) if r.topics[0].partitions[0].error_code == 0 => {}
            other => panic!("OffsetCommit to {}: {other:?}", deleted(version)),
        }
    }
    let joined = client.call(
        ApiKey::JoinGroup,
        3,
        &RequestKind::JoinGroup(join_request(SYNCED, "")),
    );
    match joined {
        Ok(ResponseKind::JoinGroup(r)) if r.error_code == 0 && r.generation_id == 1 => {
            let _ = MEMBER.set(r.member_id.to_string());
        }
        other => panic!("JoinGroup v3 of {SYNCED}: {other:?}"),
    }
}

fn member() -> String {
    MEMBER.get().cloned().unwrap_or_default()
}

fn commit_first(client: &mut Connection) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let found = client.call(
            ApiKey::FindCoordinator,
            3,
            &RequestKind::FindCoordinator(
                FindCoordinatorRequest::default()
                    .with_key(text(GROUP))
                    .with_key_type(0),
            ),
        );
        let code = match found {
            Ok(ResponseKind::FindCoordinator(r)) => r.error_code,
            other => panic!("FindCoordinator: {other:?}"),
        };
        let code = if code == 0 {
            match client.call(ApiKey::OffsetCommit, 8, &commit(8)) {
                Ok(ResponseKind::OffsetCommit(r)) => r.topics[0].partitions[0].error_code,
                other => panic!("OffsetCommit: {other:?}"),
            }
        } else {
            code
        };
        match code {
            0 => return,
            14..=16 if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            code => panic!("preparing the group: error {code}"),
        }
    }
}

/// The simple group DeleteGroups at `version` deletes.
fn deleted(version: i16) -> String {
    format!("sweep-delete-v{version}")
}

fn commit(_version: i16) -> RequestKind {
    commit_to(GROUP)
}

fn commit_to(group: &str) -> RequestKind {
    RequestKind::OffsetCommit(
        OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_retention_time_ms(-1)
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(name(TOPIC))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(OFFSET)
                            .with_committed_leader_epoch(-1),
                    ]),
            ]),
    )
}

/// A request of a group API at `version`.
pub fn request_for(key: ApiKey, version: i16, _context: &Context) -> Option<RequestKind> {
    Some(match key {
        ApiKey::OffsetCommit => commit(version),
        ApiKey::DeleteGroups => {
            RequestKind::DeleteGroups(DeleteGroupsRequest::default().with_groups_names(vec![
                GroupId(text(&deleted(version))),
                GroupId(text(SYNCED)),
                GroupId(text("sweep-never-seen")),
            ]))
        }
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(
            OffsetDeleteRequest::default()
                .with_group_id(GroupId(text(GROUP)))
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(name(TOPIC))
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default()
                                .with_partition_index(0),
                        ]),
                ]),
        ),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(text(SYNCED))]),
        ),
        ApiKey::ListGroups => RequestKind::ListGroups(
            ListGroupsRequest::default()
                .with_states_filter(if version >= 4 {
                    vec![text("stable")]
                } else {
                    vec![]
                })
                .with_types_filter(if version >= 5 {
                    vec![text("classic")]
                } else {
                    vec![]
                }),
        ),
        ApiKey::JoinGroup => {
            RequestKind::JoinGroup(join_request(&format!("sweep-join-v{version}"), ""))
        }
        ApiKey::SyncGroup => RequestKind::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(GroupId(text(SYNCED)))
                .with_generation_id(1)
                .with_member_id(text(&member()))
                .with_protocol_type(Some(text("consumer")))
                .with_protocol_name(Some(text("range")))
                .with_assignments(vec![
                    SyncGroupRequestAssignment::default()
                        .with_member_id(text(&member()))
                        .with_assignment(bytes::Bytes::from_static(ASSIGNMENT)),
                ]),
        ),
        ApiKey::Heartbeat => RequestKind::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(GroupId(text(SYNCED)))
                .with_generation_id(1)
                .with_member_id(text(&member())),
        ),
        ApiKey::LeaveGroup if version < 3 => RequestKind::LeaveGroup(
            LeaveGroupRequest::default()
                .with_group_id(GroupId(text(SYNCED)))
                .with_member_id(text("sweep-nobody")),
        ),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(
            LeaveGroupRequest::default()
                .with_group_id(GroupId(text(SYNCED)))
                .with_members(vec![
                    MemberIdentity::default().with_member_id(text("sweep-nobody")),
                ]),
        ),
        ApiKey::ConsumerGroupHeartbeat => {
            RequestKind::ConsumerGroupHeartbeat(consumer_join(version))
        }
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(text(&format!("sweep-cg-v{version}")))]),
        ),
        ApiKey::OffsetFetch if version >= 8 => {
            RequestKind::OffsetFetch(OffsetFetchRequest::default().with_groups(vec![
                OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(text(GROUP)))
                    .with_topics(Some(vec![
                        OffsetFetchRequestTopics::default()
                            .with_name(name(TOPIC))
                            .with_partition_indexes(vec![0]),
                    ])),
            ]))
        }
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(
            OffsetFetchRequest::default()
                .with_group_id(GroupId(text(GROUP)))
                .with_topics(Some(vec![
                    OffsetFetchRequestTopic::default()
                        .with_name(name(TOPIC))
                        .with_partition_indexes(vec![0]),
                ])),
        ),
        _ => return None,
    })
}

/// A KIP-848 member joining its own group (`sweep-cg-v{version}`) subscribed to the sweep's
/// topic: v0 lets the coordinator name it, v1 (KIP-1082) names itself.
fn consumer_join(version: i16) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(&format!("sweep-cg-v{version}"))))
        .with_member_id(if version >= 1 {
            text(&uuid::Uuid::new_v4().to_string())
        } else {
            text("")
        })
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(60_000)
        .with_subscribed_topic_names(Some(vec![name(TOPIC)]))
        .with_topic_partitions(Some(vec![]))
}

fn check_join(version: i16, r: &kafka_protocol::messages::JoinGroupResponse) -> Result<(), String> {
    let fine = if version >= 4 {
        r.error_code == 79 && !r.member_id.is_empty()
    } else {
        r.error_code == 0
            && r.generation_id == 1
            && !r.member_id.is_empty()
            && r.leader == r.member_id
            && r.members.len() == 1
            && r.protocol_name.as_ref().map(|p| p.as_str()) == Some("range")
    };
    if fine { Ok(()) } else { Err(format!("{r:?}")) }
}

/// Checks a group API's answer at `version`; `None` for other APIs.
pub fn check(version: i16, response: &ResponseKind) -> Option<Result<(), String>> {
    Some(match response {
        ResponseKind::OffsetCommit(r) => {
            match r.topics.first().and_then(|t| t.partitions.first()) {
                Some(p) if p.partition_index == 0 && p.error_code == 0 => Ok(()),
                _ => Err(format!("{r:?}")),
            }
        }
        ResponseKind::OffsetFetch(r) if version >= 8 => {
            match r.groups.first().and_then(|g| {
                (g.error_code == 0 && g.group_id.as_str() == GROUP)
                    .then(|| g.topics.first().and_then(|t| t.partitions.first()))
                    .flatten()
            }) {
                Some(p) if p.committed_offset == OFFSET && p.error_code == 0 => Ok(()),
                _ => Err(format!("{r:?}")),
            }
        }
        ResponseKind::OffsetFetch(r) => match r.topics.first().and_then(|t| t.partitions.first()) {
            Some(p) if r.error_code == 0 && p.committed_offset == OFFSET && p.error_code == 0 => {
                Ok(())
            }
            _ => Err(format!("{r:?}")),
        },
        ResponseKind::JoinGroup(r) => check_join(version, r),
        ResponseKind::DeleteGroups(r) => {
            let codes: Vec<i16> = r.results.iter().map(|g| g.error_code).collect();
            if codes == [0, 68, 69] {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
        ResponseKind::OffsetDelete(r) => {
            match r.topics.first().and_then(|t| t.partitions.first()) {
                Some(p) if r.error_code == 0 && p.error_code == 0 => Ok(()),
                _ => Err(format!("{r:?}")),
            }
        }
        ResponseKind::DescribeGroups(r) => {
            let fine = r.groups.len() == 1 && {
                let g = &r.groups[0];
                g.error_code == 0
                    && g.group_state.as_str() == "Stable"
                    && g.protocol_data.as_str() == "range"
                    && g.members.len() == 1
                    && g.members[0].member_id.as_str() == member()
                    && &g.members[0].member_assignment[..] == ASSIGNMENT
                    && (version < 5
                        || g.unknown_tagged_fields.get(&10_000).map(|b| &b[..])
                            == Some(&b"join"[..]))
            };
            if fine { Ok(()) } else { Err(format!("{r:?}")) }
        }
        ResponseKind::ListGroups(r) => {
            // sweep-join-v0 awaits its sync (CompletingRebalance): the states filter (v4+)
            // leaves it out.
            let listed = |id: &str| r.groups.iter().any(|g| g.group_id.as_str() == id);
            if r.error_code == 0 && listed(SYNCED) && listed("sweep-join-v0") == (version < 4) {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        }
        ResponseKind::SyncGroup(r) if r.error_code == 0 && &r.assignment[..] == ASSIGNMENT => {
            Ok(())
        }
        ResponseKind::SyncGroup(r) => Err(format!("{r:?}")),
        ResponseKind::Heartbeat(r) if r.error_code == 0 => Ok(()),
        ResponseKind::Heartbeat(r) => Err(format!("{r:?}")),
        ResponseKind::LeaveGroup(r) if version < 3 && r.error_code == 25 => Ok(()),
        ResponseKind::LeaveGroup(r)
            if version >= 3
                && r.error_code == 0
                && r.members.len() == 1
                && r.members[0].error_code == 25 =>
        {
            Ok(())
        }
        ResponseKind::LeaveGroup(r) => Err(format!("{r:?}")),
        // The member joined at epoch 1 with the sweep topic's one partition.
        ResponseKind::ConsumerGroupHeartbeat(r)
            if r.error_code == 0
                && r.member_id.as_ref().is_some_and(|id| !id.is_empty())
                && r.member_epoch == 1
                && r.heartbeat_interval_ms > 0
                && r.assignment.as_ref().is_some_and(|a| {
                    a.topic_partitions.len() == 1 && a.topic_partitions[0].partitions == [0]
                }) =>
        {
            Ok(())
        }
        ResponseKind::ConsumerGroupHeartbeat(r) => Err(format!("{r:?}")),
        ResponseKind::ConsumerGroupDescribe(r) => {
            let fine = r.groups.len() == 1 && {
                let g = &r.groups[0];
                g.error_code == 0
                    && g.group_state.as_str() == "Stable"
                    && g.group_epoch == 1
                    && g.assignment_epoch == 1
                    && g.assignor_name.as_str() == "uniform"
                    && g.members.len() == 1
                    && g.members[0].member_epoch == 1
                    && g.members[0].assignment.topic_partitions.len() == 1
                    && g.members[0].assignment.topic_partitions[0]
                        .topic_name
                        .as_str()
                        == TOPIC
                    && (version < 1 || g.members[0].member_type == 1)
            };
            if fine { Ok(()) } else { Err(format!("{r:?}")) }
        }
        _ => return None,
    })
}
