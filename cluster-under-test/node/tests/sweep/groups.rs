//! The group APIs' part of the version sweep: a group's FindCoordinator (this node, once
//! `__consumer_offsets` exists), OffsetCommit of a simple group at every version (accepted)
//! and OffsetFetch at every version seeing the offset committed before the sweep.

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, GroupId, OffsetCommitRequest, OffsetFetchRequest, RequestKind,
    ResponseKind,
};

use super::{Connection, Context, TOPIC, name, text};

/// The sweep's group.
pub const GROUP: &str = "sweep-group";
/// The offset every commit of the sweep writes (and the one committed before it).
const OFFSET: i64 = 77;

/// Waits for the group's coordinator (creating `__consumer_offsets`) and commits `OFFSET`
/// once, so every OffsetFetch version has something to see.
pub fn prepare(client: &mut Connection) {
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

fn commit(_version: i16) -> RequestKind {
    RequestKind::OffsetCommit(
        OffsetCommitRequest::default()
            .with_group_id(GroupId(text(GROUP)))
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
        _ => return None,
    })
}
