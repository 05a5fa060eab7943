package policycorpus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A corpus of two cases, one on each base, and the modules they call: each case's hash follows
// its own files and the modules it instantiates, directly or through another module, and no
// other module.
func TestLoadAndSourceHash(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	corpus := filepath.Join("policies", "testdata", "corpus", "aws")
	write(filepath.Join(corpus, "_base", "base.tf"), `module "ssf" {
  source = "../../../../../modules/aws/ssf"
}
`)
	write(filepath.Join(corpus, "_coordination", "base.tf"), `module "coordination" {
  source = "../../../../../modules/aws/coordination"
}
`)
	write(filepath.Join(corpus, "ssf-case", "main.tf"), "# a violation\n")
	write(filepath.Join(corpus, "ssf-case", "expect"), "# what is denied\naccess aws_iam_role.x\n")
	write(filepath.Join(corpus, "coord-case", "main.tf"), "# a violation\n")
	write(filepath.Join(corpus, "coord-case", "expect"), "public aws_s3_bucket.x\n")
	write(filepath.Join(corpus, "coord-case", "base"), "_coordination\n")
	write(filepath.Join("modules", "aws", "ssf", "main.tf"), "# the ssf module\n")
	write(filepath.Join("modules", "aws", "coordination", "main.tf"), `module "inner" {
  source = "../inner"
}
`)
	write(filepath.Join("modules", "aws", "inner", "main.tf"), "# called by coordination\n")
	write(filepath.Join("modules", "aws", "inner", "tests", "x.tftest.hcl"), "# not hashed\n")

	cases, err := Load(filepath.Join(root, "policies", "testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || cases[0].Name != "coord-case" || cases[0].Base != "_coordination" || cases[1].Base != DefaultBase {
		t.Fatalf("cases %+v", cases)
	}
	if e := cases[1].Expect; len(e) != 1 || e[0].Prefix() != "[access] aws_iam_role.x:" {
		t.Fatalf("expect %+v", e)
	}
	hashes := func() (coord, ssf string) {
		t.Helper()
		c, err := cases[0].SourceHash()
		if err != nil {
			t.Fatal(err)
		}
		s, err := cases[1].SourceHash()
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	coord, ssf := hashes()
	for _, change := range []struct {
		file              string
		coordChanges, ssf bool
	}{
		{filepath.Join("modules", "aws", "inner", "main.tf"), true, false},
		{filepath.Join("modules", "aws", "ssf", "main.tf"), false, true},
		{filepath.Join("modules", "aws", "other", "main.tf"), false, false}, // a new module
		{filepath.Join("modules", "aws", "inner", "tests", "x.tftest.hcl"), false, false},
		{filepath.Join(corpus, "_coordination", "base.tf"), true, false},
		{filepath.Join(corpus, "coord-case", "main.tf"), true, false},
	} {
		b, _ := os.ReadFile(filepath.Join(root, change.file))
		write(change.file, string(b)+"# changed\n")
		c, s := hashes()
		if (c != coord) != change.coordChanges || (s != ssf) != change.ssf {
			t.Errorf("after a change to %s: the coordination case's hash changed %v (want %v), the ssf case's %v (want %v)", change.file, c != coord, change.coordChanges, s != ssf, change.ssf)
		}
		coord, ssf = c, s
	}

	write(filepath.Join(corpus, "coord-case", "base"), "coordination\n")
	if _, err := Load(filepath.Join(root, "policies", "testdata", "corpus")); err == nil || !strings.Contains(err.Error(), "_DIRECTORY") {
		t.Errorf("a base not starting with _: %v", err)
	}
	write(filepath.Join(corpus, "coord-case", "base"), "_missing\n")
	if _, err := Load(filepath.Join(root, "policies", "testdata", "corpus")); err == nil {
		t.Errorf("a base that does not exist was accepted")
	}
}
