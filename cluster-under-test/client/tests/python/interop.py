"""Interop with librdkafka (confluent-kafka) for logjam-client's tests.

consume BOOTSTRAP TOPIC PARTITIONS COUNT: read COUNT records from the beginning of every
partition and print one JSON line: [[partition, offset, key_hex|null, value_hex|null], ...].
produce BOOTSTRAP TOPIC PARTITIONS COUNT: produce COUNT records (acks=all, keys for most,
explicit partition i % PARTITIONS) and print the acknowledged [[partition, offset, key_hex,
value_hex], ...] as one JSON line.
"""

import json
import sys
import time


def hexed(b):
    return None if b is None else b.hex()


def payload(i):
    key = None if i % 5 == 0 else f"key-{i % 11}".encode()
    value = i.to_bytes(4, "big") + bytes((i * 7 + j) % 256 for j in range(i % 50))
    return key, value


def consume(bootstrap, topic, partitions, count):
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "logjam-interop",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.time() + 60
    while len(out) < count and time.time() < deadline:
        for msg in consumer.consume(num_messages=1000, timeout=0.5):
            if msg.error():
                print(json.dumps({"error": str(msg.error())}))
                sys.exit(1)
            out.append([msg.partition(), msg.offset(), hexed(msg.key()), hexed(msg.value())])
    consumer.close()
    print(json.dumps(out))


def produce(bootstrap, topic, partitions, count):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked, errors = [], []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append([msg.partition(), msg.offset(), hexed(msg.key()), hexed(msg.value())])

    for i in range(count):
        key, value = payload(i)
        producer.produce(topic, key=key, value=value, partition=i % partitions, on_delivery=delivered)
        producer.poll(0)
    producer.flush(60)
    if errors:
        print(json.dumps({"error": errors[:5]}))
        sys.exit(1)
    print(json.dumps(acked))


if __name__ == "__main__":
    mode, bootstrap, topic, partitions, count = sys.argv[1:6]
    {"consume": consume, "produce": produce}[mode](bootstrap, topic, int(partitions), int(count))
