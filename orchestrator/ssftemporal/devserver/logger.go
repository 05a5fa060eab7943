package devserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// slogLogger passes Temporal's warnings and errors to an slog.Logger; its Debug and Info
// chatter (several lines per task) is dropped.
type slogLogger struct {
	out *slog.Logger
	// muted is set once Stop begins: every request that shutdown cancels is logged as a warning
	// or an error, dozens of lines that say nothing about the user's workflows.
	muted *atomic.Bool
}

func (slogLogger) Debug(string, ...tag.Tag) {}
func (slogLogger) Info(string, ...tag.Tag)  {}

func (l slogLogger) Warn(msg string, tags ...tag.Tag) {
	// The HTTP API (needed only by Nexus) is off on purpose: one listener fewer.
	if strings.HasPrefix(msg, "HTTP API port has not been set") {
		return
	}
	l.log(slog.LevelWarn, msg, tags)
}

func (l slogLogger) Error(msg string, tags ...tag.Tag)  { l.log(slog.LevelError, msg, tags) }
func (l slogLogger) DPanic(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags) }

// Panic and Fatal must not return: Temporal's callers go on as if the call had ended the
// process. A panic keeps the stack for the report without exiting an embedding program.
func (l slogLogger) Panic(msg string, tags ...tag.Tag) { l.fail(msg, tags) }
func (l slogLogger) Fatal(msg string, tags ...tag.Tag) { l.fail(msg, tags) }

func (l slogLogger) With(tags ...tag.Tag) log.Logger {
	return slogLogger{out: l.out.With(attrs(tags)...), muted: l.muted}
}

func (l slogLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	if !l.muted.Load() {
		l.out.Log(context.Background(), level, msg, attrs(tags)...)
	}
}

func (l slogLogger) fail(msg string, tags []tag.Tag) {
	l.out.Error(msg, attrs(tags)...)
	panic(fmt.Sprintf("temporal: %s %v", msg, attrs(tags)))
}

func attrs(tags []tag.Tag) []any {
	out := make([]any, len(tags))
	for i, t := range tags {
		out[i] = slog.Any(t.Key(), t.Value())
	}
	return out
}
