package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/metadata"
)

func init() { registerCommand(newPartitionCmd) }

// reassignmentPlan is a reassignment file: Kafka's
// kafka-reassign-partitions.sh JSON (version 1, each partition's new
// replicas), which --plan writes and --execute and --cancel read.
type reassignmentPlan struct {
	Version    int              `json:"version"`
	Partitions []plannedReplica `json:"partitions"`
}

type plannedReplica struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

func newPartitionCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "partition", Short: "Move partition replicas between brokers (reassignment)"}
	cmd.AddCommand(partitionReassignCmd(g))
	return cmd
}

func partitionReassignCmd(g *globalFlags) *cobra.Command {
	var (
		plan, status     bool
		execute, cancel  string
		output           string
		topics           []string
		throttle         int64
		wait             bool
		waitPollInterval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "reassign --plan [--topic T]... [--output FILE] | --execute FILE [--throttle B] [--wait] | --status | --cancel FILE",
		Short: "Plan, start, follow or cancel partition reassignments",
		Long: `Partition reassignment (Kafka's KIP-455), one of:

  --plan     a plan that spreads replicas and preferred leaders evenly over
             the live brokers that are not cordoned (racks respected),
             moving replicas off fenced and cordoned brokers, with as few
             moves as it finds; as a table, or as the reassignment JSON
             with --format json or --output FILE. Nothing is started.
  --execute  starts the reassignments of a JSON file (Kafka's format:
             {"version":1,"partitions":[{"topic":..,"partition":..,
             "replicas":[..]}]}), all or none: an unknown partition or
             broker, a fenced or cordoned broker, a broker twice or fewer
             replicas than min.insync.replicas refuses the whole file.
             --throttle sets replica.reassignment.throttle.bytes.per.second
             on every broker first; --wait follows the moves to the end.
  --status   the pending reassignments.
  --cancel   cancels the file's reassignments still pending (back to the
             original replicas).

Each new replica is created on its broker, catches up as a follower and
joins the ISR; then a leader being removed hands over leadership; only then
do the removed replicas leave and delete their data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			for _, set := range []bool{plan, execute != "", status, cancel != ""} {
				if set {
					n++
				}
			}
			if n != 1 {
				return errors.New("give exactly one of --plan, --execute FILE, --status, --cancel FILE")
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			out := cmd.OutOrStdout()
			switch {
			case plan:
				return reassignPlan(ctx, cl, g, out, topics, output)
			case execute != "":
				p, err := readPlan(execute)
				if err != nil {
					return err
				}
				if cmd.Flags().Changed("throttle") {
					if err := cl.SetReassignmentThrottle(ctx, throttle, false); err != nil {
						return fmt.Errorf("set the reassignment throttle: %w", err)
					}
					fmt.Fprintf(out, "replica.reassignment.throttle.bytes.per.second set to %d on every broker\n", throttle)
				}
				targets := make([]client.ReassignmentTarget, len(p.Partitions))
				for i, pr := range p.Partitions {
					targets[i] = client.ReassignmentTarget{Topic: pr.Topic, Partition: pr.Partition, Replicas: pr.Replicas}
				}
				if err := cl.AlterPartitionReassignments(ctx, targets); err != nil {
					return fmt.Errorf("start the reassignments of %s (none started): %w", execute, err)
				}
				fmt.Fprintf(out, "started %d partition reassignments\n", len(targets))
				if wait {
					return waitReassignments(ctx, cl, out, p, waitPollInterval)
				}
				return nil
			case status:
				pending, err := cl.ListPartitionReassignments(ctx, "")
				if err != nil {
					return fmt.Errorf("list reassignments: %w", err)
				}
				return printReassignments(out, g, pending)
			default:
				p, err := readPlan(cancel)
				if err != nil {
					return err
				}
				return cancelReassignments(ctx, cl, out, cancel, p)
			}
		},
	}
	f := cmd.Flags()
	f.BoolVar(&plan, "plan", false, "print a balancing plan (start nothing)")
	f.StringSliceVar(&topics, "topic", nil, "with --plan: plan only these topics (repeatable); default every topic")
	f.StringVar(&output, "output", "", "with --plan: also write the plan's JSON to this file")
	f.StringVar(&execute, "execute", "", "start the reassignments of this JSON file")
	f.Int64Var(&throttle, "throttle", 0, "with --execute: set replica.reassignment.throttle.bytes.per.second on every broker first (0: unthrottled)")
	f.BoolVar(&wait, "wait", false, "with --execute: follow the moves until every one has completed")
	f.DurationVar(&waitPollInterval, "poll-interval", time.Second, "with --wait: how often to look at the moves")
	f.BoolVar(&status, "status", false, "list the pending reassignments")
	f.StringVar(&cancel, "cancel", "", "cancel the pending reassignments of this JSON file")
	return cmd
}

// cancelReassignments cancels the file's reassignments still pending. A
// move that completes between the listing and the cancel refuses the
// cancel (all or none, nothing cancelled): the pending ones are listed
// again and the cancel retried, a few times.
func cancelReassignments(ctx context.Context, cl *client.Client, out io.Writer, file string, p *reassignmentPlan) error {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		pending, err := cl.ListPartitionReassignments(ctx, "")
		if err != nil {
			return fmt.Errorf("list reassignments: %w", err)
		}
		var targets []client.ReassignmentTarget
		var idle []string
		for _, pr := range p.Partitions {
			if slices.ContainsFunc(pending, func(r client.Reassignment) bool { return r.Topic == pr.Topic && r.Partition == pr.Partition }) {
				targets = append(targets, client.ReassignmentTarget{Topic: pr.Topic, Partition: pr.Partition, Cancel: true})
			} else {
				idle = append(idle, fmt.Sprintf("%s-%d", pr.Topic, pr.Partition))
			}
		}
		if len(targets) == 0 {
			return fmt.Errorf("no reassignment of %s is pending (%s): nothing to cancel", file, partitionList(idle))
		}
		err = cl.AlterPartitionReassignments(ctx, targets)
		if err != nil && client.ErrorCode(err) == quirev1.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS && attempt < attempts {
			continue // a move completed meanwhile
		}
		if err != nil {
			return fmt.Errorf("cancel the reassignments of %s (none cancelled): %w", file, err)
		}
		fmt.Fprintf(out, "cancelled %d partition reassignments\n", len(targets))
		if len(idle) > 0 {
			fmt.Fprintf(out, "not pending, left as they are: %s\n", partitionList(idle))
		}
		return nil
	}
}

// partitionList is names joined with commas, the first ten of them.
func partitionList(names []string) string {
	const most = 10
	if len(names) > most {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
	}
	return strings.Join(names, ", ")
}

// readPlan reads and checks a reassignment file.
func readPlan(path string) (*reassignmentPlan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the reassignment file: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var p reassignmentPlan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("reassignment file %s: %w (want {\"version\":1,\"partitions\":[{\"topic\":\"T\",\"partition\":0,\"replicas\":[1,2,3]}]})", path, err)
	}
	if p.Version != 1 {
		return nil, fmt.Errorf("reassignment file %s: version %d, want 1", path, p.Version)
	}
	if len(p.Partitions) == 0 {
		return nil, fmt.Errorf("reassignment file %s names no partitions", path)
	}
	return &p, nil
}

// currentAssignment is every partition's replicas as they will be once the
// pending reassignments complete, and the brokers, for a plan.
func currentAssignment(ctx context.Context, cl *client.Client, topics []string) ([]metadata.PlanBroker, []metadata.PlanPartition, error) {
	cluster, err := cl.DescribeCluster(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("describe the cluster: %w", err)
	}
	descs, err := cl.DescribeTopics(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("describe the topics: %w", err)
	}
	pending, err := cl.ListPartitionReassignments(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("list reassignments: %w", err)
	}
	var brokers []metadata.PlanBroker
	for _, b := range cluster.Brokers {
		brokers = append(brokers, metadata.PlanBroker{ID: b.ID, Rack: b.Rack, Fenced: b.Fenced, Cordoned: b.Cordoned})
	}
	var parts []metadata.PlanPartition
	for _, t := range descs {
		for _, p := range t.Partitions {
			replicas := p.Replicas
			for _, r := range pending {
				if r.Topic == t.Name && r.Partition == p.Partition {
					replicas = slices.DeleteFunc(slices.Clone(r.Replicas), func(id int32) bool { return slices.Contains(r.RemovingReplicas, id) })
				}
			}
			parts = append(parts, metadata.PlanPartition{Topic: t.Name, Partition: p.Partition, Replicas: replicas})
		}
	}
	return brokers, parts, nil
}

func reassignPlan(ctx context.Context, cl *client.Client, g *globalFlags, out io.Writer, topics []string, output string) error {
	brokers, parts, err := currentAssignment(ctx, cl, topics)
	if err != nil {
		return err
	}
	moves := metadata.PlanReassignment(brokers, parts, metadata.PlanOptions{Balance: true})
	plan := planOf(moves)
	if output != "" {
		data, err := json.MarshalIndent(plan, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(output, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("write the plan: %w", err)
		}
	}
	if g.format == "json" {
		return printJSON(out, plan)
	}
	current := map[string][]int32{}
	for _, p := range parts {
		current[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p.Replicas
	}
	rows := make([][]string, len(moves))
	for i, m := range moves {
		rows[i] = []string{m.Topic, strconv.Itoa(int(m.Partition)), ids(current[fmt.Sprintf("%s-%d", m.Topic, m.Partition)]), ids(m.Replicas)}
	}
	if err := printTable(out, []string{"TOPIC", "PARTITION", "CURRENT", "PROPOSED"}, rows); err != nil {
		return err
	}
	if len(moves) == 0 {
		fmt.Fprintln(out, "balanced already: nothing to move")
	} else if output != "" {
		fmt.Fprintf(out, "%d partitions to move; plan written to %s (start it with --execute %s)\n", len(moves), output, output)
	}
	return nil
}

func planOf(moves []metadata.PlanPartition) reassignmentPlan {
	p := reassignmentPlan{Version: 1, Partitions: []plannedReplica{}}
	for _, m := range moves {
		p.Partitions = append(p.Partitions, plannedReplica{Topic: m.Topic, Partition: m.Partition, Replicas: m.Replicas})
	}
	return p
}

func ids(s []int32) string {
	parts := make([]string, len(s))
	for i, id := range s {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

func printReassignments(out io.Writer, g *globalFlags, pending []client.Reassignment) error {
	if g.format == "json" {
		if pending == nil {
			pending = []client.Reassignment{}
		}
		return printJSON(out, pending)
	}
	rows := make([][]string, len(pending))
	for i, r := range pending {
		rows[i] = []string{r.Topic, strconv.Itoa(int(r.Partition)), ids(r.Replicas), ids(r.AddingReplicas), ids(r.RemovingReplicas), ids(r.ISR), strconv.Itoa(int(r.Leader)), bytesLeft(r)}
	}
	if err := printTable(out, []string{"TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING", "ISR", "LEADER", "BYTES LEFT"}, rows); err != nil {
		return err
	}
	if len(pending) == 0 {
		fmt.Fprintln(out, "no reassignment in progress")
	}
	return nil
}

// bytesLeft is what each adding replica of r has still to fetch, in
// ADDING's order ("-" for one whose figure is not known).
func bytesLeft(r client.Reassignment) string {
	if len(r.AddingReplicas) == 0 {
		return "-"
	}
	out := make([]string, len(r.AddingReplicas))
	for i, id := range r.AddingReplicas {
		out[i] = "-"
		for _, a := range r.Adding {
			if a.BrokerID == id && a.BytesLeft >= 0 {
				out[i] = strconv.FormatInt(a.BytesLeft, 10)
			}
		}
	}
	return strings.Join(out, ",")
}

// waitReassignments follows the plan's moves until none is pending,
// printing how many are left whenever that changes.
func waitReassignments(ctx context.Context, cl *client.Client, out io.Writer, p *reassignmentPlan, every time.Duration) error {
	inPlan := map[string]bool{}
	for _, pr := range p.Partitions {
		inPlan[fmt.Sprintf("%s-%d", pr.Topic, pr.Partition)] = true
	}
	last, differing := -1, 0
	for {
		pending, err := cl.ListPartitionReassignments(ctx, "")
		if err != nil {
			return fmt.Errorf("follow the reassignments: %w", err)
		}
		left := 0
		for _, r := range pending {
			if inPlan[fmt.Sprintf("%s-%d", r.Topic, r.Partition)] {
				left++
			}
		}
		if left != last {
			fmt.Fprintf(out, "%d of %d partition moves pending\n", left, len(p.Partitions))
			last = left
		}
		if left == 0 {
			err := checkPlanDone(ctx, cl, out, p)
			// The node that answered may not have applied the last
			// completions yet: a difference must last to count.
			if differing++; err == nil || differing >= 10 {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped following with %d moves pending (they go on): %w", left, ctx.Err())
		case <-time.After(every):
		}
	}
}

// checkPlanDone confirms that every partition of the plan has the
// plan's replicas: a move cancelled or replaced meanwhile did not do
// what the plan said.
func checkPlanDone(ctx context.Context, cl *client.Client, out io.Writer, p *reassignmentPlan) error {
	var topics []string
	for _, pr := range p.Partitions {
		if !slices.Contains(topics, pr.Topic) {
			topics = append(topics, pr.Topic)
		}
	}
	descs, err := cl.DescribeTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("check the moves: %w", err)
	}
	var differ []string
	for _, pr := range p.Partitions {
		var now []int32
		for _, t := range descs {
			if t.Name == pr.Topic && int(pr.Partition) < len(t.Partitions) {
				now = t.Partitions[pr.Partition].Replicas
			}
		}
		if !slices.Equal(now, pr.Replicas) {
			differ = append(differ, fmt.Sprintf("%s-%d has %s, not %s", pr.Topic, pr.Partition, ids(now), ids(pr.Replicas)))
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("no move is pending, but %d partitions do not have the planned replicas (cancelled or replaced?): %s",
			len(differ), strings.Join(differ, "; "))
	}
	fmt.Fprintf(out, "every move completed: %d partitions have their planned replicas\n", len(p.Partitions))
	return nil
}
