// Package deploy stands an environment up and tears it down (`ssfkit up`, `ssfkit down`): it runs
// Terraform in a root module that instantiates a cloud's modules, checks the plan against the
// policies before applying it, and writes the ssfkit config from the root's `ssfkit_config`
// output, so deployment settings flow from Terraform into ssfkit without hand-editing.
package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/azurearm"
	"github.com/ssfkit/ssfkit/policies"
)

// clouds is the one list of the clouds ssfkit deploys to: each one's name (--cloud, modules/NAME)
// and the directory of an example's main package for its host (examples/APP/DIR), which `ssfkit
// build` compiles.
var clouds = []struct{ name, hostDir string }{{"aws", "lambda"}, {"azure", "azure"}, {"gcp", "gcp"}}

// Clouds are the clouds Terraform deploys to, by name.
var Clouds = func() []string {
	var names []string
	for _, c := range clouds {
		names = append(names, c.name)
	}
	return names
}()

// HostDir is the directory of an example's main package for cloud's host (examples/APP/DIR).
func HostDir(cloud string) (string, bool) {
	for _, c := range clouds {
		if c.name == cloud {
			return c.hostDir, true
		}
	}
	return "", false
}

// Config is an application's ssfkit config: the settings of each of its SSFs, as the functions
// receive them (docs/modules.md).
type Config struct {
	Cloud       string         `json:"cloud"`
	Environment string         `json:"environment"`
	Region      string         `json:"region,omitempty"`
	Dir         string         `json:"terraform_dir,omitempty"` // the root module it came from
	SSFs        map[string]SSF `json:"ssfs"`
	// Coordination holds the coordination services the root module deploys
	// (modules/<cloud>/coordination), by name: each one's coord_config output.
	Coordination map[string]Coordination `json:"coordination,omitempty"`
}

// Coordination is one coordination service's entry: the coordination module's coord_config
// output, what `ssfkit coord proxy` needs.
type Coordination struct {
	Environment     string `json:"environment"`
	Store           string `json:"store"`
	Queue           string `json:"queue"`
	Blobs           string `json:"blobs"`
	DeadLetterQueue string `json:"dead_letter_queue,omitempty"`
	// FunctionIDs are the writer's and the heartbeat's functions (ARNs, Azure resource IDs,
	// Cloud Run service names): `up` syncs their triggers on Azure.
	FunctionIDs []string `json:"function_ids,omitempty"`
}

// SSF is one SSF's entry: the ssf module's ssfkit_config output.
type SSF struct {
	Name                 string `json:"name"`
	Store                string `json:"store"`
	Queue                string `json:"queue"`
	DeadLetterQueue      string `json:"dead_letter_queue,omitempty"`
	LifetimeSeconds      int    `json:"lifetime_seconds,omitempty"`
	GCBoundSeconds       int    `json:"gc_bound_seconds,omitempty"`
	RelaunchDelaySeconds int    `json:"relaunch_delay_seconds,omitempty"`
	// FunctionID is the SSF's function (Lambda ARN, Azure function app ID, Cloud Run service).
	FunctionID string `json:"function_id,omitempty"`
}

// Validate checks what the runtime will open: every SSF has a name, and store and queue URLs
// a driver could open.
func (c *Config) Validate() error {
	if len(c.SSFs) == 0 && len(c.Coordination) == 0 {
		return errors.New("the config names no SSF and no coordination service")
	}
	for _, key := range slices.Sorted(maps.Keys(c.Coordination)) {
		s := c.Coordination[key]
		if _, err := store.ParseURL(s.Store); err != nil {
			return fmt.Errorf("coordination %s: store: %w", key, err)
		}
		if _, err := queue.ParseURL(s.Queue); err != nil {
			return fmt.Errorf("coordination %s: queue: %w", key, err)
		}
		if u, err := url.Parse(s.Blobs); err != nil || u.Scheme == "" {
			return fmt.Errorf("coordination %s: blobs %q is not a bucket URL", key, s.Blobs)
		}
	}
	owners := map[string]string{} // table identity -> SSF
	for _, key := range slices.Sorted(maps.Keys(c.SSFs)) {
		s := c.SSFs[key]
		if s.Name != key {
			return fmt.Errorf("SSF %q: its name is %q", key, s.Name)
		}
		u, err := store.ParseURL(s.Store)
		if err != nil {
			return fmt.Errorf("SSF %s: store: %w", key, err)
		}
		table := tableIdentity(u)
		if other, dup := owners[table]; dup {
			return fmt.Errorf("SSFs %s and %s are on one table (%s): every SSF needs a table of its own, or their instances and items collide", other, key, u.Redacted())
		}
		owners[table] = key
		if s.RelaunchDelaySeconds != 0 && s.LifetimeSeconds != 0 && s.RelaunchDelaySeconds < s.LifetimeSeconds {
			return fmt.Errorf("SSF %s: relaunch_delay_seconds (%d) must be at least lifetime_seconds (%d): a relaunch while the first execution may still run only duplicates it", key, s.RelaunchDelaySeconds, s.LifetimeSeconds)
		}
		if _, err := queue.ParseURL(s.Queue); err != nil {
			return fmt.Errorf("SSF %s: queue: %w", key, err)
		}
		if s.GCBoundSeconds != 0 && s.GCBoundSeconds <= s.LifetimeSeconds {
			return fmt.Errorf("SSF %s: gc_bound_seconds (%d) must exceed lifetime_seconds (%d)", key, s.GCBoundSeconds, s.LifetimeSeconds)
		}
	}
	return nil
}

// tableIdentity names the table a store URL opens, whatever options it carries: the scheme,
// the authority, the path and the table parameter. Two URLs that differ only in other
// parameters (a region, an endpoint, creation flags) count as one table: refusing such a pair
// is safer than letting two SSFs share a table.
func tableIdentity(u *store.URL) string {
	return u.Scheme + "://" + u.Host + u.Path + "?table=" + u.Param("table", "")
}

// Load reads and validates a config file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// CheckConfigPath refuses a --config path that cannot be written as a file (a directory, or a
// path in a directory that does not exist), so that up fails before it writes or deploys anything.
func CheckConfigPath(path string) error {
	if path == "" {
		return errors.New("--config: empty path (want the config file to write, e.g. ssfkit.json)")
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("--config %s is a directory; give the config file's path, e.g. %s", path, filepath.Join(path, "ssfkit.json"))
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--config %s: directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("--config %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("--config %s: %s is not a directory", path, dir)
	}
	return nil
}

// Write writes the config to path atomically: into a temporary file in path's directory,
// renamed over path. Whatever fails, no temporary file is left behind.
func (c *Config) Write(path string) (err error) {
	if err := CheckConfigPath(path); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp's 0600 would hide it from other users
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return renameConfig(f.Name(), path)
}

// renameConfig is os.Rename; a test makes it fail.
var renameConfig = os.Rename

// Options say where and how to run Terraform.
type Options struct {
	Cloud string // aws, azure or gcp
	// Dir is the root module: one that instantiates the cloud's modules and outputs
	// ssfkit_config = {environment, region, ssfs = {name => module.ssf[name].ssfkit_config}},
	// as modules/<cloud>/examples/bank does.
	Dir      string
	VarFiles []string
	Vars     []string // NAME=VALUE
	// Endpoint points the AWS provider at an emulator such as moto (AWS_ENDPOINT_URL).
	Endpoint string
	// Terraform is the terraform executable (default: terraform on PATH).
	Terraform string
	// Env is added to Terraform's environment (e.g. TF_CLI_CONFIG_FILE).
	Env []string
	// StateDir holds what Terraform keeps of this environment, outside the root module: its
	// state (unless the root module configures a backend), Terraform's data directory, the CLI
	// configuration naming the provider mirrors found, and a log of every command's output.
	StateDir string
	// LiftProtection lets Down turn deletion protection off (an apply with the root module's
	// throwaway = true or deletion_protection = false) before it destroys, once Confirm agrees.
	LiftProtection bool
	// Confirm asks the user a yes/no question (nil: the answer is no).
	Confirm func(question string) bool
	// AcceptWarnings applies a plan the policies only warn about (each warning is printed as
	// accepted). Nothing applies a plan they deny: a denial is a rule the plan breaks, or a
	// value the policies cannot see and so cannot prove safe.
	AcceptWarnings bool
	Progress       io.Writer
	// Azure reaches Resource Manager to sync the function apps' triggers after an Azure apply
	// (nil: DefaultAzureCredential, public cloud).
	Azure *azurearm.Client
}

// Result is what Up did.
type Result struct {
	Config  *Config
	Verdict policies.Verdict // the policies on the plan that was applied
	// Applied is the policies on a plan made after the apply, when every value is known (the
	// plan before could only warn about values known after apply); Drift lists the resources
	// that plan would still change.
	Applied policies.Verdict
	Drift   []string
}

// Up runs init, plan, the policies on the plan, and apply in o.Dir, and returns the config its
// ssfkit_config output describes.
func Up(ctx context.Context, o Options) (*Result, error) {
	s, err := o.start("up")
	if err != nil {
		return nil, err
	}
	defer s.close()
	steps := 6
	if o.Cloud == "azure" {
		steps++
	}
	if err := s.step(ctx, 1, steps, "init", "init", "-input=false", "-no-color"); err != nil {
		return nil, err
	}
	plan := filepath.Join(o.StateDir, "up.tfplan")
	defer os.Remove(plan)
	if err := s.step(ctx, 2, steps, "plan", append(append([]string{"plan", "-input=false", "-no-color", "-out", plan}, s.stateArgs()...), o.varArgs()...)...); err != nil {
		return nil, err
	}
	s.say("[3/%d] policies on the plan", steps)
	js, err := s.capture(ctx, "show", "-json", plan)
	if err != nil {
		return nil, err
	}
	verdict, err := policies.Evaluate(ctx, js)
	if err != nil {
		return nil, err
	}
	for _, w := range verdict.Warn {
		s.say("  warning: %s", w)
	}
	for _, d := range verdict.Deny {
		s.say("  VIOLATION: %s", d)
	}
	if len(verdict.Deny) > 0 {
		return &Result{Verdict: verdict}, fmt.Errorf("up: the plan violates %d policies (policies/README.md); nothing was applied", len(verdict.Deny))
	}
	if len(verdict.Warn) > 0 {
		if !o.AcceptWarnings {
			return &Result{Verdict: verdict}, fmt.Errorf("up: the policies warn about %d things in the plan; nothing was applied: fix them, or apply anyway with --accept-warnings (the plan is checked again after the apply, with every value known)", len(verdict.Warn))
		}
		for _, w := range verdict.Warn {
			s.say("  ACCEPTED warning (--accept-warnings): %s", w)
		}
	}
	s.say("  %d violations, %d warnings", len(verdict.Deny), len(verdict.Warn))
	if err := s.step(ctx, 4, steps, "apply", append(append([]string{"apply", "-input=false", "-no-color"}, s.stateArgs()...), plan)...); err != nil {
		return &Result{Verdict: verdict}, err
	}
	res := &Result{Verdict: verdict}
	if err := s.checkApplied(ctx, 5, steps, res); err != nil {
		return res, err
	}
	s.say("[6/%d] reading ssfkit_config", steps)
	cfg, err := s.readConfig(ctx)
	if err != nil {
		return res, err
	}
	res.Config = cfg
	s.hint()
	if o.Cloud == "azure" {
		s.say("[7/%d] syncing the function apps' triggers", steps)
		return res, o.syncTriggers(ctx, cfg)
	}
	return res, nil
}

// checkApplied plans again after the apply, when every value is known, runs the policies on
// that plan and lists what it would still change (drift from what was approved). A violation
// only visible now (a policy document built from ARNs) fails up: the environment stands, and
// must be fixed or taken down.
func (s *session) checkApplied(ctx context.Context, n, steps int, res *Result) error {
	o := s.o
	after := filepath.Join(o.StateDir, "up-applied.tfplan")
	defer os.Remove(after)
	if err := s.step(ctx, n, steps, "plan of what was applied", append(append([]string{"plan", "-input=false", "-no-color", "-out", after}, s.stateArgs()...), o.varArgs()...)...); err != nil {
		return err
	}
	js, err := s.capture(ctx, "show", "-json", after)
	if err != nil {
		return err
	}
	if res.Applied, err = policies.Evaluate(ctx, js); err != nil {
		return err
	}
	var plan struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal(js, &plan); err != nil {
		return fmt.Errorf("up: the plan after apply: %w", err)
	}
	for _, rc := range plan.ResourceChanges {
		if a := strings.Join(rc.Change.Actions, ","); a != "no-op" && a != "read" {
			res.Drift = append(res.Drift, rc.Address+" ("+a+")")
		}
	}
	for _, d := range res.Drift {
		s.say("  drift: %s would still change", d)
	}
	for _, w := range res.Applied.Warn {
		s.say("  warning after apply: %s", w)
	}
	for _, d := range res.Applied.Deny {
		s.say("  VIOLATION after apply: %s", d)
	}
	s.say("  after apply: %d violations, %d warnings, %d resources drifting", len(res.Applied.Deny), len(res.Applied.Warn), len(res.Drift))
	if len(res.Applied.Deny) > 0 {
		return fmt.Errorf("up: applied, but what was applied violates %d policies (values the plan could only show after apply; policies/README.md): fix the configuration and run up again, or take it down with ssfkit down", len(res.Applied.Deny))
	}
	return nil
}

// syncAPIVersion is the Microsoft.Web API version of syncfunctiontriggers.
const syncAPIVersion = "2024-04-01"

// syncRetryWait is the wait before the first retry of a refused sync (it doubles).
var syncRetryWait = 2 * time.Second

// syncTriggers tells Azure about each function app's queue and timer triggers: the module puts
// the package in the app's deployment container with a blob upload, which (unlike a publish)
// does not, so the collectors' timers would wait for the app's first HTTP request. Azure refuses
// a sync now and then while the app starts, so each is tried three times.
func (o *Options) syncTriggers(ctx context.Context, cfg *Config) error {
	arm := o.Azure
	if arm == nil {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return fmt.Errorf("up: an Azure credential to sync the function apps' triggers: %w", err)
		}
		arm = &azurearm.Client{Credential: cred}
	}
	type app struct{ name, id string }
	var apps []app
	for _, name := range slices.Sorted(maps.Keys(cfg.SSFs)) {
		id := cfg.SSFs[name].FunctionID
		if id == "" {
			return fmt.Errorf("up: SSF %s: the ssfkit_config output has no function_id to sync the triggers of (modules/azure/ssf gives it)", name)
		}
		apps = append(apps, app{name, id})
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Coordination)) {
		ids := cfg.Coordination[name].FunctionIDs
		if len(ids) == 0 {
			return fmt.Errorf("up: coordination service %s: its coord_config has no function_ids to sync the triggers of (modules/azure/coordination gives them)", name)
		}
		for _, id := range ids {
			apps = append(apps, app{"coordination " + name + " " + id[strings.LastIndex(id, "/")+1:], id})
		}
	}
	var unsynced []string
	for _, a := range apps {
		name, id := a.name, a.id
		err := o.retry(ctx, name, func() error {
			_, err := arm.Post(ctx, id, "syncfunctiontriggers", syncAPIVersion)
			return err
		})
		if err != nil {
			unsynced = append(unsynced, fmt.Sprintf("%s: %v\n  retry: az rest --method post --url '%s'", name, err, arm.ActionURL(id, "syncfunctiontriggers", syncAPIVersion)))
			continue
		}
		fmt.Fprintf(o.Progress, "up:   %s: triggers synced\n", name)
	}
	if len(unsynced) > 0 {
		return fmt.Errorf("up: the environment is up, but the triggers of %d function apps are not synced, so their collectors and queue wait for a first HTTP request:\n%s", len(unsynced), strings.Join(unsynced, "\n"))
	}
	return nil
}

// retry calls fn up to three times, waiting syncRetryWait and then twice that between calls.
func (o *Options) retry(ctx context.Context, what string, fn func() error) error {
	wait := syncRetryWait
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt == 3 {
			return err
		}
		fmt.Fprintf(o.Progress, "up:   %s: %v; retrying in %s\n", what, err, wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		wait *= 2
	}
}

// Down destroys what Up created in o.Dir. It refuses, before destroying anything, an
// environment whose state is protected (deletion protection on its tables, databases or
// storage), unless LiftProtection is set and Confirm agrees: then it first applies the root
// module with its protection variable turned off.
func Down(ctx context.Context, o Options) error {
	s, err := o.start("down")
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.step(ctx, 1, 3, "init", "init", "-input=false", "-no-color"); err != nil {
		return err
	}
	s.say("[2/3] deletion protection")
	protected, err := s.protected(ctx)
	if err != nil {
		return err
	}
	vars := o.varArgs()
	if len(protected) > 0 {
		lift, err := s.liftProtection(ctx, protected)
		if err != nil {
			return err
		}
		vars = append(vars, lift)
	} else {
		s.say("  nothing is protected")
	}
	if err := s.step(ctx, 3, 3, "destroy", append(append([]string{"destroy", "-auto-approve", "-input=false", "-no-color"}, s.stateArgs()...), vars...)...); err != nil {
		left, lerr := s.remaining(ctx)
		if lerr != nil || len(left) == 0 {
			return err
		}
		return fmt.Errorf("%w\ndown: %d resources remain in the state (ssfkit down again destroys them once the cause is fixed):\n  %s", err, len(left), strings.Join(left, "\n  "))
	}
	return nil
}

// protectionVariables are the root-module variables that turn the modules' deletion
// protection off, and the value that does: the examples' throwaway, or deletion_protection.
var protectionVariables = []struct{ name, off string }{{"throwaway", "true"}, {"deletion_protection", "false"}}

// liftProtection turns protection off with an apply, once the user agrees, and returns the
// variable argument that keeps it off for the destroy.
func (s *session) liftProtection(ctx context.Context, protected []string) (string, error) {
	o := s.o
	listing := "  " + strings.Join(protected, "\n  ")
	variable := ""
	for _, v := range protectionVariables {
		if declared, err := declaresVariable(o.Dir, v.name); err != nil {
			return "", err
		} else if declared {
			variable = "-var=" + v.name + "=" + v.off
			break
		}
	}
	if variable == "" {
		return "", fmt.Errorf("down: deletion protection keeps %d resources, and nothing was destroyed:\n%s\nTurn it off in %s (deletion_protection = false on the ssf modules), run ssfkit up, then ssfkit down again", len(protected), listing, o.Dir)
	}
	if !o.LiftProtection {
		return "", fmt.Errorf("down: deletion protection keeps %d resources, and nothing was destroyed:\n%s\nTo destroy them with their data, run ssfkit down again with --lift-protection (it applies %s first, asking you to confirm)", len(protected), listing, strings.TrimPrefix(variable, "-var="))
	}
	if o.Confirm == nil || !o.Confirm(fmt.Sprintf("Destroy %d protected resources and the data in them (%s)?", len(protected), strings.Join(protected, ", "))) {
		return "", errors.New("down: not confirmed; nothing was destroyed")
	}
	if err := s.step(ctx, 2, 3, "apply with deletion protection off", append(append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, s.stateArgs()...), append(o.varArgs(), variable)...)...); err != nil {
		return "", err
	}
	return variable, nil
}

func declaresVariable(dir, name string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return false, err
	}
	re := regexp.MustCompile(`(?m)^\s*variable\s+"` + regexp.QuoteMeta(name) + `"`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		if re.Match(b) {
			return true, nil
		}
	}
	return false, nil
}

// protected lists the resources of the state that refuse deletion: deletion protection on
// (DynamoDB tables, Firestore databases, Bigtable, Cloud Run), Azure management locks and the
// Azure module's deletion guard.
func (s *session) protected(ctx context.Context) ([]string, error) {
	args := []string{"show", "-json", "-no-color"}
	if s.state != "" {
		if _, err := os.Stat(s.state); err != nil {
			return nil, nil // no state: nothing to protect (or to destroy)
		}
		args = append(args, s.state)
	}
	js, err := s.capture(ctx, args...)
	if err != nil {
		return nil, err
	}
	var state struct {
		Values *struct {
			RootModule stateModule `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal(js, &state); err != nil {
		return nil, fmt.Errorf("down: terraform show -json: %w", err)
	}
	if state.Values == nil {
		return nil, nil
	}
	var found []string
	state.Values.RootModule.walk(func(r stateResource) {
		if isProtected(r) {
			found = append(found, r.Address)
		}
	})
	slices.Sort(found)
	return found, nil
}

type stateResource struct {
	Address string         `json:"address"`
	Type    string         `json:"type"`
	Values  map[string]any `json:"values"`
}

type stateModule struct {
	Resources    []stateResource `json:"resources"`
	ChildModules []stateModule   `json:"child_modules"`
}

func (m stateModule) walk(fn func(stateResource)) {
	for _, r := range m.Resources {
		fn(r)
	}
	for _, c := range m.ChildModules {
		c.walk(fn)
	}
}

func isProtected(r stateResource) bool {
	v := r.Values
	switch {
	case r.Type == "azurerm_management_lock":
		return true
	case r.Type == "terraform_data":
		out, _ := v["output"].(map[string]any)
		return out != nil && out["protected"] == true
	}
	return v["deletion_protection_enabled"] == true || v["deletion_protection"] == true || v["deletion_protection"] == "PROTECTED" ||
		v["delete_protection_state"] == "DELETE_PROTECTION_ENABLED" || v["deletion_policy"] == "PREVENT"
}

// remaining lists the resources still in the state.
func (s *session) remaining(ctx context.Context) ([]string, error) {
	out, err := s.capture(ctx, append([]string{"state", "list"}, s.stateArgs()...)...)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

func (o *Options) check() error {
	if !slices.Contains(Clouds, o.Cloud) {
		return fmt.Errorf("deploy: cloud %q: Terraform deploys to %s", o.Cloud, strings.Join(Clouds, ", "))
	}
	if fi, err := os.Stat(filepath.Join(o.Dir, "main.tf")); err != nil || fi.IsDir() {
		return fmt.Errorf("deploy: %s is not a Terraform root module (no main.tf)", o.Dir)
	}
	for _, v := range o.Vars {
		if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
			return fmt.Errorf("deploy: variable %q: want NAME=VALUE", v)
		}
	}
	for _, f := range o.VarFiles {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("deploy: var file: %w", err)
		}
	}
	if o.Endpoint != "" {
		if o.Cloud != "aws" {
			return fmt.Errorf("deploy: an endpoint points the AWS provider at an emulator; the %s provider has none", o.Cloud)
		}
		if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("deploy: endpoint %q is not an http(s) URL", o.Endpoint)
		}
	}
	if o.Terraform == "" {
		path, err := exec.LookPath("terraform")
		if err != nil {
			return errors.New("deploy: terraform is not on PATH (https://developer.hashicorp.com/terraform/install, or `make tools` in a checkout of ssfkit)")
		}
		o.Terraform = path
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

func (o *Options) varArgs() []string {
	var args []string
	for _, f := range o.VarFiles {
		abs, _ := filepath.Abs(f) // terraform runs in o.Dir
		args = append(args, "-var-file="+abs)
	}
	for _, v := range o.Vars {
		args = append(args, "-var="+v)
	}
	return args
}

// readConfig reads the root module's ssfkit_config output.
func (s *session) readConfig(ctx context.Context) (*Config, error) {
	o := s.o
	js, err := s.capture(ctx, append([]string{"output", "-json"}, s.stateArgs()...)...)
	if err != nil {
		return nil, err
	}
	var outputs struct {
		Config *struct {
			Value Config `json:"value"`
		} `json:"ssfkit_config"`
	}
	if err := json.Unmarshal(js, &outputs); err != nil {
		return nil, fmt.Errorf("up: terraform output -json: %w", err)
	}
	if outputs.Config == nil {
		return nil, fmt.Errorf("up: %s has no ssfkit_config output (see modules/%s/examples/bank for its shape)", o.Dir, o.Cloud)
	}
	cfg := outputs.Config.Value
	cfg.Cloud, cfg.Dir = o.Cloud, o.Dir
	if o.Endpoint != "" {
		// The runtime must reach the same emulator the provider did.
		for name, s := range cfg.SSFs {
			s.Store, s.Queue = withEndpoint(s.Store, o.Endpoint), withEndpoint(s.Queue, o.Endpoint)
			if strings.HasPrefix(s.Store, "dynamodb:") {
				// Emulators such as moto do not apply a request to an item atomically.
				s.Store += "&serialize=true"
			}
			if s.DeadLetterQueue != "" {
				s.DeadLetterQueue = withEndpoint(s.DeadLetterQueue, o.Endpoint)
			}
			cfg.SSFs[name] = s
		}
		for name, c := range cfg.Coordination {
			c.Store, c.Queue = withEndpoint(c.Store, o.Endpoint), withEndpoint(c.Queue, o.Endpoint)
			if strings.HasPrefix(c.Store, "dynamodb:") {
				c.Store += "&serialize=true"
			}
			if c.DeadLetterQueue != "" {
				c.DeadLetterQueue = withEndpoint(c.DeadLetterQueue, o.Endpoint)
			}
			if strings.HasPrefix(c.Blobs, "s3:") {
				// gocloud.dev's S3 driver: an S3-compatible server by path-style requests.
				c.Blobs = withEndpoint(c.Blobs, o.Endpoint) + "&use_path_style=true"
			}
			cfg.Coordination[name] = c
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("up: the ssfkit_config output: %w", err)
	}
	return &cfg, nil
}

// withEndpoint adds endpoint=e to a driver URL's query.
func withEndpoint(raw, e string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + url.Values{"endpoint": {e}}.Encode()
}
