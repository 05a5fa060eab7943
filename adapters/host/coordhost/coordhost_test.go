package coordhost

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
)

// A function with a setting missing or wrong fails at start with the setting's name.
func TestConfigFromEnvNamesTheBadSetting(t *testing.T) {
	good := map[string]string{"SSFKIT_COORD_ROLE": "writer", "SSFKIT_ENVIRONMENT": "prod",
		"SSFKIT_COORD_STORE": "mem://t", "SSFKIT_COORD_QUEUE": "mem://q", "SSFKIT_COORD_SNAPSHOT_EVERY": "500"}
	cfg, err := ConfigFromEnv(func(k string) string { return good[k] })
	if err != nil || cfg.SnapshotEvery != 500 || cfg.Role != RoleWriter {
		t.Fatalf("%+v, %v", cfg, err)
	}
	if cfg, err := ConfigFromEnv(func(k string) string {
		return map[string]string{"SSFKIT_ENVIRONMENT": "e", "SSFKIT_COORD_STORE": "s", "SSFKIT_COORD_QUEUE": "q"}[k]
	}); err != nil || cfg.Role != "" {
		t.Fatalf("no role (both): %+v, %v", cfg, err)
	}
	for setting, value := range map[string]string{"SSFKIT_COORD_ROLE": "reader", "SSFKIT_COORD_STORE": "", "SSFKIT_COORD_QUEUE": "",
		"SSFKIT_ENVIRONMENT": "", "SSFKIT_COORD_SNAPSHOT_EVERY": "0"} {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		env[setting] = value
		if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), setting) {
			t.Errorf("%s=%q: %v, want an error naming it", setting, value, err)
		}
	}
}

// A wake-up that names no session is poison: no retry can decide it.
func TestMessageWithoutASessionIsPoison(t *testing.T) {
	f, err := Open(context.Background(), Config{Role: RoleWriter, Environment: "t", Store: "mem://coordhost-poison", Queue: "mem://q"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, body := range []string{``, `{}`, `{"session":"zz"}`, `{"session":"0"}`, `[1]`} {
		err := f.HandleMessage(context.Background(), &queue.Message{Body: []byte(body)})
		var poison *queue.PoisonError
		if !errors.As(err, &poison) {
			t.Errorf("body %q: %v, want poison", body, err)
		}
	}
	if err := f.HandleMessage(context.Background(), &queue.Message{Body: []byte(`{"session":"1f"}`)}); err != nil {
		t.Errorf("a wake-up for a session that does not exist: %v, want nothing to do", err)
	}
}
