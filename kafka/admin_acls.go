package kafka

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// ACLs and SCRAM users, as the Security service keeps them. Kafka's ACLs
// carry a host; the cluster's do not (every ACL holds for any host,
// Kafka's "*"), so an ACL for one host is refused and a filter for one
// matches nothing.

// Kafka's ACL enums, by number, and the names the Security service
// gives them; a number missing here has no counterpart.
var (
	aclResourceTypes = map[kmsg.ACLResourceType]string{
		kmsg.ACLResourceTypeTopic: "Topic", kmsg.ACLResourceTypeGroup: "Group", kmsg.ACLResourceTypeCluster: "Cluster",
		kmsg.ACLResourceTypeTransactionalId: "TransactionalId",
	}
	aclPatterns = map[kmsg.ACLResourcePatternType]string{
		kmsg.ACLResourcePatternTypeLiteral: "Literal", kmsg.ACLResourcePatternTypePrefixed: "Prefixed",
	}
	aclOperations = map[kmsg.ACLOperation]string{
		kmsg.ACLOperationAll: "All", kmsg.ACLOperationRead: "Read", kmsg.ACLOperationWrite: "Write",
		kmsg.ACLOperationCreate: "Create", kmsg.ACLOperationDelete: "Delete", kmsg.ACLOperationAlter: "Alter",
		kmsg.ACLOperationDescribe: "Describe", kmsg.ACLOperationClusterAction: "ClusterAction",
		kmsg.ACLOperationDescribeConfigs: "DescribeConfigs", kmsg.ACLOperationAlterConfigs: "AlterConfigs",
		kmsg.ACLOperationIdempotentWrite: "IdempotentWrite",
	}
	aclPermissions = map[kmsg.ACLPermissionType]string{
		kmsg.ACLPermissionTypeDeny: "Deny", kmsg.ACLPermissionTypeAllow: "Allow",
	}
)

// enumOf is the Kafka number of a name the Security service gives (its
// names compare without regard to case).
func enumOf[K comparable](m map[K]string, name string) K {
	for k, v := range m {
		if strings.EqualFold(v, name) {
			return k
		}
	}
	var zero K
	return zero
}

// aclOfCreation is the ACL a CreateAcls entry asks for, or why it cannot
// be made.
func aclOfCreation(c kmsg.CreateACLsRequestCreation, version int16) (*request.ACL, string) {
	pattern := c.ResourcePatternType
	if version == 0 {
		pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	a := &request.ACL{Principal: c.Principal, ResourceName: c.ResourceName}
	var ok bool
	switch {
	case c.Host != "*":
		return nil, fmt.Sprintf("host %q: ACLs hold for every host here; give host \"*\"", c.Host)
	}
	if a.ResourceType, ok = aclResourceTypes[c.ResourceType]; !ok {
		return nil, fmt.Sprintf("resource type %s: only TOPIC, GROUP and CLUSTER are served", c.ResourceType)
	}
	if a.PatternType, ok = aclPatterns[pattern]; !ok {
		return nil, fmt.Sprintf("pattern type %s: an ACL is LITERAL or PREFIXED", pattern)
	}
	if a.Operation, ok = aclOperations[c.Operation]; !ok {
		return nil, fmt.Sprintf("operation %s is not one an ACL may grant here", c.Operation)
	}
	if a.Permission, ok = aclPermissions[c.PermissionType]; !ok {
		return nil, fmt.Sprintf("permission %s: an ACL is ALLOW or DENY", c.PermissionType)
	}
	return a, ""
}

// createACLs creates each ACL on its own.
func createACLs(ctx context.Context, b Backend, req *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := kmsg.NewPtrCreateACLsResponse()
	for _, c := range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		a, msg := aclOfCreation(c, req.Version)
		if a == nil {
			r.ErrorCode, r.ErrorMessage = invalidRequest, msgPtr(msg)
		} else if err := b.CreateAcls(ctx, []request.ACL{*a}); err != nil {
			code, msg := coreError(err)
			r.ErrorCode, r.ErrorMessage = code, msgPtr(msg)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// aclFilter is a Kafka ACL filter in the Security service's terms: a
// filter for the service (empty fields match anything), and for a MATCH
// pattern the name the ACLs it selects must cover, which the service's
// filters cannot say. none is a filter that matches nothing here (a
// resource type or host no ACL has).
type aclFilter struct {
	pb    *request.ACL
	match *string
	none  bool
}

func filterOf(rt kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType, version int16) (aclFilter, string) {
	f := aclFilter{pb: &request.ACL{}}
	if version == 0 {
		pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	var ok bool
	switch rt {
	case kmsg.ACLResourceTypeAny:
	case kmsg.ACLResourceTypeUnknown:
		return f, "resource type UNKNOWN is not a filter"
	default:
		if f.pb.ResourceType, ok = aclResourceTypes[rt]; !ok {
			f.none = true
		}
	}
	switch pattern {
	case kmsg.ACLResourcePatternTypeAny:
	case kmsg.ACLResourcePatternTypeMatch:
		f.match = name
		name = nil
	default:
		if f.pb.PatternType, ok = aclPatterns[pattern]; !ok {
			return f, fmt.Sprintf("pattern type %s is not a filter", pattern)
		}
	}
	switch op {
	case kmsg.ACLOperationAny:
	default:
		if f.pb.Operation, ok = aclOperations[op]; !ok {
			f.none = true
		}
	}
	switch perm {
	case kmsg.ACLPermissionTypeAny:
	default:
		if f.pb.Permission, ok = aclPermissions[perm]; !ok {
			return f, fmt.Sprintf("permission %s is not a filter", perm)
		}
	}
	if name != nil {
		if *name == "" {
			f.none = true // no ACL has an empty name
		}
		f.pb.ResourceName = *name
	}
	if principal != nil {
		if *principal == "" {
			f.none = true
		}
		f.pb.Principal = *principal
	}
	if host != nil && *host != "*" {
		f.none = true
	}
	return f, ""
}

// covers reports whether an ACL holds for the resource name of a MATCH
// filter: the name itself, the wildcard, or a prefix of it.
func (f aclFilter) covers(a *request.ACL) bool {
	if f.match == nil {
		return true
	}
	n := *f.match
	switch {
	case strings.EqualFold(a.PatternType, "Prefixed"):
		return strings.HasPrefix(n, a.ResourceName)
	default:
		return a.ResourceName == n || a.ResourceName == "*"
	}
}

// list is the ACLs the filter selects.
func (f aclFilter) list(ctx context.Context, b Backend) ([]*request.ACL, error) {
	if f.none {
		return nil, nil
	}
	out, err := b.ListAcls(ctx, *f.pb)
	if err != nil {
		return nil, err
	}
	var acls []*request.ACL
	for i := range out {
		if a := &out[i]; f.covers(a) {
			acls = append(acls, a)
		}
	}
	return acls, nil
}

func describeACLs(ctx context.Context, b Backend, req *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	resp := kmsg.NewPtrDescribeACLsResponse()
	f, msg := filterOf(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType, req.Version)
	if msg != "" {
		resp.ErrorCode, resp.ErrorMessage = invalidRequest, msgPtr(msg)
		return resp
	}
	acls, err := f.list(ctx, b)
	if err != nil {
		code, msg := coreError(err)
		resp.ErrorCode, resp.ErrorMessage = code, msgPtr(msg)
		return resp
	}
	type resource struct{ rt, name, pattern string }
	index := map[resource]int{}
	for _, a := range acls {
		k := resource{strings.ToLower(a.ResourceType), a.ResourceName, strings.ToLower(a.PatternType)}
		i, ok := index[k]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName = enumOf(aclResourceTypes, a.ResourceType), a.ResourceName
			r.ResourcePatternType = enumOf(aclPatterns, a.PatternType)
			i = len(resp.Resources)
			index[k] = i
			resp.Resources = append(resp.Resources, r)
		}
		ra := kmsg.NewDescribeACLsResponseResourceACL()
		ra.Principal, ra.Host = a.Principal, "*"
		ra.Operation, ra.PermissionType = enumOf(aclOperations, a.Operation), enumOf(aclPermissions, a.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, ra)
	}
	return resp
}

// deleteACLs deletes, for each filter on its own, the ACLs it selects.
func deleteACLs(ctx context.Context, b Backend, req *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := kmsg.NewPtrDeleteACLsResponse()
	for _, in := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		f, msg := filterOf(in.ResourceType, in.ResourceName, in.ResourcePatternType, in.Principal, in.Host, in.Operation, in.PermissionType, req.Version)
		deleted, err := func() ([]request.ACL, error) {
			if msg != "" || f.none {
				return nil, nil
			}
			filters := []request.ACL{*f.pb}
			if f.match != nil {
				// The service's filters cannot say MATCH: the ACLs it
				// selects are deleted each by its exact self.
				acls, err := f.list(ctx, b)
				if err != nil || len(acls) == 0 {
					return nil, err
				}
				filters = filters[:0]
				for _, a := range acls {
					filters = append(filters, *a)
				}
			}
			return b.DeleteAcls(ctx, filters)
		}()
		switch {
		case msg != "":
			r.ErrorCode, r.ErrorMessage = invalidRequest, msgPtr(msg)
		case err != nil:
			code, msg := coreError(err)
			r.ErrorCode, r.ErrorMessage = code, msgPtr(msg)
		}
		for _, a := range deleted {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = enumOf(aclResourceTypes, a.ResourceType), a.ResourceName
			m.ResourcePatternType = enumOf(aclPatterns, a.PatternType)
			m.Principal, m.Host = a.Principal, "*"
			m.Operation, m.PermissionType = enumOf(aclOperations, a.Operation), enumOf(aclPermissions, a.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// Kafka's numbers for the SCRAM mechanisms. A user's credential holds
// the keys of SCRAM-SHA-256, and of SCRAM-SHA-512 too when it was derived
// from a password (gRPC's UpsertUser, `quire user set`); a salted password
// sent through AlterUserScramCredentials sets SCRAM-SHA-256 only, the one
// mechanism a salted password of its length can give.
const (
	scramSHA256 = 1
	scramSHA512 = 2
)

// describeSCRAM lists the users named (every user for none), each with
// its one credential.
func describeSCRAM(ctx context.Context, b Backend, req *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	out, err := b.ListUsers(ctx)
	if err != nil {
		code, msg := coreError(err)
		resp.ErrorCode, resp.ErrorMessage = code, msgPtr(msg)
		return resp
	}
	users := map[string]request.UserDescription{}
	for _, u := range out {
		users[u.Name] = u
	}
	result := func(name string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = name
		u, ok := users[name]
		if !ok {
			r.ErrorCode, r.ErrorMessage = kerr.ResourceNotFound.Code, msgPtr(fmt.Sprintf("user %q has no SCRAM credential", name))
			return r
		}
		// Each mechanism the user has keys for, with its own iterations.
		for _, c := range u.Credentials {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			switch c.Mechanism {
			case "SCRAM-SHA-256":
				ci.Mechanism = scramSHA256
			case "SCRAM-SHA-512":
				ci.Mechanism = scramSHA512
			default:
				continue
			}
			ci.Iterations = c.Iterations
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		return r
	}
	if req.Users == nil {
		for _, u := range out {
			resp.Results = append(resp.Results, result(u.Name))
		}
		return resp
	}
	names := make([]string, len(req.Users))
	for i, u := range req.Users {
		names[i] = u.Name
	}
	dup := duplicates(names)
	done := map[string]bool{}
	for _, name := range names {
		switch {
		case done[name]:
		case dup[name]:
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = name, kerr.DuplicateResource.Code, msgPtr(fmt.Sprintf("user %q is named more than once", name))
			resp.Results = append(resp.Results, r)
		default:
			resp.Results = append(resp.Results, result(name))
		}
		done[name] = true
	}
	return resp
}

// scramMechanisms are Kafka's SCRAM mechanism numbers and their names.
var scramMechanisms = map[int8]string{scramSHA256: "SCRAM-SHA-256", scramSHA512: "SCRAM-SHA-512"}

// alterSCRAM deletes and upserts credentials, each of one mechanism (the
// user's other kept), one result per user: the first failure of its
// changes, or none. A (user, mechanism) pair named more than once is
// refused for that user, as Kafka does.
func alterSCRAM(ctx context.Context, b Backend, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	type pair struct {
		user string
		mech int8
	}
	seen := map[pair]int{}
	var order []string
	results := map[string]*kmsg.AlterUserSCRAMCredentialsResponseResult{}
	note := func(name string, mech int8) {
		seen[pair{name, mech}]++
		if results[name] == nil {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User = name
			results[name] = &r
			order = append(order, name)
		}
	}
	for _, d := range req.Deletions {
		note(d.Name, d.Mechanism)
	}
	for _, u := range req.Upsertions {
		note(u.Name, u.Mechanism)
	}
	failed := func(name string) bool { return results[name].ErrorCode != 0 }
	answer := func(name string, code int16, msg string) {
		if r := results[name]; r.ErrorCode == 0 {
			r.ErrorCode, r.ErrorMessage = code, msgPtr(msg)
		}
	}
	for p, n := range seen {
		if n > 1 {
			answer(p.user, kerr.DuplicateResource.Code, fmt.Sprintf("user %q: mechanism %d is named more than once in the request", p.user, p.mech))
		}
	}
	// check answers a change that cannot be made for its user, and says
	// whether it can.
	check := func(name string, mechanism int8) (string, bool) {
		mech, known := scramMechanisms[mechanism]
		switch {
		case failed(name):
		case name == "":
			answer(name, kerr.UnacceptableCredential.Code, "the user name is empty")
		case !known:
			answer(name, kerr.UnsupportedSaslMechanism.Code, fmt.Sprintf("mechanism %d: not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)", mechanism))
		default:
			return mech, true
		}
		return "", false
	}
	for _, d := range req.Deletions {
		mech, ok := check(d.Name, d.Mechanism)
		if !ok {
			continue
		}
		if err := b.DeleteScramCredential(ctx, d.Name, mech); err != nil {
			code, msg := coreError(err)
			answer(d.Name, code, msg)
		}
	}
	for _, u := range req.Upsertions {
		mech, ok := check(u.Name, u.Mechanism)
		if !ok {
			continue
		}
		if err := b.UpsertScramCredential(ctx, u.Name, mech, u.Iterations, u.Salt, u.SaltedPassword); err != nil {
			code, msg := coreError(err)
			if code == invalidRequest || code == kerr.UnknownServerError.Code {
				code = kerr.UnacceptableCredential.Code
			}
			answer(u.Name, code, msg)
		}
	}
	for _, name := range order {
		resp.Results = append(resp.Results, *results[name])
	}
	return resp
}
