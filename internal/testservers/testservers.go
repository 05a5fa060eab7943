// Package testservers starts the emulators the default test run needs (moto, Azurite, the
// Firestore emulator) on 127.0.0.1, once per test binary, and stops them when the binary's
// tests end. A missing emulator is a test failure whose message says how to install it: the
// suites never skip a backend silently.
//
// `make tools` (run by `make test`) installs the pinned moto and Azurite; the Firestore emulator
// ships with the Google Cloud CLI, which no package registry serves.
package testservers

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ssfkit/ssfkit/internal/childproc"
	"github.com/ssfkit/ssfkit/internal/suite"
)

// Server is an emulator started on first use and shared by every test in the binary.
type Server struct {
	// Name is what failure messages call the server.
	Name string
	// Start launches the server and returns its address (or URL) and a function that stops it.
	Start func() (addr string, stop func(), err error)

	once sync.Once
	addr string
	err  error
}

var (
	runningMu sync.Mutex
	running   []func()
)

// Addr starts the server if it is not running yet and returns its address; it fails t if the
// server cannot start.
func (s *Server) Addr(t suite.T) string {
	t.Helper()
	addr, err := s.Get()
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	return addr
}

// Get starts the server if it is not running yet and returns its address.
func (s *Server) Get() (string, error) {
	s.once.Do(func() {
		var stop func()
		s.addr, stop, s.err = s.Start()
		if s.err == nil {
			runningMu.Lock()
			running = append(running, stop)
			runningMu.Unlock()
		}
	})
	return s.addr, s.err
}

// StopAll stops every server this binary started; call it from TestMain after m.Run.
func StopAll() {
	runningMu.Lock()
	defer runningMu.Unlock()
	for _, stop := range running {
		stop()
	}
	running = nil
}

// RepoRoot is the directory holding go.mod, found by walking up from the working directory
// (go test runs each package in its own directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Tool finds an executable: on PATH, else under the repository's .ssfkit/tools (where
// `make tools` installs what the registries serve). The error says how to install it.
func Tool(name, install string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if root, err := RepoRoot(); err == nil {
		for _, p := range []string{
			filepath.Join(root, ".ssfkit", "tools", "node_modules", ".bin", name),
			filepath.Join(root, ".ssfkit", "tools", "bin", name),
		} {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s not found on PATH or in .ssfkit/tools: %s", name, install)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago. All n stay
// bound until the last is chosen: ports picked one at a time, each released before the next
// is asked for, can come back equal (Azurite once got one port for two services).
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// startOnFreePorts runs start on n free ports, and again on fresh ones (three attempts in all)
// when a server failed because another process bound one of its ports between FreePorts and
// the server's own bind.
func startOnFreePorts(n int, start func(ports []int) (string, func(), error)) (string, func(), error) {
	for attempt := 1; ; attempt++ {
		ports, err := FreePorts(n)
		if err != nil {
			return "", nil, err
		}
		addr, stop, err := start(ports)
		if err == nil || attempt == 3 || !portTaken(err) {
			return addr, stop, err
		}
	}
}

// portTaken recognises the bind failures of the JVM, Node.js and Python servers.
func portTaken(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Address already in use") || strings.Contains(msg, "EADDRINUSE")
}

// Process is an emulator process with its output kept for failure messages.
type Process struct {
	cmd    *exec.Cmd
	output *syncBuffer
	exited chan struct{}
}

// StartProcess runs path with args in its own process group (so Stop also ends the children a
// launcher script forks, such as the JVM behind the Firestore emulator's wrapper), in a
// temporary working directory that Stop removes (emulators drop files where they run).
func StartProcess(path string, args []string, env ...string) (*Process, error) {
	dir, err := os.MkdirTemp("", "ssfkit-emulator-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// A test binary killed by its timeout skips StopAll; the emulator dies with it.
	cmd.SysProcAttr = childproc.Attr(true)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p := &Process{cmd: cmd, output: out, exited: make(chan struct{})}
	go func() { cmd.Wait(); os.RemoveAll(dir); close(p.exited) }()
	return p, nil
}

// WaitReady polls ready until it succeeds, the process exits, or timeout passes; on failure it
// stops the process and reports its output.
func (p *Process) WaitReady(timeout time.Duration, ready func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := ready(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			p.Stop() // the children a launcher forked may live on
			return fmt.Errorf("%s exited before it was ready: %v\n%s", p.cmd.Path, p.cmd.ProcessState, p.output.String())
		default:
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("%s not ready after %v: %v\n%s", p.cmd.Path, timeout, err, p.output.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the process group and waits for the process to exit.
func (p *Process) Stop() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// DialReady is a readiness check that succeeds once addr accepts TCP connections.
func DialReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	}
}

// HostPort joins 127.0.0.1 and port.
func HostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 { // keep the start (why it failed to boot), drop the chatter
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
