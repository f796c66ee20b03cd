"""Transactions through a real client (confluent-kafka, librdkafka's transactional producer)
against a logjam-node cluster.

Usage: transactions.py BOOTSTRAP TOPIC {commit-abort,zombie,kafka-python-commit-abort}

commit-abort: init_transactions, then a committed transaction of 10 records, an aborted one
of 10, and another committed one of 10; every call must succeed. Prints the offsets acked.

kafka-python-commit-abort: commit-abort with kafka-python's transactional producer.

zombie: producer A opens a transaction and produces; producer B with the same
transactional.id calls init_transactions (which fences A and aborts A's transaction); A's
commit must then fail with librdkafka's fatal _FENCED error, and B can commit its own.

send-offsets: consume-transform-produce. Records are seeded on TOPIC; a consumer of group
TOPIC-group reads some, a transactional producer writes their transforms to TOPIC-out and
calls send_offsets_to_transaction(consumer.position(...), consumer_group_metadata()), then
commits; a second consumer of the group must see those offsets committed. Then the same with
an abort: a third consumer must still see the first transaction's offsets.

Prints one JSON line with what it saw; exit status 0 only when every expectation held.
"""

import json
import sys


def producer(bootstrap, txn_id):
    from confluent_kafka import Producer

    return Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": 60000,
        "linger.ms": 5,
    })


def produce_all(p, topic, tag, count, acked):
    def delivered(err, msg):
        if err is None:
            acked.append([tag, msg.partition(), msg.offset()])

    for i in range(count):
        p.produce(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-{i}".encode(),
                  partition=i % 2, on_delivery=delivered)
    p.flush(30)


def read_committed(bootstrap, topic, partitions=2):
    """Every record a read_committed consumer sees on the topic, as keys, in offset order."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"{topic}-reader",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    keys, eof = [], set()
    import time
    deadline = time.time() + 60
    while len(eof) < partitions and time.time() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                eof.add(msg.partition())
                continue
            raise RuntimeError(str(msg.error()))
        keys.append(msg.key().decode())
    consumer.close()
    return sorted(keys), len(eof) == partitions


def commit_abort(bootstrap, topic):
    p = producer(bootstrap, f"{topic}-txn")
    p.init_transactions(60)
    acked = []
    for tag, commit in [("c1", True), ("a1", False), ("c2", True)]:
        p.begin_transaction()
        produce_all(p, topic, tag, 10, acked)
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
    keys, complete = read_committed(bootstrap, topic)
    expected = sorted(f"{tag}-{i}" for tag in ("c1", "c2") for i in range(10))
    ok = len(acked) == 30 and complete and keys == expected
    return ok, {"acked": len(acked), "read_committed": keys, "read_to_end": complete}


def kafka_python_commit_abort(bootstrap, topic):
    """commit-abort with kafka-python's transactional producer (its own protocol code, not
    librdkafka's), read back with the read_committed consumer above."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap.split(","),
                      transactional_id=f"{topic}-kp-txn",
                      transaction_timeout_ms=60000, linger_ms=5)
    p.init_transactions()
    acked = []
    for tag, commit in [("c1", True), ("a1", False), ("c2", True)]:
        p.begin_transaction()
        futures = [p.send(topic, key=f"{tag}-{i}".encode(), value=b"v", partition=i % 2)
                   for i in range(10)]
        p.flush(30)
        acked.extend(f.get(timeout=30).offset for f in futures)
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.close(timeout=10)
    keys, complete = read_committed(bootstrap, topic)
    expected = sorted(f"{tag}-{i}" for tag in ("c1", "c2") for i in range(10))
    ok = len(acked) == 30 and complete and keys == expected
    return ok, {"acked": len(acked), "read_committed": keys, "read_to_end": complete}


def zombie(bootstrap, topic):
    from confluent_kafka import KafkaException

    txn_id = f"{topic}-zombie"
    a = producer(bootstrap, txn_id)
    a.init_transactions(60)
    a.begin_transaction()
    acked = []
    produce_all(a, topic, "zombie", 5, acked)
    b = producer(bootstrap, txn_id)
    b.init_transactions(60)
    seen = None
    try:
        produce_all(a, topic, "zombie-late", 1, acked)
        a.commit_transaction(30)
        seen = "committed"
    except KafkaException as e:
        error = e.args[0]
        seen = {"code": error.name(), "fatal": error.fatal()}
    fenced = isinstance(seen, dict) and seen["fatal"] and seen["code"] in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    try:
        b.begin_transaction()
        produce_all(b, topic, "b", 5, acked)
        b.commit_transaction(60)
        b_outcome = "committed"
    except KafkaException as e:
        b_outcome = e.args[0].name()
    keys, complete = read_committed(bootstrap, topic)
    ok = fenced and b_outcome == "committed" and complete and keys == sorted(f"b-{i}" for i in range(5))
    return ok, {"zombie_commit": seen, "new_producer": b_outcome, "read_committed": keys,
                "read_to_end": complete}


def commit_paused(bootstrap, topic, partition, txn_id):
    """Produces 5 records in a transaction to one partition, then waits for a line on stdin
    (the test crashes that partition's leader), commits, waits for another line (the test
    restarted the leader) and reads the partition back read_committed."""
    from confluent_kafka import TopicPartition  # noqa: F401

    p = producer(bootstrap, txn_id)
    p.init_transactions(60)
    p.begin_transaction()
    acked = []
    for i in range(5):
        p.produce(topic, key=f"p-{i}".encode(), value=b"v", partition=partition,
                  on_delivery=lambda err, msg: err is None and acked.append(msg.offset()))
    p.flush(30)
    print("READY", flush=True)
    sys.stdin.readline()
    p.commit_transaction(60)
    print("COMMITTED", flush=True)
    sys.stdin.readline()
    keys, complete = read_committed(bootstrap, topic, partitions=partition + 1)
    keys = [k for k in keys if k.startswith("p-")]
    ok = len(acked) == 5 and complete and keys == [f"p-{i}" for i in range(5)]
    return ok, {"acked": len(acked), "read_committed": keys, "read_to_end": complete}


def send_offsets(bootstrap, topic):
    import time
    from confluent_kafka import Consumer, Producer, TopicPartition

    seed = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        seed.produce(topic, value=f"in-{i}".encode(), partition=i % 2)
    seed.flush(30)
    group = f"{topic}-group"

    def consumer():
        c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        })
        c.subscribe([topic])
        return c

    def committed(c):
        parts = [TopicPartition(topic, p) for p in range(2)]
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                return {tp.partition: tp.offset for tp in c.committed(parts, timeout=10)}
            except Exception:  # noqa: BLE001 - retried until the coordinator answers
                time.sleep(0.5)
        raise RuntimeError("committed() never answered")

    def step(p, c, count, commit):
        got = 0
        deadline = time.time() + 60
        while got < count and time.time() < deadline:
            msg = c.poll(1.0)
            if msg is None or msg.error():
                continue
            p.produce(f"{topic}-out", value=b"out-" + msg.value(), partition=0)
            got += 1
        positions = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
        p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 60)
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
        return {tp.partition: tp.offset for tp in positions}

    p = producer(bootstrap, f"{topic}-txn")
    p.init_transactions(60)
    c1 = consumer()
    p.begin_transaction()
    first = step(p, c1, 10, True)
    c1.close()
    c2 = consumer()
    after_commit = committed(c2)
    p.begin_transaction()
    second = step(p, c2, 10, False)
    c2.close()
    c3 = consumer()
    after_abort = committed(c3)
    c3.close()
    want = {part: first.get(part, -1001) for part in range(2)}
    ok = (bool(first) and after_commit == want and after_abort == want
          and second != first)
    return ok, {"sent": first, "committed": after_commit, "aborted_sent": second,
                "after_abort": after_abort}


def main():
    bootstrap, topic, mode = sys.argv[1:4]
    if mode == "commit-paused":
        ok, seen = commit_paused(bootstrap, topic, int(sys.argv[4]), sys.argv[5])
        seen["ok"] = ok
        print(json.dumps(seen))
        sys.exit(0 if ok else 1)
    ok, seen = {"commit-abort": commit_abort, "zombie": zombie,
                 "kafka-python-commit-abort": kafka_python_commit_abort,
                 "send-offsets": send_offsets}[mode](bootstrap, topic)
    seen["ok"] = ok
    print(json.dumps(seen))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
