//! A cluster with a controller-only node and broker-only nodes, so that brokers can be paused,
//! killed or all down without losing the metadata quorum.

use std::path::Path;
use std::time::Duration;

use super::{
    NodeProcess, eprint_log_tail, free_port, internal_topic_factors, metadata, wait_until,
};

/// A controller-only node (id 1, the only voter, in `root/node1`) and broker-only nodes
/// (`brokers[i]` has node id `i + 2`, in `root/node{i + 2}`) heartbeating every 500 ms. On a
/// failing test, prints the tail of every node's log.
pub struct ControllerAndBrokers {
    pub controller: NodeProcess,
    pub brokers: Vec<NodeProcess>,
}

impl ControllerAndBrokers {
    /// Starts the controller and `broker_count` brokers under `root`, all formatted with
    /// `cluster_id`, with `controller_extra` and `broker_extra` appended to their configs. Each
    /// broker serves clients (it is registered and unfenced) when this returns, but may not yet
    /// see the others: see [`wait_until_brokers_unfenced`](Self::wait_until_brokers_unfenced).
    pub fn start(
        root: &Path,
        cluster_id: &str,
        broker_count: usize,
        controller_extra: &str,
        broker_extra: &str,
    ) -> ControllerAndBrokers {
        let controller_port = free_port();
        let voters = format!("1@127.0.0.1:{controller_port}");
        // One cluster id for every node, as `kafka-storage format --cluster-id` would write.
        for id in 1..=broker_count + 1 {
            let data = root.join(format!("node{id}/data"));
            std::fs::create_dir_all(&data).unwrap();
            std::fs::write(
                data.join("meta.properties"),
                format!("version=1\ncluster.id={cluster_id}\nnode.id={id}\n"),
            )
            .unwrap();
        }
        let controller = NodeProcess::start_with_config(
            &root.join("node1"),
            &format!(
                "node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{controller_port}\n\
                 controller.quorum.voters={voters}\nlog.dirs={}\n{controller_extra}\n",
                root.join("node1/data").display()
            ),
            format!("127.0.0.1:{controller_port}").parse().unwrap(),
        );
        let brokers: Vec<NodeProcess> = (2..=broker_count + 1)
            .map(|id| {
                let port = free_port();
                let dir = root.join(format!("node{id}"));
                NodeProcess::start_with_config(
                    &dir,
                    &format!(
                        "node.id={id}\nprocess.roles=broker\nlisteners=PLAINTEXT://127.0.0.1:{port}\n\
                         controller.listener.names=CONTROLLER\ncontroller.quorum.voters={voters}\n\
                         log.dirs={}\nbroker.heartbeat.interval.ms=500\n{}{broker_extra}\n",
                        dir.join("data").display(),
                        internal_topic_factors(broker_count)
                    ),
                    format!("127.0.0.1:{port}").parse().unwrap(),
                )
            })
            .collect();
        ControllerAndBrokers {
            controller,
            brokers,
        }
    }

    /// Waits (30 s at most) until the first broker sees every broker registered and unfenced.
    pub fn wait_until_brokers_unfenced(&self) {
        let count = self.brokers.len();
        wait_until(
            &format!("{count} brokers are unfenced"),
            Duration::from_secs(30),
            || metadata(self.brokers[0].address).is_some_and(|m| m.brokers.len() == count),
        );
    }

    /// The controller's log so far.
    pub fn controller_log(&self) -> String {
        std::fs::read_to_string(self.controller.dir.join("node.log")).unwrap_or_default()
    }
}

impl Drop for ControllerAndBrokers {
    /// On a failing test, print the tail of every node's log.
    fn drop(&mut self) {
        if std::thread::panicking() {
            for node in std::iter::once(&self.controller).chain(&self.brokers) {
                eprint_log_tail(&node.dir, 60);
            }
        }
    }
}
