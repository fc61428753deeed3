package group

import (
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestGroupScripts runs the protocol scripts under testdata/.
func TestGroupScripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			s := &scriptState{cfg: DefaultConfig(), now: epoch0}
			s.m = newMachine(t, s.cfg)
			runScript(t, path, s.do)
		})
	}
}

func newMachine(t *testing.T, cfg Config) *Machine {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type scriptState struct {
	cfg    Config
	m      *Machine
	now    time.Time
	topics map[string]int32
	log    []Record // every record so far, for replay
}

func (s *scriptState) do(t *testing.T, c *scriptCase) string {
	if at, ok := c.arg("at"); ok {
		s.now = epoch0.Add(parseDuration(t, c, at))
	}
	var out string
	switch c.cmd {
	case "config":
		c.known(t, "session", "interval", "max-size", "assignors")
		cfg := DefaultConfig()
		if v, ok := c.arg("session"); ok {
			cfg.SessionTimeout = parseDuration(t, c, v)
		}
		if v, ok := c.arg("interval"); ok {
			cfg.HeartbeatInterval = parseDuration(t, c, v)
		}
		if v, ok := c.arg("max-size"); ok {
			cfg.MaxSize = parseInt(t, c, v)
		}
		if v, ok := c.arg("assignors"); ok {
			cfg.Assignors = splitList(v)
		}
		m, err := New(cfg)
		if err != nil {
			return "error: " + err.Error()
		}
		s.cfg, s.m, s.log = cfg, m, nil
		if s.topics != nil {
			s.record(m.SetTopics(s.topics))
		}
		out = "ok"
	case "topics":
		s.topics = map[string]int32{}
		for _, a := range c.args {
			s.topics[a.key] = int32(parseInt(t, c, a.val))
		}
		out = s.record(s.m.SetTopics(s.topics))
	case "heartbeat":
		out = s.heartbeat(t, c)
	case "tick":
		c.known(t, "at")
		out = s.record(s.m.Tick(s.now))
	case "describe":
		c.known(t, "group")
		d, err := s.m.Describe(s.group(c))
		if err != nil {
			return "error: " + err.Error()
		}
		out = formatDescription(d)
	case "groups":
		var lines []string
		for _, l := range s.m.Groups() {
			line := fmt.Sprintf("%s %s members=%d", l.Group, l.State, l.Members)
			if !l.EmptySince.IsZero() {
				line += fmt.Sprintf(" empty-since=%v", l.EmptySince.Sub(epoch0))
			}
			lines = append(lines, line)
		}
		out = strings.Join(lines, "\n")
	case "commit":
		c.known(t, "group", "member", "epoch")
		member, _ := c.arg("member")
		epoch := int32(-1)
		if v, ok := c.arg("epoch"); ok {
			epoch = int32(parseInt(t, c, v))
		}
		if err := s.m.ValidateCommit(s.group(c), member, epoch); err != nil {
			return "error: " + err.Error()
		}
		out = "ok"
	case "txn-commit":
		// A transaction's offsets sent as a member (TxnOffsetCommit).
		c.known(t, "group", "member", "instance", "epoch", "parts")
		member, _ := c.arg("member")
		instance, _ := c.arg("instance")
		epoch := int32(-1)
		if v, ok := c.arg("epoch"); ok {
			epoch = int32(parseInt(t, c, v))
		}
		var parts []TopicPartition
		if v, ok := c.arg("parts"); ok {
			parts = parsePartitions(t, c, v)
		}
		if err := s.m.ValidateTxnCommit(s.group(c), member, instance, epoch, parts); err != nil {
			return "error: " + err.Error()
		}
		out = "ok"
	case "delete":
		c.known(t, "group")
		recs, err := s.m.Delete(s.group(c))
		if err != nil {
			return "error: " + err.Error()
		}
		out = s.record(recs)
	case "replay":
		// A new coordinator rebuilds from every record written so far,
		// then learns the topics.
		// Arguments other than at= are the topics as they are now.
		m := newMachine(t, s.cfg)
		if _, err := m.Replay(s.log, s.m.topics, s.now); err != nil {
			t.Fatalf("%s: replay: %v", c.pos, err)
		}
		if got, want := m.Snapshot(), s.m.Snapshot(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: replayed state differs:\n%v\nwant\n%v", c.pos, got, want)
		}
		topics := s.topics
		if len(c.args) > 1 || len(c.args) == 1 && c.args[0].key != "at" {
			topics = map[string]int32{}
			for _, a := range c.args {
				if a.key != "at" {
					topics[a.key] = int32(parseInt(t, c, a.val))
				}
			}
		}
		s.m = newMachine(t, s.cfg)
		recs, err := s.m.Replay(s.log, topics, s.now)
		if err != nil {
			t.Fatalf("%s: replay: %v", c.pos, err)
		}
		s.topics = topics
		out = "ok"
		if r := s.record(recs); r != "" {
			out += "\n" + r
		}
	default:
		t.Fatalf("%s: unknown command %q", c.pos, c.cmd)
	}
	checkInvariants(t, s.m)
	return out
}

func (s *scriptState) group(c *scriptCase) string {
	if g, ok := c.arg("group"); ok {
		return g
	}
	return "g"
}

func (s *scriptState) heartbeat(t *testing.T, c *scriptCase) string {
	c.known(t, "group", "member", "instance", "epoch", "topics", "regex", "owned", "timeout", "session", "assignor", "address", "at", "classic")
	hb := Heartbeat{Group: s.group(c), Now: s.now}
	hb.MemberID, _ = c.arg("member")
	if v, ok := c.arg("epoch"); ok {
		hb.MemberEpoch = int32(parseInt(t, c, v))
	}
	topics, hasTopics := c.arg("topics")
	regex, hasRegex := c.arg("regex")
	if hasTopics || hasRegex {
		hb.Subscription = &Subscription{Topics: splitList(topics), Regex: regex}
	}
	if v, ok := c.arg("owned"); ok {
		hb.Owned, hb.HasOwned = parsePartitions(t, c, v), true
	}
	if v, ok := c.arg("timeout"); ok {
		hb.RebalanceTimeout = parseDuration(t, c, v)
	} else if hb.MemberEpoch == JoinEpoch {
		hb.RebalanceTimeout = time.Minute
	}
	_, hb.Classic = c.arg("classic")
	hb.Assignor, _ = c.arg("assignor")
	hb.ClientAddress, _ = c.arg("address")
	hb.InstanceID, _ = c.arg("instance")
	if v, ok := c.arg("session"); ok {
		hb.SessionTimeout = parseDuration(t, c, v)
	}
	resp, recs, err := s.m.Heartbeat(hb)
	if err != nil {
		if len(recs) > 0 {
			t.Fatalf("%s: an error with records %v", c.pos, recs)
		}
		return "error: " + err.Error()
	}
	out := fmt.Sprintf("epoch=%d interval=%v", resp.MemberEpoch, resp.HeartbeatInterval)
	if resp.SessionTimeout != s.cfg.SessionTimeout {
		out += fmt.Sprintf(" session=%v", resp.SessionTimeout)
	}
	if resp.HasAssignment {
		out += " assignment=" + formatPartitions(resp.Assignment)
	}
	if resp.Rejoin {
		out += " rejoin"
	}
	if r := s.record(recs); r != "" {
		out += "\n" + r
	}
	return out
}

// record keeps recs for a later replay and formats them, one a line.
func (s *scriptState) record(recs []Record) string {
	s.log = append(s.log, recs...)
	var lines []string
	for _, r := range recs {
		lines = append(lines, formatRecord(r))
	}
	return strings.Join(lines, "\n")
}

func formatRecord(r Record) string {
	g := ""
	if r.GroupID() != "g" {
		g = " group=" + r.GroupID()
	}
	switch r := r.(type) {
	case MemberMetadata:
		s := fmt.Sprintf("+ member %s%s topics=[%s]", r.MemberID, g, strings.Join(r.Topics, " "))
		if r.InstanceID != "" {
			s += " instance=" + r.InstanceID
		}
		if r.Regex != "" {
			s += " regex=" + r.Regex
		}
		s += fmt.Sprintf(" timeout=%v", r.RebalanceTimeout)
		if r.SessionTimeout != 0 {
			s += fmt.Sprintf(" session=%v", r.SessionTimeout)
		}
		if r.Assignor != "" {
			s += " assignor=" + r.Assignor
		}
		if r.ClientAddress != "" {
			s += " address=" + r.ClientAddress
		}
		return s
	case MemberAssignment:
		s := fmt.Sprintf("+ assignment %s%s epoch=%d prev=%d %s assigned=%s", r.MemberID, g, r.Epoch, r.PreviousEpoch, r.State, formatPartitions(r.Assigned))
		if len(r.PendingRevocation) > 0 {
			s += " revoking=" + formatPartitions(r.PendingRevocation)
		}
		return s
	case MemberRemoved:
		return fmt.Sprintf("- member %s%s", r.MemberID, g)
	case GroupEpoch:
		var ts []string
		for _, t := range slices.Sorted(maps.Keys(r.Topics)) {
			ts = append(ts, fmt.Sprintf("%s:%d", t, r.Topics[t]))
		}
		s := fmt.Sprintf("+ group-epoch%s %d topics={%s}", g, r.Epoch, strings.Join(ts, " "))
		if !r.EmptySince.IsZero() {
			s += fmt.Sprintf(" empty-since=%v", r.EmptySince.Sub(epoch0))
		}
		return s
	case TargetAssignment:
		s := fmt.Sprintf("+ target%s epoch=%d", g, r.Epoch)
		for _, id := range slices.Sorted(maps.Keys(r.Members)) {
			s += fmt.Sprintf(" %s=%s", id, formatPartitions(r.Members[id]))
		}
		return s
	case GroupDeleted:
		return "- group " + r.Group
	}
	return fmt.Sprintf("? %#v", r)
}

func formatDescription(d Description) string {
	lines := []string{fmt.Sprintf("%s state=%s epoch=%d target-epoch=%d assignor=%s", d.Group, d.State, d.Epoch, d.TargetEpoch, d.Assignor)}
	for _, m := range d.Members {
		s := fmt.Sprintf("  %s epoch=%d %s assigned=%s", m.MemberID, m.Epoch, m.State, formatPartitions(m.Assigned))
		if m.InstanceID != "" {
			s += " instance=" + m.InstanceID
		}
		if len(m.PendingRevocation) > 0 {
			s += " revoking=" + formatPartitions(m.PendingRevocation)
		}
		if len(m.PendingAssignment) > 0 {
			s += " pending=" + formatPartitions(m.PendingAssignment)
		}
		lines = append(lines, s)
	}
	return strings.Join(lines, "\n")
}

func formatPartitions(ps []TopicPartition) string {
	var s []string
	for _, tp := range ps {
		s = append(s, tp.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

func parsePartitions(t *testing.T, c *scriptCase, v string) []TopicPartition {
	out := []TopicPartition{}
	for _, f := range splitList(v) {
		i := strings.LastIndexByte(f, '-')
		if i <= 0 {
			t.Fatalf("%s: %q is not topic-partition", c.pos, f)
		}
		out = append(out, TopicPartition{Topic: f[:i], Partition: int32(parseInt(t, c, f[i+1:]))})
	}
	return out
}

func splitList(v string) []string {
	if v == "" {
		return []string{}
	}
	return strings.Split(v, ",")
}

func parseInt(t *testing.T, c *scriptCase, v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", c.pos, err)
	}
	return n
}

func parseDuration(t *testing.T, c *scriptCase, v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", c.pos, err)
	}
	return d
}

// checkInvariants checks what must hold after every input: no partition
// held by two members, the owner index true to the members, assigned and
// pending partitions sorted and apart, no epoch ahead of the group's.
func checkInvariants(t testing.TB, m *Machine) {
	t.Helper()
	for id, g := range m.groups {
		held := map[TopicPartition]string{}
		for _, mem := range g.members {
			if !slices.IsSortedFunc(mem.assigned, comparePartitions) || !slices.IsSortedFunc(mem.pendingRevocation, comparePartitions) {
				t.Fatalf("group %s member %s: partitions not sorted", id, mem.id)
			}
			if overlaps(mem.assigned, mem.pendingRevocation) {
				t.Fatalf("group %s member %s: %v both assigned and revoking %v", id, mem.id, mem.assigned, mem.pendingRevocation)
			}
			for _, tp := range slices.Concat(mem.assigned, mem.pendingRevocation) {
				if other, dup := held[tp]; dup {
					t.Fatalf("group %s: %v held by %s and %s", id, tp, other, mem.id)
				}
				held[tp] = mem.id
			}
			if mem.epoch > g.epoch || mem.epoch > g.targetEpoch && g.targetEpoch > 0 {
				t.Fatalf("group %s member %s at epoch %d; group %d, target %d", id, mem.id, mem.epoch, g.epoch, g.targetEpoch)
			}
		}
		static := map[string]string{}
		for _, mem := range g.members {
			if mem.instanceID == "" {
				continue
			}
			if other, dup := static[mem.instanceID]; dup {
				t.Fatalf("group %s: instance %s is members %s and %s", id, mem.instanceID, other, mem.id)
			}
			static[mem.instanceID] = mem.id
		}
		if !maps.Equal(static, g.static) {
			t.Fatalf("group %s: instance index %v, the members are %v", id, g.static, static)
		}
		if !maps.Equal(held, g.owners) {
			t.Fatalf("group %s: owner index %v, the members hold %v", id, g.owners, held)
		}
		if g.targetEpoch > g.epoch {
			t.Fatalf("group %s: target epoch %d ahead of group epoch %d", id, g.targetEpoch, g.epoch)
		}
	}
}
