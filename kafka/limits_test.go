package kafka

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// totalAlloc is the bytes allocated so far, after a collection.
func totalAlloc() (heap, total uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.TotalAlloc
}

// A body claimed at 100 MiB of which 3 MiB arrive costs at most four
// times what arrived; a whole one is read as it was sent.
func TestKafkaReadBodyGrowsWithWhatArrives(t *testing.T) {
	sent := bytes.Repeat([]byte("abcdefgh"), 3<<20/8)
	_, before := totalAlloc()
	if _, err := readBody(bytes.NewReader(sent), 100<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %v, want unexpected EOF", err)
	}
	_, after := totalAlloc()
	if d := after - before; d > 4*uint64(len(sent)) {
		t.Fatalf("reading 3 MiB of a claimed 100 MiB allocated %d MiB", d>>20)
	}
	t.Logf("3 MiB of a claimed 100 MiB: %d KiB allocated", (after-before)>>10)
	for _, n := range []int{0, 1, firstBodyRead - 1, firstBodyRead, firstBodyRead + 1, 1<<20 + 7} {
		want := sent[:n]
		got, err := readBody(bytes.NewReader(want), n)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("body of %d bytes: %d bytes read, error %v", n, len(got), err)
		}
	}
}

// A header claiming 100 MiB followed by a short body, the client then
// going quiet, leaves the heap where it was: the connection is closed
// having cost about what was sent.
func TestKafkaShortBodyOfLargeClaimCostsLittle(t *testing.T) {
	_, k := startServerConfig(t, Config{Backend: &fakeBackend{}, MaxRequestBytes: 100 << 20})
	heapBefore, before := totalAlloc()
	claim := binary.BigEndian.AppendUint32(nil, 100<<20-1)
	claim = append(claim, bytes.Repeat([]byte{1}, 1000)...)
	if _, err := k.c.Write(claim); err != nil {
		t.Fatal(err)
	}
	_ = k.c.(*net.TCPConn).CloseWrite()
	if !k.closed() {
		t.Fatal("connection not closed after a short body")
	}
	heapAfter, after := totalAlloc()
	t.Logf("heap %d KiB before, %d KiB after; %d KiB allocated", heapBefore>>10, heapAfter>>10, (after-before)>>10)
	if d := after - before; d > 4<<20 {
		t.Fatalf("a 1000-byte body claimed at 100 MiB allocated %d MiB", d>>20)
	}
}

// dialFrom connects to addr from the loopback address ip and asks
// ApiVersions; it returns the connection and whether it was answered.
func dialFrom(t *testing.T, addr, ip string) (net.Conn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	k := &kconn{t: t, c: c, r: bufio.NewReader(c)}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 2
	k.request(req)
	var size [4]byte
	if _, err := io.ReadFull(k.r, size[:]); err != nil {
		return c, false
	}
	_, err = io.ReadFull(k.r, make([]byte, binary.BigEndian.Uint32(size[:])))
	return c, err == nil
}

// max.connections caps a listener's connections, max.connections.per.ip
// a client address's; one past either is closed at once and reported,
// and a connection that ends makes room for another.
func TestKafkaConnectionCaps(t *testing.T) {
	t.Parallel()
	var refused atomic.Int32
	var reasons atomic.Value
	s, first := startServerConfig(t, Config{Backend: &fakeBackend{}, MaxRequestBytes: 1 << 20,
		MaxConnections: 3, MaxConnectionsPerIP: 2,
		Refused: func(reason string) { refused.Add(1); reasons.Store(reason) }})
	addr := first.c.RemoteAddr().String()
	_ = first // one from 127.0.0.1
	c1, ok := dialFrom(t, addr, "127.0.0.1")
	if !ok {
		t.Fatal("second connection from 127.0.0.1 refused under a cap of 2")
	}
	if _, ok := dialFrom(t, addr, "127.0.0.1"); ok {
		t.Fatal("third connection from 127.0.0.1 answered past max.connections.per.ip 2")
	}
	if got := reasons.Load(); refused.Load() != 1 || got != "max.connections.per.ip" {
		t.Fatalf("refusals %d (%v), want 1 for max.connections.per.ip", refused.Load(), got)
	}
	if _, ok := dialFrom(t, addr, "127.0.0.2"); !ok {
		t.Fatal("first connection from 127.0.0.2 refused with the listener at 2 of 3")
	}
	if _, ok := dialFrom(t, addr, "127.0.0.3"); ok {
		t.Fatal("a fourth connection answered past max.connections 3")
	}
	if got := reasons.Load(); refused.Load() != 2 || got != "max.connections" {
		t.Fatalf("refusals %d (%v), want a second for max.connections", refused.Load(), got)
	}
	// One from 127.0.0.1 ends: another from there is taken once the
	// server has seen it go.
	_ = c1.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		n := s.perIP["127.0.0.1"]
		s.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("127.0.0.1 still counted with %d connections", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := dialFrom(t, addr, "127.0.0.1"); !ok {
		t.Fatal("a connection from 127.0.0.1 refused after one of its two ended")
	}
}

// A connection gives back an answer buffer larger than keptAnswerBytes
// once the answer is written: eight idle connections that each fetched 4
// MiB do not hold 32 MiB.
func TestKafkaLargeAnswerBuffersGivenBack(t *testing.T) {
	records := bytes.Repeat([]byte{7}, 4<<20)
	backend := &fakeBackend{fetchResp: &quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{
		{Topic: "t", Partition: 0, HighWatermark: 1, Records: records}}}}
	_, k := startServer(t, backend)
	addr := k.c.RemoteAddr().String()
	heapBefore, _ := totalAlloc()
	for range 8 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		kc := &kconn{t: t, c: c, r: bufio.NewReader(c)}
		kc.request(fetchReq(12, 0, -1))
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 12
		kc.response(resp, true)
		if got := len(resp.Topics[0].Partitions[0].RecordBatches); got != len(records) {
			t.Fatalf("fetched %d bytes, want %d", got, len(records))
		}
	}
	heapAfter, _ := totalAlloc()
	t.Logf("heap %d KiB before, %d KiB with 8 idle connections that fetched 4 MiB each", heapBefore>>10, heapAfter>>10)
	if heapAfter > heapBefore+8<<20 {
		t.Fatalf("heap grew from %d to %d MiB: answer buffers kept", heapBefore>>20, heapAfter>>20)
	}
}
