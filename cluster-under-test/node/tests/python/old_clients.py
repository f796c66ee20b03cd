"""Produce and consume through a client pinned to an old protocol: kafka-python with a fixed
`api_version`, or librdkafka (confluent-kafka) with `api.version.request=false` and a
`broker.version.fallback`. Neither asks the node which versions it serves: each sends the
versions its pinned release used, which is what exercises the node's old-version paths.

A kafka-python release older than 0.11 is expected to be refused (see refused_kafka_python).

Usage: old_clients.py {kafka-python,confluent} VERSION BOOTSTRAP TOPIC PARTITIONS MESSAGES
  VERSION: dotted, e.g. 1.0 (kafka-python api_version (1, 0)) or 0.11.0 (librdkafka fallback).

The topic must exist. Exit status 0 only when every message was acknowledged with an offset and
each partition read back from offset 0 holds exactly the acknowledged messages, at their
acknowledged offsets, with identical keys and values. Prints one JSON line.
"""

import json
import sys
import time

from roundtrip import payloads


def run_kafka_python(version, bootstrap, topic, partitions, messages):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    api_version = tuple(int(p) for p in version.split("."))
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, acks="all",
                             linger_ms=5, request_timeout_ms=10000, max_block_ms=20000)
    futures = []
    for i, (key, value) in enumerate(messages):
        futures.append((key, value, producer.send(topic, key=key, value=value, partition=i % partitions)))
    producer.flush(30)
    acked = {}
    for key, value, future in futures:
        meta = future.get(timeout=30)
        acked[(meta.partition, meta.offset)] = (key, value)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version,
                             enable_auto_commit=False, request_timeout_ms=10000)
    assignment = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(assignment)
    consumer.seek_to_beginning(*assignment)
    read = {}
    deadline = time.time() + 60
    while len(read) < len(acked) and time.time() < deadline:
        for tp, records in consumer.poll(timeout_ms=500, max_records=1000).items():
            for record in records:
                read[(tp.partition, record.offset)] = (record.key, record.value)
    consumer.close()
    return acked, read, None


def refused_kafka_python(version, bootstrap, topic, partitions, messages):
    """A release older than 0.11 produces with Produce v0-v2 (message format v0/v1), which Kafka
    4 brokers and this node no longer accept: the client must get an error, not an ack."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    api_version = tuple(int(p) for p in version.split("."))
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, acks="all",
                             request_timeout_ms=2000, max_block_ms=5000, retries=0)
    futures = [producer.send(topic, key=key, value=value, partition=i % partitions)
               for i, (key, value) in enumerate(messages)]
    try:
        producer.flush(8)
    except KafkaError:
        pass
    acked = sum(1 for f in futures if f.succeeded())
    failed = sum(1 for f in futures if f.failed())
    producer.close(timeout=1)
    print(json.dumps({"client": "kafka-python", "version": version, "refused": True,
                      "acked": acked, "failed": failed}))
    sys.exit(0 if acked == 0 else 1)


def run_confluent(version, bootstrap, topic, partitions, messages):
    from confluent_kafka import Consumer, Producer, TopicPartition

    pinned = {"bootstrap.servers": bootstrap, "api.version.request": False,
              "broker.version.fallback": version}
    producer = Producer({**pinned, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000})
    acked = {}
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    for i, (key, value) in enumerate(messages):
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or errors:
        return acked, {}, f"{remaining} undelivered, errors: {errors[:5]}"

    consumer = Consumer({**pinned, "group.id": "logjam-old-clients", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    read = {}
    deadline = time.time() + 60
    while len(read) < len(acked) and time.time() < deadline:
        for msg in consumer.consume(num_messages=1000, timeout=0.5):
            if msg.error():
                return acked, read, f"consume error: {msg.error()}"
            read[(msg.partition(), msg.offset())] = (msg.key(), msg.value())
    consumer.close()
    return acked, read, None


def main():
    client, version, bootstrap, topic, partitions, count = sys.argv[1:7]
    partitions, count = int(partitions), int(count)
    messages = payloads(count)
    if client == "kafka-python" and tuple(int(p) for p in version.split(".")) < (0, 11):
        refused_kafka_python(version, bootstrap, topic, partitions, messages)
    runner = {"confluent": run_confluent, "kafka-python": run_kafka_python}[client]
    acked, read, error = runner(version, bootstrap, topic, partitions, messages)
    problems = []
    if error:
        problems.append(error)
    if len(acked) != count:
        problems.append(f"{len(acked)} of {count} messages acknowledged with distinct offsets")
    for position, record in acked.items():
        if read.get(position) != record:
            problems.append(f"at partition/offset {position}: read {read.get(position)!r:.80}, acked {record!r:.80}")
            if len(problems) > 5:
                break
    extra = set(read) - set(acked)
    if extra:
        problems.append(f"{len(extra)} records read that were never acknowledged")
    for p in range(partitions):
        offsets = sorted(o for (q, o) in acked if q == p)
        if offsets != list(range(len(offsets))):
            problems.append(f"partition {p}: offsets are not 0..{len(offsets) - 1}")
    print(json.dumps({"client": client, "version": version, "acked": len(acked), "read": len(read),
                      "problems": problems}))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
