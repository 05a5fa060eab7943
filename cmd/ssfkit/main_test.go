package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		status     int
		stdout     string // substring
		stderrPart string
	}{
		{args: nil, status: 0, stdout: "Commands:"},
		{args: []string{"help"}, status: 0, stdout: "bench"},
		{args: []string{"help", "demo"}, status: 0, stderrPart: "-crash-rate"},
		{args: []string{"frobnicate"}, status: 2, stderrPart: `unknown command "frobnicate"`},
		{args: []string{"demo", "--no-such-flag"}, status: 2, stderrPart: "flag provided but not defined"},
		{args: []string{"demo", "extra"}, status: 2, stderrPart: `unknown application "extra"`},
		{args: []string{"demo", "travel", "extra"}, status: 2, stderrPart: "takes no arguments"},
		{args: []string{"demo", "travel", "--capacity", "0"}, status: 2, stderrPart: "--capacity 0"},
		{args: []string{"demo", "travel", "-h"}, status: 0, stderrPart: "-reservations"},
		{args: []string{"dev", "--app", "shop"}, status: 2, stderrPart: `--app "shop"`},
		{args: []string{"demo", "--crash-rate", "1.5"}, status: 2, stderrPart: "--crash-rate 1.5"},
		{args: []string{"dev", "--addr", "0.0.0.0:8080"}, status: 2, stderrPart: "--public"},
		{args: []string{"worker", "--app", "shop"}, status: 2, stderrPart: `--app "shop"`},
		{args: []string{"worker", "--temporal", "off"}, status: 2, stderrPart: "--temporal off is only for dev: the worker needs a Temporal cluster's HOST:PORT"},
		{args: []string{"worker", "--temporal", "embedded"}, status: 2, stderrPart: "--temporal embedded is only for dev"},
		{args: []string{"worker", "--temporal", "temporal.example.com"}, status: 2, stderrPart: `--temporal "temporal.example.com": want the cluster's HOST:PORT`},
		{args: []string{"worker", "--tls-cert", "c.pem"}, status: 2, stderrPart: "--tls-cert and --tls-key go together"},
		{args: []string{"worker", "--tls-ca", "/no/such/ca.pem"}, status: 2, stderrPart: "--tls-ca"},
		{args: []string{"demo", "temporal", "--kills", "-1"}, status: 2, stderrPart: "--kills"},
		{args: []string{"help", "worker"}, status: 0, stderrPart: "-api-key"},
		{args: []string{"build", "--cloud", "aws", "--out", "x.zip"}, status: 2, stderrPart: "give --app (bank, travel) or --pkg"},
		{args: []string{"build", "--cloud", "aws", "--app", "shop", "--out", "x.zip"}, status: 2, stderrPart: `no example named "shop"`},
		{args: []string{"build", "--cloud", "aws", "--app", "bank"}, status: 2, stderrPart: "--out is required"},
		{args: []string{"build", "--cloud", "ibm", "--app", "bank", "--out", "x.zip"}, status: 2, stderrPart: `not "ibm"`},
		{args: []string{"build", "--cloud", "gcp", "--app", "bank", "--out", "x.tar"}, status: 2, stderrPart: "--cloud gcp needs --image"},
		{args: []string{"build", "--cloud", "gcp", "--app", "bank", "--image", "Not A Ref", "--out", "x.tar"}, status: 1, stderrPart: `image reference "Not A Ref"`},
		{args: []string{"build", "--cloud", "aws", "--app", "bank", "--arch", "mips", "--out", "x.zip"}, status: 1, stderrPart: `architecture "mips"`},
		{args: []string{"build", "--cloud", "aws", "--coordination", "--app", "bank", "--out", "x.zip"}, status: 2, stderrPart: "give no --app or --pkg with it"},
		{args: []string{"log"}, status: 2, stderrPart: "give an action first"},
		{args: []string{"log", "tail"}, status: 2, stderrPart: `unknown action "tail"`},
		{args: []string{"help", "log"}, status: 0, stderrPart: "collect"},
		{args: []string{"log", "read", "-tenant", "t", "-color", "c"}, status: 2, stderrPart: "-store is required"},
		{args: []string{"log", "read", "-store", "mem://", "-tenant", "t"}, status: 2, stderrPart: "-color is required"},
		{args: []string{"log", "trim", "-store", "mem://", "-tenant", "t", "-color", "c"}, status: 2, stderrPart: "-upto is required"},
		{args: []string{"log", "colors", "-store", "mem://", "-tenant", "a|b"}, status: 2, stderrPart: `tenant "a|b"`},
		{args: []string{"log", "colors", "-store", "nosuch://x", "-tenant", "t"}, status: 1, stderrPart: "nosuch"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, &stdout, &stderr)
		// The flag package writes usage to os.Stderr; the rest goes to the buffers.
		status := exitStatus(err, &stderr)
		if status != tc.status {
			t.Errorf("ssfkit %q: exit status %d, want %d (err %v)", tc.args, status, tc.status, err)
		}
		if !strings.Contains(stdout.String(), tc.stdout) {
			t.Errorf("ssfkit %q: stdout lacks %q:\n%s", tc.args, tc.stdout, stdout.String())
		}
		if tc.stderrPart != "" && !strings.Contains(stderr.String()+errString(err), tc.stderrPart) {
			t.Errorf("ssfkit %q: stderr lacks %q:\n%s (err %v)", tc.args, tc.stderrPart, stderr.String(), err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The help lists every command with its variants, from the commands table; every command and
// every variant answers -h (and `ssfkit help COMMAND [VARIANT]`) with its usage, exit status 0,
// and every flag it lists says what it does.
func TestHelpListsEveryCommandAndVariant(t *testing.T) {
	var help bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &help, &help); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ssfkit demo [bank|travel|temporal]", "ssfkit log colors|read|trim|collect", "ssfkit policy check",
		"ssfkit bench ops|daal|travel|backends|temporal|log", "ssfkit up --cloud local|aws|azure|gcp", "ssfkit down --cloud local|aws|azure|gcp",
		".ssfkit/temporal.db", "127.0.0.1:7233"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("the help lacks %q:\n%s", want, help.String())
		}
	}
	for _, c := range commands {
		if !strings.Contains(help.String(), "  "+c.usageLine()+"\n") {
			t.Errorf("the help lacks the command %s (%q):\n%s", c.name, c.usageLine(), help.String())
		}
		if c.name == "help" {
			continue
		}
		invocations := [][]string{{c.name, "-h"}, {"help", c.name}}
		if c.variants != nil {
			for _, v := range c.variants() {
				if !strings.Contains(c.usageLine(), v) {
					t.Errorf("%s's usage line %q lacks its variant %s", c.name, c.usageLine(), v)
				}
				invocations = append(invocations, []string{c.name, v, "-h"}, []string{"help", c.name, v})
			}
		}
		for _, args := range invocations {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), args, &stdout, &stderr)
			if status := exitStatus(err, &stderr); status != 0 {
				t.Errorf("ssfkit %q: exit status %d, want 0 (err %v)\n%s", args, status, err, stderr.String())
			}
			usage := stdout.String() + stderr.String()
			want := "Usage: ssfkit " + c.name
			if len(args) == 3 { // a variant's own usage; the optional default's is the command's
				v := args[1]
				if args[0] == "help" {
					v = args[2]
				}
				if !strings.Contains(usage, want+" ["+v+"|") {
					want += " " + v
				}
			}
			if !strings.Contains(usage, want) {
				t.Errorf("ssfkit %q printed no usage %q:\n%s", args, want, usage)
			}
			// The flag package's format: "  -name TYPE" then "    \tdescription", or
			// "  -x\tdescription" for a one-letter bool.
			_, flags, _ := strings.Cut(usage, "\nFlags:\n")
			lines := strings.Split(flags, "\n")
			for i, line := range lines {
				if strings.HasPrefix(line, "  -") && !strings.Contains(line, "\t") &&
					(i+1 == len(lines) || !strings.HasPrefix(lines[i+1], "    \t") || strings.TrimSpace(lines[i+1]) == "") {
					t.Errorf("ssfkit %q: flag %q has no description", args, strings.TrimSpace(line))
				}
			}
		}
	}
}
