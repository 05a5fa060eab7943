package build

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/google"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageEntrypoint is where the SSF host lives in the container image.
const imageEntrypoint = "/ssfkit-host"

// CloudRunImage cross-compiles the main package pkg (which calls httphost.Main with
// httphost.CloudRun) for linux/amd64 and builds a container image holding only it: the
// executable is static and carries its own CA roots (the mains import x509roots/fallback), so
// the image needs no base. ref names the image (e.g.
// europe-west1-docker.pkg.dev/PROJECT/REPO/bank:v1); the image is written to out as a tarball
// (`docker load`, `crane push`) when out is set, and pushed to ref's registry when push is set,
// with the credentials of the Docker config or Google's Application Default Credentials. It
// returns the image's digest reference, which the ssf module's artifact should name.
func CloudRunImage(ctx context.Context, dir, pkg, ref, out string, push bool, progress io.Writer) (string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("build: image reference %q: %w", ref, err)
	}
	if out == "" && !push {
		return "", fmt.Errorf("build: nowhere to put the image: give --out FILE.tar, --push, or both")
	}
	start := time.Now()
	bin, cleanup, err := compile(ctx, dir, pkg, "amd64", "", progress)
	if err != nil {
		return "", err
	}
	defer cleanup()
	img, err := singleExecutableImage(bin)
	if err != nil {
		return "", fmt.Errorf("build: image: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	if out != "" {
		partial := out + ".partial"
		defer os.Remove(partial)
		if err := tarball.WriteToFile(partial, tag, img); err != nil {
			return "", fmt.Errorf("build: writing %s: %w", out, err)
		}
		if err := os.Rename(partial, out); err != nil {
			return "", err
		}
		fmt.Fprintf(progress, "build: wrote %s\n", out)
	}
	if push {
		keychain := authn.NewMultiKeychain(authn.DefaultKeychain, google.Keychain)
		if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain)); err != nil {
			return "", fmt.Errorf("build: pushing %s: %w", tag, err)
		}
		fmt.Fprintf(progress, "build: pushed %s\n", tag)
	}
	digestRef := tag.Context().Digest(digest.String()).String()
	fmt.Fprintf(progress, "build: image %s (%s)\n", digestRef, time.Since(start).Round(100*time.Millisecond))
	return digestRef, nil
}

// singleExecutableImage is an image whose one layer holds the executable at imageEntrypoint.
func singleExecutableImage(bin string) (v1.Image, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: imageEntrypoint[1:], Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(b); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint = []string{imageEntrypoint}
	cfg.Config.User = "65532" // not root: the host needs no privileges
	return mutate.ConfigFile(img, cfg)
}
