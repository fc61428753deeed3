package controlplane

import (
	"fmt"
	"testing"

	"github.com/quirelog/quire/internal/errcode"
)

// TestControllerFailoverIsRetriable: what the forwarder retries is a subset
// of what errcode declares retriable, so the two cannot disagree on an
// error the forwarder rides out.
func TestControllerFailoverIsRetriable(t *testing.T) {
	t.Parallel()
	for _, e := range errorTable {
		for _, err := range []error{fmt.Errorf("%w: detail", e.err), fromStatus(toStatus(fmt.Errorf("%w: detail", e.err)))} {
			if retriable(err) && !errcode.Retriable(e.errCode) {
				t.Errorf("the forwarder retries %v, whose code %v is not retriable", err, e.errCode)
			}
		}
	}
	rows := MetadataErrors()
	if len(rows) != len(errorTable) {
		t.Fatalf("MetadataErrors has %d rows, the table %d", len(rows), len(errorTable))
	}
	for i, m := range rows {
		if m.Err != errorTable[i].err || m.Code != errorTable[i].errCode || m.GRPC != errorTable[i].code {
			t.Errorf("row %d: %+v differs from the table", i, m)
		}
	}
}
