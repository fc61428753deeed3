package metadata

import (
	"strconv"

	"github.com/hashicorp/raft"
)

// Stats is a snapshot of this node's metadata quorum member, for
// monitoring.
type Stats struct {
	// AppliedIndex is the raft index of the image in use.
	AppliedIndex uint64
	// CommitIndex is the highest raft index this node knows committed; the
	// image lags the controller's log by CommitIndex-AppliedIndex (as far
	// as this node knows).
	CommitIndex uint64
	// LastLogIndex is the last raft index in this node's log.
	LastLogIndex uint64
	Term         uint64
	// RaftState is raft's: Leader, Follower, Candidate or Shutdown (a
	// broker-only node follows as a non-voter).
	RaftState string
	// IsController is true on the raft leader, the active controller.
	IsController bool
	// ControllerID is the controller this node knows, -1 when none.
	ControllerID int32
	// Brokers and FencedBrokers count the registered brokers in the image.
	Brokers, FencedBrokers int
	// Partitions counts every partition; OfflinePartitions those with no
	// leader, or a fenced one; UnderReplicated those whose ISR is smaller
	// than their replica set without the replicas a reassignment is adding
	// (cluster-wide, from the image); ReassigningPartitions those with a
	// reassignment pending.
	Partitions, OfflinePartitions, UnderReplicatedPartitions, ReassigningPartitions int
	// LeaderElections counts the partition leader elections in the
	// metadata commands this node applied since it started (a partition
	// given a new leader, an offline one included); UncleanLeaderElections
	// those whose new leader was not in the ISR. The same on every node.
	LeaderElections, UncleanLeaderElections uint64
}

// Stats returns the node's metadata state.
func (n *Node) Stats() Stats {
	img := n.Image()
	rs := n.raft.Stats()
	num := func(k string) uint64 {
		v, _ := strconv.ParseUint(rs[k], 10, 64)
		return v
	}
	st := Stats{AppliedIndex: img.Index(), CommitIndex: num("commit_index"), LastLogIndex: num("last_log_index"),
		Term: num("term"), RaftState: rs["state"], IsController: n.raft.State() == raft.Leader, ControllerID: -1}
	if id, _, ok := n.Controller(); ok {
		st.ControllerID = id
	}
	st.LeaderElections, st.UncleanLeaderElections = n.fsm.Elections()
	fenced := map[int32]bool{}
	for _, b := range img.Brokers() {
		st.Brokers++
		if b.Fenced {
			st.FencedBrokers++
			fenced[b.ID] = true
		}
	}
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			st.Partitions++
			if p.Leader < 0 || fenced[p.Leader] {
				st.OfflinePartitions++
			}
			if len(p.ISR) < len(p.Replicas)-len(p.AddingReplicas) {
				st.UnderReplicatedPartitions++
			}
			if p.Reassigning() {
				st.ReassigningPartitions++
			}
		}
	}
	return st
}
