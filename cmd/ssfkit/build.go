package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/ssfkit/ssfkit/internal/build"
)

// lambdaMains are the examples' Lambda bootstraps, for `--app`.
var lambdaMains = map[string]string{
	"bank":   "github.com/ssfkit/ssfkit/examples/bank/lambda",
	"travel": "github.com/ssfkit/ssfkit/examples/travel/lambda",
}

func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("build", "Builds the artifact a cloud's ssf module deploys: for --cloud aws, a zip holding the\n"+
		"Lambda bootstrap of an application (an example with --app, or your own main package,\n"+
		"which calls lambdahost.Main, with --pkg). Needs the Go toolchain.", stderr)
	cloud := fs.String("cloud", "", "the cloud to build for: aws")
	app := fs.String("app", "", "an example application: "+lambdaApps())
	pkg := fs.String("pkg", "", "your application's main package (import path or ./dir)")
	arch := fs.String("arch", "arm64", "aws: the functions' architecture, arm64 or x86_64 (the ssf module's `architecture`)")
	out := fs.String("out", "", "the artifact to write (required), e.g. bank.zip")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	main, err := buildTarget(*app, *pkg)
	if err != nil {
		return usageErr(err)
	}
	if *out == "" {
		return usageErr(fmt.Errorf("--out is required"))
	}
	switch *cloud {
	case "aws":
		dir, err := os.Getwd()
		if err != nil {
			return err
		}
		return build.AWSLambda(ctx, dir, main, *arch, *out, stderr)
	case "azure", "gcp":
		return fmt.Errorf("build: --cloud %s: its function host is not built yet (docs/roadmap.md); aws is", *cloud)
	}
	return usageErr(fmt.Errorf("--cloud must be aws, azure or gcp, not %q", *cloud))
}

func buildTarget(app, pkg string) (string, error) {
	switch {
	case app != "" && pkg != "":
		return "", fmt.Errorf("give --app or --pkg, not both")
	case pkg != "":
		return pkg, nil
	case app == "":
		return "", fmt.Errorf("give --app (%s) or --pkg", lambdaApps())
	}
	main, ok := lambdaMains[app]
	if !ok {
		return "", fmt.Errorf("no example named %q; the examples are %s", app, lambdaApps())
	}
	return main, nil
}

func lambdaApps() string { return strings.Join(slices.Sorted(maps.Keys(lambdaMains)), ", ") }

func usageErr(err error) error { return &cliUsageError{err: fmt.Errorf("build: %w", err)} }
