"""aiokafka against a node: its own protocol code and version choices, independent of
librdkafka's and kafka-python's. Creates a 3-partition topic, produces 300 messages with
idempotence and acks=all, reads them back in a consumer group and commits, looks an offset up by
timestamp, commits one transaction (with the group's offsets) and aborts another, and reads with
read_committed.

Usage: aiokafka_roundtrip.py BOOTSTRAP TOPIC

Exit status 0 only when every check holds; prints one JSON line with what it saw.
"""

import asyncio
import json
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

COUNT = 300


async def read(consumer, want, seconds=30, linger=0.0, seen_at=None):
    """Values read until `want` arrived (or `seconds` passed), then for `linger` seconds more,
    so a record that should not be there has time to show up. `seen_at` collects partition 0's
    (offset, timestamp) pairs."""
    values = []
    deadline = time.time() + seconds
    lingering_until = None
    while time.time() < (lingering_until or deadline):
        batches = await consumer.getmany(timeout_ms=200)
        for tp, messages in batches.items():
            values += [m.value for m in messages]
            if seen_at is not None and tp.partition == 0:
                seen_at += [(m.offset, m.timestamp) for m in messages]
        if lingering_until is None and len(values) >= want:
            if not linger:
                break
            lingering_until = time.time() + linger
    return values


async def main(bootstrap, topic):
    seen, problems = {}, []
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, 3, 1)])
    await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    # Distinct timestamps in send order (a minute ago, 1 ms apart), so a timestamp names one record.
    base_ms = int(time.time() * 1000) - 60_000
    sent = [await producer.send(topic, f"v{i}".encode(), key=f"k{i % 7}".encode(), timestamp_ms=base_ms + i)
            for i in range(COUNT)]
    offsets = [await future for future in sent]
    await producer.stop()
    seen["acked"] = len(offsets)

    group = f"{topic}-group"
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    partition0 = []
    values = await read(consumer, COUNT, seen_at=partition0)
    seen["read"] = len(values)
    if sorted(values) != sorted(f"v{i}".encode() for i in range(COUNT)):
        problems.append("the group read other values than were produced")
    await consumer.commit()
    tp0 = TopicPartition(topic, 0)
    committed = await consumer.committed(tp0)
    end = (await consumer.end_offsets([tp0]))[tp0]
    if committed != end:
        problems.append(f"committed {committed} for partition 0, its end is {end}")
    # A record from the middle of partition 0: its own timestamp finds it.
    partition0.sort()
    middle_offset, middle_ms = partition0[len(partition0) // 2]
    found = (await consumer.offsets_for_times({tp0: middle_ms}))[tp0]
    seen["timestamp_lookup"] = [middle_ms - base_ms, None if found is None else found.offset]
    if found is None or (found.offset, found.timestamp) != (middle_offset, middle_ms):
        problems.append(f"offsets_for_times({middle_ms}) found {found}, expected offset {middle_offset}")
    await consumer.stop()

    txn = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-txn")
    await txn.start()
    async with txn.transaction():
        await txn.send_and_wait(topic, b"committed", partition=0)
        await txn.send_offsets_to_transaction({tp0: 1}, group)
    try:
        async with txn.transaction():
            await txn.send_and_wait(topic, b"aborted", partition=0)
            raise RuntimeError("abort")
    except RuntimeError:
        pass
    await txn.stop()

    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                              auto_offset_reset="earliest")
    await reader.start()
    reader.assign([tp0])
    await reader.seek_to_beginning(tp0)
    # Partition 0 held `end` records before the transactions; one more was committed, one
    # aborted: read until the committed one came, then a while longer for the aborted one.
    committed_values = await read(reader, end + 1, seconds=30, linger=2.0)
    await reader.stop()
    seen["read_committed"] = len(committed_values)
    if b"committed" not in committed_values or b"aborted" in committed_values:
        problems.append("read_committed saw the aborted record or missed the committed one")
    offsets_consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await offsets_consumer.start()
    txn_offset = await offsets_consumer.committed(tp0)
    await offsets_consumer.stop()
    if txn_offset != 1:
        problems.append(f"the transaction's group offset is {txn_offset}, expected 1")
    print(json.dumps({"seen": seen, "problems": problems}))
    return not problems


if __name__ == "__main__":
    sys.exit(0 if asyncio.run(main(sys.argv[1], sys.argv[2])) else 1)
