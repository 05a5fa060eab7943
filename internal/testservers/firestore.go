package testservers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Firestore is the official Cloud Firestore emulator (native mode, in memory); Addr returns its
// HOST:PORT, what firestore:// URLs take as emulator= and FIRESTORE_EMULATOR_HOST holds. It
// starts in about two seconds.
var Firestore = &Server{Name: "Firestore emulator", Start: startFirestore}

const firestoreInstall = "the Firestore emulator ships with the Google Cloud CLI: run `gcloud components install cloud-firestore-emulator`, " +
	"or install the Debian/Ubuntu package google-cloud-cli-firestore-emulator; it needs Java 11 or later on PATH"

// firestoreLauncher finds the emulator's launcher script: on PATH, else in the Cloud SDK that
// the gcloud on PATH belongs to (gcloud is usually a symlink into it).
func firestoreLauncher() (string, error) {
	const name = "cloud_firestore_emulator"
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return "", fmt.Errorf("neither %s nor gcloud is on PATH: %s", name, firestoreInstall)
	}
	if gcloud, err = filepath.EvalSymlinks(gcloud); err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(filepath.Dir(gcloud)), "platform", "cloud-firestore-emulator", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found in the Cloud SDK at %s: %s", name, filepath.Dir(filepath.Dir(gcloud)), firestoreInstall)
	}
	return p, nil
}

func startFirestore() (string, func(), error) {
	launcher, err := firestoreLauncher()
	if err != nil {
		return "", nil, err
	}
	java := os.Getenv("JAVA") // the launcher's own override
	if java == "" {
		java = "java"
	}
	if _, err := exec.LookPath(java); err != nil {
		return "", nil, fmt.Errorf("%s not found: %s", java, firestoreInstall)
	}
	// Calling the launcher directly skips gcloud's Python start-up (a second or more). The test
	// binaries share two cores, where the JVM's optimising compiler competes with the tests for
	// CPU while the emulator warms up: with the quick compiler alone and the single-threaded
	// collector the emulator served several times more requests in its first ten seconds.
	jvm := strings.TrimSpace(os.Getenv("JAVA_TOOL_OPTIONS") + " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
	return startOnFreePorts(1, func(ports []int) (string, func(), error) {
		p, err := StartProcess(launcher, []string{"--host", "127.0.0.1", "--port", fmt.Sprint(ports[0])}, "JAVA_TOOL_OPTIONS="+jvm)
		if err != nil {
			return "", nil, err
		}
		addr := HostPort(ports[0])
		if err := p.WaitReady(60*time.Second, httpReady("http://"+addr+"/")); err != nil {
			return "", nil, err
		}
		return addr, p.Stop, nil
	})
}
