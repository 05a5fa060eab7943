package console

import (
	"fmt"
	"net"
	"strconv"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// StartTemporalUI serves the Temporal Web UI (temporalio/ui-server, the UI Temporal's own dev
// server ships) on addr, a loopback host:port, for the Temporal frontend at temporalAddr, and
// returns how to stop it.
func StartTemporalUI(addr, temporalAddr, namespace string) (stop func(), err error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portText, err)
	}
	// ui-server exits the process when it cannot listen: find out first.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ln.Close()
	cfg := &uiconfig.Config{
		Host: host, Port: port, TemporalGRPCAddress: temporalAddr, EnableUI: true, DefaultNamespace: namespace,
		HideLogs: true, DisableNewsFetch: true, Distribution: "ssfkit",
		// The UI's CSRF cookie over plain HTTP on loopback.
		CORS: uiconfig.CORS{CookieInsecure: true},
	}
	s := uiserver.NewServer(uioptions.WithConfigProvider(cfg))
	go s.Start() //nolint:errcheck // Start returns when Stop closes it
	return s.Stop, nil
}
