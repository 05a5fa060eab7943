package httphost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// Route is one of the routes a Server serves, as its Verifier sees it (Azure's /api prefix
// removed).
type Route string

const (
	RouteSSF              Route = "/ssf"
	RouteSpawn            Route = "/spawn"
	RouteQueue            Route = "/queue"
	RouteIntentCollector  Route = "/intent-collector"
	RouteGarbageCollector Route = "/garbage-collector"
	// RouteHeartbeat is the coordination service's heartbeat timer (NewTriggered).
	RouteHeartbeat Route = "/heartbeat"
)

// Routes are all the routes an SSF's Server serves.
var Routes = []Route{RouteSSF, RouteSpawn, RouteQueue, RouteIntentCollector, RouteGarbageCollector}

// timerRoute tells the routes the platform's timers call.
func timerRoute(r Route) bool {
	return r == RouteIntentCollector || r == RouteGarbageCollector || r == RouteHeartbeat
}

// platformRoute tells the routes only the platform itself calls: its queue delivery and its
// timers.
func platformRoute(r Route) bool { return r == RouteQueue || timerRoute(r) }

// A Verifier decides who may call a route. The Server asks it before it reads the request's
// body or does any work for it. Verify returns nil to admit the request; an error wrapping
// ErrUnauthenticated (answered 401: no credentials, or ones that prove nothing) or
// ErrForbidden (403: a proven caller that may not use this route) to refuse it; any other
// error means the verifier could not decide (its keys could not be read), answered 503.
//
// The platforms' verifiers are GoogleIDTokenVerifier (Cloud Run) and AzureKeyVerifier (Azure
// Functions); PlatformVerifier builds the one the platform's settings configure.
type Verifier interface {
	Verify(r *http.Request, route Route) error
}

var (
	// ErrUnauthenticated: the request carries no credentials, or credentials that prove nothing.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the caller is known, and may not use the route.
	ErrForbidden = errors.New("forbidden")
)

// guard verifies the caller of route before next does anything.
func (s *Server) guard(route Route, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := s.verifier.Verify(r, route)
		if err == nil {
			next(w, r)
			return
		}
		status := http.StatusServiceUnavailable
		switch {
		case errors.Is(err, ErrUnauthenticated):
			status = http.StatusUnauthorized
			if s.platform == CloudRun {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			}
		case errors.Is(err, ErrForbidden):
			status = http.StatusForbidden
		}
		slog.Warn("refused a request", "function", s.name, "route", string(route), "status", status, "err", err)
		writeError(w, status, fmt.Errorf("%s refused: %w", route, err))
	}
}

// Settings of the inbound verifiers (docs/modules.md). The modules set them; a host missing
// one refuses to start rather than admit every caller.
const (
	// SettingAudience is the Cloud Run service's own URL: the audience its callers' ID tokens
	// must name.
	SettingAudience = "SSFKIT_AUDIENCE"
	// SettingCallers lists the service accounts (emails, comma-separated) that may call /ssf and
	// /spawn on Cloud Run: the SSF's own and its peers'.
	SettingCallers = "SSFKIT_CALLERS"
	// SettingPushCaller is the service account whose ID token the Pub/Sub push subscription
	// presents on /queue.
	SettingPushCaller = "SSFKIT_PUSH_CALLER"
	// SettingSchedulerCaller is the service account whose ID token the Cloud Scheduler jobs
	// present on the collector routes.
	SettingSchedulerCaller = "SSFKIT_SCHEDULER_CALLER"
	// SettingAzureSite is the Resource Manager ID of the SSF's own function app, whose keys the
	// Azure host reads to check the keys its callers present.
	SettingAzureSite = "SSFKIT_AZURE_SITE"
)

// PlatformVerifier is the platform's verifier of inbound calls, configured by the module's
// settings: Google ID tokens on Cloud Run, the function app's own keys on Azure. A missing or
// malformed setting is an error naming it.
func PlatformVerifier(ctx context.Context, platform Platform, getenv func(string) string) (Verifier, error) {
	return platformVerifier(ctx, platform, getenv, Routes)
}

// platformVerifier is PlatformVerifier for a server of the given routes: it needs the settings
// of those routes' callers only.
func platformVerifier(ctx context.Context, platform Platform, getenv func(string) string, served []Route) (Verifier, error) {
	switch platform {
	case CloudRun:
		c := GoogleIDTokenConfig{Audience: strings.TrimSpace(getenv(SettingAudience)), Callers: map[Route][]string{}}
		for _, r := range served {
			if platformRoute(r) {
				c.FrontEndVerified = append(c.FrontEndVerified, r)
			}
		}
		if c.Audience == "" {
			return nil, missingSetting(SettingAudience, "the service's own URL, the audience its callers' ID tokens name")
		}
		for _, s := range []struct {
			name   string
			serves func(Route) bool
		}{
			{SettingCallers, func(r Route) bool { return r == RouteSSF || r == RouteSpawn }},
			{SettingPushCaller, func(r Route) bool { return r == RouteQueue }},
			{SettingSchedulerCaller, timerRoute},
		} {
			var routes []Route
			for _, r := range served {
				if s.serves(r) {
					routes = append(routes, r)
				}
			}
			if len(routes) == 0 {
				continue
			}
			emails, err := parseEmails(s.name, getenv(s.name))
			if err != nil {
				return nil, err
			}
			for _, r := range routes {
				c.Callers[r] = emails
			}
		}
		return NewGoogleIDTokenVerifier(c)
	case Azure:
		site := getenv(SettingAzureSite)
		if site == "" {
			return nil, missingSetting(SettingAzureSite, "the Resource Manager ID of the SSF's own function app, whose keys it checks callers' keys against")
		}
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("httphost: Azure credentials: %w", err)
		}
		return NewAzureKeyVerifier(AzureKeyConfig{Credential: cred, Site: site})
	}
	return nil, fmt.Errorf("httphost: unknown platform %q", platform)
}

func missingSetting(name, what string) error {
	return fmt.Errorf("httphost: %s is not set (%s; the module sets it): the host refuses to start rather than admit every caller", name, what)
}

// parseEmails reads a comma-separated list of service account emails.
func parseEmails(setting, raw string) ([]string, error) {
	var emails []string
	for _, e := range strings.Split(raw, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if a, err := mail.ParseAddress(e); err != nil || a.Address != e {
			return nil, fmt.Errorf("httphost: %s: %q is not a service account's email", setting, e)
		}
		emails = append(emails, e)
	}
	if len(emails) == 0 {
		return nil, missingSetting(setting, "the service accounts allowed to call")
	}
	return emails, nil
}

// checkAudience accepts an absolute http(s) URL.
func checkAudience(aud string) error {
	u, err := url.Parse(aud)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("httphost: the audience (%s) %q is not the service's URL (https://…)", SettingAudience, aud)
	}
	return nil
}
