package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// page is what every template gets: the page's own data and what the
// layout shows around it.
type page struct {
	Title   string
	Nav     string // the nav entry lit: overview, topics, groups, moves, ...
	Refresh int    // ms between in-place refreshes; 0: only while Errors are shown, -1: never
	// Errors are the cluster's answers that kept figures off the page, in
	// words.
	Errors []string
	// Unreachable is set when the cluster could not be reached: Errors
	// says where and why, and Data is the page's last good view (from
	// StaleAt, StaleAge ago), or nil.
	Unreachable       bool
	StaleAt, StaleAge string
	// Notice is the outcome of an action, shown once.
	Notice string
	Data   any
}

// chartArgs is what the "chart" template draws.
type chartArgs struct {
	ID, Label string
	C         chart
}

var funcs = template.FuncMap{
	"chart": func(id, label string, c chart) chartArgs { return chartArgs{id, label, c} },
	"aclOperations": func() []string {
		return []string{"Read", "Write", "Create", "Delete", "Alter", "Describe", "DescribeConfigs", "AlterConfigs", "ClusterAction", "IdempotentWrite", "All"}
	},
	"sub":               func(a, b int) int { return a - b },
	"int64":             func(v int) int64 { return int64(v) },
	"until":             func(n int32) []struct{} { return make([]struct{}, n) },
	"window":            func() int { return browseWindow },
	"throughputSamples": func() int { return throughputSamples },
	"ints": func(v []int32) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = fmt.Sprint(x)
		}
		return strings.Join(s, ", ")
	},
	"offset": func(v int64) string {
		if v < 0 {
			return "–"
		}
		return fmt.Sprint(v)
	},
	"seconds": secondsText,
}

// secondsText writes a time in seconds: "4.2 s", "1m30s"; "–" when
// negative (unknown).
func secondsText(v float64) string {
	switch {
	case v < 0:
		return "–"
	case v < 10:
		return fmt.Sprintf("%.1f s", v)
	}
	return (time.Duration(v) * time.Second).String()
}

// parsePages parses each page template with the layout.
func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(webFS, "web/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(webFS, "web/pages/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		t, err := template.Must(layout.Clone()).ParseFS(webFS, n)
		if err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(strings.TrimPrefix(n, "web/pages/"), ".html")] = t
	}
	return out, nil
}

// render writes page name with status code.
func (c *Console) render(w http.ResponseWriter, code int, name string, p page) {
	if p.Refresh == 0 && len(p.Errors) > 0 {
		p.Refresh = int(c.cfg.RefreshInterval / time.Millisecond)
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		c.log.Error("rendering a page failed", "page", name, "error", err)
		http.Error(w, "console: rendering "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// refresh is the in-place refresh interval of pages with live figures.
func (c *Console) refresh() int { return int(c.cfg.RefreshInterval / time.Millisecond) }

// errText is err in words; a cluster's error reads "CODE: the broker's
// message", with what the console was doing in front.
func errText(err error) string { return err.Error() }

// httpCode is the status of a page that failed with err.
func httpCode(err error) int {
	switch errorCode(err) {
	case quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, quirev1.ErrorCode_GROUP_ID_NOT_FOUND:
		return http.StatusNotFound
	case quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, quirev1.ErrorCode_GROUP_AUTHORIZATION_FAILED, quirev1.ErrorCode_CLUSTER_AUTHORIZATION_FAILED:
		return http.StatusForbidden
	case quirev1.ErrorCode_INVALID_REQUEST, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, quirev1.ErrorCode_INVALID_PARTITIONS,
		quirev1.ErrorCode_INVALID_REPLICATION_FACTOR, quirev1.ErrorCode_INVALID_GROUP_ID, quirev1.ErrorCode_TOPIC_ALREADY_EXISTS,
		quirev1.ErrorCode_INVALID_CONFIG, quirev1.ErrorCode_UNKNOWN_MEMBER_ID, quirev1.ErrorCode_NON_EMPTY_GROUP:
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}
