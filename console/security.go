package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/quirelog/quire/client"
)

// securityView is the security page: who the console is to the cluster,
// the SCRAM users and the ACLs, each shown or why not (a principal that
// may not describe them gets the broker's refusal in its words).
type securityView struct {
	Principal, AuthenticatedBy string
	WhoErr                     string
	Users                      []client.UserDescription
	UsersErr                   string
	ACLs                       []client.ACL
	ACLsErr                    string
}

func (c *Console) securityPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.pageCtx(r)
	defer cancel()
	p := page{Title: "Security", Nav: "security", Refresh: -1, Notice: r.URL.Query().Get("done")}
	cl, err := c.client(ctx)
	if err != nil {
		c.renderUnreachable(w, r, "security", p, err)
		return
	}
	var sv securityView
	sv.Principal, sv.AuthenticatedBy, err = cl.WhoAmI(ctx)
	if unreachable(err) {
		c.renderUnreachable(w, r, "security", p, err)
		return
	}
	if err != nil {
		sv.WhoErr = errText(err)
	}
	if sv.Users, err = cl.ListUsers(ctx); err != nil {
		sv.UsersErr = errText(err)
	}
	sort.Slice(sv.Users, func(i, j int) bool { return sv.Users[i].Name < sv.Users[j].Name })
	if sv.ACLs, err = cl.ListACLs(ctx, client.ACL{}); err != nil {
		sv.ACLsErr = errText(err)
	}
	sort.SliceStable(sv.ACLs, func(i, j int) bool {
		a, b := sv.ACLs[i], sv.ACLs[j]
		if a.Principal != b.Principal {
			return a.Principal < b.Principal
		}
		if a.ResourceType != b.ResourceType {
			return a.ResourceType < b.ResourceType
		}
		return a.ResourceName < b.ResourceName
	})
	p.Data = sv
	c.remember(r.URL.Path, sv)
	c.render(w, http.StatusOK, "security", p)
}

// aclFields are an ACL's form fields.
var aclFields = []string{"principal", "permission", "operation", "resource_type", "resource_name", "pattern"}

func aclOf(a *actionInput) client.ACL {
	return client.ACL{Principal: a.str("principal"), Permission: a.str("permission"), Operation: a.str("operation"),
		ResourceType: a.str("resource_type"), ResourceName: a.str("resource_name"), PatternType: a.str("pattern")}
}

func aclText(acl client.ACL) string {
	return fmt.Sprintf("%s %s %s on %s %q (%s)", acl.Permission, acl.Principal, acl.Operation, acl.ResourceType, acl.ResourceName, acl.PatternType)
}

// checkACL says what an ACL form lacks; the broker checks the rest (a
// known operation, resource type and pattern) and its refusal is shown.
func checkACL(a *actionInput) client.ACL {
	acl := aclOf(a)
	for _, f := range []struct{ v, what string }{{acl.Principal, "a principal (User:NAME)"}, {acl.Permission, "a permission"},
		{acl.Operation, "an operation"}, {acl.ResourceType, "a resource type"}, {acl.ResourceName, "a resource name"}, {acl.PatternType, "a pattern type"}} {
		if f.v == "" {
			a.errs = append(a.errs, f.what+" is required")
		}
	}
	if acl.Principal != "" && !strings.HasPrefix(acl.Principal, "User:") {
		a.errs = append(a.errs, fmt.Sprintf("principal %q: write User:NAME", acl.Principal))
	}
	return acl
}

// createACL adds an ACL (CreateAcls), for a console whose principal may
// alter the cluster's ACLs; the broker's refusal is shown otherwise.
func (c *Console) createACL(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, aclFields,
		func(a *actionInput) (string, bool, string) {
			acl := checkACL(a)
			return "Add the ACL: " + aclText(acl) + ".", false, "/security"
		},
		func(ctx context.Context, cl *client.Client, a *actionInput) (string, error) {
			acl := aclOf(a)
			if err := cl.CreateACLs(ctx, acl); err != nil {
				return "", err
			}
			return done("/security", "Added the ACL: "+aclText(acl)+"."), nil
		})
}

// deleteACL deletes one ACL: the filter names every field, so it matches
// that ACL alone.
func (c *Console) deleteACL(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, aclFields,
		func(a *actionInput) (string, bool, string) {
			acl := checkACL(a)
			return "Delete the ACL: " + aclText(acl) + ".", true, "/security"
		},
		func(ctx context.Context, cl *client.Client, a *actionInput) (string, error) {
			acl := aclOf(a)
			deleted, err := cl.DeleteACLs(ctx, acl)
			if err != nil {
				return "", err
			}
			if len(deleted) == 0 {
				return "", fmt.Errorf("no ACL %s to delete (deleted meanwhile?)", aclText(acl))
			}
			return done("/security", fmt.Sprintf("Deleted %d ACL: %s.", len(deleted), aclText(acl))), nil
		})
}
