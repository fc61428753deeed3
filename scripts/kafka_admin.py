#!/usr/bin/python3
"""librdkafka's admin API (confluent-kafka's AdminClient) against a node's
Kafka listener: topics created (explicit counts and configs, the broker's
defaults, a dry run) and refused when they exist, partitions added,
configs described (topic and broker) and altered (a bad value and a
broker's static key refused), a group committed to, listed and deleted,
ACLs created, described and deleted, and the topics deleted. The calls an
older binding does not wrap (ACLs and group deletion in Debian 12's 1.7)
go through librdkafka's C API with ctypes. Each step checks the answer;
the first that does not hold exits 1 with what was seen.

Usage: kafka_admin.py HOST:PORT[,HOST:PORT...] [PROPERTY=VALUE ...]

The PROPERTY=VALUE pairs are librdkafka properties given to every client
(security.protocol=SASL_SSL, sasl.mechanisms, sasl.username, ...).
"""

import sys
import time

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


def eventually(what, check):
    """Polls check (None once it holds, else what it saw) for TIMEOUT
    seconds: on a cluster the node a client asks may apply a change a
    moment after the one that took it (docs/security.md)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        seen = check()
        if seen is None:
            return
        if time.monotonic() > deadline:
            fail("%s: %s (waited %ss)" % (what, seen, TIMEOUT))
        time.sleep(0.1)


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


class Rdkafka:
    """librdkafka's C admin API through ctypes, for the calls an older
    binding (Debian 12's confluent-kafka 1.7) does not wrap: ACLs and
    group deletion. The same library the binding uses sends the
    requests."""

    PRODUCER = 0
    # Kafka's enums, as librdkafka numbers them.
    TOPIC, MATCH, LITERAL, ANY = 2, 2, 3, 1
    READ, ALLOW = 3, 3

    def __init__(self, bootstrap, props):
        import ctypes
        self.c = ctypes
        lib = ctypes.CDLL("librdkafka.so.1")
        P, S, I = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        for name, res, args in [
            ("rd_kafka_conf_new", P, []),
            ("rd_kafka_conf_set", I, [P, S, S, S, ctypes.c_size_t]),
            ("rd_kafka_new", P, [I, P, S, ctypes.c_size_t]),
            ("rd_kafka_destroy", None, [P]),
            ("rd_kafka_queue_new", P, [P]),
            ("rd_kafka_queue_destroy", None, [P]),
            ("rd_kafka_queue_poll", P, [P, I]),
            ("rd_kafka_event_destroy", None, [P]),
            ("rd_kafka_event_error", I, [P]),
            ("rd_kafka_event_error_string", S, [P]),
            ("rd_kafka_error_code", I, [P]),
            ("rd_kafka_error_string", S, [P]),
            ("rd_kafka_AclBinding_new", P, [I, S, I, S, S, I, I, S, ctypes.c_size_t]),
            ("rd_kafka_AclBindingFilter_new", P, [I, S, I, S, S, I, I, S, ctypes.c_size_t]),
            ("rd_kafka_AclBinding_destroy", None, [P]),
            ("rd_kafka_AclBinding_operation", I, [P]),
            ("rd_kafka_CreateAcls", None, [P, P, ctypes.c_size_t, P, P]),
            ("rd_kafka_event_CreateAcls_result", P, [P]),
            ("rd_kafka_CreateAcls_result_acls", P, [P, P]),
            ("rd_kafka_acl_result_error", P, [P]),
            ("rd_kafka_DescribeAcls", None, [P, P, P, P]),
            ("rd_kafka_event_DescribeAcls_result", P, [P]),
            ("rd_kafka_DescribeAcls_result_acls", P, [P, P]),
            ("rd_kafka_DeleteAcls", None, [P, P, ctypes.c_size_t, P, P]),
            ("rd_kafka_event_DeleteAcls_result", P, [P]),
            ("rd_kafka_DeleteAcls_result_responses", P, [P, P]),
            ("rd_kafka_DeleteAcls_result_response_error", P, [P]),
            ("rd_kafka_DeleteAcls_result_response_matching_acls", P, [P, P]),
            ("rd_kafka_DeleteGroup_new", P, [S]),
            ("rd_kafka_DeleteGroup_destroy", None, [P]),
            ("rd_kafka_DeleteGroups", None, [P, P, ctypes.c_size_t, P, P]),
            ("rd_kafka_event_DeleteGroups_result", P, [P]),
            ("rd_kafka_DeleteGroups_result_groups", P, [P, P]),
            ("rd_kafka_group_result_error", P, [P]),
        ]:
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        self.lib = lib
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        for k, v in [("bootstrap.servers", bootstrap)] + sorted(props.items()):
            if lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), errstr, 512) != 0:
                fail("rd_kafka_conf_set %s: %s" % (k, errstr.value.decode()))
        self.rk = lib.rd_kafka_new(self.PRODUCER, conf, errstr, 512)
        if not self.rk:
            fail("rd_kafka_new: " + errstr.value.decode())
        self.q = lib.rd_kafka_queue_new(self.rk)

    def close(self):
        self.lib.rd_kafka_queue_destroy(self.q)
        self.lib.rd_kafka_destroy(self.rk)

    def event(self, what):
        """The admin call's result event; fails on a call-level error."""
        ev = self.lib.rd_kafka_queue_poll(self.q, int(TIMEOUT * 1000))
        if not ev:
            fail("%s: no answer within %ss" % (what, TIMEOUT))
        if self.lib.rd_kafka_event_error(ev) != 0:
            fail("%s: %s" % (what, self.lib.rd_kafka_event_error_string(ev)))
        return ev

    def items(self, fn, obj):
        """The array a result accessor returns, as a list of pointers."""
        n = self.c.c_size_t(0)
        arr = fn(obj, self.c.byref(n))
        if not n.value:
            return []
        return list(self.c.cast(arr, self.c.POINTER(self.c.c_void_p))[:n.value])

    def error(self, err):
        """An rd_kafka_error_t as (code, message); (0, "") for none."""
        if not err:
            return 0, ""
        return self.lib.rd_kafka_error_code(err), (self.lib.rd_kafka_error_string(err) or b"").decode()

    def binding(self, new, name, pattern, principal, host, op, perm):
        errstr = self.c.create_string_buffer(512)
        b = new(self.TOPIC, name.encode(), pattern, principal.encode() if principal else None,
                host.encode() if host else None, op, perm, errstr, 512)
        if not b:
            fail("ACL binding: " + errstr.value.decode())
        return b

    def create_acl(self, topic, principal, host):
        """Creates one ACL (READ allowed); its error code and message."""
        lib = self.lib
        acl = self.binding(lib.rd_kafka_AclBinding_new, topic, self.LITERAL, principal, host, self.READ, self.ALLOW)
        lib.rd_kafka_CreateAcls(self.rk, (self.c.c_void_p * 1)(acl), 1, None, self.q)
        ev = self.event("CreateAcls")
        res = self.items(lib.rd_kafka_CreateAcls_result_acls, lib.rd_kafka_event_CreateAcls_result(ev))
        out = self.error(lib.rd_kafka_acl_result_error(res[0]))
        lib.rd_kafka_event_destroy(ev)
        lib.rd_kafka_AclBinding_destroy(acl)
        return out

    def describe_acls(self, topic, principal):
        """The operations of the ACLs a MATCH filter on topic selects."""
        lib = self.lib
        f = self.binding(lib.rd_kafka_AclBindingFilter_new, topic, self.MATCH, principal, None, self.ANY, self.ANY)
        lib.rd_kafka_DescribeAcls(self.rk, f, None, self.q)
        ev = self.event("DescribeAcls")
        acls = self.items(lib.rd_kafka_DescribeAcls_result_acls, lib.rd_kafka_event_DescribeAcls_result(ev))
        ops = [lib.rd_kafka_AclBinding_operation(a) for a in acls]
        lib.rd_kafka_event_destroy(ev)
        lib.rd_kafka_AclBinding_destroy(f)
        return ops

    def delete_acls(self, topic, principal):
        """Deletes the ACLs a MATCH filter selects: (code, message, count)."""
        lib = self.lib
        f = self.binding(lib.rd_kafka_AclBindingFilter_new, topic, self.MATCH, principal, None, self.ANY, self.ANY)
        lib.rd_kafka_DeleteAcls(self.rk, (self.c.c_void_p * 1)(f), 1, None, self.q)
        ev = self.event("DeleteAcls")
        resps = self.items(lib.rd_kafka_DeleteAcls_result_responses, lib.rd_kafka_event_DeleteAcls_result(ev))
        code, msg = self.error(lib.rd_kafka_DeleteAcls_result_response_error(resps[0]))
        n = len(self.items(lib.rd_kafka_DeleteAcls_result_response_matching_acls, resps[0]))
        lib.rd_kafka_event_destroy(ev)
        lib.rd_kafka_AclBinding_destroy(f)
        return code, msg, n

    def delete_group(self, group):
        """Deletes a group: its error code and message."""
        lib = self.lib
        g = lib.rd_kafka_DeleteGroup_new(group.encode())
        lib.rd_kafka_DeleteGroups(self.rk, (self.c.c_void_p * 1)(g), 1, None, self.q)
        ev = self.event("DeleteGroups")
        res = self.items(lib.rd_kafka_DeleteGroups_result_groups, lib.rd_kafka_event_DeleteGroups_result(ev))
        out = self.error(lib.rd_kafka_group_result_error(res[0]))
        lib.rd_kafka_event_destroy(ev)
        lib.rd_kafka_DeleteGroup_destroy(g)
        return out


def main():
    if len(sys.argv) < 2 or any("=" not in a for a in sys.argv[2:]):
        fail("usage: kafka_admin.py HOST:PORT[,HOST:PORT...] [PROPERTY=VALUE ...]")
    bootstrap = sys.argv[1]
    props = dict(a.split("=", 1) for a in sys.argv[2:])
    # An admin client is a producer to librdkafka: it refreshes the
    # metadata of topics it has named (list_topics("pa") below) asking
    # for them to be created, and the node's auto.create.topics.enable
    # (on, as Kafka's) would bring a topic it just deleted back.
    admin = AdminClient(dict(props, **{"bootstrap.servers": bootstrap, "socket.timeout.ms": 30000,
                                       "allow.auto.create.topics": False}))

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
    md = None

    def created():
        nonlocal md
        md = admin.list_topics(timeout=TIMEOUT)
        if "pa" not in md.topics or "pdef" not in md.topics or "pdry" in md.topics or "pbad" in md.topics:
            return "topics %s" % sorted(md.topics)
        if len(md.topics["pa"].partitions) != 2 or len(md.topics["pdef"].partitions) < 1:
            return "partitions: pa %d, pdef %d" % (len(md.topics["pa"].partitions), len(md.topics["pdef"].partitions))
        return None
    eventually("topics after creating", created)

    step("add partitions; a shrink is refused")
    want_ok("create partitions", admin.create_partitions([NewPartitions("pa", 4)], request_timeout=TIMEOUT))
    want_error("shrink", admin.create_partitions([NewPartitions("pb", 1)])["pb"], KafkaError.INVALID_PARTITIONS)
    eventually("pa grows to 4 partitions",
               lambda: None if len(admin.list_topics("pa", timeout=TIMEOUT).topics["pa"].partitions) == 4 else "fewer")

    step("describe topic and broker configs")
    broker_id = str(next(iter(md.brokers)))
    got = {}

    def described():
        fs = admin.describe_configs([ConfigResource("topic", "pa"), ConfigResource("broker", broker_id)], request_timeout=TIMEOUT)
        for res, f in fs.items():
            configs, err = result(f)
            if err is not None:
                return "describe configs of %s: %s" % (res, err)
            got[res.name] = configs
        return None
    eventually("describe configs", described)
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

    def altered():
        configs, err = result(admin.describe_configs([ConfigResource("topic", "pa")])[ConfigResource("topic", "pa")])
        if err is not None or configs["retention.ms"].value != "120000":
            return "retention.ms %s (%s)" % (configs and configs["retention.ms"].value, err)
        return None
    eventually("pa retention.ms after altering", altered)
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

    step("a group commits, is listed, and is deleted; deleting it again is refused")
    c = Consumer(dict(props, **{"bootstrap.servers": bootstrap, "group.id": "pgroup", "enable.auto.commit": False}))
    try:
        c.commit(offsets=[TopicPartition("pa", 0, 0)], asynchronous=False)
    finally:
        c.close()

    def listed():
        ids = [g.id for g in admin.list_groups("pgroup", timeout=TIMEOUT)]
        return None if ids == ["pgroup"] else "listed %s" % ids
    eventually("list groups", listed)
    if hasattr(admin, "delete_consumer_groups"):
        want_ok("delete group", admin.delete_consumer_groups(["pgroup"], request_timeout=TIMEOUT))
    else:
        rdk = Rdkafka(bootstrap, props)
        code, msg = rdk.delete_group("pgroup")
        if code != 0:
            fail("delete group (librdkafka's C API): %d %s" % (code, msg))
        code, msg = rdk.delete_group("pgroup")
        if code != KafkaError.GROUP_ID_NOT_FOUND or not msg:
            fail("delete a deleted group: %d %s, want GROUP_ID_NOT_FOUND" % (code, msg))
        rdk.close()
    eventually("pgroup unlisted after deleting it",
               lambda: "still listed" if [g.id for g in admin.list_groups(timeout=TIMEOUT) if g.id == "pgroup"] else None)

    if hasattr(admin, "create_acls"):
        step("ACLs created, described, deleted")
        from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                           ResourcePatternType, ResourceType)
        acl = AclBinding(ResourceType.TOPIC, "pa", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
        want_ok("create ACL", admin.create_acls([acl], request_timeout=TIMEOUT))
        flt = AclBindingFilter(ResourceType.TOPIC, "pa", ResourcePatternType.MATCH, "User:alice", None,
                               AclOperation.ANY, AclPermissionType.ANY)

        def described_acls():
            found, err = result(admin.describe_acls(flt, request_timeout=TIMEOUT))
            if err is not None or len(found) != 1 or found[0].operation != AclOperation.READ:
                return "%s %s" % (err, found)
            return None
        eventually("describe ACLs", described_acls)
        deleted, err = result(admin.delete_acls([flt], request_timeout=TIMEOUT)[flt])
        if err is not None or len(deleted) != 1:
            fail("delete ACLs: %s %s" % (err, deleted))
    else:
        step("ACLs created, described, deleted (librdkafka's C API: this binding does not wrap them)")
        rdk = Rdkafka(bootstrap, props)
        # A node just started raises the cluster's metadata.version,
        # which ACLs need, within seconds: UNSUPPORTED_VERSION until then.
        deadline = time.monotonic() + 30
        while True:
            code, msg = rdk.create_acl("pa", "User:alice", "*")
            if code != KafkaError.UNSUPPORTED_VERSION or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if code != 0:
            fail("create ACL: %d %s" % (code, msg))
        code, msg = rdk.create_acl("pa", "User:alice", "10.0.0.1")
        if code != KafkaError.INVALID_REQUEST or not msg:
            fail("create an ACL for one host: %d %s, want INVALID_REQUEST" % (code, msg))
        eventually("describe ACLs (want [READ])",
                   lambda: None if rdk.describe_acls("pa", "User:alice") == [Rdkafka.READ] else
                   "operations %s" % rdk.describe_acls("pa", "User:alice"))
        code, msg, n = rdk.delete_acls("pa", "User:alice")
        if code != 0 or n != 1:
            fail("delete ACLs: %d %s, %d deleted" % (code, msg, n))
        eventually("no ACLs left after deleting them",
                   lambda: "left: %s" % rdk.describe_acls("pa", "User:alice") if rdk.describe_acls("pa", "User:alice") else None)
        rdk.close()

    step("delete topics; deleting one again is refused")
    want_ok("delete", admin.delete_topics(["pa", "pb", "pdef"], request_timeout=TIMEOUT))
    want_error("delete a deleted topic", admin.delete_topics(["pa"])["pa"], KafkaError.UNKNOWN_TOPIC_OR_PART)

    def deleted():
        left = [t for t in admin.list_topics(timeout=TIMEOUT).topics if t in ("pa", "pb", "pdef")]
        return "left: %s" % left if left else None
    eventually("topics gone after deleting", deleted)
    step("ok")


if __name__ == "__main__":
    main()
