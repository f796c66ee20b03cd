//! The failover resume of a commit (issue #16's coordinator-failover-mid-commit, at the node):
//! the transaction coordinator dies between PrepareCommit and the markers, and the next
//! coordinator of the id completes the commit. Method: the five-node rig of
//! `common::txn::CommitRig`, the data partition's only replica M paused so the COMMIT marker
//! waits; EndTxn writes PrepareCommit (answered once replicated); the coordinator C is killed;
//! another replica of the id's `__transaction_state` partition becomes its leader and loads
//! PrepareCommit; M resumes; the new coordinator writes the marker and CompleteCommit, and
//! logs that it completed a transaction a previous coordinator prepared.

mod common;

use std::time::Duration;

use common::txn::{CommitRig, DATA, TXN_TOPIC, describe, end, layout, markers, partition_for};
use common::{connect, wait_until};

#[test]
fn a_commit_prepared_by_a_dead_coordinator_is_completed_by_the_next() {
    let root = tempfile::tempdir().unwrap();
    let mut rig = CommitRig::start(
        root.path(),
        "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000",
    );
    let (id, coordinator) = (rig.id.clone(), rig.coordinator);
    let (data_leader, data_partition) = (rig.data_leader, rig.data_partition);
    rig.cluster.nodes[(data_leader - 1) as usize].pause();
    let ended = end(&mut rig.stream, &id, rig.producer.0, rig.producer.1, true);
    assert_eq!(ended.error_code, 0, "PrepareCommit written: {ended:?}");
    assert_eq!(
        describe(&mut rig.stream, &id).1,
        "PrepareCommit",
        "the marker waits for the paused partition leader"
    );

    rig.cluster.nodes[(coordinator - 1) as usize].kill();
    let survivor = rig.at(rig.replica);
    let index = partition_for(&id) as usize;
    let mut leader = -1;
    wait_until(
        "another replica leads the id's transaction-log partition",
        Duration::from_secs(60),
        || {
            leader = layout(survivor, TXN_TOPIC)[index].0;
            leader > 0 && leader != coordinator
        },
    );
    rig.cluster.nodes[(data_leader - 1) as usize].resume();
    let mut stream = connect(rig.at(leader));
    wait_until(
        "the new coordinator completes the commit",
        Duration::from_secs(60),
        || describe(&mut stream, &id).1 == "CompleteCommit",
    );
    assert!(
        markers(rig.at(data_leader), DATA, data_partition).is_ok_and(|n| n >= 1),
        "the COMMIT marker is on the data partition"
    );
    let log = std::fs::read_to_string(
        rig.cluster.nodes[(leader - 1) as usize]
            .dir
            .join("node.log"),
    )
    .unwrap();
    let completed = log
        .lines()
        .find(|line| {
            line.contains("completed a transaction a previous coordinator prepared")
                && line.contains(&format!("transactional_id={id}"))
        })
        .unwrap_or_else(|| panic!("node {leader}'s log names the resumed commit"));
    assert!(completed.contains("commit=true"), "{completed}");
    let old = std::fs::read_to_string(
        rig.cluster.nodes[(coordinator - 1) as usize]
            .dir
            .join("node.log"),
    )
    .unwrap();
    assert!(
        !old.contains("a previous coordinator prepared"),
        "the first coordinator prepared it itself: no resume there"
    );
}
