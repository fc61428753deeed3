package replica

// EndOffsetForEpoch answers a client's OffsetForLeaderEpoch (KIP-320) as
// the leader: the largest leader epoch at or below epoch that the log
// knows and the offset where it ends (the next epoch's start, or the log
// end offset for the latest), or -1, -1 for an epoch older than the
// log's first known or newer than its latest (storage's
// Log.EndOffsetForEpoch). As Kafka checks, a current leader epoch the
// client gives (non-nil, >= 0) is compared first (ErrFencedLeaderEpoch,
// ErrUnknownLeaderEpoch); then only the leader answers (NotLeaderError),
// a consumer checking for truncation after a leader change asking the
// leader it now reads from.
func (p *Partition) EndOffsetForEpoch(current *int32, epoch int32) (int32, int64, error) {
	if err := p.CheckLeaderEpoch(current); err != nil {
		return -1, -1, err
	}
	st := p.state()
	if !st.leader {
		return -1, -1, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	e, end := p.log.EndOffsetForEpoch(epoch)
	return e, end, nil
}
