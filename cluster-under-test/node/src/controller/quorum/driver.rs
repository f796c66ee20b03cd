//! The driver of the Raft node on the quorum thread: timers, commands, ready handling (quorum
//! state, log ops, messages, snapshot and committed entries, in the raft crate's order),
//! controller activation and the requests waiting for their records to commit.

use super::*;
/// A controller request answered once `end` is committed.
pub(super) struct Pending {
    pub(super) end: Offset,
    pub(super) response: ResponseKind,
    pub(super) reply: Callback,
}

pub(super) struct Driver {
    pub(super) settings: QuorumSettings,
    pub(super) node: RaftNode,
    pub(super) store: MetadataLogStore,
    pub(super) started: Instant,
    pub(super) rng: u64,
    pub(super) image: Arc<MetadataImage>,
    pub(super) image_tx: watch::Sender<Arc<MetadataImage>>,
    pub(super) leader_tx: watch::Sender<Option<NodeId>>,
    pub(super) controller: Option<QuorumController>,
    pub(super) pending: VecDeque<Pending>,
    pub(super) last_proposed_end: Offset,
    /// When the active controller last proposed anything (for idle NoOps).
    pub(super) last_propose_ms: u64,
    /// The last snapshot this node made itself (others were fetched from the leader).
    pub(super) created_snapshot: Option<SnapshotId>,
    pub(super) peers: HashMap<NodeId, mpsc::UnboundedSender<Envelope>>,
    /// The clients of other nodes' controller listeners, for forwarding.
    pub(super) clients: ControllerClients,
    /// Where to write the answer to an inbound Raft request, by (peer, correlation id).
    pub(super) inbound:
        HashMap<(NodeId, CorrelationId), (mpsc::UnboundedSender<Bytes>, ApiKey, i16)>,
    pub(super) commands: mpsc::UnboundedSender<CommandBox>,
}

impl Driver {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn moment(&mut self) -> Moment {
        // splitmix64 step: a fresh word per call.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Moment::new(self.now_ms(), z ^ (z >> 31))
    }

    pub(super) async fn run(&mut self, mut commands: mpsc::UnboundedReceiver<CommandBox>) {
        let mut session_check = tokio::time::interval(Duration::from_millis(SESSION_CHECK_MS));
        let mut jitter: (u64, u64) = (u64::MAX, 0);
        let idle_ms = self.settings.max_idle_interval_ms;
        let mut idle_check = tokio::time::interval(Duration::from_millis(idle_ms.max(1)));
        loop {
            let mut deadline = self.node.next_deadline_ms();
            // Symmetry breaking: followers of one leader time out on their fetch timers
            // within a millisecond of each other (the timer is not randomized, and they
            // fetched at the same moment), which makes split pre-votes and votes likely. A
            // follower therefore ticks up to `fetch.timeout.ms / 10` late (a driver may always
            // tick late), chosen once per deadline.
            if self.node.role() == Role::Follower {
                if jitter.0 != deadline {
                    let spread = self.settings.raft.fetch_timeout_ms / 10 + 1;
                    jitter = (deadline, self.moment().random % spread);
                }
                deadline = deadline.saturating_add(jitter.1);
            }
            let sleep_ms = deadline.saturating_sub(self.now_ms()).min(60_000);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(sleep_ms)) => {
                    let moment = self.moment();
                    let before = self.node.describe_quorum();
                    self.node.tick(moment);
                    if let Some(before) = before
                        && self.node.role() == Role::Resigned
                    {
                        log_check_quorum_resignation(&before, moment.now_ms);
                    }
                }
                command = commands.recv() => match command {
                    None | Some(CommandBox(Command::Stop)) => break,
                    Some(CommandBox(command)) => self.handle(command),
                },
                _ = session_check.tick() => self.expire_sessions(),
                _ = idle_check.tick(), if idle_ms > 0 => self.maybe_append_no_op(),
            }
            if let Err(error) = self.process_ready() {
                halt_on_metadata_log_failure(&error);
            }
        }
        self.fail_pending();
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Step { envelope, reply_to } => {
                if let Some(reply_to) = reply_to {
                    self.inbound
                        .insert((envelope.from, envelope.correlation_id), reply_to);
                }
                let moment = self.moment();
                self.node.step(moment, envelope);
            }
            Command::Controller { request, reply } => self.controller_request(request, reply),
            Command::Forward { request, reply } => {
                let commands = self.commands.clone();
                let settings = self.settings.clone();
                let leader = self.leader_tx.subscribe();
                let clients = self.clients.clone();
                tokio::spawn(async move {
                    let result = forward(&settings, &clients, &commands, &leader, request).await;
                    reply(result.ok_or(None));
                });
            }
            Command::Describe(reply) => {
                let _ = reply.send(self.node.describe_quorum());
            }
            Command::Stop => {}
        }
    }

    fn controller_request(&mut self, request: RequestKind, reply: Callback) {
        if let RequestKind::DescribeQuorum(_) = &request {
            match self.node.describe_quorum() {
                Some(description) => reply(Ok(ResponseKind::DescribeQuorum(
                    describe_quorum_response(Some(description)),
                ))),
                None => reply(Err(self.node.leader())),
            }
            return;
        }
        let now_ms = self.now_ms();
        let next_offset = self.node.log().end_offset().max(self.last_proposed_end).0;
        let Some(controller) = self.controller.as_mut() else {
            reply(Err(self.node.leader()));
            return;
        };
        let (records, response) = match request {
            RequestKind::BrokerRegistration(request) => split(
                controller.register_broker(&request, next_offset, now_ms),
                ResponseKind::BrokerRegistration,
            ),
            RequestKind::BrokerHeartbeat(request) => split(
                controller.heartbeat(&request, now_ms),
                ResponseKind::BrokerHeartbeat,
            ),
            RequestKind::CreateTopics(request) => split(
                controller.create_topics(&request),
                ResponseKind::CreateTopics,
            ),
            RequestKind::AlterPartition(request) => split(
                controller.alter_partition(&request),
                ResponseKind::AlterPartition,
            ),
            RequestKind::CreatePartitions(request) => split(
                controller.create_partitions(&request),
                ResponseKind::CreatePartitions,
            ),
            RequestKind::AllocateProducerIds(request) => split(
                controller.allocate_producer_ids(&request),
                ResponseKind::AllocateProducerIds,
            ),
            _ => {
                reply(Err(None));
                return;
            }
        };
        if records.is_empty() {
            // Nothing to commit, but answer only after what was proposed before is committed
            // (the response may describe it).
            let end = self.last_proposed_end;
            self.pending.push_back(Pending {
                end,
                response,
                reply,
            });
            self.resolve_pending();
            return;
        }
        let moment = self.moment();
        match self.node.propose(moment, vec![encode_records(&records)]) {
            Ok(range) => {
                self.last_proposed_end = range.end;
                self.last_propose_ms = now_ms;
                self.pending.push_back(Pending {
                    end: range.end,
                    response,
                    reply,
                });
            }
            Err(error) => {
                tracing::warn!(%error, "proposal refused; stepping down as controller");
                self.deactivate();
                reply(Err(self.node.leader()));
            }
        }
    }

    fn expire_sessions(&mut self) {
        let now_ms = self.now_ms();
        let Some(controller) = self.controller.as_mut() else {
            return;
        };
        let records = controller.expire_sessions(now_ms);
        if records.is_empty() {
            return;
        }
        let moment = self.moment();
        match self.node.propose(moment, vec![encode_records(&records)]) {
            Ok(range) => {
                self.last_proposed_end = range.end;
                self.last_propose_ms = now_ms;
            }
            Err(_) => self.deactivate(),
        }
    }

    /// Kafka's idle `NoOpRecord` (`metadata.max.idle.interval.ms`).
    fn maybe_append_no_op(&mut self) {
        let now_ms = self.now_ms();
        if self.controller.is_none()
            || now_ms.saturating_sub(self.last_propose_ms) < self.settings.max_idle_interval_ms
        {
            return;
        }
        let moment = self.moment();
        match self
            .node
            .propose(moment, vec![encode_records(&[MetadataRecord::NoOp])])
        {
            Ok(range) => {
                self.last_proposed_end = range.end;
                self.last_propose_ms = now_ms;
            }
            Err(_) => self.deactivate(),
        }
    }

    fn deactivate(&mut self) {
        if self.controller.take().is_some() {
            tracing::info!(
                node = self.settings.node_id.0,
                "no longer the active controller"
            );
        }
        self.fail_pending();
    }

    fn fail_pending(&mut self) {
        let leader = self.node.leader();
        for pending in self.pending.drain(..) {
            (pending.reply)(Err(leader));
        }
    }

    fn resolve_pending(&mut self) {
        while self
            .pending
            .front()
            .is_some_and(|pending| pending.end.0 <= self.image.offset)
        {
            let pending = self.pending.pop_front().expect("checked");
            (pending.reply)(Ok(pending.response));
        }
    }

    fn process_ready(&mut self) -> Result<(), crate::controller::metadata_log::MetadataLogError> {
        let mut image_changed = false;
        while self.node.has_ready() {
            let ready = self.node.take_ready();
            if let Some(quorum) = &ready.quorum_state {
                self.store.write_quorum_state(quorum)?;
            }
            for op in &ready.log_ops {
                if let LogOp::Snapshot(snapshot) = op
                    && self.created_snapshot != Some(snapshot.id)
                {
                    tracing::info!(
                        end_offset = snapshot.id.end_offset.0,
                        "installed a metadata snapshot fetched from the leader"
                    );
                }
                self.store.apply(op)?;
            }
            for envelope in ready.messages {
                self.send(envelope);
            }
            if let Some(snapshot) = &ready.load_snapshot {
                match MetadataImage::from_snapshot(&snapshot.data) {
                    Ok(mut image) => {
                        image.offset = snapshot.id.end_offset.0;
                        tracing::info!(
                            end_offset = snapshot.id.end_offset.0,
                            "loaded metadata snapshot"
                        );
                        self.image = Arc::new(image);
                        image_changed = true;
                    }
                    Err(error) => tracing::error!(%error, "metadata snapshot does not decode"),
                }
            }
            let mut activate = false;
            for entry in &ready.apply {
                let image = Arc::make_mut(&mut self.image);
                if let EntryKind::Data(payload) = &entry.kind {
                    match decode_records(payload) {
                        Ok(records) => records.iter().for_each(|record| image.apply(record)),
                        Err(error) => {
                            tracing::error!(%error, offset = entry.offset.0, "skipping a metadata entry")
                        }
                    }
                }
                image.offset = entry.offset.0 + 1;
                image_changed = true;
                if entry.epoch == self.node.epoch() && self.node.role() == Role::Leader {
                    activate = true;
                }
            }
            if let Some(role) = ready.role {
                tracing::info!(node = self.settings.node_id.0, ?role, epoch = self.node.epoch().0, leader = ?self.node.leader(), "raft role");
                if role != Role::Leader {
                    self.deactivate();
                }
            }
            if activate && self.controller.is_none() && self.node.role() == Role::Leader {
                tracing::info!(
                    node = self.settings.node_id.0,
                    epoch = self.node.epoch().0,
                    "active controller"
                );
                self.last_proposed_end = self.node.log().end_offset();
                self.controller = Some(QuorumController::new(
                    (*self.image).clone(),
                    self.settings.controller.clone(),
                    self.now_ms(),
                ));
            }
            self.resolve_pending();
            if ready.snapshot_suggested.is_some() {
                let end = Offset(self.image.offset);
                match self.node.create_snapshot(end, self.image.to_snapshot()) {
                    Ok(id) => {
                        self.created_snapshot = Some(id);
                        tracing::info!(end_offset = id.end_offset.0, "created metadata snapshot");
                    }
                    Err(error) => tracing::debug!(%error, "snapshot not created"),
                }
            }
        }
        let leader = self.node.leader();
        self.leader_tx.send_if_modified(|current| {
            let changed = *current != leader;
            *current = leader;
            changed
        });
        if image_changed {
            let _ = self.image_tx.send(Arc::clone(&self.image));
        }
        Ok(())
    }

    fn send(&mut self, envelope: Envelope) {
        if envelope.message.is_request() {
            let to = envelope.to;
            let Some(address) = self.settings.voter_addresses.get(&to).copied() else {
                return;
            };
            let sender = self.peers.entry(to).or_insert_with(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(peer_task(
                    to,
                    address,
                    self.settings.cluster_id.clone(),
                    Duration::from_millis(self.settings.raft.request_timeout_ms),
                    rx,
                    self.commands.clone(),
                ));
                tx
            });
            let _ = sender.send(envelope);
        } else if let Some((writer, key, version)) =
            self.inbound.remove(&(envelope.to, envelope.correlation_id))
            && let Some(body) = response_to_wire(&envelope.message)
            && let Some(frame) =
                encode_response(key, version, envelope.correlation_id.0 as i32, &body)
                    .map(BytesMut::freeze)
        {
            let _ = writer.send(frame);
        }
    }
}

/// Why a leader resigned on a tick (check quorum): when each voter last fetched, as the
/// leader saw it just before.
fn log_check_quorum_resignation(before: &QuorumDescription, now_ms: u64) {
    let fetched: Vec<String> = before
        .current_voters
        .iter()
        .map(|voter| match voter.last_fetch_timestamp_ms {
            Some(at) => format!(
                "{}: {} ms ago",
                voter.replica_id.0,
                now_ms.saturating_sub(at)
            ),
            None => format!("{}: never", voter.replica_id.0),
        })
        .collect();
    tracing::warn!(
        ?fetched,
        "resigned: a majority of voters has not fetched within the check-quorum window"
    );
}

pub(super) fn split<R>(
    decision: Decision<R>,
    wrap: fn(R) -> ResponseKind,
) -> (Vec<crate::metadata::MetadataRecord>, ResponseKind) {
    (decision.records, wrap(decision.response))
}

/// A write to the metadata log failed (ENOSPC, EIO): the process halts, as Kafka's
/// `ProcessTerminatingFaultHandler` does for a fatal fault in the Raft I/O thread. Stopping only
/// the quorum would leave the broker serving on a metadata image frozen at an old epoch: it kept
/// acknowledging acks=all writes as leader after the controller had elected another, whose
/// followers then truncated them (acknowledged writes lost in 2 of 46 runs of the safe.toml sweep
/// under `disk-full`).
fn halt_on_metadata_log_failure(error: &dyn std::fmt::Display) -> ! {
    tracing::error!(%error, "metadata log failure; halting the process, as Kafka does");
    eprintln!("fatal: metadata log failure: {error}; halting");
    std::process::exit(1)
}
