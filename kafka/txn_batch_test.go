package kafka

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/txn"
)

// brokerTxns answers AddPartitionsToTxn v4+ as the core does for a
// coordinator holding transaction "tx" (producer 7, epoch 2) with the
// partitions in has; refused says the caller lacks ClusterAction.
type brokerTxns struct {
	fakeBackend
	has     map[txn.TopicPartition]bool
	refused bool
}

func (b *brokerTxns) AddPartitionsToTxnForBroker(_ context.Context, p txn.Producer, parts []txn.TopicPartition, verifyOnly bool) ([]error, error) {
	if b.refused {
		return nil, refusal(quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, "ClusterAction denied")
	}
	out := make([]error, len(parts))
	for i, tp := range parts {
		switch {
		case p.ID != "tx":
			out[i] = refusal(quirev1.ErrorCode_INVALID_PRODUCER_ID_MAPPING, "unknown transactional id")
		case p.Epoch != 2:
			out[i] = refusal(quirev1.ErrorCode_PRODUCER_FENCED, "fenced")
		case verifyOnly && !b.has[tp]:
			out[i] = refusal(quirev1.ErrorCode_INVALID_TXN_STATE, "not in the transaction")
		case !verifyOnly:
			b.has[tp] = true
		}
	}
	return out, nil
}

// AddPartitionsToTxn v4 and v5 over the wire (kmsg's encoding both ways):
// a batch of transactions, each answered per partition in the order
// asked; verify_only adds nothing; a caller without ClusterAction is
// refused at the top level with no transaction answered; ApiVersions
// offers 0-5.
func TestKafkaAddPartitionsToTxnBatch(t *testing.T) {
	t.Parallel()
	b := &brokerTxns{has: map[txn.TopicPartition]bool{{Topic: "a", Partition: 0}: true}}
	_, k := startServer(t, b)

	versions := roundTrip[*kmsg.ApiVersionsResponse](k, kmsg.NewPtrApiVersionsRequest())
	i := slices.IndexFunc(versions.ApiKeys, func(v kmsg.ApiVersionsResponseApiKey) bool { return v.ApiKey == 24 })
	if i < 0 || versions.ApiKeys[i].MinVersion != 0 || versions.ApiKeys[i].MaxVersion != 5 {
		t.Fatalf("ApiVersions offers AddPartitionsToTxn %+v, want 0-5", versions.ApiKeys)
	}

	tx := func(id string, epoch int16, verify bool, parts map[string][]int32, order ...string) kmsg.AddPartitionsToTxnRequestTransaction {
		r := kmsg.NewAddPartitionsToTxnRequestTransaction()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.VerifyOnly = id, 7, epoch, verify
		for _, topic := range order {
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic, rt.Partitions = topic, parts[topic]
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	// answers flattens a transaction's answer to "topic-partition:code".
	answers := func(r kmsg.AddPartitionsToTxnResponseTransaction) []string {
		var out []string
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out = append(out, t.Topic+"-"+string(rune('0'+p.Partition))+":"+errName(p.ErrorCode))
			}
		}
		return out
	}
	ok, notIn := errName(0), errName(kerr.InvalidTxnState.Code)
	for _, v := range []int16{4, 5} {
		b.has = map[txn.TopicPartition]bool{{Topic: "a", Partition: 0}: true}
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = v
		req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{
			tx("tx", 2, true, map[string][]int32{"a": {0, 1}, "b": {2}}, "a", "b"),
			tx("tx", 1, true, map[string][]int32{"a": {0}}, "a"),
			tx("other", 2, true, map[string][]int32{"a": {0}}, "a"),
		}
		resp := roundTrip[*kmsg.AddPartitionsToTxnResponse](k, req)
		if resp.ErrorCode != 0 || len(resp.Transactions) != 3 {
			t.Fatalf("v%d: top-level %s, %d transactions answered", v, errName(resp.ErrorCode), len(resp.Transactions))
		}
		want := [][]string{
			{"a-0:" + ok, "a-1:" + notIn, "b-2:" + notIn},
			{"a-0:" + errName(kerr.ProducerFenced.Code)},
			{"a-0:" + errName(kerr.InvalidProducerIDMapping.Code)},
		}
		for j, r := range resp.Transactions {
			if r.TransactionalID != req.Transactions[j].TransactionalID || !slices.Equal(answers(r), want[j]) {
				t.Fatalf("v%d: transaction %d answered %s %v, want %s %v", v, j, r.TransactionalID, answers(r), req.Transactions[j].TransactionalID, want[j])
			}
		}
		if len(b.has) != 1 {
			t.Fatalf("v%d: a verification added partitions: %v", v, b.has)
		}

		// Without verify_only they are added, and then verify.
		req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx("tx", 2, false, map[string][]int32{"b": {2}}, "b")}
		if got := answers(roundTrip[*kmsg.AddPartitionsToTxnResponse](k, req).Transactions[0]); !slices.Equal(got, []string{"b-2:" + ok}) {
			t.Fatalf("v%d: add answered %v", v, got)
		}
		req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx("tx", 2, true, map[string][]int32{"a": {0}, "b": {2}}, "a", "b")}
		if got := answers(roundTrip[*kmsg.AddPartitionsToTxnResponse](k, req).Transactions[0]); !slices.Equal(got, []string{"a-0:" + ok, "b-2:" + ok}) {
			t.Fatalf("v%d: verify after the add answered %v", v, got)
		}
	}

	b.refused = true
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 5
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx("tx", 2, true, map[string][]int32{"a": {0}}, "a")}
	resp := roundTrip[*kmsg.AddPartitionsToTxnResponse](k, req)
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Transactions) != 0 {
		t.Fatalf("without ClusterAction: top-level %s, %d transactions answered", errName(resp.ErrorCode), len(resp.Transactions))
	}

	// v3, a producer's own call, is still served by AddPartitionsToTxn.
	old := kmsg.NewPtrAddPartitionsToTxnRequest()
	old.Version = 3
	old.TransactionalID = "tx"
	ot := kmsg.NewAddPartitionsToTxnRequestTopic()
	ot.Topic, ot.Partitions = "a", []int32{0}
	old.Topics = append(old.Topics, ot)
	if got := roundTrip[*kmsg.AddPartitionsToTxnResponse](k, old); len(got.Topics) != 1 || got.Topics[0].Partitions[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("v3 answered %+v, want the backend's AddPartitionsToTxn (UNSUPPORTED_VERSION here)", got)
	}
}
