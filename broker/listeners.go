package broker

import (
	"context"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc/peer"

	"github.com/quirelog/quire/config"
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

// boundListener is one listener the server accepts on.
type boundListener struct {
	name       string
	lis        net.Listener
	advertised string
}

// bindListeners binds every listener of the plan; pre, when set, is the
// inter-broker listener already bound (Config.Listener). On error nothing
// stays bound.
func bindListeners(plan config.ListenerPlan, pre net.Listener) ([]boundListener, error) {
	var out []boundListener
	for _, l := range plan.Listeners {
		lis := pre
		if l.Name != plan.Inter || pre == nil {
			var err error
			if lis, err = net.Listen("tcp", l.Addr); err != nil {
				for _, b := range out {
					_ = b.lis.Close()
				}
				if pre != nil {
					_ = pre.Close()
				}
				return nil, fmt.Errorf("broker: listen on %s (%s): %w", l.Addr, l.Name, err)
			}
		}
		adv := plan.Advertised[l.Name]
		if adv == "" {
			adv = advertisedFor(lis.Addr().(*net.TCPAddr))
		}
		out = append(out, boundListener{name: l.Name, lis: taggedListener{Listener: lis, name: l.Name}, advertised: adv})
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
	if len(ls) == 1 && ls[0].name == config.DefaultListenerName {
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
