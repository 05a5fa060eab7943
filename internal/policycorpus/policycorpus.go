// Package policycorpus reads the corpus of real plans the policies are checked on
// (policies/testdata/corpus): per cloud, root modules of a base (one SSF of the kit's ssf module,
// _base; or a coordination service of its coordination module, _coordination) plus one
// violation each, with what the policies must say of them and the plan a real provider made.
//
// It imports only the standard library.
package policycorpus

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
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
	// Base is the directory beside the case whose base.tf the case adds its violation to:
	// DefaultBase, or the one its file "base" names (e.g. _coordination).
	Base string
}

// DefaultBase is the base of a case without a "base" file: one SSF of the ssf module.
const DefaultBase = "_base"

// A Denial names a rule (a package of policies/ssfkit) and the resource it denies.
type Denial struct{ Rule, Address string }

// Prefix is how a verdict's message about the denial starts.
func (d Denial) Prefix() string { return fmt.Sprintf("[%s] %s:", d.Rule, d.Address) }

// Sources are a case's own files its plan is made from (relative to its directory), in the
// order they are hashed.
func (c Case) Sources() []string {
	return []string{"../" + c.Base + "/base.tf", "main.tf", "apply-first", "base"}
}

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
		c.Base = DefaultBase
		base, err := readLines(filepath.Join(dir, "base"))
		switch {
		case err != nil && !os.IsNotExist(err):
			return nil, err
		case len(base) > 1 || len(base) == 1 && !strings.HasPrefix(base[0], "_"):
			return nil, fmt.Errorf("policycorpus: case %s/%s: its base file must name one _DIRECTORY beside it, not %q", c.Cloud, c.Name, base)
		case len(base) == 1:
			c.Base = base[0]
		}
		if _, err := os.Stat(filepath.Join(dir, "..", c.Base, "base.tf")); err != nil {
			return nil, fmt.Errorf("policycorpus: case %s/%s: %w", c.Cloud, c.Name, err)
		}
		cases = append(cases, c)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Cloud+"/"+cases[i].Name < cases[j].Cloud+"/"+cases[j].Name })
	return cases, nil
}

// SourceHash is the hash of the case's sources as they are now: its files, and the kit's
// modules it instantiates, directly or through another module (their .tf files, not their
// tests or examples), so that a recorded plan is of the modules as they are shipped, and a
// module the case does not use changes nothing.
func (c Case) SourceHash() (string, error) {
	h := sha256.New()
	files := c.Sources()
	modules, err := c.modules()
	if err != nil {
		return "", fmt.Errorf("policycorpus: the modules of case %s/%s: %w", c.Cloud, c.Name, err)
	}
	for _, m := range modules {
		entries, err := os.ReadDir(m)
		if err != nil {
			return "", fmt.Errorf("policycorpus: the modules of case %s/%s: %w", c.Cloud, c.Name, err)
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".tf") {
				rel, err := filepath.Rel(c.Dir, filepath.Join(m, e.Name()))
				if err != nil {
					return "", err
				}
				files = append(files, filepath.ToSlash(rel))
			}
		}
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

// localSource matches a module call's local source.
var localSource = regexp.MustCompile(`(?m)^\s*source\s*=\s*"(\.\.?/[^"]*)"`)

// modules are the directories of the local modules the case calls, and those they call, sorted.
func (c Case) modules() ([]string, error) {
	seen := map[string]bool{}
	var visit func(dir string, files []string) error
	visit = func(dir string, files []string) error {
		for _, f := range files {
			b, err := os.ReadFile(f)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return err
			}
			for _, m := range localSource.FindAllSubmatch(b, -1) {
				mod := filepath.Clean(filepath.Join(dir, string(m[1])))
				if seen[mod] {
					continue
				}
				seen[mod] = true
				tf, err := filepath.Glob(filepath.Join(mod, "*.tf"))
				if err != nil {
					return err
				}
				if len(tf) == 0 {
					return fmt.Errorf("module %s has no .tf file", mod)
				}
				if err := visit(mod, tf); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// A base's sources are relative to its directory, which is beside the case's.
	if err := visit(c.Dir, []string{filepath.Join(c.Dir, "..", c.Base, "base.tf"), filepath.Join(c.Dir, "main.tf")}); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(seen)), nil
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
