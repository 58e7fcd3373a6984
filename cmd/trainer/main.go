// Command trainer trains on and consumes batches from loaderd.
//
//	trainer train [flags]     train an image classifier on batches from loaderd
//	trainer devices [flags]   list GPUs (NVML) or the CPU devices used instead
//	trainer consume [flags]   read a stream and report images/s and time waiting
package main

import (
	"github.com/loaderd/loaderd/internal/cli"
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
	cli.Main("trainer", usage,
		cli.Command{Name: "train", Run: trainMain},
		cli.Command{Name: "devices", Run: devicesMain},
		cli.Command{Name: "consume", Run: consumeMain},
		cli.Command{Name: "datasets", Run: datasetsMain},
	)
}
