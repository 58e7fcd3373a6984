// Command trainer trains on and consumes batches from loaderd.
//
//	trainer train [flags]     train an image classifier on batches from loaderd
//	trainer devices [flags]   list GPUs (NVML) or the CPU devices used instead
//	trainer consume [flags]   read a stream and report images/s and time waiting
//	trainer datasets [flags]  list the daemon's datasets
//
// It is a module of its own, beside the trainer's: it links the client and
// the trainer, never the daemon.
package main

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

const usage = `usage: trainer <command> [flags]

commands:
  train     train an image classifier (MLP or CNN) on batches streamed from loaderd
  devices   list the GPUs (count, name, memory, utilisation) or the CPU devices used instead
  consume   read batches from loaderd and report images/s and the share of time waiting
  datasets  list the daemon's datasets

Run 'trainer <command> -h' for a command's flags.
`

var commands = map[string]func(ctx context.Context, args []string) error{
	"train":    trainMain,
	"devices":  devicesMain,
	"consume":  consumeMain,
	"datasets": datasetsMain,
}

// main exits 0 on success or -h, 1 when the command fails, 2 on a usage
// error; SIGINT and SIGTERM cancel the command's context.
func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name := os.Args[1]
	run, ok := commands[name]
	switch {
	case name == "-h" || name == "--help" || name == "help":
		fmt.Print(usage)
		return
	case !ok:
		fmt.Fprintf(os.Stderr, "trainer: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[2:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		// The trainer's errors carry their package's prefix already.
		fmt.Fprintln(os.Stderr, "trainer:", strings.TrimPrefix(err.Error(), "trainer: "))
		os.Exit(1)
	}
}
