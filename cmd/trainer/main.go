// Command trainer trains on and consumes batches from loaderd.
//
//	trainer train [flags]     train an image classifier on batches from loaderd
//	trainer devices [flags]   list GPUs (NVML) or the CPU devices used instead
//	trainer consume [flags]   read a stream and report images/s and time waiting
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

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "train":
		err = trainMain(ctx, args)
	case "devices":
		err = devicesMain(ctx, args)
	case "consume":
		err = consumeMain(ctx, args)
	case "datasets":
		err = datasetsMain(ctx, args)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "trainer: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		// Package errors carry their own prefix; do not print it twice.
		fmt.Fprintln(os.Stderr, "trainer:", strings.TrimPrefix(err.Error(), "trainer: "))
		os.Exit(1)
	}
}
