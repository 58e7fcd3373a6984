package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/loaderd/loaderd/trainer/devices"
)

func devicesMain(_ context.Context, args []string) error {
	var o devices.Options
	fs := flag.NewFlagSet("trainer devices", flag.ContinueOnError)
	fs.IntVar(&o.CPUDevices, "devices", 0, "CPU devices to list (default what trainer train uses)")
	fs.IntVar(&o.Goroutines, "goroutines", 0, "goroutines per CPU device (default GOMAXPROCS / devices)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.CPUDevices < 0 || o.Goroutines < 0 || fs.NArg() > 0 {
		return fmt.Errorf("devices: --devices and --goroutines must not be negative; no arguments")
	}
	r := devices.Discover(o)
	if *asJSON {
		return r.WriteJSON(os.Stdout)
	}
	return r.WriteText(os.Stdout)
}
