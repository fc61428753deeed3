#!/usr/bin/env python3
"""Consume a Quire consumer group from Python with one Subscribe stream.

The broker is the group member on the stream's behalf: it joins the group,
is assigned partitions, reads them from their leaders and streams their
records, a batch of one partition's records at a time. This program uses
the fast pattern: a credit of several batches (max_outstanding_records),
and cumulative acknowledgements: per partition, the next_offset of the
last batch handled (which acknowledges it and everything before), all
partitions in one ack message every ACK_EVERY records handled, at once
for a partition the broker says is revoking, and before closing. The
broker commits what was acknowledged. Closing the request side of the
stream leaves the group at once. Uses only grpcio and protobuf and stubs
generated from proto/ (see README.md); it checks what it got and exits 1
on the first surprise, so it doubles as a test (scripts/e2e_python.sh).

    python3 quire_subscribe.py --brokers 127.0.0.1:9092
"""

import argparse
import queue
import sys
import time

import grpc

from quire.v1 import admin_pb2, admin_pb2_grpc
from quire.v1 import errors_pb2
from quire.v1 import group_pb2, group_pb2_grpc
from quire.v1 import produce_pb2, produce_pb2_grpc
from quire_errors import quire_error

# Records handled between acknowledgements: one ack message covers them
# all, the broker sending on meanwhile (the credit is several times this).
ACK_EVERY = 1000
CREDIT = 5000


def check(ok, what):
    if not ok:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


def parts(assignment):
    return sorted((t.topic, p) for t in assignment.topics for p in t.partitions)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="py-subscribe")
    ap.add_argument("--group", default="py-subscribers")
    args = ap.parse_args()
    channel = grpc.insecure_channel(args.brokers)
    admin = admin_pb2_grpc.AdminStub(channel)
    producer = produce_pb2_grpc.ProducerStub(channel)
    groups = group_pb2_grpc.GroupsStub(channel)

    admin.CreateTopic(admin_pb2.CreateTopicRequest(name=args.topic, partitions=3), timeout=30)
    want = {}
    for p in range(3):
        values = ["p%d-r%d" % (p, i) for i in range(4)]
        producer.ProduceRecords(produce_pb2.ProduceRecordsRequest(topic=args.topic, records=[
            produce_pb2.ProduceRecord(value=v, partition=p) for v in values]), timeout=30)
        want.update({v: p for v in values})
    print("produced %d records to 3 partitions" % len(want))

    deadline = time.time() + 30
    while True:
        try:
            got = consume(groups, args, len(want), deadline)
            break
        except grpc.RpcError as err:
            # A cluster just started finalizes metadata.version 2 (consumer
            # groups) moments later; until then a join is UNSUPPORTED_VERSION.
            e = quire_error(err)
            check(e is not None and e.code == errors_pb2.UNSUPPORTED_VERSION and time.time() < deadline,
                  "subscribe: %s" % err)
            time.sleep(0.2)
    check(got == want, "read %s, want %s" % (got, want))
    print("read all %d records, each once, acknowledged; the stream ended OK" % len(got))

    # The broker committed every acknowledged record before the stream
    # ended, and the member left at once.
    committed = groups.FetchOffsets(group_pb2.FetchOffsetsRequest(group=args.group), timeout=30).offsets
    check(sorted((o.partition, o.offset) for o in committed) == [(0, 4), (1, 4), (2, 4)],
          "committed: %s" % committed)
    desc = groups.DescribeGroup(group_pb2.DescribeGroupRequest(group=args.group), timeout=30)
    check(desc.state == "empty" and len(desc.members) == 0, "group after the close: %s" % desc)
    print("committed offset 4 on each partition; group %s is empty" % args.group)
    print("python subscribe: OK")


def consume(groups, args, n, deadline):
    """Reads n records over one Subscribe stream, acknowledging each, then
    closes it; returns {value: partition}."""
    # The request side of the stream: the start, then acknowledgements
    # queued by the loop below; None ends it (a clean close).
    outbox = queue.Queue()
    outbox.put(group_pb2.SubscribeRequest(start=group_pb2.SubscribeStart(
        group=args.group, subscription=group_pb2.GroupSubscription(topics=[args.topic]),
        batches=True, max_outstanding_records=CREDIT, max_outstanding_bytes=CREDIT * 1024,
        commit_interval_ms=200)))

    def requests():
        while True:
            m = outbox.get()
            if m is None:
                return
            yield m

    got, owned, closing = {}, set(), False
    acks = Acks(args.topic, outbox)
    stream = groups.Subscribe(requests(), timeout=60)
    try:
        for event in stream:
            closing = handle(event, owned, got, acks, n, closing)
            check(time.time() < deadline, "read %d of %d records in 30s" % (len(got), n))
    finally:
        if not closing:
            outbox.put(None)
    return got


class Acks:
    """Cumulative acknowledgements: per partition, the next_offset of the
    last batch handled, sent together every ACK_EVERY records."""

    def __init__(self, topic, outbox):
        self.topic, self.outbox = topic, outbox
        self.pending, self.since = {}, 0

    def handled(self, batch):
        self.pending[batch.partition] = batch.next_offset
        self.since += len(batch.records)
        if self.since >= ACK_EVERY:
            self.flush()

    def flush(self, only=None):
        ack = group_pb2.SubscribeAck()
        for p in sorted(self.pending):
            if only is None or p in only:
                ack.partitions.add(topic=self.topic, partition=p, next_offset=self.pending[p])
        for a in ack.partitions:
            del self.pending[a.partition]
        if only is None:
            self.since = 0
        if ack.partitions:
            self.outbox.put(group_pb2.SubscribeRequest(ack=ack))


def handle(event, owned, got, acks, n, closing):
    kind = event.WhichOneof("event")
    if kind == "ack_refused":
        check(False, "ack refused: %s" % event.ack_refused)
    if kind == "assignment":
        a = event.assignment
        # A partition revoking waits for what it sent to be acknowledged:
        # say at once what was handled of it.
        acks.flush(only={p for (_, p) in parts(a.revoking)})
        owned -= set(parts(a.revoked))
        owned |= set(parts(a.assigned))
        check(owned == set(parts(a.owned)), "assignment: %s" % a)
        print("member %s epoch %d owns %s" % (a.member_id[:8], a.member_epoch, sorted(owned)))
        return closing
    batch = event.batch
    check(kind == "batch" and (batch.topic, batch.partition) in owned, "a batch of a partition not owned: %s" % event)
    for r in batch.records:
        check(r.value not in got, "read twice: %s" % r)
        got[r.value] = batch.partition
    check(batch.next_offset == batch.records[-1].offset + 1, "next_offset %d after offset %d" % (
        batch.next_offset, batch.records[-1].offset))
    # Handled: its next_offset acknowledges it and everything before.
    acks.handled(batch)
    if len(got) == n and not closing:
        acks.flush()
        acks.outbox.put(None)  # every record read: close, which commits and leaves
        return True
    return closing


if __name__ == "__main__":
    main()
