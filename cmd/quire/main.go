// Command quire is Quire's one binary: `quire server` runs a node, `quire
// console` serves the web console, and the other verbs (topic, produce,
// consume, group, cluster, perf) are the command-line client.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// DefaultBrokers is where the CLI looks for a cluster when neither --brokers
// nor QUIRE_BROKERS says otherwise: the dev server's address.
const DefaultBrokers = "127.0.0.1:9092"

// globalFlags are the flags every client verb shares.
type globalFlags struct {
	brokers string // comma-separated host:port list
	format  string // "table" or "json"
	tls     tlsFlags
	scram   scramFlags
}

// commandFactories are registered from init functions in the files that
// define each verb, so each verb lives in its own file.
var commandFactories []func(g *globalFlags) *cobra.Command

func registerCommand(f func(g *globalFlags) *cobra.Command) {
	commandFactories = append(commandFactories, f)
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "quire",
		Short:         "Quire: a replicated, partitioned commit log",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	brokers := os.Getenv("QUIRE_BROKERS")
	if brokers == "" {
		brokers = DefaultBrokers
	}
	root.PersistentFlags().StringVar(&g.brokers, "brokers", brokers,
		"comma-separated broker addresses (host:port; a host alone means port "+DefaultPort+"); also QUIRE_BROKERS")
	root.PersistentFlags().StringVar(&g.format, "format", "table", "output format: table or json")
	g.tls.bind(root)
	g.scram.bind(root)
	for _, f := range commandFactories {
		root.AddCommand(f(g))
	}
	root.SetHelpCommand(helpCommand())
	requireSubcommands(root)
	return root
}

func main() {
	if err := newRootCmd().Execute(); err != nil {
		code := exitCode(err)
		if code == exitInterrupted {
			// An interrupt is no error: what it stopped says where.
			fmt.Fprintln(os.Stderr, err)
		} else {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(code)
	}
}
