package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/quirelog/quire/client"
)

// An action is a form POSTed twice: first without confirm=yes, which
// answers a page saying what will be done with a button that posts the
// same fields with confirm=yes; then with it, which does it and redirects
// to the page showing the result (303). A failure is shown on the
// confirmation page, in the broker's words, with the button to try again.

// confirmView is the confirmation page.
type confirmView struct {
	Action  string // the form's path
	Summary string // what will happen, in words
	Danger  bool   // cannot be undone
	Fields  []field
	Back    string
	// Invalid: the form did not pass its checks; there is nothing to
	// confirm.
	Invalid bool
}

type field struct{ Name, Value string }

// actionInput is a form's fields, checked.
type actionInput struct {
	r    *http.Request
	errs []string
}

func (a *actionInput) str(name string) string { return strings.TrimSpace(a.r.PostForm.Get(name)) }

func (a *actionInput) required(name, what string) string {
	v := a.str(name)
	if v == "" {
		a.errs = append(a.errs, what+" is required")
	}
	return v
}

func (a *actionInput) int32(name, what string, optional bool) int32 {
	v := a.str(name)
	if v == "" && optional {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n <= 0 {
		a.errs = append(a.errs, fmt.Sprintf("%s must be a positive number, not %q", what, v))
		return 0
	}
	return int32(n)
}

// action runs the common part of every action: it parses the form, checks
// that the post comes from the console's own pages, and either answers the
// confirmation page or calls do, whose answer is where to go afterwards.
func (c *Console) action(w http.ResponseWriter, r *http.Request, fields []string,
	describe func(a *actionInput) (summary string, danger bool, back string),
	do func(ctx context.Context, cl *client.Client, a *actionInput) (string, error)) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "console: bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			http.Error(w, fmt.Sprintf("console: a form posted from %s, not from this console, is refused", o), http.StatusForbidden)
			return
		}
	}
	a := &actionInput{r: r}
	summary, danger, back := describe(a)
	cv := confirmView{Action: r.URL.Path, Summary: summary, Danger: danger, Back: back}
	for _, f := range fields {
		cv.Fields = append(cv.Fields, field{f, a.str(f)})
	}
	p := page{Title: "Confirm", Data: cv, Refresh: -1} // a POST's answer: nothing to refresh
	if len(a.errs) > 0 {
		p.Errors = a.errs
		cv.Invalid = true
		p.Data = cv
		c.render(w, http.StatusBadRequest, "confirm", p)
		return
	}
	if a.str("confirm") != "yes" {
		c.render(w, http.StatusOK, "confirm", p)
		return
	}
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	cl, err := c.client(ctx)
	var next string
	if err == nil {
		next, err = do(ctx, cl, a)
	}
	if err != nil {
		c.log.Info("console action failed", "action", r.URL.Path, "error", err)
		p.Errors = []string{errText(err)}
		c.render(w, httpCode(err), "confirm", p)
		return
	}
	c.log.Info("console action done", "action", r.URL.Path, "summary", summary)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func done(path, notice string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "done=" + url.QueryEscape(notice)
}

func (c *Console) createTopic(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, []string{"name", "partitions", "replication_factor"},
		func(a *actionInput) (string, bool, string) {
			name := a.required("name", "a topic name")
			parts, rf := a.int32("partitions", "partitions", true), a.int32("replication_factor", "replication factor", true)
			s := fmt.Sprintf("Create topic %q with %s and %s.", name, orDefault(parts, "partitions", "the broker's num.partitions"),
				orDefault(rf, "replicas each", "the broker's default.replication.factor"))
			return s, false, "/topics"
		},
		func(ctx context.Context, cl *client.Client, a *actionInput) (string, error) {
			name := a.str("name")
			d, err := cl.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: a.int32("partitions", "", true),
				ReplicationFactor: a.int32("replication_factor", "", true)})
			if err != nil {
				return "", err
			}
			return done("/topics/"+url.PathEscape(name), fmt.Sprintf("Created topic %s with %d partitions.", name, len(d.Partitions))), nil
		})
}

func orDefault(n int32, unit, def string) string {
	if n == 0 {
		return def
	}
	return fmt.Sprintf("%d %s", n, unit)
}

func (c *Console) deleteTopic(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, []string{"name"},
		func(a *actionInput) (string, bool, string) {
			name := a.required("name", "a topic name")
			return fmt.Sprintf("Delete topic %q and all its records. This cannot be undone.", name), true, "/topics/" + url.PathEscape(name)
		},
		func(ctx context.Context, cl *client.Client, a *actionInput) (string, error) {
			name := a.str("name")
			if err := cl.DeleteTopic(ctx, name); err != nil {
				return "", err
			}
			return done("/topics", fmt.Sprintf("Deleted topic %s.", name)), nil
		})
}

func (c *Console) addPartitions(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, []string{"name", "total"},
		func(a *actionInput) (string, bool, string) {
			name := a.required("name", "a topic name")
			total := a.int32("total", "the new partition count", false)
			return fmt.Sprintf("Raise topic %q to %d partitions. Partitions cannot be removed afterwards, and keys may map to other partitions.", name, total),
				false, "/topics/" + url.PathEscape(name)
		},
		func(ctx context.Context, cl *client.Client, a *actionInput) (string, error) {
			name := a.str("name")
			d, err := cl.CreatePartitions(ctx, name, a.int32("total", "", false))
			if err != nil {
				return "", err
			}
			return done("/topics/"+url.PathEscape(name), fmt.Sprintf("Topic %s has %d partitions.", name, len(d.Partitions))), nil
		})
}

// deleteRecords deletes the records of every partition of a topic below
// an offset, or below each partition's high watermark when none is given
// (Kafka's DeleteRecords).
func (c *Console) deleteRecords(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, []string{"name", "before"},
		func(a *actionInput) (string, bool, string) {
			name := a.required("name", "a topic name")
			where := "its high watermark (everything consumers can read now)"
			if v := a.str("before"); v != "" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					a.errs = append(a.errs, fmt.Sprintf("the offset must be a non-negative number, not %q", v))
				}
				where = fmt.Sprintf("offset %d", n)
			}
			return fmt.Sprintf("Delete the records of every partition of topic %q below %s. Consumers positioned below the new log start reset by their policy. This cannot be undone.", name, where),
				true, "/topics/" + url.PathEscape(name)
		},
		func(ctx context.Context, cl *client.Client, a *actionInput) (string, error) {
			name := a.str("name")
			before := client.DeleteBelowHighWatermark
			if v := a.str("before"); v != "" {
				before, _ = strconv.ParseInt(v, 10, 64)
			}
			n, err := cl.PartitionCount(ctx, name)
			if err != nil {
				return "", err
			}
			want := make(map[int32]int64, n)
			for p := range n {
				want[p] = before
			}
			res, err := cl.DeleteRecords(ctx, name, want)
			if err != nil {
				return "", err
			}
			var errs []error
			starts := make([]string, 0, len(res))
			for _, d := range res {
				if d.Err != nil {
					errs = append(errs, fmt.Errorf("partition %d: %w", d.Partition, d.Err))
					continue
				}
				starts = append(starts, fmt.Sprintf("%d from %d", d.Partition, d.LowWatermark))
			}
			if len(errs) > 0 {
				return "", errors.Join(errs...)
			}
			return done("/topics/"+url.PathEscape(name), fmt.Sprintf("Deleted records of %s: partitions start at %s.", name, strings.Join(starts, ", "))), nil
		})
}

// resetOffsets commits new offsets for an empty group (one with no
// members): every partition of a topic to its start, its end or an offset.
// The commit goes through CommitOffsets with no member, which the
// coordinator accepts only while the group has no members.
func (c *Console) resetOffsets(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, []string{"group", "topic", "to", "offset"},
		func(a *actionInput) (string, bool, string) {
			group, topic := a.required("group", "a group"), a.required("topic", "a topic")
			to := a.str("to")
			var where string
			switch to {
			case "start":
				where = "the log start offset"
			case "end":
				where = "the high watermark (skipping every record not consumed yet)"
			case "offset":
				n, err := strconv.ParseInt(a.str("offset"), 10, 64)
				if err != nil || n < 0 {
					a.errs = append(a.errs, fmt.Sprintf("the offset must be a non-negative number, not %q", a.str("offset")))
				}
				where = fmt.Sprintf("offset %d", n)
			default:
				a.errs = append(a.errs, fmt.Sprintf("reset to %q: choose start, end or offset", to))
			}
			return fmt.Sprintf("Set the committed offsets of group %q on every partition of topic %q to %s.", group, topic, where),
				true, "/groups/" + url.PathEscape(group)
		},
		func(ctx context.Context, cl *client.Client, a *actionInput) (string, error) {
			group, topic := a.str("group"), a.str("topic")
			d, err := c.groupState(ctx, group)
			if err != nil {
				return "", err
			}
			if n := len(d.GetMembers()); n > 0 {
				return "", fmt.Errorf("group %s has members (%d): only an empty group's offsets can be reset (stop its consumers first)", group, n)
			}
			var at client.Offset
			switch a.str("to") {
			case "start":
				at = client.AtStart()
			case "end":
				at = client.AtEnd()
			default:
				n, _ := strconv.ParseInt(a.str("offset"), 10, 64)
				at = client.At(n)
			}
			offs, err := cl.ListOffsets(ctx, topic, at)
			if err != nil {
				return "", err
			}
			commits := make([]client.OffsetCommit, 0, len(offs))
			for p, off := range offs {
				commits = append(commits, client.OffsetCommit{Topic: topic, Partition: p, Offset: off, LeaderEpoch: -1,
					Metadata: "reset by quire console"})
			}
			if err := cl.CommitOffsets(ctx, group, commits...); err != nil {
				return "", err
			}
			return done("/groups/"+url.PathEscape(group), fmt.Sprintf("Committed %d offsets of %s for group %s.", len(commits), topic, group)), nil
		})
}
