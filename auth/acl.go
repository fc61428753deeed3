package auth

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidACL is an ACL that cannot be stored.
var ErrInvalidACL = errors.New("auth: invalid ACL")

// Operation is what a call does to a resource (Kafka's names).
type Operation string

// The operations.
const (
	OpAll             Operation = "All"
	OpRead            Operation = "Read"
	OpWrite           Operation = "Write"
	OpCreate          Operation = "Create"
	OpDelete          Operation = "Delete"
	OpAlter           Operation = "Alter"
	OpDescribe        Operation = "Describe"
	OpDescribeConfigs Operation = "DescribeConfigs"
	OpAlterConfigs    Operation = "AlterConfigs"
	OpClusterAction   Operation = "ClusterAction"
	// OpIdempotentWrite on the cluster lets a producer get a producer id
	// (InitProducerId), as in Kafka.
	OpIdempotentWrite Operation = "IdempotentWrite"
)

// Operations lists every operation an ACL may name.
var Operations = []Operation{OpAll, OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs, OpClusterAction, OpIdempotentWrite}

// ResourceType is the kind of resource an ACL covers.
type ResourceType string

// The resource types.
const (
	ResourceTopic   ResourceType = "Topic"
	ResourceGroup   ResourceType = "Group"
	ResourceCluster ResourceType = "Cluster"
	// ResourceTransactionalID is a transactional producer's id.
	ResourceTransactionalID ResourceType = "TransactionalId"
)

// ClusterName is the name of the one cluster resource.
const ClusterName = "kafka-cluster"

// PatternType is how an ACL's resource name matches.
type PatternType string

// The pattern types.
const (
	Literal  PatternType = "Literal"  // the name itself, or "*" for every one
	Prefixed PatternType = "Prefixed" // every name starting with it
)

// Permission is an ACL's effect.
type Permission string

// The permissions.
const (
	Allow Permission = "Allow"
	Deny  Permission = "Deny"
)

// ACL is one access control entry.
type ACL struct {
	Principal    string // User:NAME or User:*
	Permission   Permission
	Operation    Operation
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
}

func (a ACL) String() string {
	return fmt.Sprintf("%s %s %s on %s %s (%s)", a.Principal, a.Permission, a.Operation, a.ResourceType, a.ResourceName, a.PatternType)
}

// parseEnum matches v case-insensitively against the allowed values.
func parseEnum[T ~string](what, v string, allowed []T) (T, error) {
	for _, a := range allowed {
		if strings.EqualFold(string(a), v) {
			return a, nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return "", fmt.Errorf("%w: %s %q: want one of %s", ErrInvalidACL, what, v, strings.Join(names, ", "))
}

// ParseOperation, ParseResourceType, ParsePatternType and ParsePermission
// read the names case-insensitively.
func ParseOperation(v string) (Operation, error) { return parseEnum("operation", v, Operations) }
func ParseResourceType(v string) (ResourceType, error) {
	return parseEnum("resource type", v, []ResourceType{ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID})
}
func ParsePatternType(v string) (PatternType, error) {
	return parseEnum("pattern type", v, []PatternType{Literal, Prefixed})
}
func ParsePermission(v string) (Permission, error) {
	return parseEnum("permission", v, []Permission{Allow, Deny})
}

// Normalize checks an ACL and returns it with its names in canonical case.
func (a ACL) Normalize() (ACL, error) {
	var err error
	if _, err = ParsePrincipal(a.Principal); err != nil {
		return ACL{}, fmt.Errorf("%w: %v", ErrInvalidACL, err)
	}
	if a.Permission, err = ParsePermission(string(a.Permission)); err != nil {
		return ACL{}, err
	}
	if a.Operation, err = ParseOperation(string(a.Operation)); err != nil {
		return ACL{}, err
	}
	if a.ResourceType, err = ParseResourceType(string(a.ResourceType)); err != nil {
		return ACL{}, err
	}
	if a.PatternType == "" {
		a.PatternType = Literal
	}
	if a.PatternType, err = ParsePatternType(string(a.PatternType)); err != nil {
		return ACL{}, err
	}
	if a.ResourceType == ResourceCluster && a.ResourceName == "" {
		a.ResourceName = ClusterName
	}
	if a.ResourceName == "" {
		return ACL{}, fmt.Errorf("%w: empty resource name (\"*\" is every %s)", ErrInvalidACL, strings.ToLower(string(a.ResourceType)))
	}
	if a.PatternType == Prefixed && a.ResourceName == "*" {
		return ACL{}, fmt.Errorf("%w: a prefixed pattern cannot be \"*\" (use a literal \"*\")", ErrInvalidACL)
	}
	return a, nil
}

// Request is one check: principal wants op on a resource.
type Request struct {
	Principal    string
	Operation    Operation
	ResourceType ResourceType
	ResourceName string
}

func (r Request) String() string {
	return fmt.Sprintf("%s may not %s %s %q", r.Principal, r.Operation, strings.ToLower(string(r.ResourceType)), r.ResourceName)
}

// Authorizer decides requests against a set of ACLs and super users.
type Authorizer struct {
	acls       []ACL
	superUsers map[string]bool
}

// NewAuthorizer returns an authorizer over acls (normalized) and super users.
func NewAuthorizer(acls []ACL, superUsers map[string]bool) *Authorizer {
	return &Authorizer{acls: acls, superUsers: superUsers}
}

// IsSuperUser reports whether principal passes every check.
func (z *Authorizer) IsSuperUser(principal string) bool { return z.superUsers[principal] }

// Authorize reports whether r is allowed: super users always; otherwise a
// matching Deny refuses whatever allows it, and with no matching Allow
// the request is refused. Describe is implied by Read, Write, Delete and
// Alter on the same resource, DescribeConfigs by AlterConfigs (as in
// Kafka).
func (z *Authorizer) Authorize(r Request) bool {
	if z.superUsers[r.Principal] {
		return true
	}
	allowed := false
	for _, a := range z.acls {
		if !a.matchesResource(r) || (a.Principal != r.Principal && a.Principal != Wildcard) {
			continue
		}
		switch a.Permission {
		case Deny:
			if a.Operation == OpAll || a.Operation == r.Operation {
				return false
			}
		case Allow:
			allowed = allowed || implies(a.Operation, r.Operation)
		}
	}
	return allowed
}

// AuthorizeAny reports whether principal may do op on at least one
// resource of type rt, named or not yet created (Kafka's check by resource
// type, with which Write on any topic lets a producer be idempotent): super
// users may; otherwise some Allow of the principal (or User:*) for op must
// cover names that no Deny of op (or All) covers whole. A Deny on some of
// the names an Allow covers leaves the others allowed.
func (z *Authorizer) AuthorizeAny(principal string, op Operation, rt ResourceType) bool {
	if z.superUsers[principal] {
		return true
	}
	mine := func(a ACL) bool {
		return a.ResourceType == rt && (a.Principal == principal || a.Principal == Wildcard)
	}
	for _, allow := range z.acls {
		if !mine(allow) || allow.Permission != Allow || !implies(allow.Operation, op) {
			continue
		}
		denied := false
		for _, deny := range z.acls {
			if mine(deny) && deny.Permission == Deny && (deny.Operation == OpAll || deny.Operation == op) && deny.covers(allow) {
				denied = true
				break
			}
		}
		if !denied {
			return true
		}
	}
	return false
}

// covers reports whether every name a matches is a name d matches.
func (d ACL) covers(a ACL) bool {
	switch {
	case d.PatternType == Literal && d.ResourceName == "*":
		return true
	case a.PatternType == Literal && a.ResourceName == "*":
		return false
	case d.PatternType == Prefixed:
		return strings.HasPrefix(a.ResourceName, d.ResourceName)
	default: // d a literal name: it covers only that literal name
		return a.PatternType == Literal && a.ResourceName == d.ResourceName
	}
}

func (a ACL) matchesResource(r Request) bool {
	if a.ResourceType != r.ResourceType {
		return false
	}
	switch a.PatternType {
	case Prefixed:
		return strings.HasPrefix(r.ResourceName, a.ResourceName)
	default:
		return a.ResourceName == "*" || a.ResourceName == r.ResourceName
	}
}

// implies reports whether an Allow of granted allows want.
func implies(granted, want Operation) bool {
	if granted == OpAll || granted == want {
		return true
	}
	switch want {
	case OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}

// Matches reports whether a filter (empty fields match anything) selects
// the ACL, for listing and deleting.
func (f ACL) Matches(a ACL) bool {
	eq := func(x, y string) bool { return x == "" || strings.EqualFold(x, y) }
	return eq(f.Principal, a.Principal) && eq(string(f.Permission), string(a.Permission)) &&
		eq(string(f.Operation), string(a.Operation)) && eq(string(f.ResourceType), string(a.ResourceType)) &&
		(f.ResourceName == "" || f.ResourceName == a.ResourceName) && eq(string(f.PatternType), string(a.PatternType))
}
