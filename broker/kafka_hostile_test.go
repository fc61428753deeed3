package broker_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/record"
)

// heapNow is the heap in use after a collection, and the bytes allocated
// so far.
func heapNow() (heap, total uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.TotalAlloc
}

// kafkaFrame is a request's frame as a client sends it.
func kafkaFrame(req kmsg.Request, corr int32) []byte {
	body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
	body = binary.BigEndian.AppendUint32(body, uint32(corr))
	body = binary.BigEndian.AppendUint16(body, 0xffff) // no client id
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// claimRecords rewrites batch to claim n records (count and last offset
// delta), with its CRC made good again, so that only its body belies it.
func claimRecords(batch []byte, n int32) []byte {
	b := append([]byte(nil), batch...)
	binary.BigEndian.PutUint32(b[23:], uint32(n-1)) // last offset delta
	binary.BigEndian.PutUint32(b[57:], uint32(n))   // record count
	binary.BigEndian.PutUint32(b[17:], record.CRC(b))
	return b
}

// Hostile requests on the Kafka listener leave the node's heap where it
// was: a header claiming 100 MiB followed by a short body, a produce of
// batches claiming 2^31-1 (and 2^31, negative as an int32) records, plain
// and compressed. Each is refused (a closed connection, or the
// partition's error), and the node serves on.
func TestBrokerKafkaHostileRequestsCostLittle(t *testing.T) {
	_, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, addr, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "hostile", Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	heapBefore, totalBefore := heapNow()

	// 100 MiB claimed, 40 bytes sent, then the client stops writing.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	claim := binary.BigEndian.AppendUint32(nil, 100<<20-1)
	claim = append(claim, kafkaFrame(kmsg.NewPtrMetadataRequest(), 1)[4:]...)
	if _, err := c.Write(claim); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after a short body: %v, want the connection closed", err)
	}

	// Batches claiming 2^31-1 and 2^31 records, each holding one.
	plain := makeBatch(1, 10, "h")
	gz := record.NewBuilder(record.Gzip)
	gz.Append(time.Now().UnixMilli(), []byte("k"), []byte("v"), nil)
	compressed := gz.Build()
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c2)
	for i, batch := range [][]byte{claimRecords(plain, math.MaxInt32), claimRecords(plain, math.MinInt32),
		claimRecords(compressed, math.MaxInt32)} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, 1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "hostile"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if _, err := c2.Write(kafkaFrame(req, int32(i))); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		buf := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, buf); err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(buf[5:]); err != nil { // correlation id, tags
			t.Fatal(err)
		}
		code := resp.Topics[0].Partitions[0].ErrorCode
		if code == 0 {
			t.Fatalf("batch %d claiming %d records was appended", i, int32(binary.BigEndian.Uint32(batch[57:])))
		}
		t.Logf("batch %d claiming %d records: error %d", i, int32(binary.BigEndian.Uint32(batch[57:])), code)
	}
	heapAfter, totalAfter := heapNow()
	t.Logf("heap %d KiB before, %d KiB after; %d KiB allocated in between", heapBefore>>10, heapAfter>>10, (totalAfter-totalBefore)>>10)
	// Before the body was read as it came, the claim alone allocated 100
	// MiB; 16 MiB leaves room for the node's own work meanwhile.
	if d := totalAfter - totalBefore; d > 16<<20 {
		t.Fatalf("%d MiB allocated while refusing the hostile requests", d>>20)
	}
	if heapAfter > heapBefore+8<<20 {
		t.Fatalf("heap grew from %d to %d KiB", heapBefore>>10, heapAfter>>10)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "hostile", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("the node no longer serves: %v", err)
	}
}
