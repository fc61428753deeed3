package metadata

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
)

// placeReplicas assigns count partitions, numbered from first, over the
// live brokers the way Kafka does: the first replica (the preferred leader)
// goes round-robin from a start offset, the others follow at a shift that
// grows every len(brokers) partitions, so replicas and leaders spread
// evenly. With racks set, brokers are interleaved by rack and a partition
// takes a replica from each rack before it takes a second from any.
func placeReplicas(live []BrokerInfo, first, count int32, rf int, offset int) ([][]int32, error) {
	n := len(live)
	if rf < 1 || rf > n {
		return nil, fmt.Errorf("%w: %d with %d live brokers", ErrInvalidReplicationFactor, rf, n)
	}
	order, racks := rackAlternated(live)
	start := offset % n
	out := make([][]int32, count)
	for i := range count {
		pid := int(first + i)
		firstIdx := (pid + start) % n
		replicas := []int32{order[firstIdx]}
		if rf > 1 {
			shift := (start + pid/n) % (n - 1)
			cands := make([]int, 0, n-1)
			for j := range n - 1 {
				cands = append(cands, (firstIdx+1+(shift+j)%(n-1))%n)
			}
			used := map[string]bool{racks[firstIdx]: true}
			picked := map[int]bool{firstIdx: true}
			for _, c := range cands {
				if len(replicas) == rf {
					break
				}
				if !used[racks[c]] {
					used[racks[c]] = true
					picked[c] = true
					replicas = append(replicas, order[c])
				}
			}
			for _, c := range cands {
				if len(replicas) == rf {
					break
				}
				if !picked[c] {
					picked[c] = true
					replicas = append(replicas, order[c])
				}
			}
		}
		out[i] = replicas
	}
	return out, nil
}

// rackAlternated orders brokers so that consecutive ones sit in different
// racks (racks sorted, brokers by id within a rack). A broker with no rack
// is its own rack.
func rackAlternated(live []BrokerInfo) ([]int32, []string) {
	byRack := map[string][]BrokerInfo{}
	for _, b := range live {
		r := b.Rack
		if r == "" {
			r = "\x00broker-" + strconv.Itoa(int(b.ID))
		}
		byRack[r] = append(byRack[r], b)
	}
	names := make([]string, 0, len(byRack))
	for r, bs := range byRack {
		names = append(names, r)
		sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	}
	anyRack := false
	for _, b := range live {
		if b.Rack != "" {
			anyRack = true
		}
	}
	if !anyRack {
		// No racks: plain id order.
		sorted := slices.Clone(live)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
		ids := make([]int32, len(sorted))
		racks := make([]string, len(sorted))
		for i, b := range sorted {
			ids[i], racks[i] = b.ID, "\x00broker-"+strconv.Itoa(int(b.ID))
		}
		return ids, racks
	}
	sort.Strings(names)
	var ids []int32
	var racks []string
	for k := 0; len(ids) < len(live); k++ {
		for _, r := range names {
			if k < len(byRack[r]) {
				ids = append(ids, byRack[r][k].ID)
				racks = append(racks, r)
			}
		}
	}
	return ids, racks
}

// checkExplicit validates a caller-given replica assignment.
func checkExplicit(img *Image, assign [][]int32, partitions int32) error {
	if len(assign) == 0 || (partitions > 0 && int(partitions) != len(assign)) {
		return fmt.Errorf("%w: assignment has %d partitions, asked for %d", ErrInvalidPartitions, len(assign), partitions)
	}
	rf := len(assign[0])
	for p, replicas := range assign {
		if len(replicas) == 0 || len(replicas) != rf {
			return fmt.Errorf("%w: partition %d has %d replicas, partition 0 has %d", ErrInvalidReplicationFactor, p, len(replicas), rf)
		}
		seen := map[int32]bool{}
		for _, r := range replicas {
			if seen[r] {
				return fmt.Errorf("%w: partition %d names broker %d twice", ErrInvalidReplicationFactor, p, r)
			}
			seen[r] = true
			if _, ok := img.brokers[r]; !ok {
				return fmt.Errorf("%w: %d in the assignment of partition %d", ErrUnknownBroker, r, p)
			}
		}
	}
	return nil
}
