//! Which checkers and which policy each workload gets. A workload registers its name, the
//! client functions its histories may hold (its op schema), a constructor for its
//! [`Checker`] and its [`Policy`]; `check_file` looks the header's workload up here instead of
//! matching on names. `queue`, `txn`, `producer`, `eos` and `group` are built in; new ones register
//! the same way.

use logjam_history::{Function, Header};

use crate::checker::{Checker, Findings};
use crate::eos::EosChecker;
use crate::group::GroupChecker;
use crate::policy::{Policy, QueueOptions};
use crate::producer::ProducerChecker;
use crate::queue::QueueChecker;
use crate::read_committed::TxnChecker;

/// One workload: its schema, its checker and its policy.
#[derive(Clone, Copy)]
pub struct WorkloadSpec {
    /// The header's `workload`.
    pub name: &'static str,
    /// The client functions its histories hold. A client op with any other `f` is reported as
    /// a warning naming its line: no checker of this workload reads it.
    pub functions: &'static [Function],
    /// A fresh checker for a history with this header.
    pub checker: fn(&Header) -> Box<dyn Checker>,
    /// The policy for a history with this header, given what the checker found (e.g. the
    /// queue relaxes poll ordering when consumers subscribed).
    pub policy: fn(&Header, &Findings) -> Policy,
}

/// Workload name → spec.
#[derive(Clone)]
pub struct Registry {
    workloads: Vec<WorkloadSpec>,
}

/// The queue workload's client functions.
const QUEUE_FUNCTIONS: &[Function] = &[
    Function::Send,
    Function::Poll,
    Function::FinalPoll,
    Function::Txn,
    Function::Assign,
    Function::Subscribe,
    Function::Crash,
    Function::LogEnd,
];

fn queue_checker(header: &Header) -> Box<dyn Checker> {
    Box::new(QueueChecker::new(header.clone()))
}

fn txn_checker(header: &Header) -> Box<dyn Checker> {
    Box::new(TxnChecker::new(header.clone()))
}

fn group_checker(header: &Header) -> Box<dyn Checker> {
    Box::new(GroupChecker::new(header.clone()))
}

fn queue_policy(header: &Header, findings: &Findings) -> Policy {
    let from_header = QueueOptions::from_header(header);
    Policy::queue(QueueOptions {
        subscribe: from_header.subscribe || findings.stats.by_f.contains_key("subscribe"),
        ..from_header
    })
}

/// The group workload's client functions: the queue's, and the rebalances its members saw.
const GROUP_FUNCTIONS: &[Function] = &[
    Function::Send,
    Function::Poll,
    Function::FinalPoll,
    Function::Assign,
    Function::Subscribe,
    Function::Rebalance,
    Function::Crash,
    Function::LogEnd,
];

/// The producer workload's client functions: its sends, then the final reads.
const PRODUCER_FUNCTIONS: &[Function] = &[
    Function::Produce,
    Function::Assign,
    Function::FinalPoll,
    Function::LogEnd,
];

fn producer_checker(header: &Header) -> Box<dyn Checker> {
    Box::new(ProducerChecker::new(header))
}

fn producer_policy(_header: &Header, _findings: &Findings) -> Policy {
    Policy::producer()
}

/// The eos workload's client functions: the input preload, the pipeline transactions, then
/// the final reads (`logjam_history::eos`).
const EOS_FUNCTIONS: &[Function] = &[
    Function::Produce,
    Function::Pipeline,
    Function::EosRead,
    Function::LogEnd,
    Function::GroupOffsets,
];

fn eos_checker(header: &Header) -> Box<dyn Checker> {
    Box::new(EosChecker::new(header))
}

impl Registry {
    /// The workloads logjam ships: `queue`, `txn`, `producer`, `eos` and `group`.
    pub fn builtin() -> Registry {
        Registry {
            workloads: vec![
                WorkloadSpec {
                    name: "queue",
                    functions: QUEUE_FUNCTIONS,
                    checker: queue_checker,
                    policy: queue_policy,
                },
                // Jepsen's transactional queue: the same ops inside transactions, read by
                // read_committed consumers (the header says so): the queue checker and the
                // read-committed checker, findings combined.
                WorkloadSpec {
                    name: "txn",
                    functions: QUEUE_FUNCTIONS,
                    checker: txn_checker,
                    policy: queue_policy,
                },
                // The queue in subscribe mode on one consumer group: the queue checker with
                // the subscribe policy (the header's `sub_via`, and the `subscribe` ops), and
                // the ownership its members' rebalances prove (`double-assign`).
                WorkloadSpec {
                    name: "group",
                    functions: GROUP_FUNCTIONS,
                    checker: group_checker,
                    policy: queue_policy,
                },
                WorkloadSpec {
                    name: "producer",
                    functions: PRODUCER_FUNCTIONS,
                    checker: producer_checker,
                    policy: producer_policy,
                },
                WorkloadSpec {
                    name: "eos",
                    functions: EOS_FUNCTIONS,
                    checker: eos_checker,
                    policy: crate::eos::policy,
                },
            ],
        }
    }

    /// Adds (or replaces) a workload.
    pub fn register(&mut self, spec: WorkloadSpec) {
        self.workloads.retain(|w| w.name != spec.name);
        self.workloads.push(spec);
    }

    /// The spec for `workload`, if registered.
    pub fn get(&self, workload: &str) -> Option<&WorkloadSpec> {
        self.workloads.iter().find(|w| w.name == workload)
    }

    /// Registered names, comma-separated (for error messages).
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.workloads.iter().map(|w| w.name).collect();
        names.join(", ")
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}
