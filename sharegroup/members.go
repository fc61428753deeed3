package sharegroup

import (
	"slices"
	"strings"
	"time"
)

// Member describes one member of a share group.
type Member struct {
	ID     string
	Epoch  int32
	Topics []string
}

// Members returns the group's members, sorted by id; nil for a group the
// coordinator does not have.
func (c *Coordinator) Members(groupName string) []Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return nil
	}
	out := make([]Member, 0, len(g.members))
	for id, m := range g.members {
		out = append(out, Member{ID: id, Epoch: m.epoch, Topics: slices.Clone(m.topics)})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Has reports whether the coordinator has the group (it has had a member,
// or settings of its own).
func (c *Coordinator) Has(groupName string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.groups[groupName]
	return ok
}

// Groups returns the names of the groups the coordinator has, sorted.
func (c *Coordinator) Groups() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.groups))
	for name := range c.groups {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// LiveMembers counts group's members once those silent past the session
// timeout are gone.
func (c *Coordinator) LiveMembers(now time.Time, groupName string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return 0
	}
	c.expireLocked(now, g)
	return len(g.members)
}

// ForgetGroup drops what this node holds of a group whose saved state
// was deleted (a group with members stays).
func (c *Coordinator) ForgetGroup(groupName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[groupName]; ok && len(g.members) == 0 {
		delete(c.groups, groupName)
		c.drops[groupName]++
	}
}
