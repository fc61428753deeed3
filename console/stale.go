package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// maxViews bounds how many pages' last good views the console keeps: one
// per page path (each topic and group its own), the oldest dropped first.
const maxViews = 256

// lastView is the data of a page the last time the cluster answered for
// it in full, and when that was.
type lastView struct {
	data any
	at   time.Time
}

// unreachable reports whether err says the cluster could not be reached
// or did not answer in time, as opposed to an answer (a refusal, an
// unknown topic) from a broker that was reached.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errCannotReach) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errorCode(err) == quirev1.ErrorCode_NETWORK_EXCEPTION {
		return true
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable {
		return true
	}
	return strings.Contains(err.Error(), "cannot reach the cluster")
}

// errCannotReach marks the console's own "cannot reach the cluster" errors.
var errCannotReach = errors.New("cannot reach the cluster")

// cannotReach is the one line a page shows when the cluster cannot be
// reached: where the console looked, and why.
func (c *Console) cannotReach(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "cannot reach the cluster at ") {
		return msg
	}
	// statusError's words for an unavailable broker, said once.
	msg = strings.TrimPrefix(msg, "cannot reach the cluster: ")
	return "cannot reach the cluster at " + strings.Join(c.cfg.Brokers, ", ") + ": " + msg
}

// remember keeps data as the last good view of the page at key.
func (c *Console) remember(key string, data any) {
	c.viewsMu.Lock()
	defer c.viewsMu.Unlock()
	if c.views == nil {
		c.views = map[string]lastView{}
	}
	if _, ok := c.views[key]; !ok && len(c.views) >= maxViews {
		oldest := ""
		for k, v := range c.views {
			if oldest == "" || v.at.Before(c.views[oldest].at) {
				oldest = k
			}
		}
		delete(c.views, oldest)
	}
	c.views[key] = lastView{data: data, at: time.Now()}
}

// recall returns the last good view of the page at key, if there is one.
func (c *Console) recall(key string) (lastView, bool) {
	c.viewsMu.Lock()
	defer c.viewsMu.Unlock()
	v, ok := c.views[key]
	return v, ok
}

// renderUnreachable renders page name for a cluster that cannot be
// reached: the reason in words, and instead of figures the page's last
// good view marked stale with its age, or none at all. Nothing on it
// claims anything about the cluster's health now.
func (c *Console) renderUnreachable(w http.ResponseWriter, r *http.Request, name string, p page, err error) {
	p.Errors = append(p.Errors[:0:0], c.cannotReach(err))
	p.Unreachable = true
	p.Data = nil
	if v, ok := c.recall(r.URL.Path); ok {
		p.Data = v.data
		p.StaleAt = v.at.UTC().Format(time.DateTime + " UTC")
		p.StaleAge = time.Since(v.at).Round(time.Second).String()
	}
	c.render(w, http.StatusBadGateway, name, p)
}
