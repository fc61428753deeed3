package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// partitionRow is one partition on the overview and topic pages.
type partitionRow struct {
	Topic string
	client.PartitionDescription
	UnderReplicated bool // fewer in-sync replicas than replicas
	Offline         bool // no leader
}

func rowOf(topic string, p client.PartitionDescription) partitionRow {
	return partitionRow{Topic: topic, PartitionDescription: p, Offline: p.Leader < 0, UnderReplicated: len(p.ISR) < len(p.Replicas)}
}

// Dirty is the partition's dirty ratio as the leader reports it for a
// compacted topic, two decimals; "–" when it is not known.
func (r partitionRow) Dirty() string {
	if r.DirtyRatio == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", *r.DirtyRatio)
}

type brokerRow struct {
	client.BrokerDescription
	ActiveController bool // the controller the cluster answers with
	Leaders          int  // partitions it leads
	Replicas         int  // partitions it holds a replica of
}

type overview struct {
	// BrokersKnown and TopicsKnown say which of the cluster's answers the
	// figures come from: without one, its figures are unknown, not 0, and
	// the page makes no claim from them.
	BrokersKnown bool
	TopicsKnown  bool
	NoController bool // no active controller: broker states cannot be confirmed
	ClusterID    string
	ControllerID int32
	Brokers      []brokerRow
	Topics       int
	Partitions   int
	// The partitions listed (at most maxListed of each), and how many
	// there are.
	UnderReplicated  []partitionRow
	Offline          []partitionRow
	NUnder, NOffline int
}

// maxListed bounds the under-replicated and offline partitions the
// overview lists (it counts them all).
const maxListed = 100

// pageCtx is a page's context: the request's, bounded by the request timeout.
func (c *Console) pageCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
}

func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	p := page{Title: "Cluster", Nav: "overview", Refresh: c.refresh()}
	cl, err := c.client(ctx)
	if err != nil {
		c.renderUnreachable(w, r, "overview", p, err)
		return
	}
	var ov overview
	code := http.StatusOK
	cd, err := cl.DescribeCluster(ctx)
	if unreachable(err) {
		c.renderUnreachable(w, r, "overview", p, err)
		return
	}
	if err != nil {
		p.Errors = append(p.Errors, "brokers: "+errText(err))
		code = httpCode(err)
	} else {
		ov.BrokersKnown = true
		ov.ClusterID, ov.ControllerID = cd.ClusterID, cd.ControllerID
		if cd.ControllerID < 0 {
			// The node knows no active controller: what it answers is its
			// last applied metadata, which nothing can confirm.
			ov.NoController = true
			p.Errors = append(p.Errors, "no active controller: the metadata quorum has no leader (a majority of the controllers may be down), so which brokers are fenced, and the partitions' leaders and in-sync replicas, are the last view of the node asked and may be stale")
		}
		for _, b := range cd.Brokers {
			ov.Brokers = append(ov.Brokers, brokerRow{BrokerDescription: b, ActiveController: b.ID == cd.ControllerID})
		}
	}
	topics, err := cl.DescribeTopics(ctx)
	if unreachable(err) {
		c.renderUnreachable(w, r, "overview", p, err)
		return
	}
	if err != nil {
		p.Errors = append(p.Errors, "topics: "+errText(err))
		code = httpCode(err)
	} else {
		ov.TopicsKnown = true
	}
	byID := map[int32]*brokerRow{}
	for i := range ov.Brokers {
		byID[ov.Brokers[i].ID] = &ov.Brokers[i]
	}
	ov.Topics = len(topics)
	for _, t := range topics {
		for _, pd := range t.Partitions {
			ov.Partitions++
			row := rowOf(t.Name, pd)
			if row.Offline {
				if ov.NOffline++; ov.NOffline <= maxListed {
					ov.Offline = append(ov.Offline, row)
				}
			} else if row.UnderReplicated {
				if ov.NUnder++; ov.NUnder <= maxListed {
					ov.UnderReplicated = append(ov.UnderReplicated, row)
				}
			}
			if b := byID[pd.Leader]; b != nil {
				b.Leaders++
			}
			for _, id := range pd.Replicas {
				if b := byID[id]; b != nil {
					b.Replicas++
				}
			}
		}
	}
	p.Data = ov
	if ov.BrokersKnown && ov.TopicsKnown && !ov.NoController {
		c.remember(r.URL.Path, ov)
	}
	c.render(w, code, "overview", p)
}

type topicRow struct {
	Name              string
	Partitions        int
	ReplicationFactor int
	Records           int64 // high watermark minus log start, summed; -1 when a leader did not answer
	UnderReplicated   int
	Offline           int
}

// topicsView is a page of the topic list.
type topicsView struct {
	Rows  []topicRow
	Pager pager
}

// topicsPage lists the topics a page at a time: the names from
// ListTopics (metadata only), then DescribeTopics for the page's topics
// alone, so a cluster of thousands of topics costs a page's worth of
// offsets. ?q= keeps the topics whose name holds it.
func (c *Console) topicsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	p := page{Title: "Topics", Nav: "topics", Refresh: c.refresh(), Notice: r.URL.Query().Get("done")}
	cl, err := c.client(ctx)
	if err != nil {
		c.renderUnreachable(w, r, "topics", p, err)
		return
	}
	code := http.StatusOK
	list, err := cl.ListTopics(ctx)
	if unreachable(err) {
		c.renderUnreachable(w, r, "topics", p, err)
		return
	}
	if err != nil {
		p.Errors = append(p.Errors, errText(err))
		code = httpCode(err)
	}
	filter := strings.TrimSpace(r.URL.Query().Get("q"))
	var names []client.TopicListing
	for _, t := range list {
		if filter == "" || strings.Contains(t.Name, filter) {
			names = append(names, t)
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i].Name < names[j].Name })
	base := "/topics?"
	if filter != "" {
		base += "q=" + url.QueryEscape(filter) + "&"
	}
	lo, hi, pg := paginate(len(names), pageParam(r), base)
	pg.Filter = filter
	names = names[lo:hi]
	rows := make([]topicRow, len(names))
	want := make([]string, len(names))
	for i, t := range names {
		rows[i] = topicRow{Name: t.Name, Partitions: int(t.Partitions), ReplicationFactor: int(t.ReplicationFactor), Records: -1, UnderReplicated: -1, Offline: -1}
		want[i] = t.Name
	}
	if len(want) > 0 {
		topics, err := cl.DescribeTopics(ctx, want...)
		if unreachable(err) {
			c.renderUnreachable(w, r, "topics", p, err)
			return
		}
		if err != nil {
			// A topic deleted since the list: the page's figures are
			// unknown, the list still shown.
			p.Errors = append(p.Errors, "offsets and replicas: "+errText(err))
		}
		byName := map[string]*topicRow{}
		for i := range rows {
			byName[rows[i].Name] = &rows[i]
		}
		for _, t := range topics {
			tr := byName[t.Name]
			if tr == nil {
				continue
			}
			tr.Records, tr.UnderReplicated, tr.Offline = 0, 0, 0
			for _, pd := range t.Partitions {
				row := rowOf(t.Name, pd)
				if row.Offline {
					tr.Offline++
				} else if row.UnderReplicated {
					tr.UnderReplicated++
				}
				if pd.HighWatermark < 0 || tr.Records < 0 {
					tr.Records = -1
				} else {
					tr.Records += pd.HighWatermark - pd.LogStartOffset
				}
			}
		}
	}
	tv := topicsView{Rows: rows, Pager: pg}
	p.Data = tv
	if code == http.StatusOK {
		c.remember(r.URL.Path, tv)
	}
	c.render(w, code, "topics", p)
}

type topicView struct {
	Name       string
	ID         string
	Partitions []partitionRow
	Configs    []client.ConfigEntry
	// Sizes are the partitions' sizes on disk by partition ("–": not
	// known): as the leaders answer DescribeTopics, or, for a leader that
	// did not, from its metrics (SizesFrom says when they were read).
	Sizes      map[int32]string
	SizesFrom  string
	Throughput topicThroughput
	// Policy is the topic's effective cleanup.policy ("" when its
	// configs could not be read); Compacted adds the dirty ratio column.
	Policy    string
	Compacted bool
}

func (c *Console) topicPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	name := r.PathValue("topic")
	p := page{Title: "Topic " + name, Nav: "topics", Refresh: c.refresh(), Notice: r.URL.Query().Get("done")}
	cl, err := c.client(ctx)
	if err != nil {
		c.renderUnreachable(w, r, "topic", p, err)
		return
	}
	topics, err := cl.DescribeTopics(ctx, name)
	if unreachable(err) {
		c.renderUnreachable(w, r, "topic", p, err)
		return
	}
	if err == nil && len(topics) == 0 {
		err = &client.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: fmt.Sprintf("no topic %q", name)}
	}
	if err != nil {
		p.Errors = append(p.Errors, errText(err))
		c.render(w, httpCode(err), "topic", p)
		return
	}
	t := topics[0]
	tv := topicView{Name: t.Name, ID: t.ID, Sizes: map[int32]string{}}
	c.sampleOnView(r)
	sizes, at := c.thr.partitionSizes()
	if sizes != nil {
		tv.SizesFrom = at.UTC().Format(time.TimeOnly) + " UTC"
	}
	for _, pd := range t.Partitions {
		tv.Partitions = append(tv.Partitions, rowOf(t.Name, pd))
		if pd.HighWatermark >= 0 && pd.SizeBytes >= 0 {
			tv.Sizes[pd.Partition] = byteSize(float64(pd.SizeBytes))
		} else {
			tv.Sizes[pd.Partition] = sizeText(sizes, t.Name, pd.Partition)
		}
	}
	tv.Throughput = c.topicThroughput(t.Name)
	tv.Configs, err = cl.DescribeConfigs(ctx, name)
	if err != nil {
		p.Errors = append(p.Errors, "configs: "+errText(err))
	} else {
		for _, e := range tv.Configs {
			if e.Name == "cleanup.policy" {
				tv.Policy = e.Value
			}
		}
	}
	// A leader reports a dirty ratio only for a compacted topic.
	tv.Compacted = strings.Contains(tv.Policy, "compact")
	for _, pd := range t.Partitions {
		tv.Compacted = tv.Compacted || pd.DirtyRatio != nil
	}
	if err == nil {
		c.remember(r.URL.Path, tv)
	}
	p.Data = tv
	c.render(w, http.StatusOK, "topic", p)
}

// groupsView is a page of the group list: only its groups are described.
type groupsView struct {
	Rows  []groupRow
	Pager pager
}

type groupRow struct {
	Name    string
	State   string
	Members int
	Lag     int64 // -1 when unknown
	KeepUp  keepUp
	Err     string
}

// groupState is a group's state and members from the coordinator; a group
// it does not have (offsets committed without members) is empty.
func (c *Console) groupState(ctx context.Context, group string) (*quirev1.DescribeGroupResponse, error) {
	d, err := c.describeGroup(ctx, group)
	if errorCode(err) == quirev1.ErrorCode_GROUP_ID_NOT_FOUND {
		return &quirev1.DescribeGroupResponse{Group: group, State: "empty"}, nil
	}
	return d, err
}

func (c *Console) groupsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	p := page{Title: "Groups", Nav: "groups", Refresh: c.refresh()}
	cl, err := c.client(ctx)
	if err != nil {
		c.renderUnreachable(w, r, "groups", p, err)
		return
	}
	code := http.StatusOK
	names, err := cl.ListGroups(ctx)
	if unreachable(err) {
		c.renderUnreachable(w, r, "groups", p, err)
		return
	}
	if err != nil {
		p.Errors = append(p.Errors, errText(err))
		code = httpCode(err)
	}
	sort.Strings(names)
	lo, hi, pg := paginate(len(names), pageParam(r), "/groups?")
	var rows []groupRow
	for _, g := range names[lo:hi] {
		row := groupRow{Name: g, Lag: -1}
		d, err := c.groupState(ctx, g)
		if err != nil {
			row.Err = errText(err)
		} else {
			row.State, row.Members = d.GetState(), len(d.GetMembers())
		}
		row.KeepUp = keepUpOf(d.GetThroughput())
		lags, err := c.groupLag(g, d)
		if err != nil {
			row.Err = errText(err)
		} else if total, ok := totalLag(lags); ok {
			row.Lag = total
		}
		rows = append(rows, row)
	}
	gv := groupsView{Rows: rows, Pager: pg}
	p.Data = gv
	if code == http.StatusOK {
		c.remember(r.URL.Path, gv)
	}
	c.render(w, code, "groups", p)
}

type memberRow struct {
	ID, Instance, Address    string
	Subscription             string
	Epoch                    int32
	Assigned, Revoking, Next string
}

type groupView struct {
	Name                   string
	State                  string
	Epoch, AssignmentEpoch int32
	Assignor               string
	Members                []memberRow
	Partitions             []PartitionLag
	TotalLag               int64
	KeepUp                 keepUp
	Chart                  chart
	Topics                 []string // the topics it has offsets or assignments in, for the reset form
	Resettable             bool     // no members: offsets may be committed from outside
}

func assignmentText(a *quirev1.GroupAssignment) string {
	var parts []string
	for _, t := range a.GetTopics() {
		ps := make([]string, len(t.GetPartitions()))
		for i, p := range t.GetPartitions() {
			ps[i] = fmt.Sprint(p)
		}
		parts = append(parts, t.GetTopic()+" ["+strings.Join(ps, ",")+"]")
	}
	return strings.Join(parts, "; ")
}

func (c *Console) groupPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	name := r.PathValue("group")
	p := page{Title: "Group " + name, Nav: "groups", Refresh: c.refresh(), Notice: r.URL.Query().Get("done")}
	if _, err := c.client(ctx); err != nil {
		c.renderUnreachable(w, r, "group", p, err)
		return
	}
	gv := groupView{Name: name, TotalLag: -1, KeepUp: keepUpOf(nil)}
	d, err := c.groupState(ctx, name)
	if unreachable(err) {
		c.renderUnreachable(w, r, "group", p, err)
		return
	}
	if err != nil {
		p.Errors = append(p.Errors, "membership: "+errText(err))
	} else {
		gv.State, gv.Epoch, gv.AssignmentEpoch, gv.Assignor = d.GetState(), d.GetGroupEpoch(), d.GetAssignmentEpoch(), d.GetAssignor()
		gv.Resettable = len(d.GetMembers()) == 0
		gv.KeepUp = keepUpOf(d.GetThroughput())
		for _, m := range d.GetMembers() {
			sub := strings.Join(m.GetTopics(), ", ")
			if m.GetRegex() != "" {
				sub = strings.TrimPrefix(sub+", /"+m.GetRegex()+"/", ", ")
			}
			gv.Members = append(gv.Members, memberRow{ID: m.GetMemberId(), Instance: m.GetInstanceId(), Address: m.GetClientAddress(), Epoch: m.GetMemberEpoch(),
				Subscription: sub, Assigned: assignmentText(m.GetAssigned()), Revoking: assignmentText(m.GetPendingRevocation()),
				Next: assignmentText(m.GetPendingAssignment())})
		}
	}
	gv.Partitions, err = c.groupLag(name, d)
	if err != nil {
		p.Errors = append(p.Errors, "offsets: "+errText(err))
	}
	if total, ok := totalLag(gv.Partitions); ok {
		gv.TotalLag = total
	}
	seen := map[string]bool{}
	for _, pl := range gv.Partitions {
		if !seen[pl.Topic] {
			seen[pl.Topic] = true
			gv.Topics = append(gv.Topics, pl.Topic)
		}
	}
	if err == nil && len(gv.Partitions) == 0 && d != nil && len(d.GetMembers()) == 0 {
		err = &client.Error{Code: quirev1.ErrorCode_GROUP_ID_NOT_FOUND, Message: fmt.Sprintf("group %q has no members and no committed offsets", name)}
		p.Errors = append(p.Errors, errText(err))
		p.Data = gv
		c.render(w, http.StatusNotFound, "group", p)
		return
	}
	gv.Chart = lagChart(c.hist.get(name), time.Now())
	p.Data = gv
	if len(p.Errors) == 0 {
		c.remember(r.URL.Path, gv)
	}
	c.render(w, http.StatusOK, "group", p)
}
