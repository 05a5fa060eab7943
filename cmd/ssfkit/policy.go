package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ssfkit/ssfkit/policies"
)

const policySynopsis = `Run ssfkit's policies on a Terraform plan, as 'ssfkit up' does before it applies:
  terraform plan -out plan.out && terraform show -json plan.out > plan.json
  ssfkit policy check plan.json
It exits 1 when the policies deny the plan (or, with -fail-on-warn, warn about it). -output json
prints conftest's JSON result format, for CI pipelines.`

// runPolicy is `ssfkit policy check PLAN.json`.
func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprintln(stderr, "Usage: ssfkit policy check [flags] PLAN.json\n\n"+policySynopsis)
			return nil
		}
		return &cliUsageError{err: errors.New("policy: give the action 'check' and a plan: ssfkit policy check PLAN.json")}
	}
	fs := newFlagSet("policy check", policySynopsis, stderr)
	output := fs.String("output", "text", "text, or json (conftest's format)")
	failOnWarn := fs.Bool("fail-on-warn", false, "exit 1 on warnings too")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &cliUsageError{err: err, printed: true}
	}
	if fs.NArg() != 1 || (*output != "text" && *output != "json") {
		return &cliUsageError{err: fmt.Errorf("policy check: give one plan file after the flags, and -output text or json (got %q, -output %s)", fs.Args(), *output)}
	}
	file := fs.Arg(0)
	plan, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("policy check: %w", err)
	}
	v, err := policies.Evaluate(ctx, plan)
	if err != nil {
		return fmt.Errorf("policy check %s: %w", file, err)
	}
	if *output == "json" {
		type result struct {
			Msg string `json:"msg"`
		}
		msgs := func(list []string) []result {
			out := []result{}
			for _, m := range list {
				out = append(out, result{m})
			}
			return out
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode([]map[string]any{{"filename": file, "namespace": "ssfkit", "successes": 0,
			"warnings": msgs(v.Warn), "failures": msgs(v.Deny)}}); err != nil {
			return err
		}
	} else {
		for _, m := range v.Deny {
			fmt.Fprintf(stdout, "FAIL - %s - %s\n", file, m)
		}
		for _, m := range v.Warn {
			fmt.Fprintf(stdout, "WARN - %s - %s\n", file, m)
		}
		fmt.Fprintf(stdout, "%d denials, %d warnings\n", len(v.Deny), len(v.Warn))
	}
	switch {
	case len(v.Deny) > 0:
		return fmt.Errorf("policy check: %d denials", len(v.Deny))
	case *failOnWarn && len(v.Warn) > 0:
		return fmt.Errorf("policy check: %d warnings (-fail-on-warn)", len(v.Warn))
	}
	return nil
}
