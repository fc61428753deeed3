#!/usr/bin/env python3
"""Produce and consume with Quire over plain gRPC from Python.

Uses only grpcio and protobuf (Debian: python3-grpcio, python3-protobuf)
and stubs generated from proto/ (see README.md). It creates a topic, writes
text, binary, empty and null (tombstone) values with ProduceRecords, reads
them back with FetchRecords in both record formats, long-polls two
partitions with one FetchRecordsMulti, and reads a quire.v1.Error from a
failed call. Each step checks what it got and the script exits 1 on the
first surprise, so it doubles as a test (scripts/e2e_python.sh).

    python3 quire_example.py --brokers 127.0.0.1:9092
"""

import argparse
import sys
import time

import grpc

from quire.v1 import admin_pb2, admin_pb2_grpc
from quire.v1 import consume_pb2, consume_pb2_grpc
from quire.v1 import errors_pb2
from quire.v1 import produce_pb2, produce_pb2_grpc
from quire_errors import quire_error


def check(ok, what):
    if not ok:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


def show(record, pair):
    """Names the field of a key or value pair that is set, or says null."""
    field = record.WhichOneof(pair + "_data")
    return "%s null" % pair if field is None else "%s=%r" % (field, getattr(record, field))


def create_topic(admin, name, partitions, deadline):
    """Creates the topic, or keeps it if it exists; retries what Quire
    marks retriable (a broker still starting) until the deadline."""
    while True:
        try:
            admin.CreateTopic(admin_pb2.CreateTopicRequest(name=name, partitions=partitions), timeout=10)
            print("created topic", name)
            return
        except grpc.RpcError as err:
            e = quire_error(err)
            if e is not None and e.code == errors_pb2.TOPIC_ALREADY_EXISTS:
                print("topic", name, "exists already")
                return
            if e is None or not e.retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def latest_offsets(consumer, topic, partitions):
    req = consume_pb2.ListOffsetsRequest(partitions=[
        consume_pb2.ListOffsetsPartition(topic=topic, partition=p, timestamp_ms=-1) for p in partitions])
    resp = consumer.ListOffsets(req, timeout=10)
    for r in resp.partitions:
        check(not r.HasField("error"), "list offsets: %s" % r.error.message)
    return {r.partition: r.offset for r in resp.partitions}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="127.0.0.1:9092", help="host:port of any broker")
    ap.add_argument("--topic", default="py-example")
    args = ap.parse_args()

    channel = grpc.insecure_channel(args.brokers)
    grpc.channel_ready_future(channel).result(timeout=60)
    admin = admin_pb2_grpc.AdminStub(channel)
    producer = produce_pb2_grpc.ProducerStub(channel)
    consumer = consume_pb2_grpc.ConsumerStub(channel)

    create_topic(admin, args.topic, 2, time.monotonic() + 60)
    start = latest_offsets(consumer, args.topic, [0, 1])

    # Keys and values are text (key, value) or bytes (key_bytes,
    # value_bytes); leaving both of a pair unset is null: a null value is a
    # tombstone, distinct from an empty one.
    records = [
        produce_pb2.ProduceRecord(key="user-1", value="hello", partition=0),
        produce_pb2.ProduceRecord(key_bytes=b"\xfe\x01", value_bytes=b"\x00\xff binary", partition=0),
        produce_pb2.ProduceRecord(key="user-1", partition=0),  # tombstone
        produce_pb2.ProduceRecord(key="user-2", value="", partition=0),  # empty, not null
        produce_pb2.ProduceRecord(value="on partition 1", partition=1),
    ]
    resp = producer.ProduceRecords(produce_pb2.ProduceRecordsRequest(topic=args.topic, records=records), timeout=30)
    for i, r in enumerate(resp.results):
        check(not r.HasField("error"), "record %d: %s" % (i, r.error.message))
    print("produced", len(resp.results), "records at offsets",
          ", ".join("%d/%d" % (r.partition, r.offset) for r in resp.results))

    # RECORD_FORMAT_AUTO (the default): valid UTF-8 as text, else bytes.
    got = consumer.FetchRecords(consume_pb2.FetchRecordsRequest(
        topic=args.topic, partition=0, offset=start[0]), timeout=30).records
    check(len(got) == 4, "fetched %d records from partition 0, want 4" % len(got))
    check(got[0].key == "user-1" and got[0].value == "hello", "text record: %s" % got[0])
    check(got[1].WhichOneof("key_data") == "key_bytes" and got[1].value_bytes == b"\x00\xff binary",
          "binary record: %s" % got[1])
    check(got[2].WhichOneof("value_data") is None, "tombstone has a value: %s" % got[2])
    check(got[3].WhichOneof("value_data") == "value" and got[3].value == "", "empty value: %s" % got[3])
    for r in got:
        print("  offset %d: %s, %s" % (r.offset, show(r, "key"), show(r, "value")))

    # RECORD_FORMAT_BYTES: always the _bytes fields, whatever they hold.
    raw = consumer.FetchRecords(consume_pb2.FetchRecordsRequest(
        topic=args.topic, partition=0, offset=start[0], format=consume_pb2.RECORD_FORMAT_BYTES), timeout=30).records
    check(raw[0].key_bytes == b"user-1" and raw[0].value_bytes == b"hello", "bytes format: %s" % raw[0])
    check(raw[2].WhichOneof("value_data") is None, "bytes format, tombstone: %s" % raw[2])
    print("read back in both record formats")

    # One long poll over both partitions: it answers when a record arrives
    # on either, with no thread per partition.
    parts = [consume_pb2.FetchRecordsPartition(topic=args.topic, partition=p, offset=start[p]) for p in (0, 1)]
    multi = consumer.FetchRecordsMulti(consume_pb2.FetchRecordsMultiRequest(partitions=parts), timeout=30)
    check([len(p.records) for p in multi.partitions] == [4, 1], "multi-partition fetch: %s" % multi)
    nxt = [consume_pb2.FetchRecordsPartition(topic=args.topic, partition=p.partition, offset=p.next_offset)
           for p in multi.partitions]
    pending = consumer.FetchRecordsMulti.future(
        consume_pb2.FetchRecordsMultiRequest(partitions=nxt, max_wait_ms=60000), timeout=30)
    producer.ProduceRecords(produce_pb2.ProduceRecordsRequest(topic=args.topic, records=[
        produce_pb2.ProduceRecord(value="woke the poll", partition=1)]), timeout=30)
    woken = pending.result()
    check(len(woken.partitions[1].records) == 1 and woken.partitions[1].records[0].value == "woke the poll",
          "long poll: %s" % woken)
    print("long poll over 2 partitions answered with:", woken.partitions[1].records[0].value)

    # Errors: a failed call carries a quire.v1.Error in its status details;
    # FetchRecordsMulti answers per-partition errors inline instead.
    try:
        consumer.FetchRecords(consume_pb2.FetchRecordsRequest(topic=args.topic, partition=99), timeout=10)
        check(False, "a fetch of partition 99 succeeded")
    except grpc.RpcError as err:
        e = quire_error(err)
        # A partition past the topic's count is an invalid request: not
        # retriable, so a client that retries what is retriable stops.
        check(e is not None and e.code == errors_pb2.INVALID_REQUEST and not e.retriable, "error details: %s" % err)
        print("FetchRecords of partition 99: gRPC %s, quire %s (retriable %s): %s" % (
            err.code().name, errors_pb2.ErrorCode.Name(e.code), e.retriable, e.message))
    inline = consumer.FetchRecordsMulti(consume_pb2.FetchRecordsMultiRequest(partitions=[
        consume_pb2.FetchRecordsPartition(topic=args.topic, partition=99)]), timeout=10).partitions[0]
    check(inline.error.code == errors_pb2.INVALID_REQUEST, "inline error: %s" % inline)
    print("FetchRecordsMulti of partition 99: inline", errors_pb2.ErrorCode.Name(inline.error.code))
    print("python example: OK")


if __name__ == "__main__":
    main()
