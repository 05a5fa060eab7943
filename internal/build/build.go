// Package build builds the artifacts the Terraform modules deploy (`ssfkit build`).
package build

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Architectures Lambda runs, as GOARCH values.
var lambdaArch = map[string]string{"arm64": "arm64", "x86_64": "amd64"}

// AWSLambda cross-compiles the main package pkg (an import path, or a ./directory relative to
// dir) for Lambda's provided.al2023 runtime on arch (arm64 or x86_64) and writes a zip holding
// it as the executable `bootstrap` to out. The main package calls lambdahost.Main.
func AWSLambda(ctx context.Context, dir, pkg, arch, out string, progress io.Writer) error {
	goarch, ok := lambdaArch[arch]
	if !ok {
		return fmt.Errorf("build: architecture %q: Lambda runs arm64 or x86_64", arch)
	}
	start := time.Now()
	// lambda.norpc drops the legacy go1.x RPC server, which provided.al2023 never uses.
	bin, cleanup, err := compile(ctx, dir, pkg, goarch, "lambda.norpc", progress)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := writeZip(out, []zipEntry{{name: "bootstrap", path: bin, mode: 0o755}}); err != nil {
		return fmt.Errorf("build: writing %s: %w", out, err)
	}
	fmt.Fprintf(progress, "build: wrote %s (%s)\n", out, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// compile cross-compiles pkg for linux/goarch, statically, into a temporary directory; cleanup
// removes it.
func compile(ctx context.Context, dir, pkg, goarch, tags string, progress io.Writer) (bin string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "ssfkit-build-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	bin = filepath.Join(tmp, "main")
	fmt.Fprintf(progress, "build: compiling %s for linux/%s\n", pkg, goarch)
	args := []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = progress, &stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("build: go build %s: %v\n%s", pkg, err, stderr.String())
	}
	return bin, cleanup, nil
}

// zipEntry is a file of a zip: from the file at path, or with the given content.
type zipEntry struct {
	name    string
	path    string
	content []byte
	mode    os.FileMode
}

// writeZip writes the entries as a zip to out; the zip is written next to out first, so a
// failed build leaves no partial artifact.
func writeZip(out string, entries []zipEntry) error {
	partial := out + ".partial"
	f, err := os.Create(partial)
	if err != nil {
		return err
	}
	defer os.Remove(partial)
	z := zip.NewWriter(f)
	for _, e := range entries {
		if e.path != "" {
			if e.content, err = os.ReadFile(e.path); err != nil {
				break
			}
		}
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		h.SetMode(e.mode)
		var w io.Writer
		if w, err = z.CreateHeader(h); err != nil {
			break
		}
		if _, err = w.Write(e.content); err != nil {
			break
		}
	}
	if err == nil {
		err = z.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(partial, out)
}
