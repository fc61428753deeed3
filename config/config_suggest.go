package config

import "fmt"

// unknownKeyHint says what an unknown server key was probably meant to
// be: the broker key a topic key takes its default from (retention.ms
// given to the server means log.retention.ms), else the closest known key
// by edit distance when it is near enough to be a typo.
func unknownKeyHint(key string) string {
	if tk, ok := topicKeyIndex[key]; ok && tk.brokerKey != "" {
		return fmt.Sprintf("; did you mean %s? (%s is a topic config; %s is the server's default for it)", tk.brokerKey, key, tk.brokerKey)
	}
	names := make([]string, 0, len(configKeyIndex))
	for name := range configKeyIndex {
		names = append(names, name)
	}
	if best := closestKey(key, names); best != "" {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return ""
}

// unknownTopicKeyHint is unknownKeyHint for a topic config: the topic key
// a server key sets the default of (log.retention.ms given to a topic
// means retention.ms), else the closest topic key.
func unknownTopicKeyHint(key string) string {
	names := make([]string, 0, len(topicKeys))
	for _, k := range topicKeys {
		if k.brokerKey != "" && k.brokerKey == key && k.name != key {
			return fmt.Sprintf("; did you mean %s? (%s is the server's default for the topic config %s)", k.name, key, k.name)
		}
		names = append(names, k.name)
	}
	if best := closestKey(key, names); best != "" {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return ""
}

// closestKey is the name nearest key by edit distance (the first in
// order of a tie), or "" when even that one is too far to be a typo.
func closestKey(key string, names []string) string {
	best, bestDist := "", -1
	for _, name := range names {
		d := editDistance(key, name)
		if bestDist < 0 || d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	// A suggestion more than a third rewritten is noise, not a typo.
	if best == "" || bestDist > max(2, len(key)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
