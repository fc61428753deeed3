package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Network cuts links between the nodes of one cluster on loopback. Each
// node runs as its own group (gidBase+id); a cut from a to b is an
// iptables rule in the harness's own chain dropping the packets a's
// processes send to b's port, so TCP between them stalls as across a
// real partition, while the harness (another group) still reaches every
// node, as clients on the other side of a cut would. It needs root and
// iptables; NewNetwork says why when it cannot work.
type Network struct {
	chain   string
	gidBase uint32
	mu      sync.Mutex
	ports   map[int]int // node id -> port
	cut     map[[2]int]bool
}

// NewNetwork creates the harness's chain (named after its process id) and
// hooks it into OUTPUT.
func NewNetwork() (*Network, error) {
	if os.Getuid() != 0 {
		return nil, fmt.Errorf("chaos: network faults need root (iptables and running nodes as their own group)")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, fmt.Errorf("chaos: network faults need iptables: %w", err)
	}
	pid := os.Getpid()
	n := &Network{chain: fmt.Sprintf("QCHAOS%d", pid), gidBase: uint32(61000 + (pid%400)*10), ports: map[int]int{}, cut: map[[2]int]bool{}}
	if err := ipt("-N", n.chain); err != nil {
		return nil, err
	}
	if err := ipt("-I", "OUTPUT", "-j", n.chain); err != nil {
		_ = ipt("-X", n.chain)
		return nil, err
	}
	return n, nil
}

func ipt(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (n *Network) gidOf(id int) uint32 { return n.gidBase + uint32(id) }

// Register tells the network the port node id listens on.
func (n *Network) Register(id int, addr string) error {
	i := strings.LastIndexByte(addr, ':')
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return fmt.Errorf("chaos: address %q: %w", addr, err)
	}
	n.mu.Lock()
	n.ports[id] = port
	n.mu.Unlock()
	return nil
}

// rule is the drop rule of packets from a's processes to b's port.
func (n *Network) rule(a, b int) []string {
	return []string{n.chain, "-o", "lo", "-p", "tcp", "-m", "owner", "--gid-owner", strconv.Itoa(int(n.gidOf(a))),
		"--dport", strconv.Itoa(n.ports[b]), "-j", "DROP"}
}

// Cut cuts the link between a and b, both ways.
func (n *Network) Cut(a, b int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range [][2]int{{a, b}, {b, a}} {
		if n.cut[l] {
			continue
		}
		if err := ipt(append([]string{"-A"}, n.rule(l[0], l[1])...)...); err != nil {
			return err
		}
		n.cut[l] = true
	}
	return nil
}

// Isolate cuts node a off from every other node.
func (n *Network) Isolate(a int, all []int) error {
	for _, b := range all {
		if b != a {
			if err := n.Cut(a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// Split cuts every link between the two sides.
func (n *Network) Split(left, right []int) error {
	for _, a := range left {
		for _, b := range right {
			if err := n.Cut(a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal removes every cut.
func (n *Network) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := ipt("-F", n.chain); err != nil {
		return err
	}
	n.cut = map[[2]int]bool{}
	return nil
}

// Cuts lists the links cut, as "a-b" (a sending to b).
func (n *Network) Cuts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for l := range n.cut {
		out = append(out, fmt.Sprintf("%d-%d", l[0], l[1]))
	}
	sort.Strings(out)
	return out
}

// Close removes the chain and its hook.
func (n *Network) Close() error {
	_ = ipt("-F", n.chain)
	err := ipt("-D", "OUTPUT", "-j", n.chain)
	if xerr := ipt("-X", n.chain); err == nil {
		err = xerr
	}
	return err
}

func sortStrings(s []string) { sort.Strings(s) }
