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
