package metadata

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/quirelog/quire/api/metapb"
)

// run is the controller loop of one leadership term. It first commits a
// ControllerChange (which also proves every earlier entry is applied here,
// so the image is current), gives every broker a fresh session, then
// checks sessions, raft membership and leader balance on a ticker.
func (c *Controller) run(ctx context.Context, done, ready chan struct{}) {
	defer close(done)
	log := c.n.logger.With("controller", c.n.cfg.NodeID)
	cc := &pb.Command{Cmd: &pb.Command_ControllerChange{ControllerChange: &pb.ControllerChange{
		ControllerId: c.n.cfg.NodeID, ControllerAddr: string(c.n.cfg.Transport.LocalAddr()), ClusterId: c.n.cfg.ClusterID,
	}}}
	for {
		_, err := c.raftApply(ctx, cc)
		if err == nil {
			break
		}
		if errors.Is(err, ErrClusterIDMismatch) || errors.Is(err, ErrNotController) || errors.Is(err, ErrShutdown) {
			log.Error("cannot take over as controller", "error", err)
			return
		}
		log.Warn("controller change not committed, retrying", "error", err)
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return
		}
	}
	now := time.Now()
	c.mu.Lock()
	for _, b := range c.n.Image().Brokers() {
		if _, ok := c.lastSeen[b.ID]; !ok {
			c.lastSeen[b.ID] = now
		}
	}
	c.mu.Unlock()
	close(ready)
	log.Info("became controller", "index", c.n.AppliedIndex())

	if c.groups != nil {
		var groupTicks sync.WaitGroup
		defer groupTicks.Wait()
		groupTicks.Go(func() { c.groups.RunTerm(ctx) })
	}
	if c.txns != nil {
		var txnTicks sync.WaitGroup
		defer txnTicks.Wait()
		txnTicks.Go(func() { c.txns.RunTerm(ctx) })
	}

	tick := min(max(c.n.cfg.BrokerSessionTimeout/4, 10*time.Millisecond), time.Second)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	nextRebalance := time.Now().Add(c.n.cfg.LeaderRebalanceEvery)
	nextBalance := time.Now().Add(c.n.cfg.BalanceEvery)
	for {
		select {
		case <-ctx.Done():
			log.Info("no longer controller")
			return
		case <-ticker.C:
		}
		c.checkSessions(ctx)
		c.reconcileMembers()
		if !c.n.cfg.ManualMetadataVersion {
			c.raiseMetadataVersion(ctx)
		}
		if c.n.cfg.AutoLeaderRebalance && time.Now().After(nextRebalance) {
			c.rebalance(ctx)
			nextRebalance = time.Now().Add(c.n.cfg.LeaderRebalanceEvery)
		}
		if c.n.cfg.Balancer && time.Now().After(nextBalance) {
			c.balance(ctx)
			nextBalance = time.Now().Add(c.n.cfg.BalanceEvery)
		}
	}
}

// checkSessions fences every unfenced broker silent for longer than the
// session timeout.
func (c *Controller) checkSessions(ctx context.Context) {
	now := time.Now()
	timeout := c.n.cfg.BrokerSessionTimeout
	var expired []BrokerInfo
	c.mu.Lock()
	for _, b := range c.n.Image().Brokers() {
		if b.Fenced {
			continue
		}
		seen, ok := c.lastSeen[b.ID]
		if !ok {
			c.lastSeen[b.ID] = now
			continue
		}
		if now.Sub(seen) > timeout {
			expired = append(expired, b)
		}
	}
	c.mu.Unlock()
	for _, b := range expired {
		_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_FenceBroker{FenceBroker: &pb.FenceBroker{
			BrokerId: b.ID, BrokerEpoch: b.Epoch, Unclean: c.n.cfg.UncleanLeaderElection,
		}}})
		if err != nil {
			c.n.logger.Warn("cannot fence broker", "broker", b.ID, "error", err)
			continue
		}
		c.n.logger.Warn("fenced broker: session expired", "broker", b.ID, "epoch", b.Epoch, "timeout", timeout)
	}
}

// reconcileMembers adds every registered broker missing from the raft
// configuration as a non-voter, so broker-only nodes replicate the
// metadata log, and removes every non-voter that is no longer a registered
// broker (unregistered: UnregisterBroker's own removal failed or a new
// controller took over before it).
func (c *Controller) reconcileMembers() {
	img := c.n.Image()
	for _, b := range img.Brokers() {
		c.ensureMember(b.ID, b.Addr)
	}
	f := c.n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			continue
		}
		id, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil {
			continue
		}
		if _, ok := img.Broker(int32(id)); !ok && !c.isVoter(int32(id)) {
			c.removeMember(int32(id))
		}
	}
}

// isVoter reports whether id is in controller.quorum.voters.
func (c *Controller) isVoter(id int32) bool {
	for _, v := range c.n.cfg.Voters {
		if v.ID == id {
			return true
		}
	}
	return false
}

// removeMember takes a non-voter out of the raft configuration.
func (c *Controller) removeMember(id int32) {
	sid := serverID(id)
	f := c.n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	found := false
	for _, s := range f.Configuration().Servers {
		if s.ID == sid {
			if s.Suffrage == raft.Voter {
				return
			}
			found = true
		}
	}
	if !found {
		return
	}
	if err := c.n.raft.RemoveServer(sid, 0, c.n.cfg.ApplyTimeout).Error(); err != nil {
		c.n.logger.Warn("cannot remove broker from the metadata quorum", "broker", id, "error", err)
		return
	}
	c.n.logger.Info("removed broker from the metadata quorum", "broker", id)
}

func (c *Controller) ensureMember(id int32, addr string) {
	f := c.n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	sid := serverID(id)
	for _, s := range f.Configuration().Servers {
		if s.ID == sid && (s.Suffrage == raft.Voter || s.Address == raft.ServerAddress(addr)) {
			return
		}
	}
	if err := c.n.raft.AddNonvoter(sid, raft.ServerAddress(addr), 0, c.n.cfg.ApplyTimeout).Error(); err != nil {
		c.n.logger.Warn("cannot add broker to the metadata quorum", "broker", id, "addr", addr, "error", err)
		return
	}
	c.n.logger.Info("added broker to the metadata quorum as non-voter", "broker", id, "addr", addr)
}

// rebalance moves leadership back to each partition's preferred (first)
// replica when it is live and in the ISR.
func (c *Controller) rebalance(ctx context.Context) {
	img := c.n.Image()
	moved := 0
	for _, name := range sortedTopicNames(img) {
		for _, p := range img.topics[name].Partitions {
			pref := p.Replicas[0]
			if p.Reassigning() || p.Leader == pref || !img.isLive(pref) || !slices.Contains(p.ISR, pref) {
				continue
			}
			_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_PartitionChange{PartitionChange: &pb.PartitionChange{
				Topic: p.Topic, Partition: p.Partition, Leader: pref, LeaderEpoch: p.LeaderEpoch,
				Isr: p.ISR, PartitionEpoch: p.PartitionEpoch,
			}}})
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				continue
			}
			moved++
		}
	}
	if moved > 0 {
		c.n.logger.Info("preferred leader election", "moved", moved)
	}
}

// RebalanceLeaders runs one preferred-leader election now.
func (c *Controller) RebalanceLeaders(ctx context.Context) error {
	if err := c.active(ctx); err != nil {
		return err
	}
	c.rebalance(ctx)
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
