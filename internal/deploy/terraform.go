package deploy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// DefaultStateDir is where an environment's Terraform state, data directory, provider
// configuration and logs go when Options.StateDir is not set: under .ssfkit/deploy in the working
// directory, one directory per cloud and root module, outside the source tree.
func DefaultStateDir(cloud, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Abs(filepath.Join(".ssfkit", "deploy", fmt.Sprintf("%s-%s-%s", cloud, filepath.Base(abs), hex.EncodeToString(sum[:4]))))
}

// DefaultMirror is the machine's provider mirror, unless SSFKIT_TF_MIRROR names another.
const DefaultMirror = "/opt/tf-plugins"

// ProjectMirror is where `make tools` builds the providers no mirror here holds (Google,
// AzureRM), relative to an ssfkit checkout.
const ProjectMirror = ".ssfkit/tf-mirror"

// A Mirror is a filesystem provider mirror and the providers it holds (registry.terraform.io/
// NAMESPACE/TYPE).
type Mirror struct {
	Path      string
	Providers []string
}

// FindMirrors returns the provider mirrors that exist, in the order Terraform should use them:
// the machine's (SSFKIT_TF_MIRROR, default /opt/tf-plugins), then each project mirror
// (.ssfkit/tf-mirror) in the given directories or their parents.
func FindMirrors(near ...string) []Mirror {
	machine := os.Getenv("SSFKIT_TF_MIRROR")
	if machine == "" {
		machine = DefaultMirror
	}
	candidates := []string{machine}
	for _, dir := range near {
		abs, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		for d := abs; ; d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(d, ProjectMirror))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	var found []Mirror
	seen := map[string]bool{}
	for _, path := range candidates {
		if seen[path] {
			continue
		}
		seen[path] = true
		providers, _ := filepath.Glob(filepath.Join(path, "registry.terraform.io", "*", "*"))
		if len(providers) == 0 {
			continue
		}
		m := Mirror{Path: path}
		for _, p := range providers {
			rel, _ := filepath.Rel(path, p)
			m.Providers = append(m.Providers, filepath.ToSlash(rel))
		}
		found = append(found, m)
	}
	return found
}

// CLIConfig is a Terraform CLI configuration that installs each provider a mirror holds from the
// first mirror that holds it, and any other from the registry.
func CLIConfig(mirrors []Mirror) string {
	var blocks, all []string
	taken := map[string]bool{}
	for _, m := range mirrors {
		var held []string
		for _, p := range m.Providers {
			if !taken[p] {
				taken[p] = true
				held = append(held, fmt.Sprintf("%q", p))
			}
		}
		if len(held) > 0 {
			blocks = append(blocks, fmt.Sprintf("  filesystem_mirror {\n    path    = %q\n    include = [%s]\n  }\n", m.Path, strings.Join(held, ", ")))
			all = append(all, held...)
		}
	}
	if len(blocks) == 0 {
		return ""
	}
	return fmt.Sprintf("provider_installation {\n%s  direct {\n    exclude = [%s]\n  }\n}\n", strings.Join(blocks, ""), strings.Join(all, ", "))
}

// backendBlock finds a backend a root module configures (terraform { backend "s3" { ... } }).
var backendBlock = regexp.MustCompile(`(?m)^\s*backend\s+"([A-Za-z0-9_]+)"`)

// session is one up or down: Terraform run in the root module with the environment's state,
// data directory and provider configuration under StateDir, every command's output in a log.
type session struct {
	o       *Options
	verb    string // up or down, the prefix of progress lines
	state   string // the local state file; "" when the root module configures a backend
	backend string
	env     []string
	log     *os.File
}

// start prepares StateDir and says where everything is.
func (o *Options) start(verb string) (*session, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	if o.StateDir == "" {
		return nil, errors.New("deploy: Options.StateDir is not set (DefaultStateDir gives the CLI's)")
	}
	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: the state directory: %w", verb, err)
	}
	s := &session{o: o, verb: verb, env: []string{"TF_DATA_DIR=" + filepath.Join(o.StateDir, "terraform-data")}}
	s.backend, err = configuredBackend(dir)
	if err != nil {
		return nil, err
	}
	if s.backend == "" {
		s.state = filepath.Join(o.StateDir, "terraform.tfstate")
		if err := adoptStateInSource(dir, s.state, o.Progress, verb); err != nil {
			return nil, err
		}
	}
	if s.log, err = os.Create(filepath.Join(o.StateDir, fmt.Sprintf("%s-%s.log", verb, time.Now().UTC().Format("20060102T150405Z")))); err != nil {
		return nil, fmt.Errorf("%s: the log: %w", verb, err)
	}
	if s.backend != "" {
		s.say("state: in the %s backend the root module configures", s.backend)
	} else {
		s.say("state: %s", s.state)
	}
	s.say("log: %s (every Terraform command's whole output)", s.log.Name())
	s.providers()
	return s, nil
}

func (s *session) close() { s.log.Close() }

func (s *session) say(format string, args ...any) {
	fmt.Fprintf(s.o.Progress, "%s: %s\n", s.verb, fmt.Sprintf(format, args...))
}

// providers makes Terraform install providers the way the tests do: from the mirrors found, each
// named once, unless the user's own CLI configuration exists (then it is used, and said).
func (s *session) providers() {
	if cfg := s.userCLIConfig(); cfg != "" {
		s.say("providers: as your Terraform CLI configuration %s says", cfg)
		return
	}
	mirrors := FindMirrors(".", s.o.Dir)
	if len(mirrors) == 0 {
		s.say("providers: from the registry (no mirror at %s or %s)", DefaultMirror, ProjectMirror)
		return
	}
	path := filepath.Join(s.o.StateDir, "terraformrc")
	if err := os.WriteFile(path, []byte(CLIConfig(mirrors)), 0o644); err != nil {
		s.say("providers: from the registry (writing %s: %v)", path, err)
		return
	}
	s.env = append(s.env, "TF_CLI_CONFIG_FILE="+path)
	var where []string
	for _, m := range mirrors {
		where = append(where, fmt.Sprintf("%s (%s)", m.Path, strings.Join(m.Providers, ", ")))
	}
	s.say("providers: from the mirrors %s; any other from the registry", strings.Join(where, "; "))
}

// userCLIConfig is the CLI configuration file the user set and that exists.
func (s *session) userCLIConfig() string {
	for _, kv := range append(os.Environ(), s.o.Env...) {
		if v, ok := strings.CutPrefix(kv, "TF_CLI_CONFIG_FILE="); ok {
			if _, err := os.Stat(v); err == nil {
				return v
			}
		}
	}
	return ""
}

// configuredBackend is the backend type a root module's terraform block names, or "".
func configuredBackend(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if m := backendBlock.FindSubmatch(b); m != nil {
			return string(m[1]), nil
		}
	}
	return "", nil
}

// adoptStateInSource moves a state an earlier ssfkit (or a hand-run terraform) left in the root
// module to the state directory, so that it is neither lost nor committed.
func adoptStateInSource(dir, state string, progress io.Writer, verb string) error {
	old := filepath.Join(dir, "terraform.tfstate")
	if _, err := os.Stat(old); err != nil {
		return nil
	}
	if _, err := os.Stat(state); err == nil {
		return fmt.Errorf("%s: there is state both in %s and in %s: keep the one that describes what exists, remove the other, and run again", verb, old, state)
	}
	if err := os.Rename(old, state); err != nil {
		return fmt.Errorf("%s: moving the state out of the source tree: %w", verb, err)
	}
	fmt.Fprintf(progress, "%s: moved the state %s to %s\n", verb, old, state)
	return nil
}

// stateArgs are the arguments that point a state-using command at the environment's state.
func (s *session) stateArgs() []string {
	if s.state == "" {
		return nil
	}
	return []string{"-state=" + s.state}
}

func (s *session) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.o.Terraform, args...)
	cmd.Dir = s.o.Dir
	cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1")
	if s.o.Endpoint != "" {
		cmd.Env = append(cmd.Env, "AWS_ENDPOINT_URL="+s.o.Endpoint)
	}
	cmd.Env = append(append(cmd.Env, s.env...), s.o.Env...)
	return cmd
}

// summary are the lines of Terraform's output a progress line repeats: what a plan would do,
// what an apply or destroy did (errors come once, in the error step returns).
var summary = regexp.MustCompile(`^(Plan: |No changes\.|Apply complete!|Destroy complete!)`)

// step runs a terraform command with its whole output in the log; progress gets one line
// when it starts, the summary lines, and one when it ends. A failure returns the command's last
// lines and the log's path.
func (s *session) step(ctx context.Context, n, of int, what string, args ...string) error {
	s.say("[%d/%d] terraform %s", n, of, what)
	fmt.Fprintf(s.log, "\n$ terraform %s    (in %s)\n", strings.Join(args, " "), s.o.Dir)
	start := time.Now()
	cmd := s.command(ctx, args...)
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	tail := make([]string, 0, 25)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.log, line)
			trimmed := strings.TrimSpace(strings.Trim(line, "│╷╵ "))
			if trimmed == "" {
				continue
			}
			if summary.MatchString(trimmed) {
				s.say("  %s", trimmed)
			}
			if len(tail) == cap(tail) {
				tail = tail[1:]
			}
			tail = append(tail, line)
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	err := cmd.Run()
	w.Close()
	<-done
	if err != nil {
		return fmt.Errorf("%s: terraform %s failed (%v); the whole output is in %s; its end:\n%s", s.verb, what, err, s.log.Name(), strings.Join(tail, "\n"))
	}
	s.say("  terraform %s done in %s", what, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// capture runs a terraform command and returns its standard output (its standard error goes to
// the log).
func (s *session) capture(ctx context.Context, args ...string) ([]byte, error) {
	fmt.Fprintf(s.log, "\n$ terraform %s    (in %s; output captured)\n", strings.Join(args, " "), s.o.Dir)
	cmd := s.command(ctx, args...)
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(&stderr, s.log)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: terraform %s: %v\n%s", s.verb, args[0], err, stderr.String())
	}
	return out, nil
}

// hint tells the user how to run Terraform on this environment by hand.
func (s *session) hint() {
	var env []string
	for _, kv := range s.env {
		env = append(env, shellQuote(kv))
	}
	if s.o.Endpoint != "" {
		env = append(env, shellQuote("AWS_ENDPOINT_URL="+s.o.Endpoint))
	}
	state := ""
	if s.state != "" {
		state = " " + shellQuote("-state="+s.state)
	}
	s.say("to run Terraform on it yourself: cd %s && %s terraform plan%s", shellQuote(s.o.Dir), strings.Join(env, " "), state)
}

// shellSafe are the words a shell reads as they are.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
