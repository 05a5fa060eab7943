// Package pgtest starts a throwaway PostgreSQL cluster on 127.0.0.1 for tests, with the
// server binaries already on the machine (Debian's postgresql package). It refuses to skip:
// a missing server is a failure that says how to get one.
package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/ssfkit/ssfkit/internal/suite"
)

// cluster is one throwaway server, started on first use and again after a Stop.
type cluster struct {
	durable bool // fsync on: commits reach the disk, as in production
	mu      sync.Mutex
	started bool
	url     string
	stop    func()
	err     error
}

func (c *cluster) baseURL() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		c.url, c.stop, c.err = start(c.durable)
		c.started = true
	}
	return c.url, c.err
}

// halt stops the server if it runs; the next baseURL starts a new one.
func (c *cluster) halt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		c.stop()
	}
	c.started, c.url, c.stop, c.err = false, "", nil, nil
}

// The tests' cluster skips fsync (its data dies with the test); benchmarks comparing how many
// commits a path makes use a durable one.
var fast, durable = &cluster{}, &cluster{durable: true}

// URL returns a postgres:// URL of a database on a cluster started once per test binary, with
// the given table, and stops the cluster when m's tests end (see Main).
func URL(t suite.T, table string) string {
	t.Helper()
	base, err := BaseURL()
	if err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	return base + "?table=" + table
}

// BaseURL starts the cluster if it is not running yet and returns the URL of its database.
func BaseURL() (string, error) { return fast.baseURL() }

// DurableBaseURL is BaseURL for a second cluster that syncs commits to disk.
func DurableBaseURL() (string, error) { return durable.baseURL() }

// Stop stops the clusters that were started; call it from TestMain after m.Run. A cluster
// asked for afterwards (a command run again in the same process) is started anew.
func Stop() {
	for _, c := range []*cluster{fast, durable} {
		c.halt()
	}
}

func binary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("%s not found: install PostgreSQL's server (Debian: apt-get install postgresql)", name)
}

func start(durable bool) (string, func(), error) {
	initdb, err := binary("initdb")
	if err != nil {
		return "", nil, err
	}
	pgctl, err := binary("pg_ctl")
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "ssfkit-pg-")
	if err != nil {
		return "", nil, err
	}
	// initdb refuses to run as root: run the server as the postgres user then.
	var as []string
	if u, _ := user.Current(); u != nil && u.Uid == "0" {
		pgUser, err := user.Lookup("postgres")
		if err != nil {
			return "", nil, fmt.Errorf("running as root needs a postgres user to run the server: %v", err)
		}
		uid, _ := strconv.Atoi(pgUser.Uid)
		gid, _ := strconv.Atoi(pgUser.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", nil, err
		}
		as = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) error {
		cmd := exec.Command(append(as, args...)[0], append(as, args...)[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run(initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		return "", nil, err
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200", port, dir)
	if !durable {
		opts += " -c fsync=off"
	} else if hasStatStatements(initdb) {
		// The benchmarks count statements on the durable cluster (ssfkit bench peers).
		opts += " -c shared_preload_libraries=pg_stat_statements"
	}
	if err := run(pgctl, "-D", data, "-w", "-l", filepath.Join(dir, "log"), "-o", opts, "start"); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = run(pgctl, "-D", data, "-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", port), stop, nil
}

// hasStatStatements says whether the server's installation has pg_stat_statements (in the lib
// directory beside its bin directory).
func hasStatStatements(initdb string) bool {
	bin, err := filepath.EvalSymlinks(initdb)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(filepath.Dir(bin)), "lib", "pg_stat_statements.so"))
	return err == nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
