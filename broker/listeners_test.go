package broker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quirelog/quire/broker"
)

// TestBrokerConfigListeners: listeners, advertised.listeners and
// inter.broker.listener.name accept Kafka's forms and reject the rest with
// an error naming the key and the problem.
func TestBrokerConfigListeners(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listeners, advertised, inter string
		wantErr                      string // "" = valid
	}{
		{"0.0.0.0:9092", "", "", ""},
		{"PLAINTEXT://0.0.0.0:9092", "quire1:9092", "", ""},
		{"INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092", "INTERNAL://quire1:9092,EXTERNAL://127.0.0.1:19092", "INTERNAL", ""},
		{"internal://:9092, external://:19092", "external://127.0.0.1:19092", "internal", ""},
		{"INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0", "", "EXTERNAL", ""},
		{"", "", "", "listeners"},
		{"nowhere", "", "", "want [NAME://]host:port"},
		{"A://:9092,B://:9092", "", "", "A and B both use port 9092"},
		{"A://:9092,a://:9093", "", "", "listener name A given twice"},
		{"BAD NAME://:9092", "", "", "the name must be"},
		{"A://:9092,", "", "", "empty entry"},
		{"A://:99999", "", "", "bad port"},
		{"INTERNAL://:9092", "EXTERNAL://127.0.0.1:19092", "", "EXTERNAL is not one of the listeners (INTERNAL)"},
		{"INTERNAL://:9092", "127.0.0.1:9092", "", "PLAINTEXT is not one of the listeners"},
		{"0.0.0.0:9092", "0.0.0.0:9092", "", "advertise an address others can dial"},
		{"0.0.0.0:9092", ":9092", "", "advertise an address others can dial"},
		{"0.0.0.0:9092", "quire1:0", "", "not 0"},
		{"INTERNAL://:9092", "", "EXTERNAL", "inter.broker.listener.name: EXTERNAL is not one of the listeners"},
	} {
		c := broker.DefaultConfig()
		c.ListenAddr, c.AdvertisedAddr, c.InterBrokerListenerName = tc.listeners, tc.advertised, tc.inter
		err := c.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q / %q / %q: %v", tc.listeners, tc.advertised, tc.inter, err)
		case tc.wantErr != "" && (!errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q / %q / %q: got %v, want an invalid config error with %q", tc.listeners, tc.advertised, tc.inter, err, tc.wantErr)
		}
	}
	// Set checks the syntax of each key on its own.
	c := broker.DefaultConfig()
	for _, kv := range [][2]string{{"listeners", "A://x"}, {"advertised.listeners", "A://:1,A://:2"}} {
		if err := c.Set(kv[0], kv[1]); !errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("Set %s=%s: %v", kv[0], kv[1], err)
		}
	}
}
