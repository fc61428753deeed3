package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// apiVersionsKey is ApiVersions' key: its answer header is never flexible.
const apiVersionsKey = 18

// transactionVersionFeature is Kafka's feature of the transaction
// protocol's version.
const transactionVersionFeature = "transaction.version"

// versions are the APIs served and their versions. The lowest are the
// first that carry what is answered from (Produce 3 and Fetch 4 carry
// RecordBatch v2, the log's format; ListOffsets 1 one offset per
// partition); the highest the last before an API names topics by id
// only (Fetch 13) or needs what is not served.
var versions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: 0, MinVersion: 3, MaxVersion: 12}, // Produce (12: transaction version 2's implicit add)
	{ApiKey: 1, MinVersion: 4, MaxVersion: 12}, // Fetch
	{ApiKey: 2, MinVersion: 1, MaxVersion: 6},  // ListOffsets (7 promises -3, the max timestamp: not served)
	{ApiKey: 3, MinVersion: 0, MaxVersion: 12}, // Metadata
	{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: 3},
	{ApiKey: 21, MinVersion: 0, MaxVersion: 2}, // DeleteRecords
	{ApiKey: 22, MinVersion: 0, MaxVersion: 4}, // InitProducerId
	// Transactions (transactions.go), versions 1 and 2 (the finalized
	// transaction.version feature below): Produce 12, EndTxn 5 and
	// TxnOffsetCommit 5 are version 2's, whose producers add no partitions
	// or groups themselves and get a new epoch at each EndTxn.
	{ApiKey: 24, MinVersion: 0, MaxVersion: 5}, // AddPartitionsToTxn (4+: the brokers' batched form)
	{ApiKey: 25, MinVersion: 0, MaxVersion: 3}, // AddOffsetsToTxn
	{ApiKey: 26, MinVersion: 0, MaxVersion: 5}, // EndTxn
	{ApiKey: 27, MinVersion: 0, MaxVersion: 1}, // WriteTxnMarkers
	{ApiKey: 28, MinVersion: 0, MaxVersion: 5}, // TxnOffsetCommit
	{ApiKey: 65, MinVersion: 0, MaxVersion: 0}, // DescribeTransactions
	{ApiKey: 66, MinVersion: 0, MaxVersion: 1}, // ListTransactions
	// Consumer groups in KIP-848's protocol and their offsets; the
	// highest versions before topics named by id only.
	{ApiKey: 8, MinVersion: 2, MaxVersion: 9},  // OffsetCommit
	{ApiKey: 9, MinVersion: 1, MaxVersion: 9},  // OffsetFetch (1, as Kafka 4; 0 read ZooKeeper's offsets)
	{ApiKey: 10, MinVersion: 0, MaxVersion: 4}, // FindCoordinator
	{ApiKey: 68, MinVersion: 1, MaxVersion: 1}, // ConsumerGroupHeartbeat (client-made member ids)
	// The classic group protocol, over the same coordinator (classic.go).
	{ApiKey: 11, MinVersion: 0, MaxVersion: 9}, // JoinGroup
	{ApiKey: 12, MinVersion: 0, MaxVersion: 4}, // Heartbeat
	{ApiKey: 13, MinVersion: 0, MaxVersion: 5}, // LeaveGroup
	{ApiKey: 14, MinVersion: 0, MaxVersion: 5}, // SyncGroup
	// Admin tools' view of the groups, either protocol (describe.go).
	{ApiKey: 15, MinVersion: 0, MaxVersion: 5}, // DescribeGroups
	{ApiKey: 16, MinVersion: 0, MaxVersion: 4}, // ListGroups (4: states; 5 filters by type, KIP-848's)

	// Clients' truncation detection after a leader change (epochs.go).
	{ApiKey: offsetForLeaderEpochKey, MinVersion: 0, MaxVersion: 4}, // OffsetForLeaderEpoch
	// SASL authentication (sasl.go): answered on every listener, as
	// Kafka does; ILLEGAL_SASL_STATE where none is required.
	{ApiKey: saslHandshakeKey, MinVersion: 0, MaxVersion: 1},
	{ApiKey: saslAuthenticateKey, MinVersion: 0, MaxVersion: 2},
}

// served reports whether version of key is answered.
func served(key, version int16) bool {
	for _, v := range versions {
		if v.ApiKey == key {
			return version >= v.MinVersion && version <= v.MaxVersion
		}
	}
	return false
}

func apiVersions(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	for _, v := range versions {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = v.ApiKey, v.MinVersion, v.MaxVersion
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	if version >= 3 {
		// Transaction version 2 (KIP-890 part 2) is served, so finalized:
		// clients that know it use it.
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, 2
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, 2, 2
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		resp.FinalizedFeaturesEpoch = 1
	}
	return resp
}

// apiVersions is what this server serves: the share-group APIs only when
// they are on.
func (s *Server) apiVersions(version int16) *kmsg.ApiVersionsResponse {
	resp := apiVersions(version)
	if !s.cfg.ShareGroups {
		keys := resp.ApiKeys[:0]
		for _, k := range resp.ApiKeys {
			if !isShareKey(k.ApiKey) {
				keys = append(keys, k)
			}
		}
		resp.ApiKeys = keys
	}
	return resp
}
