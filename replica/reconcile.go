package replica

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/quirelog/quire/storage"
)

// View is what the replicas follow of the metadata image: every topic with
// its effective config and the assignment of each partition. The broker's
// image watcher builds one from each new image and hands it to Reconcile.
type View struct {
	Topics []TopicView
	// Registered says the view includes this broker's own registration
	// by this process: it is then at least as new as everything committed
	// before the process started, so logs on disk it does not assign here
	// belong to deleted topics.
	Registered bool
}

// TopicView is one topic of a View.
type TopicView struct {
	Name       string
	ID         string
	Config     TopicConfig
	Partitions []Assignment
}

// Assignment is a partition's leadership as the metadata image has it.
type Assignment struct {
	Partition                           int32
	Leader, LeaderEpoch, PartitionEpoch int32
	Replicas, ISR                       []int32
	// Adding are the replicas a pending reassignment adds (in Replicas
	// too): they fetch under the reassignment throttle.
	Adding []int32
}

// Reconcile brings the hosted replicas in line with v: create and lead or
// follow the replicas assigned here, apply topic configs, delete the
// replicas of deleted topics (and, once v is Registered, stray logs on
// disk). Errors are logged per replica; the next view tries again.
func (rm *Manager) Reconcile(v View) {
	rm.reconcileMu.Lock()
	defer rm.reconcileMu.Unlock()
	self := rm.nodeID
	want := map[storage.TopicPartition]bool{}
	topics := map[string]bool{}
	var jobs []applyJob
	for _, t := range v.Topics {
		topics[t.Name] = true
		if old, ok := rm.topicIDs[t.Name]; ok && old != t.ID {
			// Deleted and created again between two views: start afresh.
			for _, key := range rm.hosted() {
				if key.Topic == t.Name {
					if err := rm.remove(key.Topic, key.Partition); err != nil {
						rm.logger.Error("cannot delete replica", "topic", key.Topic, "partition", key.Partition, "error", err)
					}
				}
			}
		}
		rm.topicIDs[t.Name] = t.ID
		rm.setTopicConfig(t.Name, t.Config)
		for _, a := range t.Partitions {
			if !contains(a.Replicas, self) {
				continue
			}
			key := storage.TopicPartition{Topic: t.Name, Partition: a.Partition}
			want[key] = true
			if a.Leader == self && !v.Registered {
				// Leadership given to this broker before this process
				// registered belongs to its previous life: the controller
				// moves it (a new epoch) when the registration commits.
				// Acting on it meanwhile would append at an epoch whose
				// history other replicas hold differently (this log may
				// have lost its unflushed tail), answer a stale high
				// watermark, and tell followers ahead of it to truncate
				// what the ISR committed.
				a.Leader = -1
			}
			jobs = append(jobs, applyJob{topic: t.Name, a: a})
		}
	}
	rm.applyAll(jobs)
	for _, key := range rm.hosted() {
		if !want[key] {
			if err := rm.remove(key.Topic, key.Partition); err != nil {
				rm.logger.Error("cannot delete replica", "topic", key.Topic, "partition", key.Partition, "error", err)
			}
		}
	}
	if v.Registered && !rm.cleaned {
		rm.cleaned = true
		for _, l := range rm.logs.Logs() {
			key := storage.TopicPartition{Topic: l.Topic(), Partition: l.Partition()}
			if !want[key] {
				rm.logger.Info("deleting stray log", "topic", key.Topic, "partition", key.Partition)
				if err := rm.logs.Delete(key.Topic, key.Partition); err != nil {
					rm.logger.Error("cannot delete stray log", "topic", key.Topic, "partition", key.Partition, "error", err)
				}
			}
		}
	}
	for _, name := range rm.configured() {
		if !topics[name] {
			rm.forgetTopic(name)
			delete(rm.topicIDs, name)
		}
	}
}

// applyJob is one partition of a view to apply.
type applyJob struct {
	topic string
	a     Assignment
}

// reconcileWorkers is how many partitions Reconcile applies at once when
// a view changes many (a node starting with 20,000 partitions, each given
// a new epoch by one image): a replica newly hosted opens or creates its
// log, and after the view a background pass writes each new leader's
// epoch checkpoint (storage.Log.AssignEpochStart records the epoch in
// memory only), file work that the workers overlap.
const reconcileWorkers = 32

// applyAll applies every job, partitions apart at once (each partition's
// own locks order what touches it; the jobs name distinct partitions).
func (rm *Manager) applyAll(jobs []applyJob) {
	apply := func(j applyJob) {
		if err := rm.apply(j.topic, j.a.Partition, j.a); err != nil {
			rm.logger.Error("cannot host replica", "topic", j.topic, "partition", j.a.Partition, "error", err)
		}
	}
	if len(jobs) <= reconcileWorkers {
		for _, j := range jobs {
			apply(j)
		}
		return
	}
	inParallel(len(jobs), func(i int) { apply(jobs[i]) })
	// The new leaders' epochs are in their logs' caches only (see
	// storage.Log.AssignEpochStart): write their checkpoint files in the
	// background, side by side, which the first append to each would
	// otherwise do under its append lock, one partition after another in
	// a produce request to many.
	rm.goBackground(func() {
		inParallel(len(jobs), func(i int) {
			j := jobs[i]
			if j.a.Leader != rm.nodeID || rm.ctx.Err() != nil {
				return
			}
			p, ok := rm.Partition(j.topic, j.a.Partition)
			if !ok {
				return
			}
			if err := p.log.WriteEpochCheckpoint(); err != nil && !errors.Is(err, storage.ErrClosed) {
				rm.logger.Error("cannot write the leader epoch checkpoint", "topic", j.topic, "partition", j.a.Partition, "error", err)
			}
		})
	})
}

// inParallel calls fn(0) to fn(n-1) on reconcileWorkers goroutines.
func inParallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range reconcileWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				fn(int(i))
			}
		}()
	}
	wg.Wait()
}
