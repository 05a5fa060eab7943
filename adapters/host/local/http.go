package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// MaxRequestBytes bounds the JSON input of one invocation over HTTP.
const MaxRequestBytes = 1 << 20

// InstanceResponse is the JSON body that describes an instance.
type InstanceResponse struct {
	InstanceID string `json:"instance_id"`
	// Status is "done", "pending" while the intent collector finishes the instance, or
	// "expired" once its result was dropped (ssf.Config.KeyRetention).
	Status string `json:"status"`
	// Output is the handler's output, if it finished without an application error.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is the handler's application error, if it finished with one.
	Error string `json:"error,omitempty"`
}

// ErrorResponse is the JSON body of a request that failed.
type ErrorResponse struct {
	Error string `json:"error"`
}

// ReplayedHeader marks an answer recorded before the request arrived (ssf.Result.Replayed): the
// request ran nothing. The name is Stripe's.
const ReplayedHeader = "Idempotent-Replayed"

// HTTPHandler serves the host's SSFs over HTTP, the way a platform's front door would:
//
//	POST /v1/ssf/{name}                  invoke the SSF with the JSON body as input
//	GET  /v1/ssf/{name}/instances/{id}   an instance's status and result
//	GET  /v1/ssf/{name}/items            the SSF's current items, for inspection
//	GET  /healthz                        liveness, and the SSFs served
//
// An invocation is a top-level request whose instance id is the Idempotency-Key header, or a
// new UUID without one. Repeating a request with the same key never runs it twice: it returns
// the first request's result with the header "Idempotent-Replayed: true", for as long as the
// SSF keeps it (ssf.Config.KeyRetention), and 410 after that (ssf.ErrKeyExpired); the same
// key with another body gets 409 (ssf.ErrInputMismatch). The answer is 200 with an InstanceResponse
// once the instance has finished (an application error is in its Error field); 202 with
// status "pending" and a Location to poll if the execution was cut short after the request was
// accepted, since the intent collector will finish it; 503 if it failed before being accepted,
// when the client should retry with the same key. Malformed requests get 400 and unknown SSFs
// 404, with an ErrorResponse.
func HTTPHandler(h *Host) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/ssf/{name}", func(w http.ResponseWriter, r *http.Request) { invokeHTTP(h, w, r) })
	mux.HandleFunc("GET /v1/ssf/{name}/instances/{id}", func(w http.ResponseWriter, r *http.Request) { instanceHTTP(h, w, r) })
	mux.HandleFunc("GET /v1/ssf/{name}/items", func(w http.ResponseWriter, r *http.Request) { itemsHTTP(h, w, r) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		var names []string
		for _, rt := range h.Runtimes() {
			names = append(names, rt.Name())
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "ssfs": names})
	})
	return mux
}

// runtimeFor returns the SSF named in the path, or answers 404.
func runtimeFor(h *Host, w http.ResponseWriter, r *http.Request) (*ssf.Runtime, bool) {
	name := r.PathValue("name")
	rt, ok := h.Runtime(name)
	if !ok {
		var names []string
		for _, rt := range h.Runtimes() {
			names = append(names, rt.Name())
		}
		writeError(w, http.StatusNotFound, "no SSF named %q (served: %s)", name, strings.Join(names, ", "))
	}
	return rt, ok
}

func invokeHTTP(h *Host, w http.ResponseWriter, r *http.Request) {
	rt, ok := runtimeFor(h, w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", MaxRequestBytes)
			return
		}
		writeError(w, http.StatusBadRequest, "reading request body: %v", err)
		return
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("null")
	}
	if !json.Valid(body) {
		writeError(w, http.StatusBadRequest, "request body is not valid JSON")
		return
	}
	id := r.Header.Get("Idempotency-Key")
	if id == "" {
		id = uuid.NewString()
	}
	if !utf8.ValidString(id) {
		writeError(w, http.StatusBadRequest, "the Idempotency-Key is not valid UTF-8")
		return
	}
	res, err := rt.Handle(r.Context(), ssf.Request{Kind: ssf.KindInvoke, InstanceID: id, Input: body})
	switch {
	case err == nil:
		if res.Replayed {
			w.Header().Set(ReplayedHeader, "true")
		}
		writeJSON(w, http.StatusOK, instanceResponse(id, ssf.IntentStatus{Exists: true, Done: true, Result: res}))
	case errors.Is(err, ssf.ErrInputMismatch):
		writeError(w, http.StatusConflict, "%v", err) // the key was used for another request
	case errors.Is(err, ssf.ErrInputTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "%v", err)
	case errors.Is(err, ssf.ErrBadInput):
		writeError(w, http.StatusBadRequest, "%v", err)
	case errors.Is(err, ssf.ErrInstanceCollected):
		// Never "retry": the key's request ran, and only its result is gone (or it expired).
		writeError(w, http.StatusGone, "%v", err)
	default:
		// The outcome depends on whether the request got as far as its intent.
		st, serr := rt.Intent(r.Context(), id)
		switch {
		case serr != nil || (!st.Exists && !st.Done):
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "request not accepted, retry with Idempotency-Key %q: %v", id, err)
		case st.Done:
			writeJSON(w, http.StatusOK, instanceResponse(id, st))
		default:
			w.Header().Set("Location", "/v1/ssf/"+url.PathEscape(rt.Name())+"/instances/"+url.PathEscape(id))
			writeJSON(w, http.StatusAccepted, instanceResponse(id, st))
		}
	}
}

func instanceHTTP(h *Host, w http.ResponseWriter, r *http.Request) {
	rt, ok := runtimeFor(h, w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	st, err := rt.Intent(r.Context(), id)
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "reading instance %s of %s: %v", id, rt.Name(), err)
	case !st.Exists && !st.Collected:
		writeError(w, http.StatusNotFound, "SSF %s has no instance %q: never accepted, or garbage-collected after it finished", rt.Name(), id)
	default:
		writeJSON(w, http.StatusOK, instanceResponse(id, st))
	}
}

func instanceResponse(id string, st ssf.IntentStatus) InstanceResponse {
	if st.Expired {
		return InstanceResponse{InstanceID: id, Status: "expired"}
	}
	if !st.Done {
		return InstanceResponse{InstanceID: id, Status: "pending"}
	}
	return InstanceResponse{InstanceID: id, Status: "done", Output: st.Result.Output, Error: st.Result.Error}
}

func itemsHTTP(h *Host, w http.ResponseWriter, r *http.Request) {
	rt, ok := runtimeFor(h, w, r)
	if !ok {
		return
	}
	items, err := rt.Items(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "reading items of %s: %v", rt.Name(), err)
		return
	}
	out := make(map[string]json.RawMessage, len(items))
	for k, v := range items {
		if len(v) == 0 {
			v = []byte("null")
		}
		out[k] = v
	}
	writeJSON(w, http.StatusOK, map[string]any{"ssf": rt.Name(), "items": out})
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, ErrorResponse{Error: fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) // the status is sent; a failed write means the client went away
}
