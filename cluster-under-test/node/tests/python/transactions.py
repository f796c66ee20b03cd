"""Transactions through a real client (confluent-kafka, librdkafka's transactional producer)
against a logjam-node cluster.

Usage: transactions.py BOOTSTRAP TOPIC {commit-abort,zombie}

commit-abort: init_transactions, then a committed transaction of 10 records, an aborted one
of 10, and another committed one of 10; every call must succeed. Prints the offsets acked.

zombie: producer A opens a transaction and produces; producer B with the same
transactional.id calls init_transactions (which fences A and aborts A's transaction); A's
commit must then fail with librdkafka's fatal _FENCED error, and B can commit its own.

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
    ok = len(acked) == 30
    return ok, {"acked": len(acked), "offsets": acked}


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
    b.begin_transaction()
    produce_all(b, topic, "b", 5, acked)
    b.commit_transaction(60)
    return fenced, {"zombie_commit": seen}


def main():
    bootstrap, topic, mode = sys.argv[1:4]
    ok, seen = {"commit-abort": commit_abort, "zombie": zombie}[mode](bootstrap, topic)
    seen["ok"] = ok
    print(json.dumps(seen))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
