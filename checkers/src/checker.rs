//! The one interface every workload's checker implements: paired history in ([`Checker::push`],
//! streaming, so a million-op history is held once, compactly), [`Findings`] with witnesses
//! out. Which findings fail a run is not the checker's business: the registry's policy for the
//! workload decides, and [`crate::Report::assemble`] turns findings and policy into a verdict.

use logjam_history::Paired;

pub use crate::findings::Findings;

/// A streaming checker for one workload's histories.
pub trait Checker {
    /// Feeds one paired item (a completed client op or a nemesis event), in history order.
    /// Client ops never completed arrive last, as `info`.
    fn push(&mut self, item: Paired);

    /// Runs every analysis over what was pushed.
    fn finish(self: Box<Self>) -> Findings;
}
