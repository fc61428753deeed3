package kafka

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fill sets every field of v to random values: short strings, null or
// not pointers, arrays of up to three elements; unknown tags stay empty.
func fill(rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[kmsg.Tags]() {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i))
			}
		}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(rng.Int64N(100))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.String:
		v.SetString(strings.Repeat("x", rng.IntN(5)))
	case reflect.Pointer:
		if rng.IntN(4) > 0 {
			p := reflect.New(v.Type().Elem())
			fill(rng, p.Elem())
			v.Set(p)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(strings.Repeat("r", rng.IntN(70))))
			return
		}
		n := rng.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(rng, v.Index(i))
		}
	case reflect.Uint8:
		v.SetUint(uint64(rng.IntN(256)))
	}
}

// randomRequest is a request of key at version with random contents,
// encoded as a client does.
func randomRequest(rng *rand.Rand, key, version int16) (kmsg.Request, []byte) {
	req := kmsg.RequestForKey(key)
	fill(rng, reflect.ValueOf(req).Elem())
	req.SetVersion(version)
	return req, req.AppendTo(nil)
}

// servedVersions calls fn for every API key and version served.
func servedVersions(fn func(key, version int16)) {
	for _, v := range versions {
		for ver := v.MinVersion; ver <= v.MaxVersion; ver++ {
			fn(v.ApiKey, ver)
		}
	}
}

// Every layout in schemas reads kmsg's encoding of its API, in every
// version served, to its last byte, and what it says decoding costs is
// at least what kmsg's decoding of it allocates.
func TestKafkaSchemasMatchKmsg(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	servedVersions(func(key, version int16) {
		a, ok := schemas[key]
		if !ok {
			t.Fatalf("api %d (%s) has no layout", key, kmsg.NameForKey(key))
		}
		for range 50 {
			req, body := randomRequest(rng, key, version)
			s := scanner{b: body, v: version, flexible: version >= a.flexibleFrom}
			s.walk(a.body)
			if s.err != nil || len(s.b) != 0 {
				t.Fatalf("%s v%d: layout error %v, %d of %d bytes left; body % x", kmsg.NameForKey(key), version, s.err, len(s.b), len(body), body)
			}
			if req.IsFlexible() != (version >= a.flexibleFrom) {
				t.Fatalf("%s v%d: flexible %v in kmsg", kmsg.NameForKey(key), version, req.IsFlexible())
			}
			got := kmsg.RequestForKey(key)
			got.SetVersion(version)
			if err := got.ReadFrom(body); err != nil {
				t.Fatalf("%s v%d: kmsg cannot read its own encoding: %v", kmsg.NameForKey(key), version, err)
			}
		}
	})
}

// decodeAlloc is the bytes allocated by one decoding of buf (a request's
// header and body), averaged over runs to see past the allocator's
// accounting by spans.
func decodeAlloc(buf []byte, runs int) (uint64, error) {
	var before, after runtime.MemStats
	var err error
	runtime.ReadMemStats(&before)
	for range runs {
		var h header
		var req kmsg.Request
		var body []byte
		if h, req, body, err = parseHeader(buf); err == nil && served(h.key, h.version) {
			err = decodeBody(h, req, body)
		}
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs), err
}

// decodeBound is what decoding a request of n bytes may allocate: k =
// decodeFactor bytes per byte, decodeSlack, and a little for the header
// (the request struct, the client id).
func decodeBound(n int) uint64 {
	return uint64(decodeSlack + 4<<10 + decodeFactor*n)
}

// requestFrame is a request's header and body as a client sends them
// (without the size).
func requestFrame(key, version int16, body []byte) []byte {
	buf := binary.BigEndian.AppendUint16(nil, uint16(key))
	buf = binary.BigEndian.AppendUint16(buf, uint16(version))
	buf = binary.BigEndian.AppendUint32(buf, 1)
	buf = binary.BigEndian.AppendUint16(buf, 4)
	buf = append(buf, "fuzz"...)
	if version >= schemas[key].flexibleFrom {
		buf = append(buf, 0)
	}
	return append(buf, body...)
}

// A produce whose topics array claims as many elements as its bytes
// allow (kmsg checks 2 bytes each, and allocates 64) is refused before
// kmsg allocates them; so is one past the element cap, and one whose
// empty group names would cost 16 bytes each.
func TestKafkaDecodeRefusesCostlyShapes(t *testing.T) {
	const n = 1 << 20
	hostile := binary.BigEndian.AppendUint16(nil, 0xffff) // no transactional id
	hostile = binary.BigEndian.AppendUint16(hostile, 1)   // acks
	hostile = binary.BigEndian.AppendUint32(hostile, 1000)
	hostile = binary.BigEndian.AppendUint32(hostile, n/2) // topics
	hostile = append(hostile, make([]byte, n)...)
	buf := requestFrame(0, 8, hostile)
	got, err := decodeAlloc(buf, 4)
	if err == nil {
		t.Fatal("a produce claiming 512 Ki topics in 1 MiB decoded")
	}
	if got > decodeBound(len(buf)) {
		t.Fatalf("refusing it allocated %d bytes, more than %d", got, decodeBound(len(buf)))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	unbounded := kmsg.NewPtrProduceRequest()
	unbounded.Version = 8
	kmsgErr := unbounded.ReadFrom(hostile)
	runtime.ReadMemStats(&after)
	t.Logf("produce claiming %d topics in %d bytes: %v; %d bytes allocated (kmsg alone: %d, %v)",
		n/2, len(buf), err, got, after.TotalAlloc-before.TotalAlloc, kmsgErr)

	// DescribeGroups v5 of 200,000 empty names (one byte each): under the
	// element cap, but 16 bytes of string header each.
	groups := binary.AppendUvarint(nil, 200_001)
	groups = append(groups, make([]byte, 200_000)...)
	for i := len(groups) - 200_000; i < len(groups); i++ {
		groups[i] = 1 // empty compact string
	}
	groups = append(groups, 0, 0) // include authorized operations, tags
	if _, err := decodeAlloc(requestFrame(15, 5, groups), 1); err == nil || !strings.Contains(err.Error(), "array elements") {
		t.Fatalf("200,000 group names: %v, want refused past the element cap", err)
	}
	few := binary.AppendUvarint(nil, 100_001)
	for range 100_000 {
		few = append(few, 1)
	}
	few = append(few, 0, 0)
	if _, err := decodeAlloc(requestFrame(15, 5, few), 1); err == nil || !strings.Contains(err.Error(), "would decode into") {
		t.Fatalf("100,000 empty group names: %v, want refused for what it would cost", err)
	}
}

// Real requests decode within the bound: the random ones of every API and
// version, and large ones of the shapes clients send.
func TestKafkaDecodeWithinBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	servedVersions(func(key, version int16) {
		_, body := randomRequest(rng, key, version)
		buf := requestFrame(key, version, body)
		got, err := decodeAlloc(buf, 20)
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), version, err)
		}
		if got > decodeBound(len(buf)) {
			t.Fatalf("%s v%d: %d bytes allocated for %d", kmsg.NameForKey(key), version, got, len(buf))
		}
	})
	// A fetch of 20,000 partitions, and a metadata request for 20,000
	// topics of short names.
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	for i := range 100 {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "topic-" + strings.Repeat("x", i%10)
		for p := range 200 {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition = int32(p)
			ft.Partitions = append(ft.Partitions, fp)
		}
		fetch.Topics = append(fetch.Topics, ft)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 8
	for i := range 20_000 {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("t" + strings.Repeat("x", i%20))
		meta.Topics = append(meta.Topics, mt)
	}
	for _, req := range []kmsg.Request{fetch, meta} {
		buf := requestFrame(req.Key(), req.GetVersion(), req.AppendTo(nil))
		got, err := decodeAlloc(buf, 4)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		t.Logf("%s of %d bytes: %d bytes allocated (%.1f a byte)", kmsg.NameForKey(req.Key()), len(buf), got, float64(got)/float64(len(buf)))
	}
}

// FuzzKafkaDecodeAlloc holds the decoder to its bound: whatever the bytes
// of a request, decoding them (or refusing them) allocates at most
// decodeFactor (k = 8) bytes per byte, plus decodeSlack. Seeded with a
// request of every API and version served, encoded by kmsg.
func FuzzKafkaDecodeAlloc(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	servedVersions(func(key, version int16) {
		_, body := randomRequest(rng, key, version)
		f.Add(requestFrame(key, version, body))
		f.Add(requestFrame(key, version, kmsg.RequestForKey(key).AppendTo(nil)))
	})
	f.Fuzz(func(t *testing.T, buf []byte) {
		got, err := decodeAlloc(buf, 8)
		if got > decodeBound(len(buf)) {
			t.Fatalf("decoding %d bytes allocated %d, more than %d (error %v)", len(buf), got, decodeBound(len(buf)), err)
		}
	})
}
