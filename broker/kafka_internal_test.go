package broker

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quirelog/quire/kafka"
)

// TestKafkaOutcome: a Kafka request's outcome is counted under the code
// the request counts keep: OK answered, Unimplemented not served,
// InvalidArgument not parsed, Unknown another that closed the
// connection.
func TestKafkaOutcome(t *testing.T) {
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{fmt.Errorf("%w: DescribeDelegationToken (key 41) version 0", kafka.ErrUnsupported), codes.Unimplemented},
		{fmt.Errorf("%w: short body", kafka.ErrMalformed), codes.InvalidArgument},
		{errors.New("write: broken pipe"), codes.Unknown},
	} {
		got := kafkaOutcome(c.err)
		if status.Code(got) != c.want {
			t.Errorf("outcome of %v: %v, want %v", c.err, status.Code(got), c.want)
		}
		if c.err != nil && status.Convert(got).Message() != c.err.Error() {
			t.Errorf("outcome of %v: message %q", c.err, status.Convert(got).Message())
		}
	}
}
