//! [`Canary`]: deliberate, named Raft bugs that prove the simulator's invariant checkers catch
//! what they claim to catch. Off by default; set only by tests (see `tests/raft/simulation.rs`).

/// A deliberately broken behaviour, switched on through [`crate::QuorumConfig::canary`].
///
/// Never set one outside a test: each variant breaks a safety property on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Canary {
    /// A voter grants a standard vote to any candidate whose log is up to date, even when it
    /// has already voted for someone else in the same epoch. Breaks election safety: two
    /// leaders can win the same epoch.
    DoubleVote,
    /// The leader advances the high watermark over entries of earlier epochs without waiting
    /// for an entry of its own epoch (the Raft paper's Figure 8 mistake). Breaks leader
    /// completeness and state-machine safety under the right interleaving.
    CommitPreviousEpoch,
}
