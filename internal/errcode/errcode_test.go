package errcode

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// kafkaNames are codes whose name in kerr is an older one of Kafka's.
var kafkaNames = map[quirev1.ErrorCode]string{
	quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_FOR_PARTITION",
}

// kafkaCode is Kafka's number for c: the same, but for UNKNOWN_SERVER_ERROR
// (Kafka's -1, which a proto3 enum could hold but Quire numbered 1000).
func kafkaCode(c quirev1.ErrorCode) int32 {
	if c == quirev1.ErrorCode_UNKNOWN_SERVER_ERROR {
		return -1
	}
	return int32(c)
}

func TestErrcodeEveryCodeDeclared(t *testing.T) {
	for v, name := range quirev1.ErrorCode_name {
		if !Known(quirev1.ErrorCode(v)) {
			t.Errorf("%s (%d) has no retriability declared in errcode", name, v)
		}
	}
	if len(declared) != len(quirev1.ErrorCode_name) {
		t.Errorf("errcode declares %d codes, the proto has %d", len(declared), len(quirev1.ErrorCode_name))
	}
}

func TestErrcodeMatchesKafka(t *testing.T) {
	for v, name := range quirev1.ErrorCode_name {
		c := quirev1.ErrorCode(v)
		if c == quirev1.ErrorCode_NONE {
			if Retriable(c) {
				t.Errorf("NONE is declared retriable")
			}
			continue
		}
		kc := kafkaCode(c)
		var k *kerr.Error
		if kc >= math.MinInt16 && kc <= math.MaxInt16 {
			k = kerr.TypedErrorForCode(int16(kc))
		}
		if k == nil || (k == kerr.UnknownServerError && kc != -1) {
			// Not one of Kafka's: such a code must live apart from Kafka's
			// numbers, so it never means something else to a Kafka tool.
			if kc < 1000 {
				t.Errorf("%s (%d) is not a Kafka code but is numbered below 1000", name, v)
			}
			continue
		}
		want := name
		if n, ok := kafkaNames[c]; ok {
			want = n
		}
		if k.Message != want {
			t.Errorf("code %d is %s here and %s in Kafka", kc, name, k.Message)
		}
		if Retriable(c) != k.Retriable {
			t.Errorf("%s: declared retriable=%v, Kafka says %v", name, Retriable(c), k.Retriable)
		}
	}
}

func TestErrcodeRetriableOr(t *testing.T) {
	if !RetriableOr(quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, false) {
		t.Error("a known retriable code follows the declaration, not the flag")
	}
	if RetriableOr(quirev1.ErrorCode_INVALID_REQUEST, true) {
		t.Error("a known permanent code follows the declaration, not the flag")
	}
	unknown := quirev1.ErrorCode(4242)
	if !RetriableOr(unknown, true) || RetriableOr(unknown, false) {
		t.Error("an unknown code follows the flag it came with")
	}
	if Retriable(unknown) {
		t.Error("an unknown code is not retriable by itself")
	}
}

func TestErrcodeFindFirstMatch(t *testing.T) {
	general := errors.New("general")
	specific := fmt.Errorf("specific: %w", general)
	table := []Mapping{
		{Err: specific, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_CORRUPT_MESSAGE},
		{Err: general, GRPC: codes.InvalidArgument, Code: quirev1.ErrorCode_INVALID_RECORD},
	}
	m, ok := Find(table, fmt.Errorf("batch 3: %w", specific))
	if !ok || m.Code != quirev1.ErrorCode_CORRUPT_MESSAGE || !m.Retriable() {
		t.Errorf("specific error: got %v ok=%v", m.Code, ok)
	}
	m, ok = Find(table, fmt.Errorf("batch 4: %w", general))
	if !ok || m.Code != quirev1.ErrorCode_INVALID_RECORD || m.Retriable() {
		t.Errorf("general error: got %v ok=%v", m.Code, ok)
	}
	if _, ok := Find(table, errors.New("other")); ok {
		t.Error("an unmapped error matched")
	}
}
