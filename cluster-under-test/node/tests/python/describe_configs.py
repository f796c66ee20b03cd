"""DescribeConfigs through a real Kafka client: create a topic overriding
unclean.leader.election.enable, then describe it and the broker.

Usage: describe_configs.py {confluent,kafka-python} BOOTSTRAP TOPIC

Exit status 0 only when the topic's override is reported with its value and the topic source,
min.insync.replicas with the broker's value (the node runs with min.insync.replicas=2 in its
file) and the broker source, and the broker describes its own min.insync.replicas. Prints one
JSON line with what it saw.
"""

import json
import sys

TOPIC_CONFIG, STATIC_BROKER_CONFIG = 1, 4


def run_confluent(bootstrap, topic):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, 1, 1, config={"unclean.leader.election.enable": "true"})
    admin.create_topics([new])[topic].result(timeout=30)
    seen = {}
    for kind, name in (("topic", topic), ("broker", "1")):
        resource = ConfigResource(kind, name)
        configs = admin.describe_configs([resource])[resource].result(timeout=30)
        for key in ("unclean.leader.election.enable", "min.insync.replicas"):
            seen[f"{kind}:{key}"] = (configs[key].value, int(configs[key].source))
    return seen


def run_kafka_python(bootstrap, topic):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"unclean.leader.election.enable": "true"})])
    # kafka-python 3 answers {type: {name: {key: {"value", "config_source", ...}}}}, sources by name.
    sources = {"DYNAMIC_TOPIC_CONFIG": TOPIC_CONFIG, "TOPIC_CONFIG": TOPIC_CONFIG,
               "STATIC_BROKER_CONFIG": STATIC_BROKER_CONFIG}
    seen = {}
    for kind, name, label in ((ConfigResourceType.TOPIC, topic, "topic"), (ConfigResourceType.BROKER, "1", "broker")):
        described = admin.describe_configs([ConfigResource(kind, name)], include_synonyms=True, config_filter="all")
        configs = described[label][name]
        for key in ("unclean.leader.election.enable", "min.insync.replicas"):
            source = configs[key]["config_source"]
            seen[f"{label}:{key}"] = (configs[key]["value"], sources.get(source, source))
    admin.close()
    return seen


def main():
    client, bootstrap, topic = sys.argv[1:4]
    seen = {"confluent": run_confluent, "kafka-python": run_kafka_python}[client](bootstrap, topic)
    expected = {
        "topic:unclean.leader.election.enable": ("true", TOPIC_CONFIG),
        "topic:min.insync.replicas": ("2", STATIC_BROKER_CONFIG),
        "broker:min.insync.replicas": ("2", STATIC_BROKER_CONFIG),
    }
    wrong = {k: (seen.get(k), v) for k, v in expected.items() if seen.get(k) != v}
    print(json.dumps({"client": client, "seen": seen, "wrong": wrong}))
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
