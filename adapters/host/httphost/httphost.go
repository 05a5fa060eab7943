// Package httphost runs an application's SSFs as HTTP servers: Azure Functions custom handlers
// and Cloud Run services. One binary, built by `ssfkit build --cloud azure|gcp`, serves the SSF
// named SSFKIT_SSF and both of its collectors (docs/modules.md has the routes and settings):
//
//   - POST /ssf: an ssf.Request (a peer's SyncInvoke, a callback, `ssfkit invoke`), answered
//     with its ssf.Result;
//   - POST /spawn: an asynchronous start from a peer, put on the SSF's own queue (only the SSF's
//     identity may write its queue);
//   - POST /queue: one asynchronous start delivered by the platform: Azure's queue trigger, or a
//     Pub/Sub push. A failure answers 500, so the platform delivers it again; a poison start,
//     and one that fails on the platform's last delivery, are dead-lettered by the host with
//     the reason and answered 200 (the platform's own dead-lettering takes the rest);
//   - POST /intent-collector, /garbage-collector: one collector pass, on the platform's timer.
//
// Azure forwards HTTP-triggered functions under /api, so /api/ssf and /api/spawn are the same
// routes; its other triggers arrive as custom-handler invocations and are answered as such.
// Peers are called over HTTP at the URLs in SSFKIT_PEERS, authenticated by the platform's
// Authorizer (AzureFunctionKeys, GoogleIDTokens).
//
// Every route checks its caller itself before it does anything, with the platform's Verifier
// (GoogleIDTokenVerifier, AzureKeyVerifier): the platform's front door is not the only check
// (docs/security.md, "Who may call what").
package httphost

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ssfkit/ssfkit/internal/telemetry"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host"
	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Platform is the serverless platform a Server runs on: it decides how queued starts and
// timers arrive and how peers are reached.
type Platform string

const (
	Azure    Platform = "azure"
	CloudRun Platform = "gcp"
)

// maxBody bounds a request body: a request's input is at most a row (400 KiB), and a JSON
// encoding at most doubles it.
const maxBody = 1 << 20

// Server serves one SSF's function (New), or a function only its platform triggers
// (NewTriggered).
type Server struct {
	platform Platform
	name     string // what it serves, for logs: the SSF's name
	fn       *host.Function
	queued   func(context.Context, *queue.Message) error
	mux      *http.ServeMux
	verifier Verifier
}

// Options are how a Server reaches its peers and checks its callers.
type Options struct {
	// Auth authenticates calls to peers (nil: none, for private networks).
	Auth Authorizer
	// Client makes the calls (nil: a client with Go's default transport).
	Client *http.Client
	// Verifier checks the caller of every route before the server does any work for it
	// (PlatformVerifier). Required: a server that would admit every caller is not made.
	Verifier Verifier
}

// New opens the SSF configured by cfg and returns its server.
func New(ctx context.Context, platform Platform, cfg host.Config, handlers map[string]ssf.Handler, opts Options) (*Server, error) {
	if platform != Azure && platform != CloudRun {
		return nil, fmt.Errorf("httphost: unknown platform %q (want %s or %s)", platform, Azure, CloudRun)
	}
	if opts.Verifier == nil {
		return nil, errors.New("httphost: no Verifier of inbound calls (PlatformVerifier builds the platform's): the server refuses to admit every caller")
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	peers := &peerTransport{cfg: cfg, platform: platform, auth: opts.Auth, client: opts.Client}
	fn, err := host.Open(ctx, cfg, handlers, func(own *queue.Queue) ssf.Transport {
		peers.queue = own
		return peers
	})
	if err != nil {
		return nil, fmt.Errorf("httphost: %w", err)
	}
	s := &Server{platform: platform, name: cfg.SSF, fn: fn, queued: fn.HandleQueued, mux: http.NewServeMux(), verifier: opts.Verifier}
	for _, prefix := range []string{"", "/api"} {
		s.mux.HandleFunc("POST "+prefix+string(RouteSSF), s.guard(RouteSSF, s.handleRequest))
		s.mux.HandleFunc("POST "+prefix+string(RouteSpawn), s.guard(RouteSpawn, s.handleSpawn))
	}
	s.mux.HandleFunc("POST "+string(RouteQueue), s.guard(RouteQueue, s.handleQueued))
	s.mux.HandleFunc("POST "+string(RouteIntentCollector), s.guard(RouteIntentCollector,
		s.collector(func(ctx context.Context) (any, error) { return fn.CollectIntents(ctx) })))
	s.mux.HandleFunc("POST "+string(RouteGarbageCollector), s.guard(RouteGarbageCollector,
		s.collector(func(ctx context.Context) (any, error) { return fn.CollectGarbage(ctx) })))
	return s, nil
}

// Triggers are what a function that only its platform calls serves: its queue's deliveries on
// /queue and its timers (the coordination service's writer and heartbeat, coordhost).
type Triggers struct {
	// Name names the function in logs.
	Name string
	// Queued handles one delivery from the function's queue (nil: no queue); an error answers
	// 500, so the platform delivers it again, and dead-letters it after its delivery limit.
	Queued func(context.Context, *queue.Message) error
	// Timers are the passes the platform's timers run, by route.
	Timers map[Route]func(context.Context) (any, error)
}

// NewTriggered serves t on the platform; verifier admits the platform's own calls only.
func NewTriggered(platform Platform, t Triggers, verifier Verifier) (*Server, error) {
	if platform != Azure && platform != CloudRun {
		return nil, fmt.Errorf("httphost: unknown platform %q (want %s or %s)", platform, Azure, CloudRun)
	}
	if verifier == nil {
		return nil, errors.New("httphost: no Verifier of inbound calls: the server refuses to admit every caller")
	}
	s := &Server{platform: platform, name: t.Name, queued: t.Queued, mux: http.NewServeMux(), verifier: verifier}
	if t.Queued != nil {
		s.mux.HandleFunc("POST "+string(RouteQueue), s.guard(RouteQueue, s.handleQueued))
	}
	for route, pass := range t.Timers {
		if !timerRoute(route) {
			return nil, fmt.Errorf("httphost: %s is not a timer's route", route)
		}
		s.mux.HandleFunc("POST "+string(route), s.guard(route, s.collector(pass)))
	}
	return s, nil
}

// served are the routes of t.
func (t Triggers) served() []Route {
	var routes []Route
	if t.Queued != nil {
		routes = append(routes, RouteQueue)
	}
	for r := range t.Timers {
		routes = append(routes, r)
	}
	return routes
}

// MainTriggered serves the triggered function the platform started this process for: open
// builds its triggers from the environment (and what to close when it stops). It exits with a
// message if the configuration is wrong: the platform reports it.
func MainTriggered(platform Platform, open func(ctx context.Context) (Triggers, func(), error)) {
	ctx := context.Background()
	err := func() error {
		t, closeFn, err := open(ctx)
		if err != nil {
			return err
		}
		defer closeFn()
		verifier, err := platformVerifier(ctx, platform, os.Getenv, t.served())
		if err != nil {
			return err
		}
		s, err := NewTriggered(platform, t, verifier)
		if err != nil {
			return err
		}
		srv := &http.Server{Addr: ListenAddress(platform, os.Getenv), Handler: s, ReadHeaderTimeout: 10 * time.Second}
		slog.Info("serving", "function", t.Name, "platform", platform, "address", srv.Addr)
		return srv.ListenAndServe()
	}()
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// Runtime is the SSF's runtime.
func (s *Server) Runtime() *ssf.Runtime { return s.fn.Runtime }

// Close releases the SSF's store and queue (a triggered server's are its opener's).
func (s *Server) Close() {
	if s.fn != nil {
		s.fn.Close()
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// decodeRequest reads an ssf.Request body.
func decodeRequest(r *http.Request) (ssf.Request, error) {
	var req ssf.Request
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("the body is not a JSON ssf.Request: %v", err)
	}
	return req, nil
}

func (s *Server) handleRequest(w http.ResponseWriter, r *http.Request) {
	req, err := decodeRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	res, err := s.fn.Runtime.Handle(r.Context(), req)
	switch {
	case errors.Is(err, ssf.ErrInputMismatch):
		writeError(w, http.StatusConflict, err) // the instance id was used with another input
	case errors.Is(err, ssf.ErrInputTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, err)
	case errors.Is(err, ssf.ErrBadInput):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, ssf.ErrInstanceCollected):
		writeError(w, http.StatusGone, err) // permanent: the instance ran and was collected
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
	default:
		if res.Replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		writeJSON(w, http.StatusOK, res)
	}
}

func (s *Server) handleSpawn(w http.ResponseWriter, r *http.Request) {
	req, err := decodeRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	body, _ := json.Marshal(req)
	id, err := s.fn.Queue.Send(r.Context(), body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"message": id})
}

// handleQueued runs one asynchronous start delivered by the platform. The host dead-letters a
// poison start, and one that fails on the platform's last delivery (SSFKIT_MAX_RECEIVE_COUNT),
// itself, with the reason (host.Function.HandleQueued), and answers 200.
func (s *Server) handleQueued(w http.ResponseWriter, r *http.Request) {
	var (
		m   *queue.Message
		err error
	)
	if s.platform == Azure {
		m, err = decodeAzureQueueItem(r.Body)
	} else {
		m, err = decodePubSubPush(r.Body)
	}
	if err != nil {
		// Delivered again until the platform dead-letters it, where it can be inspected.
		slog.Error("undecodable queue delivery", "function", s.name, "err", err)
		s.reply(w, http.StatusBadRequest, nil, err)
		return
	}
	if err := s.queued(r.Context(), m); err != nil {
		s.reply(w, http.StatusInternalServerError, nil, err)
		return
	}
	s.reply(w, http.StatusOK, nil, nil)
}

func (s *Server) collector(pass func(context.Context) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, http.MaxBytesReader(nil, r.Body, maxBody)) // a timer's or scheduler's payload: nothing needed
		report, err := pass(r.Context())
		if err != nil {
			s.reply(w, http.StatusInternalServerError, nil, err)
			return
		}
		s.reply(w, http.StatusOK, report, nil)
	}
}

// reply answers a platform-triggered invocation: Azure wants a custom handler response, Cloud
// Run callers only look at the status.
func (s *Server) reply(w http.ResponseWriter, status int, value any, err error) {
	if s.platform != Azure {
		if err != nil {
			writeError(w, status, err)
		} else {
			writeJSON(w, status, value)
		}
		return
	}
	resp := azureInvocationResponse{Outputs: map[string]any{}, Logs: []string{}, ReturnValue: value}
	if err != nil {
		resp.Logs = append(resp.Logs, err.Error())
	}
	writeJSON(w, status, resp)
}

// azureInvocation is what the Functions host posts to a custom handler for a non-HTTP trigger:
// the trigger's data by binding name, and its metadata.
type azureInvocation struct {
	Data     map[string]json.RawMessage `json:"Data"`
	Metadata map[string]json.RawMessage `json:"Metadata"`
}

type azureInvocationResponse struct {
	Outputs     map[string]any `json:"Outputs"`
	Logs        []string       `json:"Logs"`
	ReturnValue any            `json:"ReturnValue"`
}

// decodeAzureQueueItem reads a queue trigger invocation (function "queue", binding "message").
// The host has already base64-decoded the message; it passes a message that is JSON either as
// a JSON string or as the JSON itself, depending on the host version, so both are accepted.
func decodeAzureQueueItem(body io.Reader) (*queue.Message, error) {
	var inv azureInvocation
	if err := json.NewDecoder(io.LimitReader(body, maxBody)).Decode(&inv); err != nil {
		return nil, fmt.Errorf("not a custom handler invocation: %v", err)
	}
	raw, ok := inv.Data["message"]
	if !ok {
		return nil, errors.New(`the invocation has no "message" binding (function.json of the queue function names it)`)
	}
	text := []byte(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		text = []byte(s)
	}
	// A message with attributes is a queue.Envelope (adapters/queue/azurequeue).
	env := queue.DecodeEnvelope(text)
	m := &queue.Message{ID: metadataString(inv.Metadata["Id"]), Body: env.Body, Attributes: env.Attributes, FirstReceived: env.FirstReceived}
	m.Attempts, _ = strconv.Atoi(metadataString(inv.Metadata["DequeueCount"]))
	if t, err := time.Parse(time.RFC3339Nano, metadataString(inv.Metadata["InsertionTime"])); err == nil {
		m.Sent = t
	}
	if m.Attempts == 1 && m.FirstReceived.IsZero() {
		m.FirstReceived = time.Now()
	}
	return m, nil
}

// metadataString reads a metadata value the host sends as a string or as a number.
func metadataString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

// pubSubPush is a Pub/Sub push request's body.
type pubSubPush struct {
	Message struct {
		Data        []byte            `json:"data"` // base64 in JSON, which encoding/json decodes
		MessageID   string            `json:"messageId"`
		Attributes  map[string]string `json:"attributes"`
		PublishTime time.Time         `json:"publishTime"`
	} `json:"message"`
	Subscription    string `json:"subscription"`
	DeliveryAttempt int    `json:"deliveryAttempt"`
}

func decodePubSubPush(body io.Reader) (*queue.Message, error) {
	var p pubSubPush
	if err := json.NewDecoder(io.LimitReader(body, maxBody)).Decode(&p); err != nil {
		return nil, fmt.Errorf("not a Pub/Sub push request: %v", err)
	}
	if p.Message.MessageID == "" {
		return nil, errors.New("not a Pub/Sub push request: no message id")
	}
	return &queue.Message{ID: p.Message.MessageID, Body: p.Message.Data, Attributes: queue.CloneAttributes(p.Message.Attributes),
		Attempts: p.DeliveryAttempt, Sent: p.Message.PublishTime}, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// ListenAddress is where the platform expects the server: Cloud Run's PORT on all interfaces,
// since its front end connects from outside the container; Azure's custom handler port on
// 127.0.0.1 only, where the Functions host, which runs beside the handler, calls it (for
// forwarded HTTP requests and its own triggers alike), so nothing else can reach it.
func ListenAddress(platform Platform, getenv func(string) string) string {
	if platform == Azure {
		return "127.0.0.1:" + cmp.Or(getenv("FUNCTIONS_CUSTOMHANDLER_PORT"), "8080")
	}
	return ":" + cmp.Or(getenv("PORT"), "8080")
}

// Main serves the function the platform started this process for, with the application's
// handlers. It exits with a message if the configuration is wrong: the platform reports it.
func Main(platform Platform, handlers map[string]ssf.Handler) {
	ctx := context.Background()
	err := func() error {
		cfg, err := host.ConfigFromEnv(os.Getenv)
		if err != nil {
			return fmt.Errorf("httphost: %w", err)
		}
		stopTelemetry, err := telemetry.Start(ctx, cfg.SSF)
		if err != nil {
			return fmt.Errorf("httphost: %w", err)
		}
		defer stopTelemetry(ctx)
		auth, err := PlatformAuthorizer(ctx, platform, os.Getenv)
		if err != nil {
			return err
		}
		verifier, err := PlatformVerifier(ctx, platform, os.Getenv)
		if err != nil {
			return err
		}
		s, err := New(ctx, platform, cfg, handlers, Options{Auth: auth, Verifier: verifier})
		if err != nil {
			return err
		}
		defer s.Close()
		srv := &http.Server{Addr: ListenAddress(platform, os.Getenv), Handler: s, ReadHeaderTimeout: 10 * time.Second}
		slog.Info("serving", "ssf", cfg.SSF, "platform", platform, "address", srv.Addr)
		return srv.ListenAndServe()
	}()
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// peerTransport reaches the other SSFs of the environment through their functions' URLs.
type peerTransport struct {
	cfg      host.Config
	platform Platform
	auth     Authorizer
	client   *http.Client
	queue    *queue.Queue
}

// post sends req to a peer's route and returns the response body. A 400 means the peer refused
// the request as malformed, which no retry fixes.
func (t *peerTransport) post(ctx context.Context, name, route string, req ssf.Request) ([]byte, error) {
	base, ok := t.cfg.Peers[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a peer of %s (the ssf module's peers variable)", ssf.ErrBadInput, name, t.cfg.SSF)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if t.platform == Azure {
		route = "/api" + route
	}
	url := strings.TrimSuffix(base, "/") + route
	for attempt := 0; ; attempt++ {
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		hr.Header.Set("Content-Type", "application/json")
		if t.auth != nil {
			if err := t.auth.Authorize(ctx, hr, name, base, attempt > 0); err != nil {
				return nil, fmt.Errorf("authorizing the call to %s: %w", name, err)
			}
		}
		resp, err := t.client.Do(hr)
		if err != nil {
			return nil, fmt.Errorf("calling %s: %w", name, err)
		}
		out, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		switch {
		case err != nil:
			return nil, fmt.Errorf("calling %s: %w", name, err)
		case (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && attempt == 0 && t.auth != nil:
			continue // a rotated key or an expired token: fetch a fresh one once
		case resp.StatusCode == http.StatusBadRequest:
			return nil, fmt.Errorf("%w: %s refused the request: %s", ssf.ErrBadInput, name, bytes.TrimSpace(out))
		case resp.StatusCode/100 != 2:
			return nil, fmt.Errorf("calling %s: %s: %s", name, resp.Status, bytes.TrimSpace(out))
		}
		return out, nil
	}
}

// Call runs req on the peer and waits for its result. An error other than a refusal leaves
// the outcome unknown, as the runtime expects of a transport.
func (t *peerTransport) Call(ctx context.Context, name string, req ssf.Request) (ssf.Result, error) {
	out, err := t.post(ctx, name, "/ssf", req)
	if err != nil {
		return ssf.Result{}, err
	}
	var res ssf.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return ssf.Result{}, fmt.Errorf("%s answered %q, not an ssf.Result: %w", name, out, err)
	}
	return res, nil
}

// Spawn starts req without waiting: on this SSF's own queue, or through the peer, whose
// identity owns its queue.
func (t *peerTransport) Spawn(ctx context.Context, name string, req ssf.Request) error {
	if name == t.cfg.SSF {
		body, err := json.Marshal(req)
		if err != nil {
			return err
		}
		_, err = t.queue.Send(ctx, body)
		return err
	}
	_, err := t.post(ctx, name, "/spawn", req)
	return err
}

var _ ssf.Transport = (*peerTransport)(nil)
