"""KIP-848 consumer groups (group.protocol=consumer) through librdkafka against logjam-node.

Usage: kip848.py BOOTSTRAP TOPIC

TOPIC has 4 partitions and 40 records (10 each). Two confluent-kafka consumers with
group.protocol=consumer join one group: the coordinator's assignor splits the 4 partitions
between them, disjoint and complete. Each consumes and commits what it is assigned; then one
closes (a heartbeat with epoch -1): the other ends up with all 4. 10 more records per partition
are produced and read by the survivor, which closes after committing; a new member resumes from
the committed offsets and reads exactly the 5 records per partition produced after that.

Prints one JSON line with what it saw; exit status 0 only when every expectation held.
"""

import json
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, libversion

import commits


def produce(bootstrap, topic, start, count_per_partition, partitions=4):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(partitions):
        for i in range(count_per_partition):
            p.produce(topic, value=f"{part}-{start + i}".encode(), partition=part)
    assert p.flush(30) == 0


class Member(threading.Thread):
    """Polls a group.protocol=consumer member, recording assignments and values read."""

    def __init__(self, bootstrap, group, topic, name):
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.id": name,
        })
        self.name = name
        self.assigned, self.assignments, self.values = set(), [], []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.refused = []  # commits refused while the member's epoch moved on (commits.py)
        self.committed = None  # whether the strict commit before closing succeeded

        # The new protocol's assignments are incremental (as cooperative-sticky).
        def on_assign(c, parts):
            with self.lock:
                self.assigned |= {p.partition for p in parts}
                self.assignments.append(sorted(self.assigned))

        def on_revoke(c, parts):
            with self.lock:
                self.assigned -= {p.partition for p in parts}
                self.assignments.append(sorted(self.assigned))

        self.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

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


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    seen = {"librdkafka": libversion()[0]}
    group = f"{topic}-group"
    produce(bootstrap, topic, 0, 10)
    a = Member(bootstrap, group, topic, "a")
    a.start()
    seen["a_alone"] = wait(lambda: a.assigned == {0, 1, 2, 3})
    b = Member(bootstrap, group, topic, "b")
    b.start()

    def split():
        with a.lock, b.lock:
            return a.assigned and b.assigned and not (a.assigned & b.assigned) \
                and (a.assigned | b.assigned) == {0, 1, 2, 3}

    seen["split"] = wait(split)
    seen["a_assigned"], seen["b_assigned"] = sorted(a.assigned), sorted(b.assigned)
    seen["all_read"] = wait(lambda: len(set(a.values) | set(b.values)) >= 40)
    b.finish()  # leaves: epoch -1
    seen["moved"] = wait(lambda: a.assigned == {0, 1, 2, 3})
    produce(bootstrap, topic, 10, 10)
    seen["new_read_by_a"] = wait(
        lambda: len([v for v in a.values if int(v.split("-")[1]) >= 10]) >= 40)
    a.finish()
    produce(bootstrap, topic, 20, 5)
    c = Member(bootstrap, group, topic, "c")
    c.start()
    wait(lambda: len(c.values) >= 20, 60)
    time.sleep(1)
    c.finish()
    seen["a_assignments"], seen["b_assignments"] = a.assignments, b.assignments
    seen["commits_refused"] = {"a": a.refused, "b": b.refused, "c": c.refused}
    seen["committed"] = {"a": a.committed, "b": b.committed}
    seen["resumed_values"] = len(c.values)
    seen["resumed_only_new"] = sorted({int(v.split("-")[1]) for v in c.values}) == list(range(20, 25))
    ok = (seen["a_alone"] and seen["split"] and seen["all_read"] and seen["moved"]
          and seen["new_read_by_a"] and a.committed and b.committed and seen["resumed_values"] == 20 and seen["resumed_only_new"])
    seen["ok"] = ok
    print(json.dumps(seen))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
