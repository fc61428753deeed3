package kafka

import (
	"encoding/binary"
	"math"
	"testing"
)

// An admin request whose lengths claim more than it holds is refused
// before it is decoded, closing the connection as for any request that
// does not parse; the server goes on answering new connections.
func TestKafkaAdminHostileBodiesClose(t *testing.T) {
	i32 := func(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
	header := func(key, version int16, flexible bool) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = append(b, 0, 0, 0, 1, 0xff, 0xff) // correlation 1, null client id
		if flexible {
			b = append(b, 0)
		}
		return b
	}
	cases := map[string][]byte{
		"CreateTopics v4, 2^31-1 topics":          append(header(19, 4, false), i32(math.MaxInt32)...),
		"DescribeConfigs v4, 2^32 resources":      binary.AppendUvarint(append(header(32, 4, true), 0), 1<<32),
		"DeleteAcls v3, 2^20 filters in 3 bytes":  binary.AppendUvarint(header(31, 3, true), 1<<20),
		"AlterUserScramCredentials, 2^31 salt":    binary.AppendUvarint(append(header(51, 0, true), 1, 2, 2, 'u', 1, 0, 0, 16, 0), 1<<31),
		"DescribeLogDirs v1, 100000 topics named": append(header(35, 1, false), i32(100000)...),
	}
	for name, frame := range cases {
		_, k := startServer(t, newAdminBackend())
		k.raw(frame)
		if !k.closed() {
			t.Errorf("%s: connection still open", name)
		}
	}
}
