package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quirelog/quire/client"
)

func init() {
	registerCommand(newUserCmd)
	registerCommand(newACLCmd)
}

func newUserCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Create, delete and list SCRAM users (stored salted in the metadata log)"}
	var password string
	var passwordStdin bool
	var iterations int32
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a user or replace its password",
		Long: `Creates a SCRAM user, or gives an existing one a new password.
The broker derives the salted SCRAM-SHA-256 and SCRAM-SHA-512 credentials;
the password itself is never stored. Clients then authenticate with
--user NAME --password ... (over TLS), and Kafka's clients with SASL/SCRAM
on a SASL_SSL or SASL_PLAINTEXT Kafka listener.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if passwordStdin {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && line == "" {
					return fmt.Errorf("read the password from stdin: %w", err)
				}
				password = strings.TrimRight(line, "\r\n")
			}
			if password == "" {
				return fmt.Errorf("give the password with --new-password or --new-password-stdin")
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			if err := cl.UpsertUser(ctx, args[0], password, iterations); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s: SCRAM credentials stored (principal User:%s)\n", args[0], args[0])
			return nil
		},
	}
	create.Flags().StringVar(&password, "new-password", "", "the user's password")
	create.Flags().BoolVar(&passwordStdin, "new-password-stdin", false, "read the password from the first line of stdin")
	create.Flags().Int32Var(&iterations, "iterations", 0, "PBKDF2 iterations (0: the broker's default, 8192; at least 4096)")
	del := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete users",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			for _, n := range args {
				if err := cl.DeleteUser(ctx, n); err != nil {
					return fmt.Errorf("%s: %w", n, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "user %s deleted\n", n)
			}
			return nil
		},
	}
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List users",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			users, err := cl.ListUsers(ctx)
			if err != nil {
				return err
			}
			if g.format == "json" {
				return printJSON(cmd.OutOrStdout(), users)
			}
			rows := [][]string{}
			for _, u := range users {
				rows = append(rows, []string{u.Name, u.Mechanism, fmt.Sprint(u.Iterations)})
			}
			return printTable(cmd.OutOrStdout(), []string{"USER", "MECHANISM", "ITERATIONS"}, rows)
		},
	}
	whoami := &cobra.Command{
		Use:   "whoami",
		Short: "Show the principal the broker sees this CLI as",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			p, by, err := cl.WhoAmI(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s (authenticated by %s)\n", p, by)
			return nil
		},
	}
	cmd.AddCommand(create, del, list, whoami)
	return cmd
}

// aclFlags are the fields of an ACL or filter.
type aclFlags struct {
	principal, permission, operation, pattern string
	topic, group                              string
	cluster                                   bool
}

func (f *aclFlags) bind(cmd *cobra.Command, filter bool) {
	cmd.Flags().StringVar(&f.principal, "principal", "", "User:NAME, or User:* for everyone")
	def := "Allow"
	if filter {
		def = ""
	}
	cmd.Flags().StringVar(&f.permission, "permission", def, "Allow or Deny")
	cmd.Flags().StringVar(&f.operation, "operation", "", "Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, ClusterAction, IdempotentWrite or All")
	cmd.Flags().StringVar(&f.topic, "topic", "", "a topic resource (\"*\" for all with the literal pattern)")
	cmd.Flags().StringVar(&f.group, "group", "", "a consumer group resource")
	cmd.Flags().BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	pdef := "Literal"
	if filter {
		pdef = ""
	}
	cmd.Flags().StringVar(&f.pattern, "pattern", pdef, "Literal (the name itself) or Prefixed (every name starting with it)")
}

func (f *aclFlags) acl(filter bool) (client.ACL, error) {
	a := client.ACL{Principal: f.principal, Permission: f.permission, Operation: f.operation, PatternType: f.pattern}
	n := 0
	if f.topic != "" {
		a.ResourceType, a.ResourceName = "Topic", f.topic
		n++
	}
	if f.group != "" {
		a.ResourceType, a.ResourceName = "Group", f.group
		n++
	}
	if f.cluster {
		a.ResourceType, a.ResourceName = "Cluster", "kafka-cluster"
		n++
	}
	if n > 1 {
		return a, fmt.Errorf("name one of --topic, --group and --cluster")
	}
	if !filter && (n == 0 || a.Principal == "" || a.Operation == "") {
		return a, fmt.Errorf("an ACL needs --principal, --operation and one of --topic, --group, --cluster")
	}
	return a, nil
}

func newACLCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "acl", Short: "Create, delete and list ACLs (kept in the metadata log; checked with authorizer.enable)"}
	var cf, df, lf aclFlags
	create := &cobra.Command{
		Use:   "create",
		Short: "Add an ACL",
		Example: `  quire acl create --principal User:reader --operation Read --topic orders
  quire acl create --principal User:app --operation Read --group app- --pattern Prefixed
  quire acl create --principal User:alice --permission Deny --operation Write --topic audit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := cf.acl(false)
			if err != nil {
				return err
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			if err := cl.CreateACLs(ctx, a); err != nil {
				return err
			}
			return printACLs(cmd, g, []client.ACL{a})
		},
	}
	cf.bind(create, false)
	del := &cobra.Command{
		Use:   "delete",
		Short: "Delete the ACLs the flags match (at least one flag)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := df.acl(true)
			if err != nil {
				return err
			}
			if f == (client.ACL{}) {
				return fmt.Errorf("give at least one flag: an empty filter would delete every ACL")
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			deleted, err := cl.DeleteACLs(ctx, f)
			if err != nil {
				return err
			}
			return printACLs(cmd, g, deleted)
		},
	}
	df.bind(del, true)
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the ACLs the flags match (all without any)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := lf.acl(true)
			if err != nil {
				return err
			}
			ctx, cl, done, err := connect(g)
			if err != nil {
				return err
			}
			defer done()
			acls, err := cl.ListACLs(ctx, f)
			if err != nil {
				return err
			}
			return printACLs(cmd, g, acls)
		},
	}
	lf.bind(list, true)
	cmd.AddCommand(create, del, list)
	return cmd
}

func printACLs(cmd *cobra.Command, g *globalFlags, acls []client.ACL) error {
	if g.format == "json" {
		if acls == nil {
			acls = []client.ACL{}
		}
		return printJSON(cmd.OutOrStdout(), acls)
	}
	rows := [][]string{}
	for _, a := range acls {
		rows = append(rows, []string{a.Principal, a.Permission, a.Operation, a.ResourceType, a.ResourceName, a.PatternType})
	}
	return printTable(cmd.OutOrStdout(), []string{"PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE", "NAME", "PATTERN"}, rows)
}

// scramFlags are the global --user and --password (QUIRE_USER,
// QUIRE_PASSWORD).
type scramFlags struct{ user, password string }

func (f *scramFlags) bind(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.user, "user", os.Getenv("QUIRE_USER"), "authenticate as this SCRAM user (needs TLS); also QUIRE_USER")
	cmd.PersistentFlags().StringVar(&f.password, "password", "", "the user's password; better QUIRE_PASSWORD, which other users of the machine cannot see")
}

func (f *scramFlags) clientOpts() []client.Opt {
	if f.user == "" {
		return nil
	}
	return []client.Opt{client.SCRAM(f.user, f.passwordOrEnv())}
}

// passwordOrEnv is --password, else QUIRE_PASSWORD.
func (f *scramFlags) passwordOrEnv() string {
	if f.password == "" {
		return os.Getenv("QUIRE_PASSWORD")
	}
	return f.password
}
