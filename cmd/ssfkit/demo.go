package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ssfkit/ssfkit/internal/apps"
)

// runDemo is `ssfkit demo [APP] [flags]`: the harness is internal/apps'.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	name := apps.Default
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == apps.TemporalDemoName {
		d := &apps.TemporalDemo{}
		fs := newFlagSet("demo temporal", apps.TemporalDemoSynopsis, stderr)
		d.Flags(fs)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if err := d.Validate(); err != nil {
			return &cliUsageError{err: err}
		}
		return d.Run(ctx, stdout)
	}
	d, err := apps.NewDemo(name)
	if err != nil {
		return &cliUsageError{err: err}
	}
	cmd := "demo"
	if name != apps.Default {
		cmd += " " + name
	}
	usage := "ssfkit " + cmd + " [flags]"
	if name == apps.Default {
		usage = fmt.Sprintf("ssfkit demo [%s] [flags]", strings.Join(apps.DemoNames(), "|"))
	}
	fs := newFlagSetUsage(cmd, usage, d.Synopsis(), stderr)
	d.Flags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return &cliUsageError{err: err}
	}
	return d.Run(ctx, "ssfkit "+cmd, stdout)
}

// appChoices lists the example apps for --app's help and errors: "bank or travel".
func appChoices() string { return strings.Join(apps.Names(), " or ") }
