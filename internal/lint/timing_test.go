package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests assert behaviour, never speed: a latency or throughput figure
// belongs in a benchmark, and a bound on how long something takes is only
// there to fail instead of hanging, far above the expected time. A bound
// below minDeadline fails on a busy machine while the code is right.
const minDeadline = 30 * time.Second

// allowTiming, in a comment on the line of the check or the line above,
// followed by the reason, lets a shorter bound stand.
const allowTiming = "lint:allow-timing"

// TestNoTimingThresholds fails when a _test.go file of the module fails
// a test on a measured duration above a bound under minDeadline: an if
// whose condition finds a timed value (time.Since, a Sub of two times, a
// Quantile, or a variable computed from one) greater than a duration, and
// whose body calls t.Error, t.Fatal or their kin.
func TestNoTimingThresholds(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "bin" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d test files under %s", len(files), root)
	}
	for _, f := range files {
		found, err := timingThresholds(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range found {
			rel, _ := filepath.Rel(root, v.pos.Filename)
			t.Errorf("%s:%d: a test fails on a duration over %s (%s): measure it in a benchmark, or make it a deadline of %v or more that says what it waited for", rel, v.pos.Line, v.bound, v.what, minDeadline)
		}
	}
}

// TestNoTimingThresholdsSamples checks the check on samples: the removed
// p99 assertion of TestClusterEndToEndLatency and other thresholds are
// found, deadline-only waits and lower bounds are not.
func TestNoTimingThresholdsSamples(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []int // lines
	}{
		{"latency.go.txt", []int{24, 28}},
		{"thresholds.go.txt", []int{12, 20, 26, 36, 43, 52}},
		{"allowed.go.txt", nil},
	} {
		found, err := timingThresholds(filepath.Join("testdata", "timing", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		var lines []int
		for _, v := range found {
			lines = append(lines, v.pos.Line)
		}
		if !slices.Equal(lines, tc.want) {
			t.Errorf("%s: thresholds found on lines %v, want %v", tc.file, lines, tc.want)
		}
	}
}

type threshold struct {
	pos   token.Position
	what  string // the timed side
	bound string
}

func timingThresholds(path string) ([]threshold, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	allowed := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if i := strings.Index(c.Text, allowTiming); i >= 0 && strings.TrimSpace(c.Text[i+len(allowTiming):]) != "" {
				l := fset.Position(c.Slash).Line
				allowed[l], allowed[l+1] = true, true
			}
		}
	}
	var found []threshold
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		s := newScope(fn.Body)
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			// A select case on time.After that fails the test: a
			// threshold too, the elapsed time implied.
			if cc, ok := n.(*ast.CommClause); ok && failsTest(&ast.BlockStmt{List: cc.Body}) {
				if d := timerOf(cc.Comm); d != nil && time.Duration(s.atLeast(d)) < minDeadline {
					if pos := fset.Position(cc.Pos()); !allowed[pos.Line] {
						found = append(found, threshold{pos: pos, what: "a select on time.After", bound: expr(fset, d)})
					}
				}
				return true
			}
			is, ok := n.(*ast.IfStmt)
			if !ok || !failsTest(is.Body) {
				return true
			}
			for _, cmp := range upperBounds(is.Cond) {
				timed, bound := cmp.X, cmp.Y
				if cmp.Op == token.LSS || cmp.Op == token.LEQ {
					timed, bound = bound, timed
				}
				if !s.timed(timed) || !s.duration(bound) {
					continue
				}
				if time.Duration(s.atLeast(bound)) >= minDeadline {
					continue
				}
				pos := fset.Position(cmp.Pos())
				if allowed[pos.Line] {
					continue
				}
				found = append(found, threshold{pos: pos, what: expr(fset, timed), bound: expr(fset, bound)})
			}
			return true
		})
	}
	return found, nil
}

// timerOf is d in a select case "<-time.After(d)" (received or assigned),
// else nil.
func timerOf(comm ast.Stmt) ast.Expr {
	var e ast.Expr
	switch c := comm.(type) {
	case *ast.ExprStmt:
		e = c.X
	case *ast.AssignStmt:
		if len(c.Rhs) == 1 {
			e = c.Rhs[0]
		}
	}
	u, ok := e.(*ast.UnaryExpr)
	if !ok || u.Op != token.ARROW {
		return nil
	}
	call, ok := u.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return nil
	}
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok && isPkg(sel.X, "time") && sel.Sel.Name == "After" {
		return call.Args[0]
	}
	return nil
}

func expr(fset *token.FileSet, e ast.Expr) string {
	p := fset.Position(e.Pos())
	end := fset.Position(e.End())
	src, err := os.ReadFile(p.Filename)
	if err != nil || end.Offset > len(src) {
		return fmt.Sprintf("%T", e)
	}
	return string(src[p.Offset:end.Offset])
}

// failsTest says whether body calls Error, Errorf, Fatal, Fatalf, Fail
// or FailNow on anything (t, b, tb), outside the function literals in it.
func failsTest(body *ast.BlockStmt) bool {
	fails := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Error", "Errorf", "Fatal", "Fatalf", "Fail", "FailNow":
					fails = true
				}
			}
		}
		return !fails
	})
	return fails
}

// upperBounds lists the ordering comparisons of a condition made of &&,
// || and parentheses.
func upperBounds(cond ast.Expr) []*ast.BinaryExpr {
	switch c := cond.(type) {
	case *ast.ParenExpr:
		return upperBounds(c.X)
	case *ast.BinaryExpr:
		switch c.Op {
		case token.LAND, token.LOR:
			return append(upperBounds(c.X), upperBounds(c.Y)...)
		case token.GTR, token.GEQ, token.LSS, token.LEQ:
			return []*ast.BinaryExpr{c}
		}
	}
	return nil
}

// scope knows, by name, the variables of one function assigned a timed
// value or a duration.
type scope struct {
	assigns map[string][]ast.Expr
	timedV  map[string]bool
	durV    map[string]bool
}

func newScope(body *ast.BlockStmt) *scope {
	s := &scope{assigns: map[string][]ast.Expr{}, timedV: map[string]bool{}, durV: map[string]bool{}}
	add := func(lhs []ast.Expr, rhs []ast.Expr) {
		for i, l := range lhs {
			id, ok := l.(*ast.Ident)
			if !ok || id.Name == "_" {
				continue
			}
			if len(rhs) == len(lhs) {
				s.assigns[id.Name] = append(s.assigns[id.Name], rhs[i])
			} else if len(rhs) == 1 {
				s.assigns[id.Name] = append(s.assigns[id.Name], rhs[0])
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			add(n.Lhs, n.Rhs)
		case *ast.ValueSpec:
			var lhs []ast.Expr
			for _, id := range n.Names {
				lhs = append(lhs, id)
			}
			add(lhs, n.Values)
		}
		return true
	})
	// Propagate until nothing changes.
	for changed := true; changed; {
		changed = false
		for name, rhs := range s.assigns {
			for _, r := range rhs {
				if !s.timedV[name] && s.timed(r) {
					s.timedV[name], changed = true, true
				}
				if !s.durV[name] && s.duration(r) {
					s.durV[name], changed = true, true
				}
			}
		}
	}
	return s
}

// timed says whether e measures time: it calls time.Since or time.Until,
// a Sub (of two times) or a Quantile, or uses a variable that does; the
// arguments of len and cap do not count.
func (s *scope) timed(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "len" || id.Name == "cap") {
				return false
			}
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Since", "Until":
					found = isPkg(sel.X, "time")
				case "Sub", "Quantile", "Percentile":
					found = true
				}
			}
		case *ast.Ident:
			found = s.timedV[n.Name]
		}
		return !found
	})
	return found
}

// duration says whether e is a duration: it names a time unit or
// time.Duration, or uses a variable that does.
func (s *scope) duration(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if isPkg(n.X, "time") {
				switch n.Sel.Name {
				case "Nanosecond", "Microsecond", "Millisecond", "Second", "Minute", "Hour", "Duration":
					found = true
				}
			}
		case *ast.Ident:
			found = s.durV[n.Name]
		}
		return !found
	})
	return found
}

// eval computes a constant duration expression (in nanoseconds): integer
// literals, time units, time.Duration conversions, + and *, and variables
// assigned once such an expression.
func (s *scope) eval(e ast.Expr) (int64, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.INT {
			v, err := strconv.ParseInt(e.Value, 0, 64)
			return v, err == nil
		}
	case *ast.ParenExpr:
		return s.eval(e.X)
	case *ast.SelectorExpr:
		if isPkg(e.X, "time") {
			if u, ok := units[e.Sel.Name]; ok {
				return int64(u), true
			}
		}
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && isPkg(sel.X, "time") && sel.Sel.Name == "Duration" && len(e.Args) == 1 {
			return s.eval(e.Args[0])
		}
	case *ast.BinaryExpr:
		x, okx := s.eval(e.X)
		y, oky := s.eval(e.Y)
		if okx && oky {
			switch e.Op {
			case token.MUL:
				return x * y, true
			case token.ADD:
				return x + y, true
			}
		}
	case *ast.Ident:
		if rhs := s.assigns[e.Name]; len(rhs) == 1 {
			return s.eval(rhs[0])
		}
	}
	return 0, false
}

// atLeast is a lower bound of a duration expression: its value when eval
// computes it, for a sum the sum of its terms' lower bounds, taking a term
// it cannot compute as 0 (durations in tests are not negative); else 0.
func (s *scope) atLeast(e ast.Expr) int64 {
	if v, ok := s.eval(e); ok {
		return v
	}
	switch e := e.(type) {
	case *ast.ParenExpr:
		return s.atLeast(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return max(s.atLeast(e.X), 0) + max(s.atLeast(e.Y), 0)
		}
	case *ast.Ident:
		if rhs := s.assigns[e.Name]; len(rhs) == 1 {
			return s.atLeast(rhs[0])
		}
	}
	return 0
}

var units = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

func isPkg(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
