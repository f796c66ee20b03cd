// KafkaJS against a node: an independent protocol implementation with its own version choices
// (Produce v7, Fetch v11, JoinGroup v5, ...). Creates a 3-partition topic, produces 300
// messages with idempotence and acks=all, reads them back in a consumer group, commits, looks
// an offset up by timestamp, describes the topic's configs, commits one transaction (with the
// group's offsets) and aborts another, and reads partition 0 with read_committed.
//
// Usage: node kafkajs_roundtrip.js BOOTSTRAP TOPIC
// Exit status 0 only when every check holds; prints one JSON line with what it saw.

const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs');

const COUNT = 300;

// Reads `topic` from the beginning until `want` values arrived (or `seconds` passed), then for
// `lingerMs` more, so a record that should not be there has time to show up.
async function readAll(consumer, topic, want, seconds, lingerMs = 0, partition0 = []) {
  const values = [];
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, seconds * 1000);
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        values.push(message.value.toString());
        if (partition === 0) partition0.push([Number(message.offset), Number(message.timestamp)]);
        if (values.length === want) { clearTimeout(timer); setTimeout(resolve, lingerMs); }
      },
    });
  });
  return values;
}

async function main(bootstrap, topic) {
  const kafka = new Kafka({ clientId: 'logjam-kafkajs', brokers: bootstrap.split(','), logLevel: logLevel.NOTHING });
  const seen = {};
  const problems = [];
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'min.insync.replicas', value: '1' }] }], waitForLeaders: true });

  // Distinct timestamps in send order (a minute ago, 1 ms apart), so a timestamp names one record.
  const baseMs = Date.now() - 60000;
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const messages = Array.from({ length: COUNT }, (_, i) => ({ key: `k${i % 7}`, value: `v${i}`, timestamp: String(baseMs + i) }));
  const acked = await producer.send({ topic, acks: -1, messages });
  await producer.disconnect();
  seen.acked_partitions = acked.length;

  const group = `${topic}-group`;
  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  const partition0 = [];
  const values = await readAll(consumer, topic, COUNT, 30, 0, partition0);
  await consumer.disconnect();
  seen.read = values.length;
  const expected = messages.map((m) => m.value).sort();
  if (JSON.stringify([...values].sort()) !== JSON.stringify(expected)) problems.push('the group read other values than were produced');

  const committed = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  const ends = await admin.fetchTopicOffsets(topic);
  for (const p of committed[0].partitions) {
    const end = ends.find((e) => e.partition === p.partition).high;
    if (p.offset !== end) problems.push(`partition ${p.partition}: committed ${p.offset}, end ${end}`);
  }
  // A record from the middle of partition 0: its own timestamp finds it.
  partition0.sort((a, b) => a[0] - b[0]);
  const [middleOffset, middleMs] = partition0[Math.floor(partition0.length / 2)];
  const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, middleMs);
  const foundOffset = byTime.find((p) => p.partition === 0).offset;
  seen.timestamp_lookup = [middleMs - baseMs, foundOffset];
  if (foundOffset !== String(middleOffset)) problems.push(`offset by timestamp ${middleMs}: ${JSON.stringify(byTime)}, expected ${middleOffset}`);

  const described = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['min.insync.replicas'] }] });
  const minIsr = described.resources[0].configEntries.find((c) => c.configName === 'min.insync.replicas');
  seen.min_insync_replicas = minIsr && minIsr.configValue;
  if (!minIsr || minIsr.configValue !== '1' || minIsr.configSource !== 1) problems.push(`describeConfigs: ${JSON.stringify(minIsr)}`);

  const end0 = Number(ends.find((e) => e.partition === 0).high);
  const txnProducer = kafka.producer({ transactionalId: `${topic}-txn`, idempotent: true, maxInFlightRequests: 1 });
  await txnProducer.connect();
  const commit = await txnProducer.transaction();
  await commit.send({ topic, messages: [{ value: 'committed', partition: 0 }] });
  await commit.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: '1' }] }] });
  await commit.commit();
  const abort = await txnProducer.transaction();
  await abort.send({ topic, messages: [{ value: 'aborted', partition: 0 }] });
  await abort.abort();
  await txnProducer.disconnect();

  const reader = kafka.consumer({ groupId: `${topic}-reader`, readUncommitted: false });
  await reader.connect();
  const readCommitted = await readAll(reader, topic, COUNT + 1, 20, 2000);
  await reader.disconnect();
  seen.read_committed = readCommitted.length;
  if (!readCommitted.includes('committed') || readCommitted.includes('aborted')) problems.push('read_committed saw the aborted record or missed the committed one');
  seen.partition0_end_before_txn = end0;

  const afterTxn = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  const txnOffset = afterTxn[0].partitions.find((p) => p.partition === 0).offset;
  if (txnOffset !== '1') problems.push(`the transaction's group offset is ${txnOffset}, expected 1`);
  await admin.disconnect();
  console.log(JSON.stringify({ seen, problems }));
  return problems.length === 0;
}

main(process.argv[2], process.argv[3]).then(
  (ok) => process.exit(ok ? 0 : 1),
  (error) => { console.log(JSON.stringify({ error: String(error && error.stack || error) })); process.exit(1); },
);
