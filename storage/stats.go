package storage

import "github.com/quirelog/quire/internal/atomichist"

// LogStats is one log on disk.
type LogStats struct {
	Topic     string
	Partition int32
	SizeBytes int64
	Segments  int
	// Compacted: the log's cleanup.policy includes compact; Cleaning is
	// then its cleaner state.
	Compacted bool
	Cleaning  CleanerStats
}

// Stats is a snapshot of the logs, for monitoring.
type Stats struct {
	Logs []LogStats // ordered by topic and partition
	// FlushLatency times every Log.Flush (the fsync of the active
	// segment and the wait for rolled ones) since the manager opened.
	FlushLatency atomichist.Snapshot
	// Files is the segment file cache the logs share.
	Files FileCacheStats
}

// Stats returns the size and segment count of every open log, the flush
// latencies and the file cache's counters.
func (m *Manager) Stats() Stats {
	logs := m.Logs()
	st := Stats{Logs: make([]LogStats, len(logs)), FlushLatency: m.opts.flushLatency.Snapshot(), Files: m.opts.Files.Stats()}
	for i, l := range logs {
		st.Logs[i] = LogStats{Topic: l.topic, Partition: l.partition, SizeBytes: l.Size(), Segments: l.NumSegments()}
		if l.Config().Compact {
			st.Logs[i].Compacted = true
			st.Logs[i].Cleaning = l.CleanerStats()
		}
	}
	return st
}
