package chaos

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/quirelog/quire/record"
)

// ReplicasDiffer is the anomaly of two replicas holding different batches
// below the high watermark, or one lacking a batch there.
const ReplicasDiffer = "replicas-differ"

// CompareReplicas reads the segments of partition dirName (topic-N) in
// each node's data directory (the nodes stopped) and reports every batch
// below hw that is not byte for byte the same on all of them.
func CompareReplicas(dataDirs []string, dirName string, partition int32, hw int64) ([]Anomaly, error) {
	logs := make([]map[int64][]byte, len(dataDirs))
	var bases []int64
	seen := map[int64]bool{}
	for i, d := range dataDirs {
		logs[i] = map[int64][]byte{}
		segs, err := filepath.Glob(filepath.Join(d, dirName, "*.log"))
		if err != nil {
			return nil, err
		}
		sort.Strings(segs)
		for _, s := range segs {
			data, err := os.ReadFile(s)
			if err != nil {
				return nil, err
			}
			// A torn or unflushed tail past the last whole batch is the
			// recovery's to cut, and lies above the HW.
			_ = record.SplitBatches(data, func(batch []byte, h record.Header) error {
				if h.NextOffset() > hw {
					return nil
				}
				logs[i][h.BaseOffset] = batch
				if !seen[h.BaseOffset] {
					seen[h.BaseOffset] = true
					bases = append(bases, h.BaseOffset)
				}
				return nil
			})
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var out []Anomaly
	for _, base := range bases {
		var ref []byte
		refNode := -1
		for i := range dataDirs {
			b, ok := logs[i][base]
			switch {
			case !ok:
				out = append(out, Anomaly{ReplicasDiffer, partition, base, "",
					fmt.Sprintf("%s lacks the batch at %d below the high watermark %d", dataDirs[i], base, hw)})
			case ref == nil:
				ref, refNode = b, i
			case !bytes.Equal(ref, b):
				out = append(out, Anomaly{ReplicasDiffer, partition, base, "",
					fmt.Sprintf("the batch at %d differs between %s and %s", base, dataDirs[refNode], dataDirs[i])})
			}
		}
	}
	return out, nil
}
