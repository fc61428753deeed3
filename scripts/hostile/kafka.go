package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaCase is raw bytes for the Kafka listener and what its answer
// must say: with req, a response to it is decoded and judged by check
// (nil: any response is clear); a closed connection is always clear.
type kafkaCase struct {
	name  string
	frame []byte
	req   kmsg.Request
	check func(kmsg.Response) (outcome, string)
}

var kfmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile"))

// kframe encodes req at version v as a whole request.
func kframe(req kmsg.Request, v int16) []byte {
	req.SetVersion(v)
	return kfmt.AppendRequest(nil, req, 7)
}

// raw builds a request by hand: header v1 (key, version, correlation id
// 7, client id "h"), then body, with its size in front; size < 0 keeps
// the true size.
func raw(key, version int16, size int32, body ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = append(b, 0, 1, 'h')
	for _, p := range body {
		b = append(b, p...)
	}
	if size < 0 {
		size = int32(len(b))
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(size)), b...)
}

func i8(v int8) []byte   { return []byte{byte(v)} }
func i16(v int16) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
func i32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func i64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func str(s string) []byte {
	return append(i16(int16(len(s))), s...)
}
func uvar(v uint64) []byte { return binary.AppendUvarint(nil, v) }

// kbytes is a Kafka BYTES field.
func kbytes(b []byte) []byte { return append(i32(int32(len(b))), b...) }

// produceV7 is a Produce v7 body: one topic, one partition, records.
func produceV7(acks int16, topic string, partition int32, records []byte) []byte {
	return bytes.Join([][]byte{i16(-1), i16(acks), i32(5000), i32(1), str(topic), i32(1), i32(partition), kbytes(records)}, nil)
}

// errorsSaid judges a response whose every partition (or topic, or the
// whole) must carry an error code.
func errorsSaid(codes ...int16) (outcome, string) {
	if len(codes) == 0 {
		return fail, "answered with nothing to say what went wrong"
	}
	for _, c := range codes {
		if c == 0 {
			return fail, fmt.Sprintf("answered without an error where one was due (codes %v)", codes)
		}
	}
	return pass, fmt.Sprintf("error codes %v", codes)
}

func produceErrors(r kmsg.Response) (outcome, string) {
	var cs []int16
	for _, t := range r.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			cs = append(cs, p.ErrorCode)
		}
	}
	return errorsSaid(cs...)
}

func fetchErrors(r kmsg.Response) (outcome, string) {
	fr := r.(*kmsg.FetchResponse)
	cs := []int16{}
	if fr.ErrorCode != 0 {
		return errorsSaid(fr.ErrorCode)
	}
	for _, t := range fr.Topics {
		for _, p := range t.Partitions {
			cs = append(cs, p.ErrorCode)
		}
	}
	return errorsSaid(cs...)
}

func listOffsetsErrors(r kmsg.Response) (outcome, string) {
	var cs []int16
	for _, t := range r.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			cs = append(cs, p.ErrorCode)
		}
	}
	return errorsSaid(cs...)
}

func apiVersionsError(r kmsg.Response) (outcome, string) {
	return errorsSaid(r.(*kmsg.ApiVersionsResponse).ErrorCode)
}

// kafkaHostile sends the Kafka listener bytes no client should send and
// requests no node should take.
func (s *sweep) kafkaHostile(ctx context.Context) {
	good := batch(3, "kafka-hostile")
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	huge := strings.Repeat("k", 100<<10)

	metaBadTopic := kmsg.NewPtrMetadataRequest()
	metaBadTopic.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("a/b")}, {Topic: kmsg.StringPtr(huge)}}
	fetchNeg := kmsg.NewPtrFetchRequest()
	fetchNeg.MaxBytes, fetchNeg.MinBytes, fetchNeg.MaxWaitMillis = -1, -1, 60000
	fetchNeg.Topics = []kmsg.FetchRequestTopic{{Topic: keptTopic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: -1}}}}
	fetchOff := kmsg.NewPtrFetchRequest()
	fetchOff.MaxBytes = 1 << 20
	fetchOff.Topics = []kmsg.FetchRequestTopic{{Topic: keptTopic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: -5, PartitionMaxBytes: 1 << 20}}}}
	fetchPart := kmsg.NewPtrFetchRequest()
	fetchPart.MaxBytes = 1 << 20
	fetchPart.Topics = []kmsg.FetchRequestTopic{{Topic: keptTopic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: math.MaxInt32, PartitionMaxBytes: 1 << 20}}}}
	listNeg := kmsg.NewPtrListOffsetsRequest()
	listNeg.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: keptTopic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: -1, Timestamp: -1}}}}
	listTS := kmsg.NewPtrListOffsetsRequest()
	listTS.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: keptTopic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -7}}}}
	commitEmpty := kmsg.NewPtrOffsetCommitRequest()
	commitEmpty.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: keptTopic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	join := kmsg.NewPtrJoinGroupRequest()
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = -1, -1, "consumer"
	findHuge := kmsg.NewPtrFindCoordinatorRequest()
	findHuge.CoordinatorKey = huge
	delNeg := kmsg.NewPtrDeleteRecordsRequest()
	delNeg.TimeoutMillis = 1000
	delNeg.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: keptTopic, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: -5}}}}
	initNeg := kmsg.NewPtrInitProducerIDRequest()
	initNeg.TransactionTimeoutMillis = -1
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.MemberID, cgh.RebalanceTimeoutMillis, cgh.SubscribedTopicNames = "m", -1, []string{"a/b"}
	describeMany := kmsg.NewPtrDescribeGroupsRequest()
	for range 1000 {
		describeMany.Groups = append(describeMany.Groups, huge[:1000])
	}

	produceAt := func(v int16, acks int16, topic string, p int32, records []byte) []byte {
		return raw(0, v, -1, produceV7(acks, topic, p, records))
	}
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	cases := []kafkaCase{
		{name: "64 bytes of garbage", frame: bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 16)},
		{name: "size 0", frame: i32(0)},
		{name: "size -1", frame: append(i32(-1), bytes.Repeat([]byte{1}, 32)...)},
		{name: "size under a header (7)", frame: append(i32(7), 0, 18, 0, 0, 0, 0, 7)},
		{name: "header claiming 100 MiB, 20 bytes sent", frame: append(i32(100<<20), raw(18, 0, -1)[4:]...)},
		{name: "header claiming 2 GiB, 20 bytes sent", frame: append(i32(math.MaxInt32), raw(18, 0, -1)[4:]...)},
		{name: "header claiming 64 MiB + 1, nothing sent", frame: i32(64<<20 + 1)},
		{name: "header of 4 bytes", frame: append(i32(4), 0, 18, 0, 0)},
		{name: "unknown API key 9999", frame: raw(9999, 0, -1, i32(0))},
		{name: "API key -1", frame: raw(-1, 0, -1)},
		{name: "CreateTopics v4, validate only: 2^31-1 partitions", frame: raw(19, 4, -1,
			i32(1), str("kbig"), i32(math.MaxInt32), i16(1), i32(0), i32(0), i32(5000), i8(1))},
		{name: "CreateTopics v4 claiming 2^31-1 topics", frame: raw(19, 4, -1, i32(math.MaxInt32), str("k"))},
		{name: "DescribeConfigs v4 compact array claiming 2^32 resources", frame: raw(32, 4, -1, i8(0), uvar(1<<32))},
		{name: "CreateAcls v1 principal claiming 32767 bytes", frame: raw(30, 1, -1, i32(1), i8(2), str("t"), i8(3), i16(0x7fff), []byte("User"))},
		{name: "AlterUserScramCredentials salted password claiming 2^31 bytes", frame: raw(51, 0, -1, i8(0), uvar(1), uvar(2), []byte("u"),
			i8(1), i32(4096), uvar(2), []byte("s"), uvar(1<<31))},
		{name: "API key 17 (SaslHandshake, not served)", frame: raw(17, 1, -1, str("PLAIN"))},
		{name: "ApiVersions v99", frame: raw(18, 99, -1), req: kmsg.NewPtrApiVersionsRequest(), check: apiVersionsError},
		{name: "Produce v99", frame: raw(0, 99, -1, produceV7(1, keptTopic, 0, good))},
		{name: "Produce v0 (below the least served)", frame: raw(0, 0, -1, i16(1), i32(5000), i32(0))},
		{name: "Metadata v-3", frame: raw(3, -3, -1, i32(0))},
		{name: "client id claiming 32767 bytes", frame: append(i32(13), 0, 18, 0, 0, 0, 0, 0, 7, 0x7f, 0xff, 'a', 'b', 'c')},
		{name: "client id length -5", frame: append(i32(10), 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xfb)},
		{name: "Metadata v1 claiming 2^31-1 topics", frame: raw(3, 1, -1, i32(math.MaxInt32))},
		{name: "Metadata v1 claiming -5 topics", frame: raw(3, 1, -1, i32(-5))},
		{name: "Metadata v1 topic name claiming 32767 bytes", frame: raw(3, 1, -1, i32(1), i16(0x7fff), []byte("abc"))},
		{name: "Metadata v9 compact array claiming 2^32 topics", frame: raw(3, 9, -1, i8(0), uvar(1<<32))},
		{name: "Metadata v9 header claiming 2^40 tagged fields", frame: raw(3, 9, -1, uvar(1<<40))},
		{name: "Metadata v9 tagged field claiming 1 GiB", frame: raw(3, 9, -1, uvar(1), uvar(0), uvar(1<<30), []byte("x"))},
		{name: "ApiVersions v3 client software name claiming 2^31 bytes", frame: raw(18, 3, -1, i8(0), uvar(1<<31), []byte("q"))},
		{name: "Metadata v1 bad and 100 KiB topic names", frame: kframe(metaBadTopic, 1), req: metaBadTopic},
		{name: "Produce v7 claiming 2^31-1 topics", frame: raw(0, 7, -1, i16(-1), i16(1), i32(5000), i32(math.MaxInt32))},
		{name: "Produce v7 claiming 2^31-1 partitions", frame: raw(0, 7, -1, i16(-1), i16(1), i32(5000), i32(1), str(keptTopic), i32(math.MaxInt32))},
		{name: "Produce v7 records claiming 100 MiB", frame: raw(0, 7, -1, i16(-1), i16(1), i32(5000), i32(1), str(keptTopic), i32(1), i32(0), i32(100<<20), good)},
		{name: "Produce v7 records length -7", frame: raw(0, 7, -1, i16(-1), i16(1), i32(5000), i32(1), str(keptTopic), i32(1), i32(0), i32(-7))},
		{name: "Produce v7 batch claiming 2^31-1 records", frame: produceAt(7, 1, keptTopic, 0, claimRecords(good, math.MaxInt32)),
			req: kmsg.NewPtrProduceRequest(), check: produceErrors},
		{name: "Produce v7 batch claiming -2^31 records", frame: produceAt(7, 1, keptTopic, 0, claimRecords(good, math.MinInt32)),
			req: kmsg.NewPtrProduceRequest(), check: produceErrors},
		{name: "Produce v7 batch length claiming 2 GiB", frame: produceAt(7, 1, keptTopic, 0, claimLength(good, math.MaxInt32)),
			req: kmsg.NewPtrProduceRequest(), check: produceErrors},
		{name: "Produce v7 bad CRC", frame: produceAt(7, 1, keptTopic, 0, badCRC), req: kmsg.NewPtrProduceRequest(), check: produceErrors},
		{name: "Produce v7 garbage records", frame: produceAt(7, 1, keptTopic, 0, bytes.Repeat([]byte{0xab}, 200)),
			req: kmsg.NewPtrProduceRequest(), check: produceErrors},
		{name: "Produce v7 topic a/b", frame: produceAt(7, 1, "a/b", 0, good), req: kmsg.NewPtrProduceRequest(), check: produceErrors},
		{name: "Produce v7 acks 5", frame: produceAt(7, 5, keptTopic, 0, good), req: kmsg.NewPtrProduceRequest(), check: produceErrors},
		{name: "Produce v7 partition -1", frame: produceAt(7, 1, keptTopic, -1, good), req: kmsg.NewPtrProduceRequest(), check: produceErrors},
		{name: "Produce v7 partition 2^31-1", frame: produceAt(7, 1, keptTopic, math.MaxInt32, good), req: kmsg.NewPtrProduceRequest(), check: produceErrors},
		{name: "Produce v7 acks=0 garbage records", frame: produceAt(7, 0, keptTopic, 0, bytes.Repeat([]byte{0xcd}, 100))},
		{name: "Fetch v11 negative sizes (would wait a minute)", frame: kframe(fetchNeg, 11), req: fetchNeg, check: fetchErrors},
		{name: "Fetch v11 claiming 2^31-1 topics", frame: raw(1, 11, -1, i32(-1), i32(0), i32(1), i32(1<<20), i8(0), i32(0), i32(0), i32(math.MaxInt32))},
		{name: "Fetch v4 offset -5", frame: kframe(fetchOff, 4), req: fetchOff, check: fetchErrors},
		{name: "Fetch v4 partition 2^31-1", frame: kframe(fetchPart, 4), req: fetchPart, check: fetchErrors},
		{name: "ListOffsets v1 partition -1", frame: kframe(listNeg, 1), req: listNeg, check: listOffsetsErrors},
		{name: "ListOffsets v4 timestamp -7", frame: kframe(listTS, 4), req: listTS, check: listOffsetsErrors},
		{name: "OffsetCommit v2 empty group", frame: kframe(commitEmpty, 2), req: commitEmpty, check: func(r kmsg.Response) (outcome, string) {
			var cs []int16
			for _, t := range r.(*kmsg.OffsetCommitResponse).Topics {
				for _, p := range t.Partitions {
					cs = append(cs, p.ErrorCode)
				}
			}
			return errorsSaid(cs...)
		}},
		{name: "OffsetCommit v2 claiming 2^31-1 topics", frame: raw(8, 2, -1, str("g"), i32(-1), str(""), i64(-1), i32(math.MaxInt32))},
		{name: "JoinGroup v5 negative timeouts, no group", frame: kframe(join, 5), req: join, check: func(r kmsg.Response) (outcome, string) {
			return errorsSaid(r.(*kmsg.JoinGroupResponse).ErrorCode)
		}},
		{name: "JoinGroup v5 claiming 2^31-1 protocols", frame: raw(11, 5, -1, str("g"), i32(1000), i32(1000), str(""), i16(-1), str("consumer"), i32(math.MaxInt32))},
		{name: "FindCoordinator v2 key of 100 KiB", frame: kframe(findHuge, 2), req: findHuge},
		{name: "DescribeGroups v0 claiming 2^31-1 groups", frame: raw(15, 0, -1, i32(math.MaxInt32))},
		{name: "DescribeGroups v0 1000 groups", frame: kframe(describeMany, 0), req: describeMany},
		{name: "DeleteRecords v0 offset -5", frame: kframe(delNeg, 0), req: delNeg, check: func(r kmsg.Response) (outcome, string) {
			var cs []int16
			for _, t := range r.(*kmsg.DeleteRecordsResponse).Topics {
				for _, p := range t.Partitions {
					cs = append(cs, p.ErrorCode)
				}
			}
			return errorsSaid(cs...)
		}},
		{name: "InitProducerId v0 transaction timeout -1", frame: kframe(initNeg, 0), req: initNeg},
		{name: "ConsumerGroupHeartbeat v1 empty group, topic a/b", frame: kframe(cgh, 1), req: cgh, check: func(r kmsg.Response) (outcome, string) {
			return errorsSaid(r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
		}},
		{name: "ApiVersions then garbage", frame: append(kframe(apiVersions, 0), bytes.Repeat([]byte{0xff}, 40)...), req: apiVersions},
		{name: "Produce v7 with trailing garbage", frame: func() []byte {
			f := produceAt(7, 1, "a/b", 0, good)
			f = append(f, bytes.Repeat([]byte{0x42}, 100)...)
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
			return f
		}()},
	}
	for _, c := range cases {
		o, d := s.kafkaSend(ctx, c)
		s.report("kafka "+c.name, o, d)
	}
}

// kafkaSend sends c's bytes on a new connection, ends its writing side,
// and judges what comes back before the node closes the connection.
func (s *sweep) kafkaSend(ctx context.Context, c kafkaCase) (outcome, string) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", s.kafkaAddr)
	if err != nil {
		return fail, "dial: " + err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(90 * time.Second))
	if _, err := conn.Write(c.frame); err != nil {
		return pass, "closed while sending: " + err.Error()
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fail, "no answer, connection still open"
		}
		return pass, "closed"
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return fail, fmt.Sprintf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return fail, "response cut short: " + err.Error()
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != 7 {
		return fail, fmt.Sprintf("response for correlation id %d", corr)
	}
	if c.req == nil {
		return pass, fmt.Sprintf("answered (%d bytes)", n)
	}
	resp := c.req.ResponseKind()
	resp.SetVersion(c.req.GetVersion())
	rest := body[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		rest = rest[1:] // no tagged fields in the response header
	}
	if err := resp.ReadFrom(rest); err != nil {
		return fail, "response does not decode: " + err.Error()
	}
	if c.check == nil {
		return pass, fmt.Sprintf("answered (%d bytes)", n)
	}
	return c.check(resp)
}
