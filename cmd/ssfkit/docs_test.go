package main

import (
	"bytes"
	"context"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/internal/tftest"
)

// The shell blocks of the README and of the docs whose commands run on this machine: each is
// extracted and run in order, against the emulators, so a doc that drifts from the code fails
// the default test run. A command is run as written, with these changes only:
//   - $PWD is a scratch directory laid out as the repository root (a copy of modules/, so
//     Terraform's lock files and the state stay out of the checkout); `ssfkit build` runs in the
//     checkout, whose code it compiles;
//   - `ssfkit up`/`down --cloud aws` get --endpoint MOTO (and down's question is answered yes);
//   - store and queue URLs of real clouds get the emulator's endpoint (and DynamoDB's
//     serialize=true: moto does not apply a request to an item atomically), and `ssfkit
//     conformance` runs its driver and queue suites only (-suites, a size bound);
//   - the dev server listens on a free port, which later curl commands are sent to.
//
// A command the runner does not know fails the test (teach the runner, or list it in
// notRunHere with the reason); so does one that fails.
var runnableDocs = []string{"README.md", "docs/conformance.md", "docs/stores/dynamodb.md"}

// notRunHere are the commands of runnableDocs this machine cannot run, and why.
var notRunHere = []struct {
	command *regexp.Regexp
	why     string
}{
	{regexp.MustCompile(`^make (test|test-long)$`), "it is the test run itself (CI runs it)"},
	{regexp.MustCompile(`^make demo$`), "the demos it runs are TestDemoEndToEnd, TestTravelDemoEndToEnd and TestTemporalDemo"},
	{regexp.MustCompile(`^ssfkit conformance -store URL \[|^\[-schedules N\]`), "a synopsis, not a command"},
	{regexp.MustCompile(`^ssfkit conformance -store 'postgres://user@db`), "a placeholder server; docs/stores/postgres.md's form runs in the store suites against a throwaway PostgreSQL"},
}

// docCommands returns the shell blocks of a Markdown file as logical command lines: comments
// dropped, continuations joined, `a && b` split.
func docCommands(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllSubmatch(b, -1) {
		var cmds []string
		for _, line := range strings.Split(strings.ReplaceAll(string(m[1]), "\\\n", " "), "\n") {
			line = stripComment(line)
			for _, c := range strings.Split(line, "&&") {
				if c = strings.Join(strings.Fields(c), " "); c != "" {
					cmds = append(cmds, c)
				}
			}
		}
		blocks = append(blocks, cmds)
	}
	return blocks
}

// stripComment drops a # comment outside single quotes.
func stripComment(line string) string {
	quoted := false
	for i, c := range line {
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '#' && !quoted && (i == 0 || line[i-1] == ' '):
			return line[:i]
		}
	}
	return line
}

func TestDocsCommandsRun(t *testing.T) {
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Dir(tftest.CopyModules(t)) // holds modules/, as the repository root does
	r := &docRunner{t: t, root: root, scratch: scratch}
	for _, doc := range runnableDocs {
		for i, block := range docCommands(t, filepath.Join(root, doc)) {
			for _, cmd := range block {
				r.run(doc, i+1, cmd)
			}
			r.endBlock()
		}
	}
	if r.ran+r.deferred < 12 {
		t.Fatalf("only %d commands ran (%d deferred)", r.ran, r.deferred)
	}
	if *docsDeploy == (r.deferred > 0) {
		t.Fatalf("%d deploy commands deferred with -docs.deploy=%v", r.deferred, *docsDeploy)
	}
}

type docRunner struct {
	t             *testing.T
	root, scratch string
	moto          string
	deferred      int    // deploy commands left to -docs.deploy
	dev           string // the dev server's base URL while its block runs
	stopDev       func()
	ran           int
}

func (r *docRunner) run(doc string, block int, cmd string) {
	t := r.t
	where := doc + " block " + strconv.Itoa(block) + ": " + cmd
	for _, n := range notRunHere {
		if n.command.MatchString(cmd) {
			t.Logf("not run here (%s): %s", n.why, where)
			if strings.HasPrefix(cmd, "make ") && !makeTarget(t, r.root, strings.Fields(cmd)[1]) {
				t.Errorf("%s: the Makefile has no such target", where)
			}
			return
		}
	}
	words := shellWords(t, strings.ReplaceAll(cmd, "$PWD", r.scratch))
	switch {
	case words[0] == "curl":
		if r.dev == "" {
			t.Fatalf("%s: no dev server runs in this block", where)
		}
		req := curlCommands(t, strings.Join(quoteAll(words), " "))[0]
		if status, _, body := req.send(t, r.dev); status != 200 || strings.Contains(body, `"error"`) {
			t.Fatalf("%s: %d %s", where, status, body)
		}
	case len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/ssfkit":
		if !r.ssfkit(where, words[3:]) {
			return
		}
	case words[0] == "ssfkit":
		if !r.ssfkit(where, words[1:]) {
			return
		}
	default:
		t.Fatalf("%s: this test does not know how to run it: teach docs_test.go, or list it in notRunHere with the reason", where)
	}
	r.ran++
	t.Logf("ran: %s", where)
}

// docsDeploy runs the README's deploy commands (build, up and down on moto) too: about 200 s.
// By default they are left to `make test-long`, since TestAWS (tests/terraform) builds, applies
// and destroys the same bank example on moto in every run, with more checks.
var docsDeploy = flag.Bool("docs.deploy", false, "also run the docs' `ssfkit build/up/down --cloud aws` commands against moto")

// ssfkit runs one ssfkit command of a doc, and reports whether it ran (or was deferred).
func (r *docRunner) ssfkit(where string, args []string) bool {
	t := r.t
	if len(args) == 0 {
		t.Fatalf("%s: no subcommand", where)
	}
	ctx := context.Background()
	cloudAWS := slicesContainsPair(args, "--cloud", "aws")
	if cloudAWS && !*docsDeploy && slices.Contains([]string{"build", "up", "down"}, args[0]) {
		t.Logf("%s: left to make test-long (-docs.deploy); TestAWS deploys the same example on moto", where)
		r.deferred++
		return false
	}
	switch args[0] {
	case "dev":
		t.Chdir(r.scratch)
		if !slices.Contains(args, "--config") {
			args = append(args, "--store", "sqlite://"+filepath.Join(t.TempDir(), "dev.db"))
		}
		r.dev, _, r.stopDev = startDev(t, args[1:]...)
		return true
	case "build":
		t.Chdir(r.root) // it compiles the checkout
	case "up", "down":
		t.Chdir(r.scratch)
		if cloudAWS {
			for k, v := range testservers.MotoEnv {
				t.Setenv(k, v)
			}
			args = append(args, "--endpoint", r.motoAddr())
		}
		if args[0] == "down" {
			stdin = strings.NewReader("y\n")
			defer func() { stdin = os.Stdin }()
		}
	case "conformance":
		t.Chdir(r.scratch)
		args = r.emulated(args)
	default:
		t.Chdir(r.scratch)
	}
	var stdout, stderr bytes.Buffer
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("%s: %v\n%s%s", where, err, stdout.String(), stderr.String())
	}
	if args[0] == "down" && cloudAWS {
		left, err := testservers.MotoResidue(r.motoAddr(), "bank")
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Fatalf("%s: moto still has:\n%s", where, strings.Join(left, "\n"))
		}
	}
	return true
}

// emulated points conformance's cloud URLs at the emulators and bounds its suites.
func (r *docRunner) emulated(args []string) []string {
	out := []string{args[0]}
	suites := []string{}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if (a == "-store" || a == "-queue") && i+1 < len(args) {
			u := args[i+1]
			switch {
			case strings.HasPrefix(u, "dynamodb://"), strings.HasPrefix(u, "sqs://"):
				for k, v := range testservers.MotoEnv {
					r.t.Setenv(k, v)
				}
				u += "&endpoint=" + url.QueryEscape(r.motoAddr())
				if strings.HasPrefix(u, "dynamodb://") {
					u += "&serialize=true" // moto does not apply a request to an item atomically
				}
			case strings.HasPrefix(u, "sqlite:///tmp/"):
				u = "sqlite://" + filepath.Join(r.t.TempDir(), strings.TrimPrefix(u, "sqlite:///tmp/"))
			}
			if a == "-store" {
				suites = append(suites, "driver")
			} else {
				suites = append(suites, "queue")
			}
			out = append(out, a, u)
			i++
			continue
		}
		out = append(out, a)
	}
	return append(out, "-suites", strings.Join(suites, ","))
}

func (r *docRunner) motoAddr() string {
	if r.moto == "" {
		r.moto = testservers.Moto.Addr(r.t)
	}
	return r.moto
}

func (r *docRunner) endBlock() {
	if r.stopDev != nil {
		r.stopDev()
		r.dev, r.stopDev = "", nil
	}
}

func makeTarget(t *testing.T, root, target string) bool {
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(b)
}

func slicesContainsPair(args []string, flag, value string) bool {
	for i := range args {
		if args[i] == flag && i+1 < len(args) && args[i+1] == value || args[i] == flag+"="+value {
			return true
		}
	}
	return false
}

// quoteAll quotes each word for shellWords.
func quoteAll(words []string) []string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + w + "'"
	}
	return q
}
