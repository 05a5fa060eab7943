package build

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// The Azure Functions app of an SSF (modules/azure/ssf): a custom handler serving the SSF's
// HTTP routes, its queue and the two collectors' timers, all bound through app settings so one
// artifact serves every SSF of an application (docs/modules.md).
var azureHost = map[string]any{
	"version": "2.0",
	"customHandler": map[string]any{
		"description":                 map[string]any{"defaultExecutablePath": "handler", "workingDirectory": "", "arguments": []string{}},
		"enableForwardingHttpRequest": true,
	},
	"extensionBundle": map[string]string{"id": "Microsoft.Azure.Functions.ExtensionBundle", "version": "[4.*, 5.0.0)"},
	"extensions":      map[string]any{"http": map[string]string{"routePrefix": "api"}},
}

func azureHTTPFunction(route string) map[string]any {
	return map[string]any{"bindings": []map[string]any{
		{"type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "function", "methods": []string{"post"}, "route": route},
		{"type": "http", "direction": "out", "name": "res"},
	}}
}

func azureTimerFunction(scheduleSetting string) map[string]any {
	return map[string]any{"bindings": []map[string]any{
		{"type": "timerTrigger", "direction": "in", "name": "timer", "schedule": "%" + scheduleSetting + "%", "runOnStartup": false, "useMonitor": true},
	}}
}

var azureFunctions = map[string]map[string]any{
	"ssf":   azureHTTPFunction("ssf"),
	"spawn": azureHTTPFunction("spawn"),
	// The binding is named "message": httphost reads Data.message.
	"queue": {"bindings": []map[string]any{
		{"type": "queueTrigger", "direction": "in", "name": "message", "queueName": "%SSFKIT_QUEUE_NAME%", "connection": "SSFKIT_QUEUE_CONNECTION"},
	}},
	"intent-collector":  azureTimerFunction("SSFKIT_INTENT_COLLECTOR_SCHEDULE"),
	"garbage-collector": azureTimerFunction("SSFKIT_GARBAGE_COLLECTOR_SCHEDULE"),
}

// azureCoordinationFunctions are the coordination service's function app's
// (modules/azure/coordination, adapters/host/coordhost/http): the writer on the requests' queue
// and the heartbeat on its timer.
var azureCoordinationFunctions = map[string]map[string]any{
	"queue":     azureFunctions["queue"],
	"heartbeat": azureTimerFunction("SSFKIT_HEARTBEAT_SCHEDULE"),
}

// AzureFunctions cross-compiles the main package pkg (which calls httphost.Main with
// httphost.Azure) for linux/amd64, the architecture of Azure's Linux function apps, and writes
// the function app's zip to out: host.json, the `handler` executable, and a function.json per
// function.
func AzureFunctions(ctx context.Context, dir, pkg, out string, progress io.Writer) error {
	return azureApp(ctx, dir, pkg, out, azureFunctions, progress)
}

// AzureCoordination is AzureFunctions for the coordination service's function app, from
// pkg (./adapters/host/coordhost/http).
func AzureCoordination(ctx context.Context, dir, pkg, out string, progress io.Writer) error {
	return azureApp(ctx, dir, pkg, out, azureCoordinationFunctions, progress)
}

func azureApp(ctx context.Context, dir, pkg, out string, functions map[string]map[string]any, progress io.Writer) error {
	start := time.Now()
	bin, cleanup, err := compile(ctx, dir, pkg, "amd64", "", progress)
	if err != nil {
		return err
	}
	defer cleanup()
	hostJSON, _ := json.MarshalIndent(azureHost, "", "  ")
	entries := []zipEntry{{name: "host.json", content: hostJSON, mode: 0o644}, {name: "handler", path: bin, mode: 0o755}}
	for _, name := range slices.Sorted(maps.Keys(functions)) {
		b, _ := json.MarshalIndent(functions[name], "", "  ")
		entries = append(entries, zipEntry{name: name + "/function.json", content: b, mode: 0o644})
	}
	if err := writeZip(out, entries); err != nil {
		return fmt.Errorf("build: writing %s: %w", out, err)
	}
	fmt.Fprintf(progress, "build: wrote %s (%s)\n", out, time.Since(start).Round(100*time.Millisecond))
	return nil
}
