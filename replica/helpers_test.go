package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quirelog/quire/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// refusingController stands in for a controller that refuses every ISR
// change: tests that do not look at ISR changes.
type refusingController struct{}

func (refusingController) AlterPartition(_ context.Context, topic string, p int32, a Assignment) (Assignment, error) {
	return a, ErrISRRefused
}

// allRegistered counts every broker as registered (by the empty
// incarnation) and unfenced.
type allRegistered struct{}

func (allRegistered) Registration(int32) (Registration, bool) { return Registration{}, true }

// brokersFunc is a Brokers answering from a function.
type brokersFunc func(id int32) (Registration, bool)

func (f brokersFunc) Registration(id int32) (Registration, bool) { return f(id) }

// noNetwork is Peers in tests that move records between replicas by
// hand (fetchOnce): the fetchers' own calls fail.
type noNetwork struct{}

func (noNetwork) ReplicaFetch(ctx context.Context, leader int32, req *FetchRequest) (*FetchResponse, error) {
	return nil, errors.New("no network in this test")
}

// testTopicConfig is topic "t"'s config in the tests.
func testTopicConfig() TopicConfig {
	return TopicConfig{Log: storage.DefaultLogConfig(), MinInsyncReplicas: 1}
}

// newTestManager is a replica manager for node id over its own data
// directory, with topic "t" configured; nil ctl or brokers get the fakes
// above. It stops at cleanup.
func newTestManager(t *testing.T, id int32, ctl Controller, brokers Brokers) *Manager {
	t.Helper()
	sm, err := storage.OpenManager(t.TempDir(), storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sm.Close() })
	return newManagerOn(t, id, sm, ctl, brokers)
}

func newManagerOn(t testing.TB, id int32, sm *storage.Manager, ctl Controller, brokers Brokers) *Manager {
	t.Helper()
	return newManagerPeers(t, id, sm, ctl, brokers, noNetwork{}, FetchConfig{MaxWait: 500 * time.Millisecond, Backoff: time.Hour})
}

// newManagerPeers is newManagerOn whose fetchers reach leaders through
// peers, tuned by fc.
func newManagerPeers(t testing.TB, id int32, sm *storage.Manager, ctl Controller, brokers Brokers, peers Peers, fc FetchConfig) *Manager {
	t.Helper()
	if ctl == nil {
		ctl = refusingController{}
	}
	if brokers == nil {
		brokers = allRegistered{}
	}
	rm, err := New(Config{NodeID: id, Logs: sm, Controller: ctl, Brokers: brokers, Peers: peers,
		Fetch:                 fc,
		MaxFetchResponseBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rm.Stop)
	rm.setTopicConfig("t", testTopicConfig())
	return rm
}
