#!/usr/bin/python3
"""librdkafka's admin API (confluent-kafka's AdminClient) against a node's
Kafka listener: topics created (explicit counts and configs, the broker's
defaults, a dry run) and refused when they exist, partitions added,
configs described (topic and broker) and altered (a bad value and a
broker's static key refused), a group committed to, listed and, where the
binding has the call, deleted, ACLs created, described and deleted where
the binding has those calls, and the topics deleted. Each step checks the
answer; the first that does not hold exits 1 with what was seen.

Usage: kafka_admin.py HOST:PORT
"""

import sys

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

TIMEOUT = 30.0


def step(msg):
    print("kafka admin: " + msg, flush=True)


def fail(msg):
    print("kafka admin: FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def result(future):
    """The future's result, or the KafkaError it failed with."""
    try:
        return future.result(timeout=TIMEOUT), None
    except KafkaException as e:
        return None, e.args[0]


def want_ok(what, futures):
    for key, f in futures.items():
        _, err = result(f)
        if err is not None:
            fail("%s %s: %s" % (what, key, err))


def want_error(what, future, code):
    _, err = result(future)
    if err is None or err.code() != code:
        fail("%s: got %s, want %s" % (what, err, KafkaError(code)))
    if not err.str():
        fail("%s: error %s without a message" % (what, err))


def main():
    if len(sys.argv) != 2:
        fail("usage: kafka_admin.py HOST:PORT")
    bootstrap = sys.argv[1]
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 30000})

    step("create topics (explicit counts and a config, the broker's defaults), a dry run, an existing one")
    want_ok("create", admin.create_topics(
        [NewTopic("pa", num_partitions=2, replication_factor=1, config={"retention.ms": "60000"}),
         NewTopic("pb", num_partitions=1, replication_factor=1),
         NewTopic("pdef", num_partitions=-1, replication_factor=-1)],
        request_timeout=TIMEOUT))
    want_ok("validate create", admin.create_topics([NewTopic("pdry", 1, 1)], validate_only=True, request_timeout=TIMEOUT))
    want_error("create an existing topic", admin.create_topics([NewTopic("pa", 1, 1)])["pa"], KafkaError.TOPIC_ALREADY_EXISTS)
    want_error("create with an unknown config",
               admin.create_topics([NewTopic("pbad", 1, 1, config={"retention.mss": "1"})])["pbad"], KafkaError.INVALID_CONFIG)
    md = admin.list_topics(timeout=TIMEOUT)
    if "pa" not in md.topics or "pdef" not in md.topics or "pdry" in md.topics or "pbad" in md.topics:
        fail("topics after creating: %s" % sorted(md.topics))
    if len(md.topics["pa"].partitions) != 2 or len(md.topics["pdef"].partitions) < 1:
        fail("partitions: pa %d, pdef %d" % (len(md.topics["pa"].partitions), len(md.topics["pdef"].partitions)))

    step("add partitions; a shrink is refused")
    want_ok("create partitions", admin.create_partitions([NewPartitions("pa", 4)], request_timeout=TIMEOUT))
    want_error("shrink", admin.create_partitions([NewPartitions("pb", 1)])["pb"], KafkaError.INVALID_PARTITIONS)
    if len(admin.list_topics("pa", timeout=TIMEOUT).topics["pa"].partitions) != 4:
        fail("pa did not grow to 4 partitions")

    step("describe topic and broker configs")
    broker_id = str(next(iter(md.brokers)))
    fs = admin.describe_configs([ConfigResource("topic", "pa"), ConfigResource("broker", broker_id)], request_timeout=TIMEOUT)
    got = {}
    for res, f in fs.items():
        configs, err = result(f)
        if err is not None:
            fail("describe configs of %s: %s" % (res, err))
        got[res.name] = configs
    ret = got["pa"].get("retention.ms")
    if ret is None or ret.value != "60000" or ret.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value:
        fail("pa retention.ms: %r" % (ret,))
    cp = got["pa"].get("cleanup.policy")
    if cp is None or cp.value != "delete" or not cp.is_default:
        fail("pa cleanup.policy: %r" % (cp,))
    np = got[broker_id].get("num.partitions")
    if np is None or not np.is_read_only:
        fail("broker %s num.partitions: %r" % (broker_id, np))

    step("alter configs (replacing the topic's), a bad value and a broker's static key refused")
    want_ok("alter", admin.alter_configs([ConfigResource("topic", "pa", set_config={"retention.ms": "120000"})], request_timeout=TIMEOUT))
    configs, _ = result(admin.describe_configs([ConfigResource("topic", "pa")])[ConfigResource("topic", "pa")])
    if configs["retention.ms"].value != "120000":
        fail("pa retention.ms after altering: %s" % configs["retention.ms"].value)
    bad = ConfigResource("topic", "pa", set_config={"retention.ms": "soon"})
    want_error("a bad value", admin.alter_configs([bad])[bad], KafkaError.INVALID_CONFIG)
    static = ConfigResource("broker", broker_id, set_config={"num.partitions": "5"})
    want_error("a broker's static key", admin.alter_configs([static])[static], KafkaError.INVALID_REQUEST)
    if hasattr(admin, "incremental_alter_configs"):
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
        inc = ConfigResource("topic", "pa", incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
        want_ok("incremental alter", admin.incremental_alter_configs([inc]))
    else:
        step("(this binding has no incremental_alter_configs: not checked)")

    step("a group commits, is listed, and is deleted")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "pgroup", "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition("pa", 0, 0)], asynchronous=False)
    finally:
        c.close()
    groups = admin.list_groups("pgroup", timeout=TIMEOUT)
    if [g.id for g in groups] != ["pgroup"]:
        fail("list groups: %s" % [g.id for g in groups])
    if hasattr(admin, "delete_consumer_groups"):
        want_ok("delete group", admin.delete_consumer_groups(["pgroup"], request_timeout=TIMEOUT))
        if [g.id for g in admin.list_groups(timeout=TIMEOUT) if g.id == "pgroup"]:
            fail("pgroup still listed after deleting it")
    else:
        step("(this binding has no delete_consumer_groups: not checked)")

    if hasattr(admin, "create_acls"):
        step("ACLs created, described, deleted")
        from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                           ResourcePatternType, ResourceType)
        acl = AclBinding(ResourceType.TOPIC, "pa", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
        want_ok("create ACL", admin.create_acls([acl], request_timeout=TIMEOUT))
        flt = AclBindingFilter(ResourceType.TOPIC, "pa", ResourcePatternType.MATCH, "User:alice", None,
                               AclOperation.ANY, AclPermissionType.ANY)
        found, err = result(admin.describe_acls(flt, request_timeout=TIMEOUT))
        if err is not None or len(found) != 1 or found[0].operation != AclOperation.READ:
            fail("describe ACLs: %s %s" % (err, found))
        deleted, err = result(admin.delete_acls([flt], request_timeout=TIMEOUT)[flt])
        if err is not None or len(deleted) != 1:
            fail("delete ACLs: %s %s" % (err, deleted))
    else:
        step("(this binding has no ACL calls: not checked)")

    step("delete topics; deleting one again is refused")
    want_ok("delete", admin.delete_topics(["pa", "pb", "pdef"], request_timeout=TIMEOUT))
    want_error("delete a deleted topic", admin.delete_topics(["pa"])["pa"], KafkaError.UNKNOWN_TOPIC_OR_PART)
    left = [t for t in admin.list_topics(timeout=TIMEOUT).topics if t in ("pa", "pb", "pdef")]
    if left:
        fail("topics left after deleting: %s" % left)
    step("ok")


if __name__ == "__main__":
    main()
