// Package devserver runs a Temporal server inside the process, persisted in SQLite (in memory,
// or in a file that survives restarts), for `ssfkit dev` and the tests. Every service binds
// 127.0.0.1 only, and the dynamic config is tuned for a single local machine: see TunedConfig
// and docs/temporal.md.
package devserver

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

const (
	loopback    = "127.0.0.1"
	clusterName = "active"
)

// Options configure Start; the zero value is an in-memory server on a free port.
type Options struct {
	// DBFile is the SQLite file holding the server's state: created with the schema when
	// missing, reused when present. Empty keeps the state in memory, lost at Stop.
	DBFile string
	// Namespace is created at start (if missing); default "default".
	Namespace string
	// Port is the frontend's gRPC port on 127.0.0.1; 0 picks a free one.
	Port int
	// Logger receives Temporal's own logs at Warn and above; nil discards them.
	Logger *slog.Logger
	// DynamicConfig overrides TunedConfig, key by key (keys as in Temporal's dynamicconfig,
	// e.g. "history.transferProcessorMaxPollRPS"); a nil value restores Temporal's default.
	DynamicConfig map[string]any
}

// TunedConfig returns the dynamic config the server starts with, before Options.DynamicConfig.
// Temporal's defaults suit a cluster under load; on one machine they add tens of milliseconds
// to every workflow step and a second to every timer. docs/temporal.md has the measurements.
func TunedConfig() map[string]any {
	return map[string]any{
		// History reads each of its internal queues at most 20 times a second by default, so
		// every hand-off (workflow task, activity task, timer, visibility record) waited up to
		// 50 ms.
		"history.transferProcessorMaxPollRPS":   1000,
		"history.timerProcessorMaxPollRPS":      1000,
		"history.visibilityProcessorMaxPollRPS": 1000,
		// Timers fire no sooner than this after they are created (a margin for clock skew between
		// hosts, of which there is one here): by default a 10 ms sleep took a second.
		"history.timerProcessorMaxTimeShift": 10 * time.Millisecond,
		// A waiter on a workflow's result can miss the close notification (the server drops it
		// when the waiter's one-slot channel is full) and then sleeps until its long poll
		// expires, 20 s by default: a short expiry caps that stall.
		"history.longPollExpirationInterval": time.Second,
	}
}

// Server is a running embedded Temporal server.
type Server struct {
	server    temporal.Server
	addr      string
	namespace string
	logger    *slog.Logger
	// muteTemporalLog silences Temporal's own logging during Stop (see slogLogger).
	muteTemporalLog *atomic.Bool
}

// Start starts the server and returns once its frontend accepts calls.
func Start(opts Options) (*Server, error) {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	store, err := openStore(opts.DBFile, opts.Namespace)
	if err != nil {
		return nil, err
	}
	ports, err := pickPorts(opts.Port)
	if err != nil {
		return nil, err
	}

	dynamicConfig := dynamicconfig.StaticClient{}
	for key, value := range TunedConfig() {
		dynamicConfig[dynamicconfig.MakeKey(key)] = value
	}
	for key, value := range opts.DynamicConfig {
		if value == nil {
			delete(dynamicConfig, dynamicconfig.MakeKey(key))
		} else {
			dynamicConfig[dynamicconfig.MakeKey(key)] = value
		}
	}

	hosts := map[primitives.ServiceName]static.Hosts{}
	for service, port := range ports {
		hosts[service] = static.SingleLocalHost(hostPort(port))
	}
	muteTemporalLog := &atomic.Bool{}
	server, err := temporal.NewServer(
		temporal.WithConfig(serverConfig(store, ports)),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(slogLogger{out: logger, muted: muteTemporalLog}),
		temporal.WithDynamicConfigClient(dynamicConfig),
	)
	if err != nil {
		return nil, fmt.Errorf("devserver: configure Temporal: %w", err)
	}
	if err := server.Start(); err != nil {
		return nil, fmt.Errorf("devserver: start Temporal: %w", err)
	}
	return &Server{
		server:          server,
		addr:            hostPort(ports[primitives.FrontendService]),
		namespace:       opts.Namespace,
		logger:          logger,
		muteTemporalLog: muteTemporalLog,
	}, nil
}

// Addr is the frontend's address, for client.Options.HostPort or `temporal --address`.
func (s *Server) Addr() string { return s.addr }

// Namespace is the namespace created at start.
func (s *Server) Namespace() string { return s.namespace }

// Stop stops every service; a file-backed server can then be started again on the same file.
func (s *Server) Stop() {
	s.muteTemporalLog.Store(true)
	if err := s.server.Stop(); err != nil {
		s.logger.Warn("devserver: stop Temporal", "error", err)
	}
}

// memoryDatabases numbers in-memory databases: the SQLite plugin shares one connection per
// name across the process, so each server needs a name of its own.
var memoryDatabases atomic.Int64

// openStore prepares the SQLite database (schema and namespace) and returns its config.
func openStore(dbFile, namespace string) (*config.SQL, error) {
	store := &config.SQL{PluginName: sqliteplugin.PluginName}
	if dbFile == "" {
		// The plugin creates the schema itself when it opens an in-memory database.
		store.DatabaseName = fmt.Sprintf("ssfkit-devserver-%d", memoryDatabases.Add(1))
		store.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
	} else {
		store.DatabaseName = dbFile
		store.ConnectAttributes = map[string]string{"mode": "rwc"}
		_, err := os.Stat(dbFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := checkDir(filepath.Dir(dbFile)); err != nil {
				return nil, fmt.Errorf("devserver: DBFile %s: %w", dbFile, err)
			}
			if err := sqliteschema.SetupSchema(store); err != nil {
				return nil, fmt.Errorf("devserver: create the schema in %s: %w", dbFile, err)
			}
		case err != nil:
			return nil, fmt.Errorf("devserver: DBFile: %w", err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("devserver: namespace %q: %w", namespace, err)
	}
	if err := sqliteschema.CreateNamespaces(store, ns); err != nil {
		return nil, fmt.Errorf("devserver: create namespace %q: %w", namespace, err)
	}
	return store, nil
}

func checkDir(dir string) error {
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("directory %s does not exist", dir)
	}
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// pickPorts checks that the frontend's port is free (Temporal exits the process when it cannot
// bind) and picks free ports for the other services, holding each until all are picked so that
// no two services get the same one.
func pickPorts(frontendPort int) (map[primitives.ServiceName]int, error) {
	ports := map[primitives.ServiceName]int{}
	for _, service := range temporal.DefaultServices {
		port := 0
		if service == string(primitives.FrontendService) {
			port = frontendPort
		}
		l, err := net.Listen("tcp", hostPort(port))
		if err != nil {
			return nil, fmt.Errorf("devserver: %s port: %w", service, err)
		}
		defer l.Close()
		ports[primitives.ServiceName(service)] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

func serverConfig(store *config.SQL, ports map[primitives.ServiceName]int) *config.Config {
	frontend := hostPort(ports[primitives.FrontendService])
	conf := &config.Config{}
	conf.Global.Membership.BroadcastAddress = loopback
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: store}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	// No HTTP, metrics or pprof listeners: their ports stay 0, which disables them.
	conf.Services = map[string]config.Service{}
	for service, port := range ports {
		var svc config.Service
		svc.RPC.GRPCPort = port
		svc.RPC.BindOnIP = loopback
		conf.Services[string(service)] = svc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend
	return conf
}

func hostPort(port int) string { return net.JoinHostPort(loopback, strconv.Itoa(port)) }
