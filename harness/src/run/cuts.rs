//! The scripted cuts of a nemesis timeline: `cut A/B` between groups of nodes (a
//! `partition` op) and `cut-clients` / `cut-clients-new` of the harness's own traffic to nodes
//! (a `partition-clients` op), each applied to the lab, recorded in the history, and returned
//! as the fault `heal` undoes.

use logjam_history::{Function, OpType, OpValue, Process};
use logjam_workloads::recorder::Recorder;
use serde_json::json;

use super::faults::{Active, names};
use crate::lab::{ClientCut, Lab};
use crate::nemesis::{self, Fault, PartitionKind};

/// A scripted cut between groups, recorded as a `partition` with its groups and cuts.
pub(super) fn cut(
    lab: &mut Lab,
    recorder: &Recorder,
    groups: Vec<Vec<usize>>,
) -> anyhow::Result<Option<Active>> {
    let cuts = nemesis::separate(&groups);
    let value = json!({
        "groups": groups.iter().map(|g| names(lab, g)).collect::<Vec<_>>(),
        "cuts": cuts.iter().map(|(a, b)| [lab.nodes[*a].name(), lab.nodes[*b].name()]).collect::<Vec<_>>(),
        "targets": names(lab, &(0..lab.nodes.len()).collect::<Vec<_>>()),
    });
    let fault = Fault::Partition(PartitionKind::Groups);
    let outcome = lab.set_cuts(cuts);
    record_scripted(recorder, fault, value, &outcome)?;
    match outcome {
        Ok(()) => {
            let active = Active {
                fault,
                targets: (0..lab.nodes.len()).collect(),
            };
            eprintln!(
                "logjam: nemesis partition {:?}",
                groups.iter().map(|g| names(lab, g)).collect::<Vec<_>>()
            );
            Ok(Some(active))
        }
        Err(error) => {
            eprintln!(
                "logjam: nemesis partition could not be injected: {}",
                crate::error_text::chain(&error)
            );
            Ok(None)
        }
    }
}

/// Records a scripted fault as a nemesis op: `info` with `value` when it took effect, `fail`
/// with the error's chain when the lab refused it.
fn record_scripted(
    recorder: &Recorder,
    fault: Fault,
    value: serde_json::Value,
    outcome: &anyhow::Result<()>,
) -> anyhow::Result<()> {
    recorder.record(
        Process::Nemesis,
        if outcome.is_ok() {
            OpType::Info
        } else {
            OpType::Fail
        },
        Function::from_name(&fault.to_string()),
        OpValue::Json(value),
        outcome
            .as_ref()
            .err()
            .map(|error| json!(crate::error_text::chain(error))),
    )?;
    Ok(())
}

/// A scripted cut of the harness's own traffic to `nodes` (all frames, or only new
/// connections), recorded as a `partition-clients` op; it replaces an earlier client cut of
/// the same nodes.
pub(super) fn cut_clients(
    lab: &mut Lab,
    recorder: &Recorder,
    nodes: Vec<usize>,
    new_only: bool,
) -> anyhow::Result<Option<Active>> {
    let kind = if new_only {
        ClientCut::NewConnections
    } else {
        ClientCut::All
    };
    let mut cuts = lab.client_cuts();
    cuts.extend(nodes.iter().map(|&node| (node, kind)));
    let value = json!({
        "nodes": names(lab, &nodes),
        "drops": if new_only { "new-connections" } else { "all" },
    });
    let fault = Fault::Partition(PartitionKind::Clients);
    let outcome = lab.set_client_cuts(cuts);
    record_scripted(recorder, fault, value, &outcome)?;
    match outcome {
        Ok(()) => {
            eprintln!(
                "logjam: nemesis cut-clients{} {}",
                if new_only { "-new" } else { "" },
                names(lab, &nodes).join(",")
            );
            Ok(Some(Active {
                fault,
                targets: nodes,
            }))
        }
        Err(error) => {
            eprintln!(
                "logjam: nemesis cut-clients could not be injected: {}",
                crate::error_text::chain(&error)
            );
            Ok(None)
        }
    }
}
