// Package lint holds checks on the module's structure.
package lint

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/quirelog/quire"

// pkgInfo is what `go list -json` says of a package.
type pkgInfo struct {
	ImportPath string
	Imports    []string // direct
	Deps       []string // transitive
}

func listPackages(t *testing.T) []pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkgInfo
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p pkgInfo
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rule limits what one of our packages (and its subpackages) may import.
type rule struct {
	pkg string // relative to the module, e.g. "storage"
	// ours lists the only packages of this module allowed among its
	// transitive dependencies (nil: none but itself).
	ours []string
	// forbiddenDirect are import path prefixes it must not import itself.
	forbiddenDirect []string
	// forbiddenDeps are our packages it must not depend on at all.
	forbiddenDeps []string
	// forbiddenTransitive are outside import path prefixes it must not
	// depend on even indirectly.
	forbiddenTransitive []string
	// except are subpackages the rule leaves to rules of their own.
	except []string
	// oursDirect, when set, lists the only packages of this module it
	// may import itself (what it reaches through them is theirs to say).
	oursDirect []string
}

var rules = []rule{
	{pkg: "record", ours: []string{}},
	{pkg: "partitioner", ours: []string{}},
	{pkg: "storage", ours: []string{"record", "internal/atomichist"},
		forbiddenDirect: []string{"google.golang.org/grpc", "github.com/hashicorp/raft", "net"}},
	// The raft commands are generated into api/metapb, apart from the gRPC
	// stubs in api/internalv1, so metadata needs no gRPC even indirectly.
	{pkg: "metadata", forbiddenDirect: []string{"google.golang.org/grpc"},
		forbiddenDeps:       []string{"broker", "storage", "client", "controlplane", "raftgrpc", "cmd", "api/internalv1", "coordinator"},
		forbiddenTransitive: []string{"google.golang.org/grpc"}},
	// The consumer group coordinator runs group/ on the controller and
	// reaches the cluster only through interfaces of its own (its Log,
	// which metadata.GroupLog implements, and its LogReader): it
	// imports the metadata image and the raft commands' types, never
	// raft, gRPC or the network.
	{pkg: "coordinator", ours: []string{"coordinator", "metadata", "group", "txn", "api/metapb", "internal/clock", "auth"},
		forbiddenDirect:     []string{"github.com/hashicorp/raft", "net"},
		forbiddenTransitive: []string{"google.golang.org/grpc"}},
	// The replicas speak to the controller, other brokers and the disk
	// through interfaces of their own (replica/deps.go) and plain types,
	// so they import no gRPC (client or server) and no raft even
	// indirectly: no api/ package, whose stubs import grpc.
	{pkg: "replica", ours: []string{"storage", "record", "internal/atomichist"},
		forbiddenTransitive: []string{"google.golang.org/grpc", "github.com/hashicorp/raft", "go.etcd.io/bbolt"},
		except:              []string{"replica/replicagrpc"}},
	// The replica fetch over gRPC: the replicas' plain types and the
	// internal API's messages, nothing of the node's wiring, so the
	// broker's ReplicaService stays a thin adapter over it.
	{pkg: "replica/replicagrpc", ours: []string{"replica", "storage", "record", "api", "internal/atomichist", "internal/bufpool"},
		forbiddenTransitive: []string{"github.com/hashicorp/raft", "go.etcd.io/bbolt"}},
	{pkg: "raftgrpc", forbiddenDeps: []string{"broker", "storage", "client", "metadata", "controlplane", "cmd"}},
	{pkg: "controlplane", forbiddenDeps: []string{"broker", "storage", "client", "cmd"}},
	{pkg: "client", forbiddenDeps: []string{"broker", "storage", "metadata", "controlplane", "raftgrpc", "cmd"}},
	{pkg: "api", ours: []string{"api"}},
	// The one declaration of each error code's retriability: the client
	// imports it, so it may use nothing of ours but the public API.
	{pkg: "internal/errcode", ours: []string{"api/quirev1", "internal/errmsg"}},
	// The bounds on an error's text, for both doors: the standard
	// library only, so the Kafka door needs no gRPC for them.
	{pkg: "internal/errmsg", ours: []string{}},
	// The hand-written codecs: the generated messages and nothing else of
	// ours, so both the broker and the client can use them.
	{pkg: "internal/wire", ours: []string{"api/quirev1"}},
	{pkg: "broker", forbiddenDeps: []string{"cmd", "client"}},
	// A Subscribe stream is a door: its group member reaches the node
	// through the request core's operations (subscribe.Core) and the
	// broker only through its Broker interface (subscribe/broker.go).
	{pkg: "subscribe", oursDirect: []string{"api/quirev1", "request", "auth", "record", "replica", "internal/wire", "internal/fetchbuf"},
		forbiddenDeps: []string{"broker", "service", "kafka", "controlplane", "client", "raftgrpc", "cmd", "api/internalv1"}},
	// The fetches' read buffers: the standard library only.
	{pkg: "internal/fetchbuf", ours: []string{}},
	// The request core: every client operation once, in plain Go types.
	// The doors depend on it, never it on them: no gRPC, no quire.v1 or
	// internal API, no Kafka codec, even indirectly; it reaches the
	// replicas, the metadata, the logs and the ACLs, and nothing else of
	// ours.
	{pkg: "request", oursDirect: []string{"replica", "metadata", "controlplane", "storage", "record", "auth", "partitioner", "internal/fetchbuf", "group", "txn", "share", "sharegroup"},
		forbiddenDirect:     []string{"google.golang.org/grpc", "github.com/twmb/franz-go"},
		forbiddenDeps:       []string{"broker", "service", "kafka", "subscribe", "config", "client", "cmd", "api/quirev1", "api/internalv1", "raftgrpc"},
		forbiddenTransitive: []string{"google.golang.org/grpc", "github.com/twmb/franz-go"}},
	// Kafka's wire protocol is a door: a translation into the request
	// core's types (its Backend takes them), never into the node's
	// internals themselves, nor through the other door: Kafka's codes
	// are made at its edge from the core's errors, so it needs neither
	// the quire.v1 API nor gRPC, even indirectly (its tests may use
	// quire.v1's codes: the rules read non-test imports only).
	{pkg: "kafka", oursDirect: []string{"request", "internal/errmsg", "internal/fetchbuf", "txn"},
		forbiddenDirect:     []string{"google.golang.org/grpc"},
		forbiddenDeps:       []string{"broker", "service", "config", "controlplane", "raftgrpc", "client", "cmd", "api/quirev1", "api/internalv1", "subscribe"},
		forbiddenTransitive: []string{"google.golang.org/grpc"}},
	// The gRPC door: the quire.v1 services over the request core, their
	// codec and the error table at the edge. It reaches the node only
	// through the core and the interfaces it is built with (service.Node,
	// subscribe.Broker): never the broker's wiring, its configuration,
	// the Kafka door, raft or the coordinator.
	{pkg: "service", oursDirect: []string{"request", "share", "sharegroup", "subscribe", "txn", "api/quirev1", "controlplane", "metadata", "replica", "replica/replicagrpc",
		"storage", "record", "internal/errcode", "internal/wire", "internal/bufpool", "internal/fetchbuf", "internal/rpcstats"},
		forbiddenDeps:       []string{"broker", "kafka", "config", "raftgrpc", "coordinator", "client", "cmd"},
		forbiddenTransitive: []string{"github.com/twmb/franz-go"}},
	// The node's configuration: keys, defaults, sources and checks, over
	// the plain types of what it configures (and tlsconf's files); nothing
	// that serves or wires.
	{pkg: "config", oursDirect: []string{"auth", "group", "share", "sharegroup", "internal/clock", "metadata", "replica", "request", "storage", "tlsconf"},
		forbiddenDeps: []string{"broker", "service", "kafka", "subscribe", "controlplane", "coordinator", "raftgrpc", "client", "cmd", "api/quirev1", "api/internalv1"}},
	// The web console sees the cluster only as any client does: through
	// the public API and the Go client, never the node's own packages.
	{pkg: "console", forbiddenDeps: []string{"broker", "storage", "metadata", "controlplane", "raftgrpc", "replica", "group", "cmd", "api/internalv1", "api/metapb"}},
	// The consumer-group state machine is pure: plain types in, records
	// out; its assignors depend on nothing at all of ours.
	{pkg: "group", ours: []string{"group"},
		forbiddenTransitive: []string{"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/hashicorp/raft", "net"}},
	{pkg: "group/assignor", ours: []string{}},
	// The transaction state machine is pure as the group one.
	{pkg: "txn", ours: []string{"txn"},
		forbiddenTransitive: []string{"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/hashicorp/raft", "net"}},
	// The transaction coordinator runs txn/ on the controller, reaching
	// the cluster through interfaces of its own, as the group one does.
	{pkg: "txncoord", ours: []string{"txncoord", "txn", "metadata", "group", "api/metapb", "internal/clock", "auth"},
		forbiddenDirect:     []string{"github.com/hashicorp/raft", "net"},
		forbiddenTransitive: []string{"google.golang.org/grpc"}},
	// The share-partition state machine is pure too, and its runtime, the
	// share coordinator, does its I/O through the caller's interfaces.
	{pkg: "share", ours: []string{"share"},
		forbiddenTransitive: []string{"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/hashicorp/raft", "net"}},
	{pkg: "sharegroup", ours: []string{"share", "sharegroup"},
		forbiddenTransitive: []string{"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/hashicorp/raft", "net"},
		except:              []string{"sharegroup/sharepeer", "sharegroup/sharestore"}},
	// The share groups' calls between nodes: the internal API's messages
	// over the request core's types, reaching the node only through its
	// own Node interface, never the broker's wiring or the controller.
	{pkg: "sharegroup/sharepeer", oursDirect: []string{"api/internalv1", "metadata", "replica", "request", "service", "share", "sharegroup"},
		forbiddenDirect: []string{"github.com/hashicorp/raft"},
		forbiddenDeps:   []string{"broker", "kafka", "config", "raftgrpc", "coordinator", "client", "cmd"}},
	// The share state in the metadata log: the image's plain types, the
	// controller reached through an interface of its own, so no gRPC
	// even indirectly, and no raft of its own.
	{pkg: "sharegroup/sharestore", oursDirect: []string{"metadata", "replica", "request", "share", "sharegroup"},
		forbiddenDirect:     []string{"github.com/hashicorp/raft", "net"},
		forbiddenTransitive: []string{"google.golang.org/grpc"}},
	// Counters for hot paths: atomics only, nothing of ours.
	{pkg: "internal/atomichist", ours: []string{}},
	{pkg: "internal/rpcstats", ours: []string{"internal/atomichist"}},
	// The node's wall clock: the standard library only, so that storage
	// and metadata may take it too.
	{pkg: "internal/clock", ours: []string{}},
	// The gRPC buffer pool of the broker and the client: nothing of ours.
	{pkg: "internal/bufpool", ours: []string{}},
	// Pure helpers the node and the CLI share: principals, credentials and
	// ACL evaluation; TLS files; directory locks.
	{pkg: "auth", ours: []string{}},
	{pkg: "tlsconf", ours: []string{}},
	{pkg: "internal/dirlock", ours: []string{}},
	// The build's protobuf compiler and breaking-change check: a tool,
	// nothing of ours (and nothing of ours imports it: it is a command).
	{pkg: "internal/protogen", ours: []string{}},
}

// prometheusImporter is the one package that may import the Prometheus
// client: the others keep plain stats snapshots it reads at scrape time.
const prometheusImporter = "metrics"

func TestPrometheusOnlyInMetrics(t *testing.T) {
	found := false
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, "github.com/prometheus/") {
				continue
			}
			if within(p.ImportPath, prometheusImporter) {
				found = true
				continue
			}
			t.Errorf("%s imports %s; only %s/%s may", p.ImportPath, imp, module, prometheusImporter)
		}
	}
	if !found {
		t.Errorf("%s/%s imports no github.com/prometheus package: the rule checks nothing", module, prometheusImporter)
	}
}

func within(path, pkg string) bool {
	full := module + "/" + pkg
	return path == full || strings.HasPrefix(path, full+"/")
}

func TestForbiddenImports(t *testing.T) {
	pkgs := listPackages(t)
	for _, p := range pkgs {
		if strings.HasSuffix(p.ImportPath, ".test") || strings.HasSuffix(p.ImportPath, "_test") {
			continue
		}
		for _, r := range rules {
			if !within(p.ImportPath, r.pkg) || strings.Contains(p.ImportPath, "/brokertest") || slices.ContainsFunc(r.except, func(e string) bool {
				return within(p.ImportPath, e)
			}) {
				continue
			}
			for _, imp := range p.Imports {
				if r.oursDirect != nil && strings.HasPrefix(imp, module+"/") && !within(imp, r.pkg) {
					ok := false
					for _, a := range r.oursDirect {
						ok = ok || within(imp, a)
					}
					if !ok {
						t.Errorf("%s imports %s; it may import only %v of this module", p.ImportPath, imp, r.oursDirect)
					}
				}
				for _, f := range r.forbiddenDirect {
					if imp == f || strings.HasPrefix(imp, f+"/") {
						t.Errorf("%s imports %s", p.ImportPath, imp)
					}
				}
			}
			for _, dep := range p.Deps {
				for _, f := range r.forbiddenTransitive {
					if dep == f || strings.HasPrefix(dep, f+"/") {
						t.Errorf("%s depends on %s", p.ImportPath, dep)
					}
				}
				if !strings.HasPrefix(dep, module+"/") || within(dep, r.pkg) {
					continue
				}
				for _, f := range r.forbiddenDeps {
					if within(dep, f) {
						t.Errorf("%s depends on %s", p.ImportPath, dep)
					}
				}
				if r.ours != nil {
					ok := false
					for _, a := range r.ours {
						ok = ok || within(dep, a)
					}
					if !ok {
						t.Errorf("%s depends on %s; it may use only %v of this module", p.ImportPath, dep, r.ours)
					}
				}
			}
		}
	}
	// A rule whose package is gone (renamed, moved) would check nothing.
	for _, r := range rules {
		found := false
		for _, p := range pkgs {
			found = found || within(p.ImportPath, r.pkg)
		}
		if !found {
			t.Errorf("the rule for %s matches no package of the module", r.pkg)
		}
	}
	// Nothing imports the command.
	for _, p := range pkgs {
		for _, dep := range p.Deps {
			if within(dep, "cmd") {
				t.Errorf("%s depends on %s", p.ImportPath, dep)
			}
		}
	}
}
