"""offsetsForTimes through a real Kafka client: produce 20 messages with explicit timestamps
(10 ms apart from a base in the past) to partition 0 of a new topic, then ask the client for
the offset of several timestamps and compare with what the timestamps say.

Usage: offsets_for_times.py {confluent,kafka-python} BOOTSTRAP TOPIC

Exit status 0 only when every lookup names the first message whose timestamp reaches the target,
with that message's timestamp, and a target past the last message finds nothing. Prints one
JSON line with the lookups.
"""

import json
import sys

BASE = 1_700_000_000_000
COUNT = 20
# target timestamp -> expected offset (None: no message reaches it)
TARGETS = {BASE - 5: 0, BASE: 0, BASE + 1: 1, BASE + 95: 10, BASE + 190: 19, BASE + 191: None}


def expected_timestamp(offset):
    return BASE + offset * 10


def run_confluent(bootstrap, topic):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(COUNT):
        producer.produce(topic, value=f"m{i}".encode(), partition=0, timestamp=expected_timestamp(i))
    assert producer.flush(30) == 0, "undelivered messages"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-g"})
    found = {}
    for target in TARGETS:
        [answer] = consumer.offsets_for_times([TopicPartition(topic, 0, target)], timeout=10)
        if answer.error is not None:
            raise RuntimeError(f"offsets_for_times({target}): {answer.error}")
        found[target] = None if answer.offset == -1 else answer.offset
    consumer.close()
    return found, {}


def run_kafka_python(bootstrap, topic):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(COUNT):
        producer.send(topic, value=f"m{i}".encode(), partition=0, timestamp_ms=expected_timestamp(i)).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    tp = TopicPartition(topic, 0)
    found, timestamps = {}, {}
    for target in TARGETS:
        answer = consumer.offsets_for_times({tp: target})[tp]
        found[target] = None if answer is None else answer.offset
        if answer is not None:
            timestamps[target] = answer.timestamp
    consumer.close()
    return found, timestamps


def main():
    client, bootstrap, topic = sys.argv[1:4]
    run = {"confluent": run_confluent, "kafka-python": run_kafka_python}[client]
    found, timestamps = run(bootstrap, topic)
    wrong = {t: (found.get(t), want) for t, want in TARGETS.items() if found.get(t) != want}
    wrong_times = {
        t: (ts, expected_timestamp(found[t])) for t, ts in timestamps.items() if ts != expected_timestamp(found[t])
    }
    print(json.dumps({"client": client, "found": {str(k - BASE): v for k, v in found.items()},
                      "wrong": {str(k - BASE): v for k, v in wrong.items()},
                      "wrong_timestamps": {str(k - BASE): v for k, v in wrong_times.items()}}))
    sys.exit(1 if wrong or wrong_times else 0)


if __name__ == "__main__":
    main()
