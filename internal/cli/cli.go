// Package cli implements the subcommand dispatch shared by loaderd's
// commands: a context cancelled by SIGINT or SIGTERM, -h, exit codes, and
// errors printed once with the program's name. It is used from main only.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Command is one subcommand: its name and what runs it with the
// arguments after the name.
type Command struct {
	Name string
	Run  func(ctx context.Context, args []string) error
}

// Main runs the subcommand os.Args[1] names and exits: 0 on success or
// -h, 1 on error, 2 on a usage error.
func Main(prog, usage string, cmds ...Command) {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	if name == "-h" || name == "--help" || name == "help" {
		fmt.Print(usage)
		return
	}
	for _, c := range cmds {
		if c.Name == name {
			os.Exit(run(prog, c, args))
		}
	}
	fmt.Fprintf(os.Stderr, "%s: unknown command %q\n\n%s", prog, name, usage)
	os.Exit(2)
}

func run(prog string, c Command, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.Run(ctx, args)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	// Package errors carry their own prefix; do not print it twice.
	fmt.Fprintln(os.Stderr, prog+":", strings.TrimPrefix(err.Error(), prog+": "))
	return 1
}
