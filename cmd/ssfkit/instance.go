package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/deploy"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

const instanceSynopsis = `Show what an SSF's table says about one instance (an idempotency key): pending
(with the intent collector's launches and the last error), done with its result or
error (a given-up or abandoned instance's error says so), collected, expired, or unknown.

  ssfkit instance -store 'sqlite:///abs/dev.db?table=teller' t-1
  ssfkit instance -config ssfkit.json -ssf teller t-1`

// runInstance inspects one instance in a live store, read-only.
func runInstance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("instance", instanceSynopsis, stderr)
	storeURL := fs.String("store", "", "the store `URL` of the SSF's table")
	configFile := fs.String("config", "", "an ssfkit config `file` ('ssfkit up' writes it), with -ssf, instead of -store")
	ssfName := fs.String("ssf", "", "with -config: the SSF")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &cliUsageError{err: err, printed: true}
	}
	if fs.NArg() != 1 {
		return &cliUsageError{err: fmt.Errorf("instance: give one instance id after the flags, got %q", fs.Args())}
	}
	id := fs.Arg(0)
	switch {
	case (*storeURL == "") == (*configFile == ""):
		return &cliUsageError{err: errors.New("instance: give -store, or -config with -ssf")}
	case *configFile != "":
		cfg, err := deploy.Load(*configFile)
		if err != nil {
			return fmt.Errorf("instance: -config: %w", err)
		}
		s, ok := cfg.SSFs[*ssfName]
		if !ok {
			return &cliUsageError{err: fmt.Errorf("instance: %s has no SSF %q (-ssf)", *configFile, *ssfName)}
		}
		*storeURL = s.Store
	}
	tbl, err := store.Open(ctx, *storeURL)
	if err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	defer tbl.Close()
	st, err := ssf.Inspect(ctx, tbl, id)
	if err != nil {
		return fmt.Errorf("instance %s: %w", id, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(instanceJSON(id, st))
	}
	fmt.Fprint(stdout, describeInstance(id, st))
	return nil
}

// instanceStatus names what an instance's status means.
func instanceStatus(st ssf.IntentStatus) string {
	switch {
	case st.Expired:
		return "expired"
	case st.Collected:
		return "collected"
	case !st.Exists:
		return "unknown"
	case !st.Done:
		return "pending"
	case strings.HasPrefix(st.Result.Error, ssf.ErrGaveUp.Error()):
		return "given up"
	case strings.HasPrefix(st.Result.Error, ssf.ErrAbandoned.Error()):
		return "abandoned"
	case st.Result.Error != "" || st.Result.TxAborted:
		return "failed"
	}
	return "done"
}

func instanceJSON(id string, st ssf.IntentStatus) map[string]any {
	out := map[string]any{"instance_id": id, "status": instanceStatus(st)}
	if len(st.Result.Output) > 0 {
		out["output"] = st.Result.Output
	}
	if st.Result.Error != "" {
		out["error"] = st.Result.Error
	}
	if st.Exists && !st.Done {
		out["launches"] = st.Launches
		if st.LastError != "" {
			out["last_error"] = st.LastError
		}
	}
	return out
}

func describeInstance(id string, st ssf.IntentStatus) string {
	var b strings.Builder
	status := instanceStatus(st)
	fmt.Fprintf(&b, "instance %s: %s\n", id, status)
	switch status {
	case "unknown":
		b.WriteString("  never accepted, or forgotten after its key retention\n")
	case "expired":
		b.WriteString("  collected, and its answer dropped after the key retention; the id is refused, never run again\n")
	case "pending":
		fmt.Fprintf(&b, "  launched %d times by the intent collector\n", st.Launches)
		if st.LastError != "" {
			fmt.Fprintf(&b, "  last error: %s\n", st.LastError)
		}
	}
	if len(st.Result.Output) > 0 {
		fmt.Fprintf(&b, "  output: %s\n", st.Result.Output)
	}
	if st.Result.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", st.Result.Error)
	}
	return b.String()
}
