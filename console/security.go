package console

import (
	"net/http"
	"sort"

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
	p := page{Title: "Security", Nav: "security", Refresh: -1}
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
