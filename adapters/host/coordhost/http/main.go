// Command http is the coordination service's function for Azure Functions (a custom handler)
// and Cloud Run: every function of modules/azure/coordination and modules/gcp/coordination runs
// it, on the platform it finds itself on, serving both roles unless SSFKIT_COORD_ROLE names one
// (coordhost): one function app on Azure, one service on Cloud Run.
//
//   - writer: POST /queue, one delivery of the requests' queue (Azure's queue trigger, a
//     Pub/Sub push), naming a session whose stored requests it decides; a failure answers 500
//     so the platform delivers it again (and dead-letters it after its delivery limit).
//   - heartbeat: POST /heartbeat, the platform's timer (Azure's timer trigger, Cloud
//     Scheduler); one housekeeping pass, its report the answer.
//
// Every route admits only the platform's own calls (httphost's verifiers: the function app's
// keys on Azure; the push subscription's and the scheduler's service accounts on Cloud Run).
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/ssfkit/ssfkit/adapters/host/coordhost"
	"github.com/ssfkit/ssfkit/adapters/host/httphost"
	_ "github.com/ssfkit/ssfkit/adapters/queue/azurequeue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/pubsubqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/aztablestore"
	_ "github.com/ssfkit/ssfkit/adapters/store/bigtablestore"
	_ "github.com/ssfkit/ssfkit/adapters/store/firestorestore"
)

// platform tells where the process runs from what each platform sets: Azure's custom handler
// port, Cloud Run's service name.
func platform(getenv func(string) string) (httphost.Platform, error) {
	switch {
	case getenv("FUNCTIONS_CUSTOMHANDLER_PORT") != "":
		return httphost.Azure, nil
	case getenv("K_SERVICE") != "":
		return httphost.CloudRun, nil
	}
	return "", fmt.Errorf("coordination function: neither FUNCTIONS_CUSTOMHANDLER_PORT (Azure Functions) nor K_SERVICE (Cloud Run) is set: run it on one of them")
}

// triggers are the function's routes: the writer's queue and the heartbeat's timer, or the one
// its role names.
func triggers(fn *coordhost.Function) httphost.Triggers {
	role := fn.Config.Role
	t := httphost.Triggers{Name: "coordination " + cmp.Or(role, "writer and heartbeat")}
	if role != coordhost.RoleHeartbeat {
		t.Queued = fn.HandleMessage
	}
	if role != coordhost.RoleWriter {
		t.Timers = map[httphost.Route]func(context.Context) (any, error){
			httphost.RouteHeartbeat: func(ctx context.Context) (any, error) { return fn.Heartbeat(ctx) },
		}
	}
	return t
}

func main() {
	p, err := platform(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	httphost.MainTriggered(p, func(ctx context.Context) (httphost.Triggers, func(), error) {
		cfg, err := coordhost.ConfigFromEnv(os.Getenv)
		if err != nil {
			return httphost.Triggers{}, nil, err
		}
		fn, err := coordhost.Open(ctx, cfg)
		if err != nil {
			return httphost.Triggers{}, nil, err
		}
		return triggers(fn), fn.Close, nil
	})
}
