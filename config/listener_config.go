package broker

// The listeners in the configuration: listeners, advertised.listeners
// and inter.broker.listener.name parsed into a plan, which listeners.go
// binds.

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

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
