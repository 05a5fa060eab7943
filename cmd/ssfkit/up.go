package main

import (
	"github.com/ssfkit/ssfkit/internal/apps"

	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ssfkit/ssfkit/internal/deploy"
)

const upSynopsis = `Stands an environment up and writes its ssfkit config (--config), from which
'ssfkit dev --config' and the functions take their stores and queues.
  --cloud local  the embedded default: each SSF of --app on a table of the SQLite database
                 .ssfkit/dev.db (no Terraform)
  --cloud aws|azure|gcp
                 terraform init, plan, the policies (policies/) on the plan, apply, in --dir
                 (default modules/CLOUD/examples/bank), then the root module's ssfkit_config
                 output. A plan the policies deny is not applied. --endpoint points the AWS
                 provider at an emulator such as moto. Providers come from the machine's mirror
                 (SSFKIT_TF_MIRROR, default /opt/tf-plugins) and the project's
                 (.ssfkit/tf-mirror), unless your Terraform CLI configuration exists; state,
                 Terraform's data and a log of its whole output go to --state-dir, outside
                 the source tree; each step prints one line.`

const downSynopsis = `Destroys what 'ssfkit up' stood up: terraform destroy in --dir for a cloud; for local,
the tables of the config's SSFs (other examples' tables in .ssfkit/dev.db stay; the file goes
with its last table). Then removes the config file. On a cloud, an environment whose state is
protected (deletion protection, the modules' default) is refused before anything is destroyed,
with the command that lifts it (--lift-protection, which asks first).`

// stdin is where down reads the answer to its question (a test replaces it).
var stdin io.Reader = os.Stdin

// confirm asks question on out and reads a yes from in.
func confirm(in io.Reader, out io.Writer, question string) bool {
	fmt.Fprintf(out, "%s [y/N] ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes"
}

// deployFlags are the flags up and down share.
type deployFlags struct {
	cloud, dir, endpoint, config, app, stateDir *string
	varFiles, vars                              stringList
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func registerDeployFlags(fs *flag.FlagSet) *deployFlags {
	f := &deployFlags{
		cloud:    fs.String("cloud", "", "where: local, aws, azure or gcp (required)"),
		dir:      fs.String("dir", "", "the Terraform root module (default modules/CLOUD/examples/bank)"),
		endpoint: fs.String("endpoint", "", "aws: an emulator's `URL` (moto), for the provider and in the written config"),
		config:   fs.String("config", "ssfkit.json", "the ssfkit config `file` to write (down: to remove)"),
		app:      fs.String("app", apps.Default, "local: the example whose SSFs get tables: "+appChoices()),
		stateDir: fs.String("state-dir", "", "where the environment's Terraform state, data directory and logs go (default .ssfkit/deploy/CLOUD-DIRNAME-HASH; a backend the root module configures keeps the state)"),
	}
	fs.Var(&f.varFiles, "var-file", "a Terraform variables `file` (repeatable)")
	fs.Var(&f.vars, "var", "a Terraform variable, `NAME=VALUE` (repeatable)")
	return f
}

func (f *deployFlags) options(stderr io.Writer) (deploy.Options, error) {
	if !slices.Contains(deploy.Clouds, *f.cloud) {
		return deploy.Options{}, &cliUsageError{err: fmt.Errorf("--cloud must be local, %s, not %q", strings.Join(deploy.Clouds, ", "), *f.cloud)}
	}
	dir := *f.dir
	if dir == "" {
		dir = filepath.Join("modules", *f.cloud, "examples", "bank")
	}
	stateDir := *f.stateDir
	if stateDir == "" {
		var err error
		if stateDir, err = deploy.DefaultStateDir(*f.cloud, dir); err != nil {
			return deploy.Options{}, err
		}
	}
	o := deploy.Options{Cloud: *f.cloud, Dir: dir, StateDir: stateDir, VarFiles: f.varFiles, Vars: f.vars, Endpoint: *f.endpoint, Progress: stderr}
	if tf := filepath.Join(".ssfkit", "tools", "bin", "terraform"); fileExists(tf) {
		o.Terraform, _ = filepath.Abs(tf) // `make tools` built it in this checkout
	}
	return o, nil
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }

func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("up", upSynopsis, stderr)
	f := registerDeployFlags(fs)
	accept := fs.Bool("accept-warnings", false, "apply a plan the policies warn about (never one they deny); each accepted warning is logged")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := deploy.CheckConfigPath(*f.config); err != nil { // before anything is written or deployed
		return &cliUsageError{err: fmt.Errorf("up: %w", err)}
	}
	if *f.cloud == "local" {
		return upLocal(*f.app, *f.config, stdout)
	}
	o, err := f.options(stderr)
	if err != nil {
		return err
	}
	o.AcceptWarnings = *accept
	res, err := deploy.Up(ctx, o)
	if res == nil || res.Config == nil {
		return err
	}
	// The environment exists even when a step after apply failed: its config is written.
	if werr := res.Config.Write(*f.config); werr != nil {
		return errors.Join(err, fmt.Errorf("up: writing the config: %w", werr))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "up: environment %s on %s: %d SSFs (%s); config written to %s\n", res.Config.Environment, o.Cloud,
		len(res.Config.SSFs), strings.Join(slices.Sorted(maps.Keys(res.Config.SSFs)), ", "), *f.config)
	return nil
}

// upLocal writes the config of the embedded default: the example's SSFs, each on its table of
// the SQLite database `ssfkit dev` uses, with dev's runtime settings.
func upLocal(appName, path string, stdout io.Writer) error {
	ex, ok := apps.Lookup(appName)
	if !ok {
		return &cliUsageError{err: fmt.Errorf("up: --app %q: want %s", appName, appChoices())}
	}
	base, err := devStoreURL("")
	if err != nil {
		return err
	}
	tableURL, err := apps.TablePerSSF(base)
	if err != nil {
		return err
	}
	rt := apps.DevConfig()
	cfg := &deploy.Config{Cloud: "local", Environment: appName, SSFs: map[string]deploy.SSF{}}
	for name := range ex.Handlers() {
		u, err := tableURL(name)
		if err != nil {
			return err
		}
		cfg.SSFs[name] = deploy.SSF{Name: name, Store: u, Queue: "mem://" + name, LifetimeSeconds: int(rt.Lifetime.Seconds()),
			GCBoundSeconds: int(rt.GCBound.Seconds()), RelaunchDelaySeconds: int(rt.RelaunchDelay.Seconds())}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.Write(path); err != nil {
		return fmt.Errorf("up: writing the config: %w", err)
	}
	fmt.Fprintf(stdout, "up: the %s example on the embedded store (%s): config written to %s; run it with: ssfkit dev --config %s\n", appName, base, path, path)
	return nil
}

func runDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("down", downSynopsis, stderr)
	f := registerDeployFlags(fs)
	lift := fs.Bool("lift-protection", false, "when deletion protection keeps the state, turn it off first (an apply with the root module's throwaway=true or deletion_protection=false), after asking")
	yes := fs.Bool("yes", false, "answer yes to --lift-protection's question (the data in the protected resources is destroyed)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *f.cloud == "local" {
		return downLocal(ctx, *f.config, stdout)
	}
	o, err := f.options(stderr)
	if err != nil {
		return err
	}
	o.LiftProtection = *lift
	o.Confirm = func(question string) bool {
		if *yes {
			fmt.Fprintf(stderr, "down: %s yes (--yes)\n", question)
			return true
		}
		return confirm(stdin, stderr, question)
	}
	if err := deploy.Down(ctx, o); err != nil {
		return err
	}
	if err := os.Remove(*f.config); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	fmt.Fprintf(stdout, "down: destroyed the environment of %s; removed %s\n", o.Dir, *f.config)
	return nil
}

// downLocal drops the tables of the local config's SSFs (removing the SQLite file once no
// table is left in it), then removes the config.
func downLocal(ctx context.Context, path string, stdout io.Writer) error {
	cfg, err := deploy.Load(path)
	if err != nil {
		return fmt.Errorf("down: %w", err)
	}
	if cfg.Cloud != "local" {
		return fmt.Errorf("down: %s describes an environment on %s; run ssfkit down --cloud %s", path, cfg.Cloud, cfg.Cloud)
	}
	if err := dropLocalTables(ctx, cfg, stdout); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("down: %w", err)
	}
	fmt.Fprintf(stdout, "down: removed %s\n", path)
	return nil
}
