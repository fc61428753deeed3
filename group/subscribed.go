package group

// SubscribedTopics is the set of existing topics some member of group id
// subscribes to, by name or through its regular expression; empty for a
// group the Machine does not have. Kafka refuses to delete a group's
// offsets of such a topic (GROUP_SUBSCRIBED_TO_TOPIC): its members would
// go on committing them.
func (m *Machine) SubscribedTopics(id string) map[string]bool {
	out := map[string]bool{}
	g := m.groups[id]
	if g == nil {
		return out
	}
	for _, mem := range g.members {
		for _, t := range m.subscribedTopics(mem) {
			out[t] = true
		}
	}
	return out
}
