"""Round trip through a real Kafka client: create a topic, produce with acks=all, consume
every partition back from the beginning and compare byte for byte.

Usage: roundtrip.py {confluent,kafka-python} BOOTSTRAP TOPIC PARTITIONS MESSAGES

Exit status 0 only when every produced message was acknowledged with an offset, and each
partition read back holds exactly the acknowledged messages, at their acknowledged offsets,
in order, with identical keys and values. Prints one JSON line describing what it saw.
"""

import json
import random
import sys
import time


def payloads(count, seed=7):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        # Unique, varied sizes, including empty values and non-UTF-8 bytes.
        size = rng.choice([0, 1, 17, 100, 1000])
        value = i.to_bytes(4, "big") + bytes(rng.getrandbits(8) for _ in range(size))
        key = None if i % 7 == 0 else f"key-{i % 13}".encode()
        out.append((key, value))
    return out


def run_confluent(bootstrap, topic, partitions, messages):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=30)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
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

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "logjam-roundtrip",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
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


def run_kafka_python(bootstrap, topic, partitions, messages):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    admin.close()

    # kafka-python 3 turns idempotence on by default (InitProducerId, sequence numbers):
    # leave the default so the node's idempotent producer is exercised.
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    assert producer.config["enable_idempotence"], "kafka-python default should be idempotent"
    futures = []
    for i, (key, value) in enumerate(messages):
        futures.append((key, value, producer.send(topic, key=key, value=value, partition=i % partitions)))
    producer.flush(60)
    acked = {}
    for key, value, future in futures:
        meta = future.get(timeout=30)
        acked[(meta.partition, meta.offset)] = (key, value)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
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


def main():
    client, bootstrap, topic, partitions, count = sys.argv[1:6]
    partitions, count = int(partitions), int(count)
    messages = payloads(count)
    runner = {"confluent": run_confluent, "kafka-python": run_kafka_python}[client]
    acked, read, error = runner(bootstrap, topic, partitions, messages)
    problems = []
    if error:
        problems.append(error)
    if len(acked) != count:
        problems.append(f"{len(acked)} of {count} messages acknowledged with distinct offsets")
    if sorted(v for _, v in acked.values()) != sorted(v for _, v in messages):
        problems.append("acknowledged values differ from the values sent")
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
    print(json.dumps({"client": client, "acked": len(acked), "read": len(read), "problems": problems}))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
