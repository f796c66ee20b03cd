"""Commits of confluent-kafka consumers in a group that may be rebalancing, shared by groups.py
and kip848.py.

While a group rebalances (classic) or a member's epoch moves on (KIP-848), the coordinator may
refuse a commit: REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH or FENCED_MEMBER_EPOCH. librdkafka documents these as not fatal: the next poll
completes the rebalance and the next commit covers the same positions, and a record that was
read but not committed is read again by the partition's next owner. So a member commits after
each record and notes a refusal (`commit`). Before it closes, it commits its positions strictly
(`final_commit`). The scripts' checks read only what was committed.
"""

import time

from confluent_kafka import KafkaError, KafkaException


def commit(consumer, message, refused):
    """Commits `message`; a refusal is noted in `refused` (the error's name)."""
    try:
        consumer.commit(message=message, asynchronous=False)
    except KafkaException as error:
        refused.append(error.args[0].name())


def final_commit(consumer, refused, seconds=30):
    """Commits the consumer's positions, polling between tries so a rebalance in progress
    completes; "nothing to commit" (_NO_OFFSET) counts as done. Returns whether it succeeded."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            consumer.commit(asynchronous=False)
            return True
        except KafkaException as error:
            if error.args[0].code() == KafkaError._NO_OFFSET:
                return True
            refused.append(error.args[0].name())
        consumer.poll(0.2)
    return False
