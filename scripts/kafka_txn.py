#!/usr/bin/python3
"""Exactly-once consume-transform-produce with librdkafka's transactional
producer (confluent-kafka) against a node's Kafka listener.

It produces N input records (in-0 .. in-N-1) to topic IN, then, in a loop,
a consumer in group GROUP (read_committed, no auto-commit) reads a few of
them and a transactional producer writes each transformed (out-I) to topic
OUT and sends the consumer's positions with send_offsets_to_transaction,
and commits. One transaction, the second, is aborted on purpose: its
outputs are written (and flushed to the partitions) under a marker
"aborted-I" and the transaction aborted; the consumer is rewound to the
group's committed offsets and reads those inputs again. Then:

  - a read_committed consumer reads OUT to its end: every input appears
    exactly once as out-I, and no aborted-I is visible;
  - a read_uncommitted consumer sees the aborted records (they were
    written to the log), so the abort is what hid them;
  - the group's committed offsets on IN are at its end (the offsets
    committed with the transactions, none with the aborted one).

Every wait is a poll bounded by a deadline. Exits 1 at the first check
that fails, saying what was seen; prints "kafka txn: ok ..." at the end.

Usage: kafka_txn.py HOST:PORT IN OUT GROUP [N]

IN and OUT must exist (one partition or more); the input records are
produced here.
"""

import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

TIMEOUT = 30.0


def step(msg):
    print("kafka txn: " + msg, flush=True)


def fail(msg):
    print("kafka txn: FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def errors(what):
    """An error_cb that fails on fatal errors (a fenced producer, ...)
    and notes the others (librdkafka retries them)."""

    def cb(err):
        if err.fatal():
            fail("%s: fatal error: %s" % (what, err))
        print("kafka txn: %s: %s" % (what, err), file=sys.stderr, flush=True)

    return cb


def read_all(broker, topic, isolation, want, group_id):
    """Reads topic from the start with isolation until `want` records
    or TIMEOUT: a list of (partition, offset, value)."""
    c = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "error_cb": errors("reader " + isolation),
        }
    )
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < want and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            fail("reader %s: %s" % (isolation, m.error()))
        got.append((m.partition(), m.offset(), m.value().decode()))
    # A little more, in case more than `want` are there (a duplicate).
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        m = c.poll(0.1)
        if m is not None and not m.error():
            got.append((m.partition(), m.offset(), m.value().decode()))
    c.close()
    return got


def main():
    if len(sys.argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    broker, src, dst, group = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) == 6 else 100
    batch = max(1, n // 10)

    step("producing %d input records to %s" % (n, src))
    p = Producer({"bootstrap.servers": broker, "enable.idempotence": True, "linger.ms": 5, "error_cb": errors("input producer")})
    for i in range(n):
        p.produce(src, key=str(i).encode(), value=("in-%d" % i).encode())
    left = p.flush(TIMEOUT)
    if left:
        fail("input producer: %d records not delivered in %ss" % (left, TIMEOUT))

    consumer = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "error_cb": errors("consumer"),
        }
    )
    consumer.subscribe([src])
    producer = Producer(
        {
            "bootstrap.servers": broker,
            "transactional.id": "kafka-txn-" + group,
            "transaction.timeout.ms": 60000,
            "linger.ms": 5,
            "error_cb": errors("transactional producer"),
        }
    )
    t0 = time.monotonic()
    producer.init_transactions(TIMEOUT)
    step("init_transactions: %.0f ms" % ((time.monotonic() - t0) * 1000))
    # The output topic's partitions known before the first transaction,
    # which would otherwise hold its records until librdkafka's next
    # metadata refresh (up to a second).
    md = producer.list_topics(dst, TIMEOUT)
    if dst not in md.topics or md.topics[dst].error is not None:
        fail("output topic %s: %s" % (dst, md.topics.get(dst) and md.topics[dst].error))

    delivery_errors = []

    def delivered(err, _msg):
        if err is not None:
            delivery_errors.append(err)

    committed = aborted = 0
    commit_ms = []
    done = set()
    aborted_values = []
    deadline = time.monotonic() + 3 * TIMEOUT
    while len(done) < n:
        if time.monotonic() > deadline:
            fail("consume-transform-produce: %d of %d inputs committed after %ss" % (len(done), n, 3 * TIMEOUT))
        msgs = consumer.consume(batch, 0.5)
        msgs = [m for m in msgs if m is not None]
        for m in msgs:
            if m.error() and m.error().code() != KafkaError._PARTITION_EOF:
                fail("consumer: %s" % m.error())
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        abort = committed == 1 and aborted == 0
        producer.begin_transaction()
        for m in msgs:
            i = m.value().decode().split("-", 1)[1]
            out = ("aborted-%s" if abort else "out-%s") % i
            producer.produce(dst, key=m.key(), value=out.encode(), on_delivery=delivered)
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT)
        if abort:
            # The records reach the partitions before the abort, so
            # the abort has something to hide.
            left = producer.flush(TIMEOUT)
            if left or delivery_errors:
                fail("transactional producer: %d not delivered, errors %s" % (left, delivery_errors))
            producer.abort_transaction(TIMEOUT)
            aborted += 1
            aborted_values += ["aborted-%s" % m.value().decode().split("-", 1)[1] for m in msgs]
            # Back to the group's committed offsets (those of the last
            # committed transaction): the inputs are read again.
            for tp in consumer.committed(consumer.assignment(), TIMEOUT):
                if tp.offset < 0:
                    tp.offset = 0
                consumer.seek(tp)
            continue
        t = time.monotonic()
        producer.commit_transaction(TIMEOUT)
        if delivery_errors:
            fail("transactional producer: delivery errors %s" % delivery_errors)
        commit_ms.append((time.monotonic() - t) * 1000)
        committed += 1
        for m in msgs:
            i = m.value().decode().split("-", 1)[1]
            if i in done:
                fail("input in-%s processed in two committed transactions" % i)
            done.add(i)
    elapsed = time.monotonic() - t0
    consumer.close()
    commit_ms.sort()
    step(
        "%d transactions committed, %d aborted (%d records), in %.1f s; commit_transaction took %.0f ms (median), %.0f ms (most)"
        % (committed, aborted, len(aborted_values), elapsed, commit_ms[len(commit_ms) // 2], commit_ms[-1])
    )
    if aborted != 1 or not aborted_values:
        fail("no transaction was aborted")

    got = read_all(broker, dst, "read_committed", n, group + "-check-rc")
    values = [v for _, _, v in got]
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        fail("read_committed: duplicated in %s: %s" % (dst, dup[:10]))
    leaked = [v for v in values if v.startswith("aborted-")]
    if leaked:
        fail("read_committed: aborted records visible: %s" % leaked[:10])
    want = {"out-%d" % i for i in range(n)}
    if set(values) != want:
        fail("read_committed: missing %s, unexpected %s" % (sorted(want - set(values))[:10], sorted(set(values) - want)[:10]))
    step("read_committed: each of the %d inputs exactly once in %s, none of the aborted" % (n, dst))

    got = read_all(broker, dst, "read_uncommitted", n + len(aborted_values), group + "-check-ru")
    values = {v for _, _, v in got}
    if not set(aborted_values) <= values:
        fail("read_uncommitted: the aborted records %s are not in the log" % sorted(set(aborted_values) - values)[:10])
    step("read_uncommitted: the %d aborted records are in the log" % len(aborted_values))

    c = Consumer({"bootstrap.servers": broker, "group.id": group, "error_cb": errors("offsets")})
    md = c.list_topics(src, TIMEOUT)
    tps = [TopicPartition(src, p) for p in md.topics[src].partitions]
    total = 0
    for tp in c.committed(tps, TIMEOUT):
        if tp.error:
            fail("committed offsets: %s" % tp.error)
        _, high = c.get_watermark_offsets(tp, TIMEOUT)
        if tp.offset != high:
            fail("group %s committed %s[%d] at %d, its end is %d" % (group, src, tp.partition, tp.offset, high))
        total += tp.offset
    c.close()
    if total != n:
        fail("group %s committed %d offsets in all, want %d" % (group, total, n))
    step("ok: group %s committed %s at its end (%d records) with the transactions" % (group, src, n))


if __name__ == "__main__":
    try:
        main()
    except KafkaException as e:
        fail("%s" % e.args[0])
