package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// Kafka's config resource types.
const (
	resourceTopic        = 2
	resourceBroker       = 4
	resourceBrokerLogger = 8
	resourceGroup        = 32
)

// Kafka's IncrementalAlterConfigs operations.
const (
	opSet      = 0
	opDelete   = 1
	opAppend   = 2
	opSubtract = 3
)

// resourceKey names a config resource, to find one named twice.
type resourceKey struct {
	typ  int8
	name string
}

// configsOf is the config entries of a resource, or the error code and
// message of its answer.
func configsOf(ctx context.Context, b Backend, typ int8, name string) ([]ConfigEntry, int16, string) {
	var (
		entries []ConfigEntry
		err     error
	)
	switch typ {
	case resourceTopic:
		entries, err = b.TopicConfigs(ctx, name)
	case resourceBroker:
		entries, err = b.BrokerConfigs(ctx, name)
	case resourceGroup:
		entries, err = b.GroupConfigs(ctx, name)
	case resourceBrokerLogger:
		return nil, invalidRequest, fmt.Sprintf("broker %s: broker loggers are not configured over Kafka's protocol; "+
			"the node's log level is set by its log.level key", name)
	default:
		return nil, invalidRequest, fmt.Sprintf("config resource type %d is not served: topics (2), brokers (4) and share groups (32) are", typ)
	}
	if err != nil {
		code, msg := coreError(err)
		return nil, code, msg
	}
	return entries, 0, ""
}

// describeConfigs answers each resource on its own: the keys asked for
// (all of them for none), with the synonyms and the documentation when
// the client asks for them.
func describeConfigs(ctx context.Context, b Backend, req *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := kmsg.NewPtrDescribeConfigsResponse()
	seen := map[resourceKey]int{}
	for _, r := range req.Resources {
		seen[resourceKey{int8(r.ResourceType), r.ResourceName}]++
	}
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		if seen[resourceKey{int8(r.ResourceType), r.ResourceName}] > 1 {
			rr.ErrorCode, rr.ErrorMessage = invalidRequest, msgPtr(fmt.Sprintf("resource %q of type %d is named more than once", r.ResourceName, r.ResourceType))
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		entries, code, msg := configsOf(ctx, b, int8(r.ResourceType), r.ResourceName)
		rr.ErrorCode, rr.ErrorMessage = code, msgPtr(msg)
		for _, e := range entries {
			if r.ConfigNames != nil && !slices.Contains(r.ConfigNames, e.Name) {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly = e.Name, kmsg.StringPtr(e.Value), e.ReadOnly
			c.Source, c.IsDefault = kmsg.ConfigSource(e.Source), e.Source == SourceDefault
			c.ConfigType = kmsg.ConfigType(e.Type)
			if req.IncludeDocumentation {
				c.Documentation = msgPtr(e.Doc)
			}
			if req.IncludeSynonyms {
				for _, s := range e.Synonyms {
					cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					cs.Name, cs.Value, cs.Source = s.Name, kmsg.StringPtr(s.Value), kmsg.ConfigSource(s.Source)
					c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
				}
			}
			rr.Configs = append(rr.Configs, c)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// configChange is what a request asks of one resource's keys.
type configChange struct {
	typ    int8
	name   string
	set    map[string]string
	delete []string
}

// applyChange carries a change out: a topic's through the admin call, a
// broker's refused, as its configuration is read from its file when it
// starts (every key is static, in Kafka's terms).
func applyChange(ctx context.Context, b Backend, c configChange, validateOnly bool) (int16, string) {
	if c.typ == resourceBroker {
		var keys []string
		for k := range c.set {
			keys = append(keys, k)
		}
		keys = append(keys, c.delete...)
		slices.Sort(keys)
		if len(keys) == 0 {
			return 0, ""
		}
		return invalidRequest, fmt.Sprintf("broker %q: %s cannot be changed while the node runs: a broker's configuration is static, "+
			"read from its configuration file when it starts (change it there and restart the node)", c.name, strings.Join(keys, ", "))
	}
	if len(c.set) == 0 && len(c.delete) == 0 {
		return 0, "" // nothing asked, nothing to do
	}
	if c.typ == resourceGroup {
		if err := b.AlterGroupConfigs(ctx, &request.AlterShareGroupConfigsRequest{Group: c.name, Set: c.set, Delete: c.delete, ValidateOnly: validateOnly}); err != nil {
			return coreError(err)
		}
		return 0, ""
	}
	err := b.AlterConfigs(ctx, &request.AlterConfigsRequest{Topic: c.name, Set: c.set, Delete: c.delete, ValidateOnly: validateOnly})
	if err != nil {
		return coreError(err)
	}
	return 0, ""
}

// alterConfigs replaces each resource's configuration: the keys given
// are set, every other key set on the topic returns to its default, as
// Kafka's (deprecated, but still used) AlterConfigs does.
func alterConfigs(ctx context.Context, b Backend, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := kmsg.NewPtrAlterConfigsResponse()
	seen := map[resourceKey]int{}
	for _, r := range req.Resources {
		seen[resourceKey{int8(r.ResourceType), r.ResourceName}]++
	}
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		rr.ErrorCode, rr.ErrorMessage = func() (int16, *string) {
			if seen[resourceKey{int8(r.ResourceType), r.ResourceName}] > 1 {
				return invalidRequest, msgPtr(fmt.Sprintf("resource %q of type %d is named more than once", r.ResourceName, r.ResourceType))
			}
			entries, code, msg := configsOf(ctx, b, int8(r.ResourceType), r.ResourceName)
			if code != 0 {
				return code, msgPtr(msg)
			}
			c := configChange{typ: int8(r.ResourceType), name: r.ResourceName, set: map[string]string{}}
			for _, kv := range r.Configs {
				if kv.Value == nil {
					return kerr.InvalidConfig.Code, msgPtr(fmt.Sprintf("%q: a null value; leave the key out to return it to its default", kv.Name))
				}
				if _, ok := c.set[kv.Name]; ok {
					return invalidRequest, msgPtr(fmt.Sprintf("%q is given more than once", kv.Name))
				}
				c.set[kv.Name] = *kv.Value
			}
			if c.typ == resourceTopic || c.typ == resourceGroup {
				for _, e := range entries {
					if _, ok := c.set[e.Name]; !ok && (e.Source == SourceDynamicTopic || e.Source == SourceGroup) {
						c.delete = append(c.delete, e.Name)
					}
				}
			}
			code, msg = applyChange(ctx, b, c, req.ValidateOnly)
			return code, msgPtr(msg)
		}()
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// incrementalAlterConfigs changes the keys named and no other: SET,
// DELETE (back to the default), and APPEND or SUBTRACT elements of a
// list key's value.
func incrementalAlterConfigs(ctx context.Context, b Backend, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	seen := map[resourceKey]int{}
	for _, r := range req.Resources {
		seen[resourceKey{int8(r.ResourceType), r.ResourceName}]++
	}
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		code, msg := func() (int16, string) {
			if seen[resourceKey{int8(r.ResourceType), r.ResourceName}] > 1 {
				return invalidRequest, fmt.Sprintf("resource %q of type %d is named more than once", r.ResourceName, r.ResourceType)
			}
			entries, code, msg := configsOf(ctx, b, int8(r.ResourceType), r.ResourceName)
			if code != 0 {
				return code, msg
			}
			c, code, msg := incrementalChange(r, entries)
			if code != 0 {
				return code, msg
			}
			return applyChange(ctx, b, c, req.ValidateOnly)
		}()
		rr.ErrorCode, rr.ErrorMessage = code, msgPtr(msg)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// incrementalChange is the change one resource of an
// IncrementalAlterConfigs asks for, over its current entries.
func incrementalChange(r kmsg.IncrementalAlterConfigsRequestResource, entries []ConfigEntry) (configChange, int16, string) {
	c := configChange{typ: int8(r.ResourceType), name: r.ResourceName, set: map[string]string{}}
	named := map[string]bool{}
	for _, kv := range r.Configs {
		if named[kv.Name] {
			return c, invalidRequest, fmt.Sprintf("%q is given more than once", kv.Name)
		}
		named[kv.Name] = true
		i := slices.IndexFunc(entries, func(e ConfigEntry) bool { return e.Name == kv.Name })
		switch kv.Op {
		case opSet:
			if kv.Value == nil {
				return c, kerr.InvalidConfig.Code, fmt.Sprintf("%q: SET with a null value; DELETE returns a key to its default", kv.Name)
			}
			c.set[kv.Name] = *kv.Value
		case opDelete:
			if i < 0 && c.typ == resourceTopic {
				return c, kerr.InvalidConfig.Code, fmt.Sprintf("unknown topic config %q", kv.Name)
			}
			if i < 0 && c.typ == resourceGroup {
				return c, kerr.InvalidConfig.Code, fmt.Sprintf("unknown group config %q", kv.Name)
			}
			c.delete = append(c.delete, kv.Name)
		case opAppend, opSubtract:
			if i < 0 {
				return c, kerr.InvalidConfig.Code, fmt.Sprintf("unknown config %q", kv.Name)
			}
			if entries[i].Type != configTypeList {
				return c, kerr.InvalidConfig.Code, fmt.Sprintf("%q is not a list: APPEND and SUBTRACT apply to list configs only; use SET", kv.Name)
			}
			if kv.Value == nil {
				return c, kerr.InvalidConfig.Code, fmt.Sprintf("%q: %s with a null value", kv.Name, kmsg.IncrementalAlterConfigOp(kv.Op))
			}
			c.set[kv.Name] = editList(entries[i].Value, *kv.Value, kv.Op == opAppend)
		default:
			return c, invalidRequest, fmt.Sprintf("%q: unknown operation %d (SET 0, DELETE 1, APPEND 2, SUBTRACT 3)", kv.Name, kv.Op)
		}
	}
	return c, 0, ""
}

// editList appends the comma-separated elements of v to list (those not
// in it yet), or removes them from it.
func editList(list, v string, add bool) string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case add && !slices.Contains(out, e):
			out = append(out, e)
		case !add:
			out = slices.DeleteFunc(out, func(x string) bool { return x == e })
		}
	}
	return strings.Join(out, ",")
}
