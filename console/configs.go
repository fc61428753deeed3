package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
)

// alterConfigs sets one config of a topic, or returns it to its default
// (reset=yes). The confirmation page names the value before and after,
// and is shown only once the broker has validated the change
// (AlterConfigs with validate_only): a value it refuses is shown in its
// words, with no Confirm button.
func (c *Console) alterConfigs(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, []string{"name", "key", "value", "reset"},
		func(a *actionInput) (string, bool, string) {
			topic, key := a.required("name", "a topic name"), a.required("key", "a config name")
			value, reset := a.str("value"), a.str("reset") == "yes"
			back := "/topics/" + url.PathEscape(topic)
			if !reset && value == "" {
				a.errs = append(a.errs, fmt.Sprintf("a value for %s is required (or reset it to its default)", key))
			}
			if len(a.errs) > 0 {
				return "", false, back
			}
			ctx, cancel := context.WithTimeout(a.r.Context(), c.cfg.RequestTimeout)
			defer cancel()
			cl, err := c.client(ctx)
			if err != nil {
				a.errs = append(a.errs, c.cannotReach(err))
				return "", false, back
			}
			entries, err := cl.DescribeConfigs(ctx, topic)
			if err != nil {
				a.errs = append(a.errs, errText(err))
				return "", false, back
			}
			var cur *client.ConfigEntry
			for i := range entries {
				if entries[i].Name == key {
					cur = &entries[i]
				}
			}
			if cur == nil {
				a.errs = append(a.errs, fmt.Sprintf("topic %s has no config %q", topic, key))
				return "", false, back
			}
			req := &quirev1.AlterConfigsRequest{Topic: topic, ValidateOnly: true}
			if reset {
				req.Delete = []string{key}
			} else {
				req.Set = map[string]string{key: value}
			}
			if err := c.call(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
				_, err := quirev1.NewAdminClient(cc).AlterConfigs(ctx, req)
				return err
			}); err != nil {
				a.errs = append(a.errs, "the broker refuses it: "+errText(err))
				return "", false, back
			}
			if reset {
				return fmt.Sprintf("Return %s of topic %q to its default (now %s, %s).", key, topic, cur.Value, sourceText(cur.Source)), false, back
			}
			return fmt.Sprintf("Set %s of topic %q from %s (%s) to %s.", key, topic, cur.Value, sourceText(cur.Source), value), false, back
		},
		func(ctx context.Context, cl *client.Client, a *actionInput) (string, error) {
			topic, key, value := a.str("name"), a.str("key"), a.str("value")
			var err error
			if a.str("reset") == "yes" {
				err = cl.AlterConfigs(ctx, topic, nil, key)
			} else {
				err = cl.AlterConfigs(ctx, topic, map[string]string{key: value})
			}
			if err != nil {
				return "", err
			}
			if a.str("reset") == "yes" {
				return done("/topics/"+url.PathEscape(topic), fmt.Sprintf("%s of %s returned to its default.", key, topic)), nil
			}
			return done("/topics/"+url.PathEscape(topic), fmt.Sprintf("Set %s=%s on %s.", key, value, topic)), nil
		})
}

func sourceText(src string) string {
	switch src {
	case "topic":
		return "set on the topic"
	case "broker":
		return "the broker's setting"
	}
	return "the default"
}
