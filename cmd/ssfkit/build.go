package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ssfkit/ssfkit/internal/apps"
	"github.com/ssfkit/ssfkit/internal/build"
	"github.com/ssfkit/ssfkit/internal/deploy"
)

func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("build", "Builds the artifact a cloud's ssf module deploys, from an application's main package\n"+
		"(an example with --app, or your own with --pkg):\n"+
		"  aws    a zip holding the Lambda bootstrap (the main calls lambdahost.Main)\n"+
		"  azure  the function app's zip: host.json, function.json files, the custom handler\n"+
		"         (the main calls httphost.Main(httphost.Azure, ...))\n"+
		"  gcp    a container image for Cloud Run (the main calls httphost.Main(httphost.CloudRun, ...)),\n"+
		"         written with --out as a tarball and/or pushed with --push; its digest\n"+
		"         reference is printed for the ssf module's artifact\n"+
		"With --coordination, the coordination service's functions instead (the writer and the\n"+
		"heartbeat), the artifact of modules/<cloud>/coordination (docs/coordination.md).\n"+
		"Needs the Go toolchain.", stderr)
	cloud := fs.String("cloud", "", "the cloud to build for: aws, azure or gcp")
	app := fs.String("app", "", "an example application: "+strings.Join(apps.Names(), ", "))
	pkg := fs.String("pkg", "", "your application's main package (import path or ./dir)")
	coordination := fs.Bool("coordination", false, "build the coordination service's functions (no --app or --pkg)")
	arch := fs.String("arch", "arm64", "aws: the functions' architecture, arm64 or x86_64 (the ssf module's `architecture`)")
	image := fs.String("image", "", "gcp: the image reference, e.g. europe-west1-docker.pkg.dev/PROJECT/REPO/bank:v1")
	push := fs.Bool("push", false, "gcp: push the image to its registry (Docker config or Google credentials)")
	out := fs.String("out", "", "the artifact to write, e.g. bank.zip (gcp: an image tarball, optional with --push)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dirName, ok := deploy.HostDir(*cloud)
	if !ok {
		return usageErr(fmt.Errorf("--cloud must be aws, azure or gcp, not %q", *cloud))
	}
	var main string
	var err error
	switch {
	case *coordination && (*app != "" || *pkg != ""):
		return usageErr(fmt.Errorf("--coordination builds ssfkit's own functions: give no --app or --pkg with it"))
	case *coordination:
		main = coordinationMain(*cloud)
	default:
		if main, err = buildTarget(*app, *pkg, dirName); err != nil {
			return usageErr(err)
		}
	}
	if *out == "" && !(*cloud == "gcp" && *push) {
		return usageErr(fmt.Errorf("--out is required"))
	}
	if *cloud == "gcp" && *image == "" {
		return usageErr(fmt.Errorf("--cloud gcp needs --image (the reference the image is tagged and pushed as)"))
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	switch *cloud {
	case "aws":
		return build.AWSLambda(ctx, dir, main, *arch, *out, stderr)
	case "azure":
		if *coordination {
			return build.AzureCoordination(ctx, dir, main, *out, stderr)
		}
		return build.AzureFunctions(ctx, dir, main, *out, stderr)
	}
	digestRef, err := build.CloudRunImage(ctx, dir, main, *image, *out, *push, stderr)
	if err == nil {
		fmt.Fprintln(stdout, digestRef)
	}
	return err
}

// coordinationMain is the main package of the coordination service's functions on cloud: the
// Lambda bootstrap, or the HTTP server Azure Functions and Cloud Run run.
func coordinationMain(cloud string) string {
	if cloud == "aws" {
		return "github.com/ssfkit/ssfkit/adapters/host/coordhost/lambda"
	}
	return "github.com/ssfkit/ssfkit/adapters/host/coordhost/http"
}

func buildTarget(app, pkg, dirName string) (string, error) {
	switch {
	case app != "" && pkg != "":
		return "", fmt.Errorf("give --app or --pkg, not both")
	case pkg != "":
		return pkg, nil
	case app == "":
		return "", fmt.Errorf("give --app (%s) or --pkg", strings.Join(apps.Names(), ", "))
	}
	a, ok := apps.Lookup(app)
	if !ok {
		return "", fmt.Errorf("no example named %q; the examples are %s", app, strings.Join(apps.Names(), ", "))
	}
	return a.MainPackage(dirName), nil
}

func usageErr(err error) error { return &cliUsageError{err: fmt.Errorf("build: %w", err)} }
