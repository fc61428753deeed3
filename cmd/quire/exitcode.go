package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// exitError is an error that asks for a particular exit status instead of
// 1: an interrupted command exits 130 (128 + SIGINT), as shells expect of
// a process a Ctrl-C stopped.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitInterrupted is the status of a command stopped by SIGINT or SIGTERM
// before it finished its work.
const exitInterrupted = 130

// exitCode is the process status for err: 0 for none, the code an
// exitError asks for, else 1.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}

// requireSubcommands makes every command that only groups others (topic,
// group, cluster, ...) fail on a word that names none of its subcommands,
// with cobra's suggestions, instead of printing its help and exiting 0;
// without any word it prints its help on standard error and fails too, so
// quire never exits 0 on a command it did not run. Cobra does the first
// only for the root command.
func requireSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		requireSubcommands(c)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			c.SetOut(c.ErrOrStderr())
			_ = c.Help()
			return fmt.Errorf("%q needs a subcommand (see the list above)", c.CommandPath())
		}
		return unknownSubcommand(c, args[0])
	}
}

// unknownSubcommand is the error for a word that names no subcommand of c,
// with the ones it might have meant.
func unknownSubcommand(c *cobra.Command, word string) error {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown command %q for %q", word, c.CommandPath())
	if s := c.SuggestionsFor(word); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return fmt.Errorf("%s (the commands of %s are: %s; run '%s --help')", msg, c.CommandPath(), strings.Join(names, ", "), c.CommandPath())
}

// helpCommand is `quire help [command]`: cobra's own prints the root's
// help and exits 0 for a command that does not exist.
func helpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil {
				return err
			}
			if len(rest) > 0 && cmd.HasSubCommands() {
				return unknownSubcommand(cmd, rest[0])
			}
			return cmd.Help()
		},
	}
}
