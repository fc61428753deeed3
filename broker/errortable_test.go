package broker

import (
	"errors"
	"testing"
)

func TestBrokerErrorTable(t *testing.T) {
	for _, m := range errorTable {
		e := toError(m.err)
		if e.Code != m.code || e.Retriable != m.retriable {
			t.Errorf("%v maps to %v/%v, want %v/%v (shadowed by an earlier row?)", m.err, e.Code, e.Retriable, m.code, m.retriable)
		}
	}
	if e := toError(errors.New("surprise")); e.Code.String() != "UNKNOWN_SERVER_ERROR" || e.Retriable {
		t.Errorf("unknown error: %+v", e)
	}
	if toError(nil) != nil || toStatus(nil) != nil {
		t.Errorf("nil must map to nil")
	}
}
