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


async def read(consumer, want, seconds=30):
    values = []
    deadline = time.time() + seconds
    while len(values) < want and time.time() < deadline:
        batches = await consumer.getmany(timeout_ms=500)
        for messages in batches.values():
            values += [m.value for m in messages]
    return values


async def main(bootstrap, topic):
    seen, problems = {}, []
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, 3, 1)])
    await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    started_ms = int(time.time() * 1000) - 1
    sent = [await producer.send(topic, f"v{i}".encode(), key=f"k{i % 7}".encode()) for i in range(COUNT)]
    offsets = [await future for future in sent]
    await producer.stop()
    seen["acked"] = len(offsets)

    group = f"{topic}-group"
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    values = await read(consumer, COUNT)
    seen["read"] = len(values)
    if sorted(values) != sorted(f"v{i}".encode() for i in range(COUNT)):
        problems.append("the group read other values than were produced")
    await consumer.commit()
    tp0 = TopicPartition(topic, 0)
    committed = await consumer.committed(tp0)
    end = (await consumer.end_offsets([tp0]))[tp0]
    if committed != end:
        problems.append(f"committed {committed} for partition 0, its end is {end}")
    found = (await consumer.offsets_for_times({tp0: started_ms}))[tp0]
    if found is None or found.offset != 0:
        problems.append(f"offsets_for_times({started_ms}) found {found}, expected offset 0")
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
    # aborted. Ask for both and wait a few seconds: only the committed one may come.
    committed_values = await read(reader, end + 2, seconds=4)
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
