package local_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore" // mem:// tables
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// tally adds its input to a counter and answers the new total.
func tally(env *ssf.Env, by int64) (int64, error) {
	var n int64
	if _, err := env.ReadInto("counters", "n", &n); err != nil {
		return 0, err
	}
	return n + by, env.Write("counters", "n", n+by)
}

// A host serving an SSF over HTTP, as `ssfkit dev` does. The Idempotency-Key is the instance
// id: the same request sent again answers from the record, marked Idempotent-Replayed, and
// adds nothing; the same key with another body is refused.
func ExampleHTTPHandler() {
	ctx := context.Background()
	host := local.NewHost()
	defer host.Close()
	table, err := store.Open(ctx, "mem://") // a fresh private in-memory table
	if err != nil {
		log.Fatal(err)
	}
	if _, err := host.Add(ssf.Config{Name: "counter", Store: table, Handler: ssf.Typed(tally)}); err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(local.HTTPHandler(host)) // on 127.0.0.1
	defer srv.Close()

	send := func(method, path, key, body string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("> %s %s", method, path)
		if key != "" {
			fmt.Printf(" Idempotency-Key: %s", key)
		}
		if body != "" {
			fmt.Printf(" %s", body)
		}
		fmt.Printf("\n< %s", resp.Status)
		if r := resp.Header.Get(local.ReplayedHeader); r != "" {
			fmt.Printf(" %s: %s", local.ReplayedHeader, r)
		}
		fmt.Printf("\n%s", answer)
	}
	send("POST", "/v1/ssf/counter", "add-1", "5")
	send("POST", "/v1/ssf/counter", "add-1", "5") // a retry: replayed
	send("POST", "/v1/ssf/counter", "add-2", "2")
	send("POST", "/v1/ssf/counter", "add-1", "3") // the key names another request
	send("GET", "/v1/ssf/counter/instances/add-2", "", "")
	// Output:
	// > POST /v1/ssf/counter Idempotency-Key: add-1 5
	// < 200 OK
	// {
	//   "instance_id": "add-1",
	//   "status": "done",
	//   "output": 5
	// }
	// > POST /v1/ssf/counter Idempotency-Key: add-1 5
	// < 200 OK Idempotent-Replayed: true
	// {
	//   "instance_id": "add-1",
	//   "status": "done",
	//   "output": 5
	// }
	// > POST /v1/ssf/counter Idempotency-Key: add-2 2
	// < 200 OK
	// {
	//   "instance_id": "add-2",
	//   "status": "done",
	//   "output": 7
	// }
	// > POST /v1/ssf/counter Idempotency-Key: add-1 3
	// < 409 Conflict
	// {
	//   "error": "ssf: bad input: instance id already used with a different input: SSF counter: instance add-1 was created with another input; a new request needs a new instance id (idempotency key)"
	// }
	// > GET /v1/ssf/counter/instances/add-2
	// < 200 OK
	// {
	//   "instance_id": "add-2",
	//   "status": "done",
	//   "output": 7
	// }
}
