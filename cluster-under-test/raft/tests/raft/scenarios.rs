//! Focused scenarios, one protocol rule each, driven by the scripted `Router`. Logs are set up
//! exactly with `RaftNode::restart` so offsets and epochs in the assertions are exact.

use logjam_raft::{
    Canary, Entry, EntryKind, Envelope, Epoch, LogOp, Message, Moment, NodeId, Offset,
    QuorumConfig, QuorumState, RaftLog, RaftNode, Role,
};

use crate::router::{Router, is_fetch};

/// A log holding one entry per epoch in `epochs`, starting at offset 0. The payload is a
/// function of `(offset, epoch)`, so two such logs obey log matching by construction.
fn log_with_epochs(epochs: &[u32]) -> RaftLog {
    let mut log = RaftLog::new();
    let entries = epochs
        .iter()
        .enumerate()
        .map(|(i, epoch)| Entry {
            offset: Offset(i as u64),
            epoch: Epoch(*epoch),
            kind: EntryKind::Data(vec![*epoch as u8, i as u8]),
        })
        .collect();
    log.apply(&LogOp::Append(entries));
    log
}

/// Replaces a router node by one restarted from the given durable state.
fn restart_with(
    router: &mut Router,
    id: u32,
    epoch: u32,
    log: RaftLog,
    tweak: impl Fn(&mut QuorumConfig),
) {
    let mut config = router.node(id).config().clone();
    tweak(&mut config);
    let quorum = QuorumState {
        epoch: Epoch(epoch),
        voted_for: None,
        leader_id: None,
    };
    let moment = Moment::new(router.now_ms, u64::from(id) * 7919);
    let node = RaftNode::restart(NodeId(id), config, quorum, log, moment);
    let _ = router.nodes.insert(NodeId(id), node);
}

fn sent_by(router: &Router, id: u32) -> Vec<Envelope> {
    router
        .readies
        .get(&NodeId(id))
        .into_iter()
        .flatten()
        .flat_map(|r| r.messages.clone())
        .collect()
}

fn log_ops_of(router: &Router, id: u32) -> Vec<LogOp> {
    router
        .readies
        .get(&NodeId(id))
        .into_iter()
        .flatten()
        .flat_map(|r| r.log_ops.clone())
        .collect()
}

/// KIP-996: a voter cut off from the leader turns Prospective, but voters that still fetch
/// from the leader refuse its pre-vote, so it never bumps the epoch and never disturbs the
/// leader.
#[test]
fn pre_vote_is_refused_while_a_leader_is_alive() {
    let mut router = Router::new(3, |_| {});
    let leader = router.elect(10_000);
    let epoch = router.nodes[&leader].epoch();
    let victim = router
        .nodes
        .keys()
        .copied()
        .find(|id| *id != leader)
        .expect("follower");

    // Cut only the victim ↔ leader link, for well past fetch timeout and several rounds.
    let cut = move |e: &Envelope| {
        (e.from == victim && e.to == leader) || (e.from == leader && e.to == victim)
    };
    router.readies.clear();
    router.advance(12_000, 10, cut);

    let victim_sent = sent_by(&router, victim.0);
    let pre_votes = victim_sent
        .iter()
        .filter(|e| matches!(&e.message, Message::Vote(v) if v.pre_vote))
        .count();
    let standard_votes = victim_sent
        .iter()
        .filter(|e| matches!(&e.message, Message::Vote(v) if !v.pre_vote))
        .count();
    assert!(pre_votes > 0, "the cut-off follower asked for pre-votes");
    assert_eq!(standard_votes, 0, "it never became a candidate");
    let other = router
        .nodes
        .keys()
        .copied()
        .find(|id| *id != leader && *id != victim)
        .expect("third");
    let refusals = sent_by(&router, other.0)
        .iter()
        .filter(|e| matches!(&e.message, Message::VoteResponse(r) if !r.vote_granted))
        .count();
    assert!(refusals > 0, "the fetching follower refused the pre-votes");
    assert_eq!(
        router.nodes[&leader].role(),
        Role::Leader,
        "the leader was not disturbed"
    );
    for node in router.nodes.values() {
        assert_eq!(node.epoch(), epoch, "{}: no epoch bump", node.id());
    }
}

/// Regression: after the leader dies, the survivors still remember it, and their answers to a
/// pre-vote name it as the leader of the epoch. A Prospective that took that hint as news went
/// back to following the dead leader on every round, so no new leader was ever elected (found
/// by the node's multi-process controller-failover test). Only a leader the node did not know
/// is news.
#[test]
fn survivors_elect_a_new_leader_after_the_leader_goes_silent() {
    let mut router = Router::new(3, |_| {});
    let old = router.elect(10_000);
    let old_epoch = router.nodes[&old].epoch();
    router.advance(500, 10, |_| false);
    let dead = move |e: &Envelope| e.from == old || e.to == old;
    router.advance(15_000, 10, dead);
    let new_leaders: Vec<NodeId> = router
        .nodes
        .values()
        .filter(|node| node.id() != old && node.role() == Role::Leader)
        .map(|node| node.id())
        .collect();
    assert_eq!(new_leaders.len(), 1, "exactly one survivor leads");
    assert!(
        router.nodes[&new_leaders[0]].epoch() > old_epoch,
        "in a newer epoch"
    );
}

/// KIP-595 divergence: a follower whose log ends in epochs 2 and 4 that the new leader does
/// not share truncates in two `DivergingEpoch` rounds — to offset 3 (end of its epoch 2, the
/// largest below the leader's epoch 3) and then to offset 1 (end of epoch 1) — and then
/// replicates the leader's log.
#[test]
fn divergence_truncates_across_two_epochs_to_the_exact_offset() {
    let mut router = Router::new(3, |_| {});
    // Leader-to-be (1) and its peer (3): epochs 1,3,3,3,5. Follower (2): epochs 1,2,2,4,4.
    restart_with(&mut router, 1, 5, log_with_epochs(&[1, 3, 3, 3, 5]), |_| {});
    restart_with(&mut router, 3, 5, log_with_epochs(&[1, 3, 3, 3, 5]), |_| {});
    restart_with(&mut router, 2, 4, log_with_epochs(&[1, 2, 2, 4, 4]), |_| {});
    let leader = router.elect(20_000);
    assert_ne!(leader, NodeId(2), "the diverged log cannot win");
    router.advance(500, 10, |_| false);

    let truncations: Vec<Offset> = log_ops_of(&router, 2)
        .into_iter()
        .filter_map(|op| match op {
            LogOp::TruncateTo(offset) => Some(offset),
            _ => None,
        })
        .collect();
    assert_eq!(truncations, vec![Offset(3), Offset(1)]);
    let diverging: Vec<(Epoch, Offset)> = sent_by(&router, leader.0)
        .iter()
        .filter_map(|e| match &e.message {
            Message::FetchResponse(r) if e.to == NodeId(2) => {
                r.diverging_epoch.map(|d| (d.epoch, d.end_offset))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        diverging,
        vec![(Epoch(3), Offset(4)), (Epoch(1), Offset(1))]
    );
    assert_eq!(
        router.node(2).log().entries(),
        router.nodes[&leader].log().entries()
    );
}

/// Sets up Raft's Figure 8: the leader-to-be holds uncommitted epoch-2 entries at offsets 1
/// and 2; one follower holds only offset 0; the third voter is unreachable. The follower
/// fetches one entry at a time. Returns every high watermark the leader reported.
fn figure_8_high_watermarks(canary: Option<Canary>) -> Vec<Offset> {
    let mut router = Router::new(3, |_| {});
    let tweak = |config: &mut QuorumConfig| {
        config.fetch_max_bytes = 1;
        config.canary = canary;
    };
    restart_with(&mut router, 1, 2, log_with_epochs(&[1, 2, 2]), tweak);
    restart_with(&mut router, 2, 2, log_with_epochs(&[1]), tweak);
    restart_with(&mut router, 3, 2, log_with_epochs(&[1]), tweak);
    let _ = router.isolated.insert(NodeId(3));
    let leader = router.elect(20_000);
    assert_eq!(leader, NodeId(1));
    assert_eq!(router.node(1).epoch(), Epoch(3));
    router.advance(1_000, 10, |_| false);
    assert_eq!(
        router.node(2).log().end_offset(),
        Offset(4),
        "the follower caught up"
    );
    router.readies[&NodeId(1)]
        .iter()
        .filter_map(|r| r.high_watermark)
        .collect()
}

/// Raft §5.4.2 / KIP-595: with the follower holding offsets 1 and 2 (epoch 2) the leader of
/// epoch 3 still does not commit them; the high watermark jumps straight to 4 once the
/// epoch-3 LEADER_CHANGE record at offset 3 is on a majority.
#[test]
fn high_watermark_waits_for_an_entry_of_the_current_epoch() {
    let reported = figure_8_high_watermarks(None);
    assert_eq!(
        reported.first(),
        Some(&Offset(4)),
        "first move covers offset 3: {reported:?}"
    );
}

/// The paired negative: the `CommitPreviousEpoch` canary commits offset 1 as soon as one
/// follower has it, which is exactly the Figure 8 mistake.
#[test]
fn figure_8_canary_commits_previous_epoch_entries() {
    let reported = figure_8_high_watermarks(Some(Canary::CommitPreviousEpoch));
    assert!(
        reported.first().is_some_and(|hw| *hw <= Offset(3)),
        "{reported:?}"
    );
}

/// Check quorum: a leader that hears no Fetch from a majority for 1.5 × fetch.timeout.ms
/// resigns and sends EndQuorumEpoch; before that it stays leader.
#[test]
fn leader_resigns_when_a_majority_stops_fetching() {
    let mut router = Router::new(3, |_| {});
    let leader = router.elect(10_000);
    router.advance(500, 10, |_| false);
    router.readies.clear();
    // Followers' fetches to the leader are lost from now on (they keep retrying), and so are
    // votes: otherwise the followers, no longer hearing from the leader, rightly elect a new
    // one before the leader's own check-quorum fires, which is not what this test is about.
    let to_leader = move |e: &Envelope| {
        (is_fetch(e) && e.to == leader)
            || matches!(e.message, Message::Vote(_) | Message::VoteResponse(_))
    };
    router.advance(2_500, 10, to_leader);
    assert_eq!(
        router.nodes[&leader].role(),
        Role::Leader,
        "within the window it stays leader"
    );
    router.advance(1_000, 10, to_leader);
    assert_eq!(
        router.nodes[&leader].role(),
        Role::Resigned,
        "3 s without a majority: resigned"
    );
    let end_quorum = sent_by(&router, leader.0)
        .into_iter()
        .filter(|e| matches!(e.message, Message::EndQuorumEpoch(_)))
        .count();
    assert!(end_quorum >= 2, "EndQuorumEpoch went to both voters");
}

/// The counterpart: one follower fetching is a majority with the leader; no resignation.
#[test]
fn leader_stays_while_one_follower_of_two_fetches() {
    let mut router = Router::new(3, |_| {});
    let leader = router.elect(10_000);
    let silent = router
        .nodes
        .keys()
        .copied()
        .find(|id| *id != leader)
        .expect("follower");
    router.advance(10_000, 10, move |e: &Envelope| {
        is_fetch(e) && e.from == silent
    });
    assert_eq!(router.nodes[&leader].role(), Role::Leader);
}

/// KIP-630: a follower whose fetch offset is below the leader's log start gets `SnapshotId`,
/// downloads the snapshot in `MaxBytes` chunks with FetchSnapshot, installs it (log start =
/// snapshot end, state machine reset), and resumes fetching after it.
#[test]
fn follower_behind_the_log_start_installs_the_snapshot() {
    let mut router = Router::new(3, |config| config.fetch_snapshot_max_bytes = 64);
    let leader = router.elect(10_000);
    router.advance(200, 10, |_| false);
    let behind = router
        .nodes
        .keys()
        .copied()
        .find(|id| *id != leader)
        .expect("follower");
    let _ = router.isolated.insert(behind);
    for i in 0..20_u8 {
        router.propose(leader, &[i; 8]);
        router.deliver_all(|_| false);
    }
    let applied_end = router.nodes[&leader].applied_end();
    assert!(
        applied_end >= Offset(20),
        "committed without the isolated follower"
    );
    let data: Vec<u8> = (0..300_u32).map(|i| i as u8).collect();
    let id = router
        .node_mut(leader.0)
        .create_snapshot(applied_end, data.clone())
        .expect("snapshot at the applied end");
    router.collect(leader);
    assert_eq!(router.nodes[&leader].log().start_offset(), applied_end);

    // The follower's lost fetch is retried after `request.timeout.ms`.
    router.isolated.clear();
    router.readies.clear();
    router.advance(5_000, 10, |_| false);

    let follower = &router.nodes[&behind];
    assert_eq!(follower.log().snapshot_id(), Some(id));
    assert_eq!(follower.log().start_offset(), id.end_offset);
    assert_eq!(
        follower.log().end_offset(),
        router.nodes[&leader].log().end_offset()
    );
    let chunks = sent_by(&router, behind.0)
        .iter()
        .filter(|e| matches!(e.message, Message::FetchSnapshot(_)))
        .count();
    assert_eq!(chunks, 5, "300 bytes in 64-byte chunks");
    let loaded: Vec<_> = router.readies[&behind]
        .iter()
        .filter_map(|r| r.load_snapshot.clone())
        .collect();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].data, data);
    assert!(follower.high_watermark() >= id.end_offset);
}

/// A vote is persisted: after a restart from its `QuorumState` a voter still refuses a second
/// candidate in the same epoch.
#[test]
fn a_restarted_voter_does_not_vote_twice_in_one_epoch() {
    let config = QuorumConfig::new([NodeId(1), NodeId(2), NodeId(3)]);
    let mut voter = RaftNode::new(NodeId(1), config.clone(), Moment::new(0, 1));
    let _ = voter.take_ready();
    let request = |candidate: u32| Envelope {
        from: NodeId(candidate),
        to: NodeId(1),
        correlation_id: logjam_raft::CorrelationId(candidate),
        message: Message::Vote(logjam_raft::rpc::vote::VoteRequest {
            candidate_epoch: Epoch(1),
            candidate_id: NodeId(candidate),
            voter_id: NodeId(1),
            last_offset_epoch: Epoch::ZERO,
            last_offset: Offset::ZERO,
            pre_vote: false,
        }),
    };
    let granted = |ready: &logjam_raft::Ready| {
        ready
            .messages
            .iter()
            .any(|e| matches!(&e.message, Message::VoteResponse(r) if r.vote_granted))
    };
    voter.step(Moment::new(1, 2), request(2));
    let ready = voter.take_ready();
    assert!(granted(&ready));
    let persisted = ready
        .quorum_state
        .expect("the vote is persisted with the response");
    assert_eq!(persisted.voted_for, Some(NodeId(2)));

    let mut restarted = RaftNode::restart(
        NodeId(1),
        config,
        persisted,
        RaftLog::new(),
        Moment::new(5, 3),
    );
    let _ = restarted.take_ready();
    restarted.step(Moment::new(6, 4), request(3));
    assert!(
        !granted(&restarted.take_ready()),
        "second vote in epoch 1 refused"
    );
    restarted.step(Moment::new(7, 5), request(2));
    assert!(
        granted(&restarted.take_ready()),
        "re-granting the same candidate is idempotent"
    );
}

/// An observer (not in `controller.quorum.voters`) finds the leader through a voter,
/// replicates the log, never votes, and does not count toward the high watermark.
#[test]
fn observer_replicates_without_voting() {
    let mut router = Router::new(3, |_| {});
    let config = router.node(1).config().clone();
    let _ = router.nodes.insert(
        NodeId(4),
        RaftNode::new(NodeId(4), config, Moment::new(0, 4)),
    );
    let leader = router.elect(10_000);
    router.propose(leader, b"x");
    router.advance(1_000, 10, |_| false);
    let observer = router.node(4);
    assert_eq!(observer.role(), Role::Follower);
    assert_eq!(observer.leader(), Some(leader));
    assert_eq!(
        observer.log().end_offset(),
        router.nodes[&leader].log().end_offset()
    );
    let description = router.nodes[&leader]
        .describe_quorum()
        .expect("leader describes");
    assert_eq!(description.current_voters.len(), 3);
    assert_eq!(description.observers.len(), 1);
    assert!(
        sent_by(&router, 4)
            .iter()
            .all(|e| !matches!(e.message, Message::Vote(_)))
    );
}

/// Two prospectives that cannot hear each other both win node 3's pre-vote at the same time
/// and become candidates of epoch 1; node 3 then receives both Vote requests. Returns the
/// checker's verdict on the roles afterwards.
fn two_candidates_one_voter(canary: Option<Canary>) -> Result<(), crate::invariants::Violation> {
    let mut router = Router::new(3, |config| config.canary = canary);
    // Node 3 never campaigns itself.
    let mut config = router.node(3).config().clone();
    config.election_timeout_ms = 1_000_000;
    let _ = router.nodes.insert(
        NodeId(3),
        RaftNode::new(NodeId(3), config, Moment::new(0, 3)),
    );
    let cut = |e: &Envelope| {
        (e.from == NodeId(1) && e.to == NodeId(2)) || (e.from == NodeId(2) && e.to == NodeId(1))
    };
    // One tick at 2 s: both election timers (in [1 s, 2 s)) have fired.
    router.advance(2_000, 2_000, cut);
    let mut checker = crate::invariants::Checker::default();
    checker.observe_roles(router.nodes.values())
}

/// Paired positive/negative test of the election-safety checker on the scripted race: with
/// the `DoubleVote` canary node 3 votes for both candidates and two leaders of epoch 1
/// appear; without it node 3 refuses the second candidate.
#[test]
fn double_vote_canary_elects_two_leaders_in_one_epoch() {
    assert_eq!(two_candidates_one_voter(None), Ok(()));
    let verdict = two_candidates_one_voter(Some(Canary::DoubleVote));
    assert!(
        matches!(
            verdict,
            Err(crate::invariants::Violation::ElectionSafety {
                epoch: Epoch(1),
                ..
            })
        ),
        "{verdict:?}"
    );
}

/// A driver sleeps until `next_deadline_ms`; in a steady quorum that must lie in the future
/// for every node, or the driver would spin.
#[test]
fn steady_quorum_has_future_deadlines() {
    let mut router = Router::new(3, |_| {});
    let leader = router.elect(10_000);
    router.propose(leader, b"steady");
    router.advance(3_000, 10, |_| false);
    for node in router.nodes.values() {
        assert!(
            node.next_deadline_ms() > router.now_ms,
            "{} ({:?}) would spin: deadline {} at {}",
            node.id(),
            node.role(),
            node.next_deadline_ms(),
            router.now_ms
        );
    }
}
