package config

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

// DefaultListenerName names a listener given without a NAME:// prefix, as
// Kafka's PLAINTEXT.
const DefaultListenerName = "PLAINTEXT"

// ListenerSpec is one entry of listeners or advertised.listeners.
type ListenerSpec struct {
	Name string // upper-cased
	Addr string // host:port
}

// parseListenerList parses "[NAME://]host:port,..." (an empty string is no
// entries). Names are case-insensitive (kept upper-cased) and unique.
func parseListenerList(v string) ([]ListenerSpec, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []ListenerSpec
	seen := map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("empty entry in %q", v)
		}
		name, addr := DefaultListenerName, part
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
		out = append(out, ListenerSpec{Name: name, Addr: addr})
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

// ListenerPlan is the checked listener configuration: what to bind, what
// each advertises ("" = derived from the bound address) and which one other
// nodes dial.
type ListenerPlan struct {
	Listeners  []ListenerSpec
	Advertised map[string]string
	Inter      string
	Kafka      map[string]bool // listeners that speak Kafka's protocol (broker/kafka.go)
}

// ListenerPlan checks listeners, advertised.listeners and
// inter.broker.listener.name together.
func (c *Config) ListenerPlan() (ListenerPlan, error) {
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
		names[l.Name] = true
		_, port, _ := net.SplitHostPort(l.Addr)
		if port == "0" {
			continue
		}
		if other, ok := byPort[port]; ok {
			bad("listeners", "%s and %s both use port %s; each listener needs its own port", other, l.Name, port)
		}
		byPort[port] = l.Name
	}
	plan := ListenerPlan{Listeners: ls, Advertised: map[string]string{}}
	adv, err := parseListenerList(c.AdvertisedAddr)
	if err != nil {
		bad("advertised.listeners", "%v", err)
	}
	for _, a := range adv {
		host, port, _ := net.SplitHostPort(a.Addr)
		switch {
		case len(ls) > 0 && !names[a.Name]:
			bad("advertised.listeners", "%s is not one of the listeners (%s)", a.Name, listenerNames(ls))
		case host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified():
			bad("advertised.listeners", "%s: advertise an address others can dial, not %q", a.Name, a.Addr)
		case port == "0":
			bad("advertised.listeners", "%s: advertise the port others dial, not 0", a.Name)
		}
		plan.Advertised[a.Name] = a.Addr
	}
	plan.Inter = strings.ToUpper(strings.TrimSpace(c.InterBrokerListenerName))
	if plan.Inter == "" && len(ls) > 0 {
		plan.Inter = ls[0].Name
	} else if len(ls) > 0 && !names[plan.Inter] {
		bad("inter.broker.listener.name", "%s is not one of the listeners (%s)", plan.Inter, listenerNames(ls))
	}
	var kerrs []error
	plan.Kafka, kerrs = c.kafkaListenerNames(ls, plan.Inter)
	errs = append(errs, kerrs...)
	errs = append(errs, c.kafkaSecurityErrors(plan.Kafka)...) // kafka_security.go
	return plan, errors.Join(errs...)
}

func listenerNames(ls []ListenerSpec) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Name
	}
	return strings.Join(names, ", ")
}
