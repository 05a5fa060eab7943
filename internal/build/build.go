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
	tmp, err := os.MkdirTemp("", "ssfkit-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bootstrap")
	start := time.Now()
	fmt.Fprintf(progress, "build: compiling %s for linux/%s\n", pkg, goarch)
	// lambda.norpc drops the legacy go1.x RPC server, which provided.al2023 never uses.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", "lambda.norpc", "-ldflags", "-s -w", "-o", bin, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = progress, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build: go build %s: %v\n%s", pkg, err, stderr.String())
	}
	if err := zipExecutable(bin, "bootstrap", out); err != nil {
		return fmt.Errorf("build: writing %s: %w", out, err)
	}
	fmt.Fprintf(progress, "build: wrote %s (%s)\n", out, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// zipExecutable writes a zip holding the file at path as name, executable, to out; the zip is
// written next to out first, so a failed build leaves no partial artifact.
func zipExecutable(path, name, out string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	partial := out + ".partial"
	f, err := os.Create(partial)
	if err != nil {
		return err
	}
	defer os.Remove(partial)
	z := zip.NewWriter(f)
	h := &zip.FileHeader{Name: name, Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := z.CreateHeader(h)
	if err == nil {
		_, err = w.Write(b)
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
