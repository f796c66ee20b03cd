//! Byte-level tests of the consumer-group record codec against Kafka's layouts.

use super::*;

fn topic(n: u8) -> Uuid {
    Uuid::from_bytes([n; 16])
}

fn all_records() -> Vec<ConsumerGroupRecord> {
    let assignment: Assignment = [
        (topic(1), BTreeSet::from([0, 2])),
        (topic(2), BTreeSet::from([1])),
    ]
    .into();
    vec![
        ConsumerGroupRecord::GroupEpoch {
            group_id: "g".into(),
            epoch: Some(7),
        },
        ConsumerGroupRecord::GroupEpoch {
            group_id: "g".into(),
            epoch: None,
        },
        ConsumerGroupRecord::SubscriptionMetadata {
            group_id: "g".into(),
            topics: Some(
                [(
                    "a".to_string(),
                    TopicMetadata {
                        id: topic(1),
                        name: "a".into(),
                        partitions: 3,
                    },
                )]
                .into(),
            ),
        },
        ConsumerGroupRecord::SubscriptionMetadata {
            group_id: "g".into(),
            topics: None,
        },
        ConsumerGroupRecord::MemberSubscription {
            group_id: "g".into(),
            member_id: "m".into(),
            subscription: Some(MemberSubscription {
                instance_id: Some("i".into()),
                rack_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["a".into(), "b".into()],
                subscribed_topic_regex: None,
                rebalance_timeout_ms: 300_000,
                server_assignor: Some("range".into()),
            }),
        },
        ConsumerGroupRecord::MemberSubscription {
            group_id: "g".into(),
            member_id: "m".into(),
            subscription: None,
        },
        ConsumerGroupRecord::TargetAssignmentEpoch {
            group_id: "g".into(),
            epoch: Some(3),
        },
        ConsumerGroupRecord::TargetAssignmentMember {
            group_id: "g".into(),
            member_id: "m".into(),
            partitions: Some(assignment.clone()),
        },
        ConsumerGroupRecord::TargetAssignmentMember {
            group_id: "g".into(),
            member_id: "m".into(),
            partitions: None,
        },
        ConsumerGroupRecord::CurrentAssignment {
            group_id: "g".into(),
            member_id: "m".into(),
            assignment: Some(CurrentAssignment {
                member_epoch: 4,
                previous_member_epoch: 3,
                state: MemberState::UnrevokedPartitions,
                assigned: assignment.clone(),
                pending_revocation: [(topic(3), BTreeSet::from([5]))].into(),
            }),
        },
        ConsumerGroupRecord::CurrentAssignment {
            group_id: "g".into(),
            member_id: "m".into(),
            assignment: None,
        },
    ]
}

#[test]
fn every_record_and_tombstone_round_trips() {
    for record in all_records() {
        let encoded = record.encode();
        assert_eq!(
            ConsumerGroupRecord::decode(&encoded),
            Ok(Some(record.clone())),
            "{record:?}"
        );
        let tombstone = matches!(
            &record,
            ConsumerGroupRecord::GroupEpoch { epoch: None, .. }
                | ConsumerGroupRecord::SubscriptionMetadata { topics: None, .. }
                | ConsumerGroupRecord::MemberSubscription {
                    subscription: None,
                    ..
                }
                | ConsumerGroupRecord::TargetAssignmentMember {
                    partitions: None,
                    ..
                }
                | ConsumerGroupRecord::CurrentAssignment {
                    assignment: None,
                    ..
                }
        );
        assert_eq!(encoded.value.is_none(), tombstone, "{record:?}");
    }
}

#[test]
fn the_group_epoch_record_is_kafkas_bytes() {
    let encoded = ConsumerGroupRecord::GroupEpoch {
        group_id: "g".into(),
        epoch: Some(5),
    }
    .encode();
    // Key: type 3, then GroupId as INT16 length + bytes.
    assert_eq!(encoded.key.as_deref(), Some(&[0, 3, 0, 1, b'g'][..]));
    // Value: version 0, Epoch, empty tagged fields.
    assert_eq!(encoded.value.as_deref(), Some(&[0, 0, 0, 0, 0, 5, 0][..]));
}

#[test]
fn the_current_assignment_record_is_kafkas_bytes() {
    let encoded = ConsumerGroupRecord::CurrentAssignment {
        group_id: "g".into(),
        member_id: "m".into(),
        assignment: Some(CurrentAssignment {
            member_epoch: 2,
            previous_member_epoch: 1,
            state: MemberState::Stable,
            assigned: [(topic(9), BTreeSet::from([0, 1]))].into(),
            pending_revocation: Assignment::new(),
        }),
    }
    .encode();
    assert_eq!(
        encoded.key.as_deref(),
        Some(&[0, 8, 0, 1, b'g', 0, 1, b'm'][..])
    );
    let mut expected = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0];
    expected.push(2); // one topic (compact: n + 1)
    expected.extend([9; 16]);
    expected.extend([3, 0, 0, 0, 0, 0, 0, 0, 1, 0]); // two partitions, struct tags
    expected.push(1); // no pending revocation
    expected.push(0); // value tags
    assert_eq!(encoded.value.as_deref(), Some(&expected[..]));
}

#[test]
fn the_member_subscription_record_is_kafkas_bytes() {
    let encoded = ConsumerGroupRecord::MemberSubscription {
        group_id: "g".into(),
        member_id: "m".into(),
        subscription: Some(MemberSubscription {
            instance_id: None,
            rack_id: Some("r".into()),
            client_id: "c".into(),
            client_host: "h".into(),
            subscribed_topic_names: vec!["t".into()],
            subscribed_topic_regex: None,
            rebalance_timeout_ms: 1,
            server_assignor: None,
        }),
    }
    .encode();
    assert_eq!(
        encoded.key.as_deref(),
        Some(&[0, 5, 0, 1, b'g', 0, 1, b'm'][..])
    );
    let expected = [
        0, 0, // version
        0, // InstanceId null
        2, b'r', 2, b'c', 2, b'h', // RackId, ClientId, ClientHost
        2, 2, b't', // SubscribedTopicNames
        0,    // SubscribedTopicRegex null
        0, 0, 0, 1, // RebalanceTimeoutMs
        0, // ServerAssignor null
        0, // tags
    ];
    assert_eq!(encoded.value.as_deref(), Some(&expected[..]));
}

#[test]
fn unknown_tagged_fields_are_skipped_as_kafka_does() {
    // A member subscription carrying ClassicMemberMetadata (tag 0) still decodes.
    let record = all_records().remove(4);
    let mut encoded = record.encode();
    let mut value = encoded.value.clone().unwrap().to_vec();
    value.pop();
    value.extend([1, 0, 3, 0xaa, 0xbb, 0xcc]);
    encoded.value = Some(Bytes::from(value));
    assert_eq!(ConsumerGroupRecord::decode(&encoded), Ok(Some(record)));
}

#[test]
fn other_record_types_are_left_to_their_owner() {
    for kind in [0i16, 1, 2, 9, 16] {
        let record = CoordinatorRecord {
            key: Some(Bytes::from(vec![(kind >> 8) as u8, kind as u8, 0, 1, b'g'])),
            value: None,
        };
        assert_eq!(
            ConsumerGroupRecord::decode(&record),
            Ok(None),
            "type {kind}"
        );
    }
}

#[test]
fn malformed_records_are_errors_not_panics() {
    for record in all_records() {
        let encoded = record.encode();
        let key = encoded.key.clone().unwrap();
        // Every truncation of the key or the value fails cleanly.
        for cut in 2..key.len() {
            let short = CoordinatorRecord {
                key: Some(key.slice(..cut)),
                value: encoded.value.clone(),
            };
            assert!(
                ConsumerGroupRecord::decode(&short).is_err(),
                "{record:?} key cut at {cut}"
            );
        }
        if let Some(value) = &encoded.value {
            for cut in 0..value.len() {
                let short = CoordinatorRecord {
                    key: Some(key.clone()),
                    value: Some(value.slice(..cut)),
                };
                assert!(
                    ConsumerGroupRecord::decode(&short).is_err(),
                    "{record:?} value cut at {cut}"
                );
            }
            let mut long = value.to_vec();
            long.push(0);
            let long = CoordinatorRecord {
                key: Some(key.clone()),
                value: Some(Bytes::from(long)),
            };
            assert!(
                ConsumerGroupRecord::decode(&long).is_err(),
                "{record:?} trailing byte"
            );
            let mut newer = value.to_vec();
            newer[1] = 1;
            let newer = CoordinatorRecord {
                key: Some(key.clone()),
                value: Some(Bytes::from(newer)),
            };
            let error = ConsumerGroupRecord::decode(&newer).unwrap_err();
            assert!(error.contains("version 1"), "{error}");
        }
    }
    assert!(
        ConsumerGroupRecord::decode(&CoordinatorRecord {
            key: None,
            value: None
        })
        .is_err()
    );
}

#[test]
fn member_states_keep_their_codes() {
    for (state, code) in [
        (MemberState::Stable, 0),
        (MemberState::UnrevokedPartitions, 1),
        (MemberState::UnreleasedPartitions, 2),
        (MemberState::Unknown, 127),
    ] {
        assert_eq!(state.code(), code);
        assert_eq!(MemberState::from_code(code), state);
    }
    assert_eq!(MemberState::from_code(42), MemberState::Unknown);
}

/// An empty group's tombstones, replayed, leave no trace of it (the records a DeleteGroups
/// and a classic join of an empty consumer group write).
#[test]
fn an_empty_groups_tombstones_delete_it() {
    let mut groups = crate::coordinator::group::consumer_group::ConsumerGroups::default();
    let written = [
        ConsumerGroupRecord::GroupEpoch {
            group_id: "g".into(),
            epoch: Some(4),
        },
        ConsumerGroupRecord::SubscriptionMetadata {
            group_id: "g".into(),
            topics: Some(BTreeMap::new()),
        },
        ConsumerGroupRecord::TargetAssignmentEpoch {
            group_id: "g".into(),
            epoch: Some(4),
        },
        ConsumerGroupRecord::TargetAssignmentMember {
            group_id: "g".into(),
            member_id: "gone".into(),
            partitions: Some([(topic(1), BTreeSet::from([0]))].into()),
        },
    ];
    for record in &written {
        groups.replay(record).unwrap();
    }
    let tombstones = groups.get("g").unwrap().tombstones();
    assert!(matches!(
        tombstones.last(),
        Some(ConsumerGroupRecord::GroupEpoch { epoch: None, .. })
    ));
    for record in &tombstones {
        groups.replay(record).unwrap();
    }
    assert!(groups.get("g").is_none(), "{groups:?}");
}
