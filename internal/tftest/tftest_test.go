package tftest

import (
	"strings"
	"testing"
)

// Without a mirror, providers come from the registry, into a plugin cache.
func TestCLIConfigWithoutMirrors(t *testing.T) {
	t.Setenv("SSFKIT_TF_MIRROR", t.TempDir())
	if cfg := cliConfig(t.TempDir()); !strings.HasPrefix(cfg, "plugin_cache_dir") {
		t.Errorf("without mirrors: %s, want the registry with a plugin cache", cfg)
	}
}
