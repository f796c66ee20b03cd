//! Integration tests of `logjam-raft`, in one test binary: a deterministic simulator
//! (`prng`, `network`, `cluster`, `invariants`, `simulation`) that runs whole quorums through
//! seeded message loss, duplication, reordering, partitions and crash-restarts while checking
//! the Raft safety properties after every step; and focused scenarios (`router`,
//! `scenarios`) that pin one protocol rule each.
//!
//! Properties checked (each a [`invariants::Violation`] variant):
//!
//! | property | source |
//! |---|---|
//! | election safety: at most one leader per epoch, over all history | Raft §5.2, Fig. 3 |
//! | log matching: same offset and epoch ⇒ identical entries and prefixes | Raft §5.3, Fig. 3 |
//! | leader completeness: a new leader holds every committed entry | Raft §5.4, Fig. 3 |
//! | state-machine safety: no two nodes apply different entries at an offset | Raft §5.4.3 |
//! | applied ⊆ committed: nothing is applied before a leader committed it | KIP-595 HW rule |
//! | liveness after healing: a leader is elected and new proposals commit everywhere | VOPR-style |
//!
//! Replay one seed: `LOGJAM_RAFT_SEED=<seed> [LOGJAM_RAFT_VOTERS=5] [LOGJAM_RAFT_STEPS=n]
//! cargo test -p logjam-raft --test raft replay -- --nocapture`; add `LOGJAM_RAFT_TRACE=1` to
//! print every node's role, epoch, leader, log end, high watermark and applied end every 50
//! steps of the healing phase. Soak: `cargo test -p logjam-raft --release -- --ignored`.

mod cluster;
mod invariants;
mod network;
mod prng;
mod router;
mod scenarios;
mod simulation;
