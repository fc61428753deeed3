package storage

import "testing"

func TestManagerStatsSizesAndFlushes(t *testing.T) {
	t.Parallel()
	m, err := OpenManager(t.TempDir(), DefaultLogConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.GetOrCreate("t", 0, DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	before := m.Stats()
	if len(before.Logs) != 1 || before.Logs[0].Topic != "t" || before.Logs[0].Segments != 1 {
		t.Fatalf("stats %+v", before.Logs)
	}
	if _, err := l.AppendAsLeader(makeBatch(3, 10, 1000), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	after := m.Stats()
	if after.Logs[0].SizeBytes <= before.Logs[0].SizeBytes {
		t.Fatalf("size %d after an append, %d before", after.Logs[0].SizeBytes, before.Logs[0].SizeBytes)
	}
	if after.FlushLatency.Count != before.FlushLatency.Count+1 {
		t.Fatalf("flushes %d, then %d", before.FlushLatency.Count, after.FlushLatency.Count)
	}
}
