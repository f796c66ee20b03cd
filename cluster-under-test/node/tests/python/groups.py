"""Consumer groups (classic protocol) through real clients against a logjam-node cluster.

Usage: groups.py BOOTSTRAP TOPIC {split-leave-resume,static-restart}

split-leave-resume: TOPIC has 4 partitions and 40 records (10 each). A confluent-kafka
consumer (group.protocol=classic) and a kafka-python KafkaConsumer join one group: the 4
partitions are split between them, disjoint and complete. Each consumes and commits what it
was assigned, then the kafka-python member leaves: the confluent member gets all 4. 10 more
records are produced, the confluent member closes after committing; a new member resumes
from the committed offsets and reads exactly the 10 new records.

static-restart: two confluent consumers with group.instance.id; the leader closes without
leaving (static members do not send LeaveGroup) and restarts with the same instance id within
the session timeout: the other member sees no rebalance (its assignment callback runs once).

Prints one JSON line with what it saw; exit status 0 only when every expectation held.
"""

import json
import sys
import threading
import time

import commits

# What a commit may meet while the group rebalances: see commits.py for the confluent members.
# kafka-python refuses a commit itself while it rejoins (RebalanceInProgressError, "try
# completing the rebalance by calling poll() and then retry"), or turns the coordinator's
# refusal into CommitFailedError. Neither is fatal: the next poll finishes the rebalance and the
# next commit covers the same positions.


def kafka_python_commit(consumer, refused):
    """Commits a kafka-python consumer's positions; a refusal during a rebalance is noted."""
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    try:
        consumer.commit()
    except (RebalanceInProgressError, CommitFailedError) as error:
        refused.append(type(error).__name__)


def produce(bootstrap, topic, start, count_per_partition, partitions=4):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(partitions):
        for i in range(count_per_partition):
            p.produce(topic, value=f"{part}-{start + i}".encode(), partition=part)
    assert p.flush(30) == 0


def confluent(bootstrap, group, extra=None):
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "classic",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range",
    }
    conf.update(extra or {})
    return Consumer(conf)


class Member(threading.Thread):
    """Polls a confluent consumer, recording assignments and the values it read."""

    def __init__(self, consumer, topic, name):
        super().__init__(daemon=True)
        self.consumer, self.name = consumer, name
        self.assigned, self.assignments, self.values = set(), [], []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.refused = []  # commits refused during a rebalance (names of the errors)
        self.committed = None  # whether the last, strict commit before closing succeeded

        def on_assign(c, parts):
            with self.lock:
                self.assigned = {p.partition for p in parts}
                self.assignments.append(sorted(self.assigned))

        def on_revoke(c, parts):
            with self.lock:
                self.assigned = set()

        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

    def run(self):
        while not self.stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                with self.lock:
                    self.values.append(msg.value().decode())
                commits.commit(self.consumer, msg, self.refused)

    def finish(self):
        """Stops polling, commits the positions strictly, and closes the consumer."""
        self.stop.set()
        self.join()
        self.committed = commits.final_commit(self.consumer, self.refused)
        self.consumer.close()


def wait(predicate, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def split_leave_resume(bootstrap, topic):
    from kafka import KafkaConsumer

    seen = {}
    group = f"{topic}-group"
    produce(bootstrap, topic, 0, 10)
    a = Member(confluent(bootstrap, group), topic, "confluent")
    a.start()
    b = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=10000, heartbeat_interval_ms=500)
    b_values, b_refused = [], []

    def b_assigned():
        return {tp.partition for tp in b.assignment()}

    def both_assigned():
        for records in b.poll(timeout_ms=200).values():
            b_values.extend(r.value.decode() for r in records)
        if b_values:
            kafka_python_commit(b, b_refused)
        with a.lock:
            mine = set(a.assigned)
        return mine and b_assigned() and mine | b_assigned() == {0, 1, 2, 3}

    seen["split"] = wait(both_assigned)
    with a.lock:
        seen["a_assigned"] = sorted(a.assigned)
    seen["b_assigned"] = sorted(b_assigned())
    seen["disjoint"] = not (set(seen["a_assigned"]) & set(seen["b_assigned"]))

    def all_read():
        for records in b.poll(timeout_ms=200).values():
            b_values.extend(r.value.decode() for r in records)
        if b_values:
            kafka_python_commit(b, b_refused)
        with a.lock:
            return len(set(a.values) | set(b_values)) >= 40

    seen["all_read"] = wait(all_read)
    b.close()  # LeaveGroup: its partitions move to the confluent member.
    seen["moved"] = wait(lambda: a.assigned == {0, 1, 2, 3})
    produce(bootstrap, topic, 10, 10)
    seen["new_read_by_a"] = wait(lambda: len([v for v in a.values if int(v.split("-")[1]) >= 10]) >= 40)
    a.finish()
    produce(bootstrap, topic, 20, 5)
    c = Member(confluent(bootstrap, group), topic, "resumed")
    c.start()
    wait(lambda: len(c.values) >= 20, 40)
    time.sleep(1)
    c.finish()
    seen["commits_refused"] = {"confluent": a.refused, "kafka-python": b_refused, "resumed": c.refused}
    seen["a_committed"] = a.committed
    seen["resumed_values"] = len(c.values)
    seen["resumed_only_new"] = sorted({int(v.split("-")[1]) for v in c.values}) == list(range(20, 25))
    ok = (seen["split"] and seen["disjoint"] and seen["all_read"] and seen["moved"]
          and seen["new_read_by_a"] and seen["a_committed"] and seen["resumed_values"] == 20 and seen["resumed_only_new"])
    return ok, seen


def static_restart(bootstrap, topic):
    seen = {}
    group = f"{topic}-static"
    produce(bootstrap, topic, 0, 2)
    static = {"session.timeout.ms": 15000}
    # (subscribe() starts librdkafka's join at once: a is created only after b settled)
    b = Member(confluent(bootstrap, group, dict(static, **{"group.instance.id": "b"})), topic, "b")
    # b settles alone first, so it leads the group: the restart replaces the leader, the
    # harder case (a replaced leader must not reassign, nor rebalance).
    b.start()
    seen["b_alone"] = wait(lambda: b.assigned == {0, 1, 2, 3})
    a = Member(confluent(bootstrap, group, dict(static, **{"group.instance.id": "a"})), topic, "a")
    a.start()
    seen["split"] = wait(lambda: a.assigned and b.assigned and (a.assigned | b.assigned) == {0, 1, 2, 3})
    a_before = list(a.assignments)
    b.finish()  # a static member's close sends no LeaveGroup
    b2 = Member(confluent(bootstrap, group, dict(static, **{"group.instance.id": "b"})), topic, "b2")
    b2.start()
    seen["restarted_assigned"] = wait(lambda: bool(b2.assigned))
    time.sleep(2)
    seen["a_assignments"] = a.assignments
    seen["b2_assigned"] = sorted(b2.assigned)
    seen["no_rebalance"] = a.assignments == a_before
    for m in (a, b2):
        m.finish()
    ok = seen["b_alone"] and seen["split"] and seen["restarted_assigned"] and seen["no_rebalance"]
    return ok, seen


def poll_timeout(bootstrap, topic):
    """A member that stops polling past max.poll.interval.ms while its heartbeats go on (a
    confluent-kafka member, then a kafka-python one): the client leaves the group itself (the
    node names the rebalance's cause)."""
    from kafka import KafkaConsumer

    seen = {}
    group = f"{topic}-poll"
    produce(bootstrap, topic, 0, 1)
    # librdkafka wants max.poll.interval.ms >= session.timeout.ms: both at the node's 6 s
    # minimum; its heartbeats run on their own thread and keep the session alive.
    slow = Member(confluent(bootstrap, group, {"max.poll.interval.ms": 6000,
                                               "session.timeout.ms": 6000}), topic, "slow")
    slow.start()
    seen["assigned"] = wait(lambda: slow.assigned == {0, 1, 2, 3}, 30)
    slow.stop.set()
    slow.join()
    time.sleep(9)  # no poll: the poll clock expires, the heartbeat clock does not
    slow.consumer.close()
    java_like = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{group}-kp",
                              session_timeout_ms=10000, max_poll_interval_ms=2000,
                              heartbeat_interval_ms=500)
    start = time.time()
    while time.time() - start < 20 and not java_like.assignment():
        java_like.poll(timeout_ms=200)
    seen["kafka_python_assigned"] = bool(java_like.assignment())
    time.sleep(4)
    java_like.close()
    return seen["assigned"] and seen["kafka_python_assigned"], seen


def main():
    bootstrap, topic, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    ok, seen = {"split-leave-resume": split_leave_resume, "static-restart": static_restart,
                 "poll-timeout": poll_timeout}[mode](bootstrap, topic)
    seen["ok"] = ok
    print(json.dumps(seen))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
