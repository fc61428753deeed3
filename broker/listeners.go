package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"google.golang.org/grpc/peer"

	"github.com/quirelog/quire/metadata"
)

// A node may listen on several named listeners, as Kafka's listeners and
// advertised.listeners ("INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092"):
// typically one advertised inside a container network and one advertised
// to the host. Every listener serves every service; each registers its
// advertised address with the controller, and a client is handed, in
// GetMetadata and DescribeCluster, every broker's address on the listener
// it connected to. The inter-broker listener (inter.broker.listener.name,
// by default the first one) is the address other nodes dial.

// defaultListenerName names a listener given without a NAME:// prefix, as
// Kafka's PLAINTEXT.
const defaultListenerName = "PLAINTEXT"

// listenerSpec is one entry of listeners or advertised.listeners.
type listenerSpec struct {
	name string // upper-cased
	addr string // host:port
}

// parseListenerList parses "[NAME://]host:port,..." (an empty string is no
// entries). Names are case-insensitive (kept upper-cased) and unique.
func parseListenerList(v string) ([]listenerSpec, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []listenerSpec
	seen := map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("empty entry in %q", v)
		}
		name, addr := defaultListenerName, part
		if n, rest, ok := strings.Cut(part, "://"); ok {
			name, addr = strings.ToUpper(n), rest
			if !validListenerName(name) {
				return nil, fmt.Errorf("listener %q: the name must be letters, digits, _ or -", part)
			}
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("listener %q: want [NAME://]host:port", part)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("listener %q: bad port %q", part, port)
		}
		if strings.ContainsAny(host, "/ ") {
			return nil, fmt.Errorf("listener %q: bad host %q", part, host)
		}
		if seen[name] {
			return nil, fmt.Errorf("listener name %s given twice", name)
		}
		seen[name] = true
		out = append(out, listenerSpec{name: name, addr: addr})
	}
	return out, nil
}

func validListenerName(n string) bool {
	if n == "" {
		return false
	}
	for _, r := range n {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// listenerPlan is the checked listener configuration: what to bind, what
// each advertises ("" = derived from the bound address) and which one other
// nodes dial.
type listenerPlan struct {
	listeners  []listenerSpec
	advertised map[string]string
	inter      string
	kafka      map[string]bool // listeners that speak Kafka's protocol (kafka.go)
}

// listenerPlan checks listeners, advertised.listeners and
// inter.broker.listener.name together.
func (c *Config) listenerPlan() (listenerPlan, error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...)))
	}
	ls, err := parseListenerList(c.ListenAddr)
	if err != nil {
		bad("listeners", "%v", err)
	} else if len(ls) == 0 {
		bad("listeners", "must name at least one [NAME://]host:port")
	}
	names := map[string]bool{}
	byPort := map[string]string{}
	for _, l := range ls {
		names[l.name] = true
		_, port, _ := net.SplitHostPort(l.addr)
		if port == "0" {
			continue
		}
		if other, ok := byPort[port]; ok {
			bad("listeners", "%s and %s both use port %s; each listener needs its own port", other, l.name, port)
		}
		byPort[port] = l.name
	}
	plan := listenerPlan{listeners: ls, advertised: map[string]string{}}
	adv, err := parseListenerList(c.AdvertisedAddr)
	if err != nil {
		bad("advertised.listeners", "%v", err)
	}
	for _, a := range adv {
		host, port, _ := net.SplitHostPort(a.addr)
		switch {
		case len(ls) > 0 && !names[a.name]:
			bad("advertised.listeners", "%s is not one of the listeners (%s)", a.name, listenerNames(ls))
		case host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified():
			bad("advertised.listeners", "%s: advertise an address others can dial, not %q", a.name, a.addr)
		case port == "0":
			bad("advertised.listeners", "%s: advertise the port others dial, not 0", a.name)
		}
		plan.advertised[a.name] = a.addr
	}
	plan.inter = strings.ToUpper(strings.TrimSpace(c.InterBrokerListenerName))
	if plan.inter == "" && len(ls) > 0 {
		plan.inter = ls[0].name
	} else if len(ls) > 0 && !names[plan.inter] {
		bad("inter.broker.listener.name", "%s is not one of the listeners (%s)", plan.inter, listenerNames(ls))
	}
	var kerrs []error
	plan.kafka, kerrs = c.kafkaListenerNames(ls, plan.inter)
	errs = append(errs, kerrs...)
	errs = append(errs, c.kafkaSecurityErrors(plan.kafka)...) // kafka_security.go
	return plan, errors.Join(errs...)
}

func listenerNames(ls []listenerSpec) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.name
	}
	return strings.Join(names, ", ")
}

// boundListener is one listener the server accepts on.
type boundListener struct {
	name       string
	lis        net.Listener
	advertised string
}

// bindListeners binds every listener of the plan; pre, when set, is the
// inter-broker listener already bound (Config.Listener). On error nothing
// stays bound.
func bindListeners(plan listenerPlan, pre net.Listener) ([]boundListener, error) {
	var out []boundListener
	for _, l := range plan.listeners {
		lis := pre
		if l.name != plan.inter || pre == nil {
			var err error
			if lis, err = net.Listen("tcp", l.addr); err != nil {
				for _, b := range out {
					_ = b.lis.Close()
				}
				if pre != nil {
					_ = pre.Close()
				}
				return nil, fmt.Errorf("broker: listen on %s (%s): %w", l.addr, l.name, err)
			}
		}
		adv := plan.advertised[l.name]
		if adv == "" {
			adv = advertisedFor(lis.Addr().(*net.TCPAddr))
		}
		out = append(out, boundListener{name: l.name, lis: taggedListener{Listener: lis, name: l.name}, advertised: adv})
	}
	return out, nil
}

// endpoints lists every listener's advertised address, as registered.
func endpoints(ls []boundListener) []metadata.Endpoint {
	out := make([]metadata.Endpoint, len(ls))
	for i, l := range ls {
		out[i] = metadata.Endpoint{Listener: l.name, Addr: l.advertised}
	}
	return out
}

// advertisedString renders the advertised addresses in the
// advertised.listeners syntax: a bare host:port for a lone PLAINTEXT
// listener, as before listeners had names.
func advertisedString(ls []boundListener) string {
	if len(ls) == 1 && ls[0].name == defaultListenerName {
		return ls[0].advertised
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.name + "://" + l.advertised
	}
	return strings.Join(parts, ",")
}

// taggedListener marks every connection it accepts with its listener's
// name, which handlers read back from the connection's local address
// (grpc's peer.LocalAddr).
type taggedListener struct {
	net.Listener
	name string
}

func (l taggedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return taggedConn{Conn: c, local: listenerAddr{Addr: c.LocalAddr(), listener: l.name}}, nil
}

type taggedConn struct {
	net.Conn
	local listenerAddr
}

func (c taggedConn) LocalAddr() net.Addr { return c.local }

// listenerAddr is a connection's local address and the listener that
// accepted it.
type listenerAddr struct {
	net.Addr
	listener string
}

// clientListener names the listener the calling client connected to; the
// inter-broker listener when that is unknown.
func (b *Broker) clientListener(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		if la, ok := p.LocalAddr.(listenerAddr); ok {
			return la.listener
		}
	}
	return b.interListener
}

// ListenerAddr returns the address the named listener is bound to, after
// Start.
func (b *Broker) ListenerAddr(name string) (string, bool) {
	for _, l := range b.listeners {
		if l.name == strings.ToUpper(name) {
			return l.lis.Addr().String(), true
		}
	}
	return "", false
}
