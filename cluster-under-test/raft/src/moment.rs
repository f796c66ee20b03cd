//! [`Moment`]: the only way time and randomness enter the state machine. The driver builds one
//! per call from its clock and its RNG; the simulator builds it from a seeded PRNG, which is
//! what makes a whole run replayable from one seed.

/// When an event happens, plus one fresh random word the node may spend on election jitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moment {
    /// Milliseconds on the driver's monotonic clock. Must never go backwards between calls on
    /// the same node (a restart may start from any value not below the last one).
    pub now_ms: u64,
    /// A uniformly random `u64`, drawn fresh for every call. Used to pick election timeouts in
    /// `[t, 2t)`, backoffs, and the voter an observer asks for the leader.
    pub random: u64,
}

impl Moment {
    /// A moment at `now_ms` with the given random word.
    #[must_use]
    pub fn new(now_ms: u64, random: u64) -> Moment {
        Moment { now_ms, random }
    }

    /// A value in `[0, bound)` derived from the random word (0 when `bound` is 0). `salt` lets
    /// one call draw several independent values.
    #[must_use]
    pub(crate) fn random_below(&self, bound: u64, salt: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        // splitmix64 finaliser: spreads the caller's word so different salts decorrelate.
        let mut z = self.random ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        z % bound
    }
}
