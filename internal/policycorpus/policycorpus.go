// Package policycorpus reads the corpus of real plans the policies are checked on
// (policies/testdata/corpus): per cloud, root modules of one SSF of the kit's module plus one
// violation each, with what the policies must say of them and the plan a real provider made.
//
// It imports only the standard library.
package policycorpus

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// A Case is one root module of the corpus, in Dir (policies/testdata/corpus/CLOUD/NAME).
type Case struct {
	Cloud, Name, Dir string
	// Expect lists the denials the policies must make: rule and resource address, as in
	// "[sovereignty] aws_iam_role_policy.extra: ...".
	Expect []Denial
	// ApplyFirst holds -var arguments: the case is applied as it is, then planned with them (a
	// replacement needs state).
	ApplyFirst []string
}

// A Denial names a rule (a package of policies/ssfkit) and the resource it denies.
type Denial struct{ Rule, Address string }

// Prefix is how a verdict's message about the denial starts.
func (d Denial) Prefix() string { return fmt.Sprintf("[%s] %s:", d.Rule, d.Address) }

// Sources are a case's own files its plan is made from, in the order they are hashed.
var Sources = []string{"../_base/base.tf", "main.tf", "apply-first"}

// PlanFile and HashFile hold the plan (`terraform show -json`) and the hash of the sources it
// was made from.
const (
	PlanFile = "plan.json"
	HashFile = "plan.sha256"
)

// Load reads every case under root (policies/testdata/corpus).
func Load(root string) ([]Case, error) {
	dirs, err := filepath.Glob(filepath.Join(root, "*", "*", "main.tf"))
	if err != nil {
		return nil, err
	}
	var cases []Case
	for _, main := range dirs {
		dir := filepath.Dir(main)
		c := Case{Cloud: filepath.Base(filepath.Dir(dir)), Name: filepath.Base(dir), Dir: dir}
		if strings.HasPrefix(c.Name, "_") {
			continue
		}
		lines, err := readLines(filepath.Join(dir, "expect"))
		if err != nil {
			return nil, fmt.Errorf("policycorpus: case %s/%s: %w", c.Cloud, c.Name, err)
		}
		for _, l := range lines {
			rule, addr, ok := strings.Cut(l, " ")
			if !ok {
				return nil, fmt.Errorf("policycorpus: case %s/%s: expect line %q is not RULE ADDRESS", c.Cloud, c.Name, l)
			}
			c.Expect = append(c.Expect, Denial{rule, addr})
		}
		if len(c.Expect) == 0 {
			return nil, fmt.Errorf("policycorpus: case %s/%s expects no denial", c.Cloud, c.Name)
		}
		if c.ApplyFirst, err = readLines(filepath.Join(dir, "apply-first")); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		cases = append(cases, c)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Cloud+"/"+cases[i].Name < cases[j].Cloud+"/"+cases[j].Name })
	return cases, nil
}

// SourceHash is the hash of the case's sources as they are now: its files, and the cloud's
// modules it instantiates (their .tf files, not their tests or examples), so that a recorded
// plan is of the modules as they are shipped.
func (c Case) SourceHash() (string, error) {
	h := sha256.New()
	files := slices.Clone(Sources)
	modules := filepath.Join(c.Dir, "..", "..", "..", "..", "..", "modules", c.Cloud)
	err := filepath.WalkDir(modules, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "tests" || d.Name() == "examples" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".tf") {
			rel, err := filepath.Rel(c.Dir, path)
			files = append(files, filepath.ToSlash(rel))
			return err
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("policycorpus: the modules of case %s/%s: %w", c.Cloud, c.Name, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(c.Dir, name))
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := strings.TrimSpace(s.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines, s.Err()
}
