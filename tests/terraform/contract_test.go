package terraform

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/terraform-config-inspect/tfconfig"

	"github.com/ssfkit/ssfkit/internal/deploy"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// clouds are the clouds with modules.
var clouds = deploy.Clouds

// A variable of a module's contract: its type (empty: only its presence is checked) and its
// default (nil: required).
type contractVariable struct {
	typ string
	def any
}

// A moduleContract is what every cloud's module of one kind declares (docs/modules.md).
type moduleContract struct {
	module    string                      // the directory under modules/<cloud>
	variables map[string]contractVariable // common variables
	own       map[string][]string         // each cloud's own variables
	outputs   []string                    // every output (each cloud gives exactly these)
	object    string                      // an output whose value is an object literal
	keys      []string                    // its keys, sorted
}

// commonVariables are the variables every cloud's ssf module takes, with their types and
// defaults (docs/modules.md). environment's type is the cloud's own (a name on AWS, the
// environment module's context elsewhere), so only its presence is checked.
var commonVariables = map[string]contractVariable{
	"name":                            {"string", nil},
	"environment":                     {"", nil},
	"artifact":                        {"string", nil},
	"function_timeout_seconds":        {"number", 60.0},
	"gc_bound_seconds":                {"number", 900.0},
	"relaunch_delay_seconds":          {"number", 120.0},
	"key_retention_seconds":           {"number", 86400.0},
	"max_attempts":                    {"number", 10.0},
	"memory_mb":                       {"number", 256.0},
	"intent_collector_every_minutes":  {"number", 1.0},
	"garbage_collector_every_minutes": {"number", 5.0},
	"max_receive_count":               {"number", 5.0},
	"peers":                           {"list(string)", []any{}},
	"encryption_key":                  {"string", "null"},
	"point_in_time_recovery":          {"bool", true},
	"deletion_protection":             {"bool", true},
	"environment_variables":           {"map(string)", map[string]any{}},
	"tags":                            {"map(string)", map[string]any{}},
	"provenance":                      {"string", "off"},
	"provenance_sink":                 {"string", "null"},
}

// cloudVariables are the variables only one cloud's ssf module has.
var cloudVariables = map[string][]string{
	"aws":   {"architecture", "log_retention_days", "encryption_key_alias"},
	"azure": {"storage_replication"},
	"gcp":   {"state_store"},
}

// delivery_window_seconds is the longest time after a start is sent at which the cloud may still
// deliver it; each module's validations keep it below gc_bound_seconds (docs/protocol.md,
// "Delivery windows").
var commonOutputs = []string{"name", "store_url", "queue_url", "dead_letter_queue_url", "function_name", "function_id",
	"collector_function_names", "identity", "table_id", "queue_id", "ssfkit_config", "delivery_window_seconds"}

// ssfkitConfigKeys are the keys of the ssfkit_config output, which `ssfkit up` reads.
var ssfkitConfigKeys = []string{"dead_letter_queue", "function_id", "gc_bound_seconds", "lifetime_seconds", "name", "queue", "relaunch_delay_seconds", "store"}

// TestModuleContract checks that every cloud's ssf module exposes the same variables, with the
// same types and defaults, and the same outputs, so that moving an application between clouds
// changes which module it instantiates and nothing else about the SSFs.
func TestModuleContract(t *testing.T) {
	checkContract(t, moduleContract{module: "ssf", variables: commonVariables, own: cloudVariables, outputs: commonOutputs,
		object: "ssfkit_config", keys: ssfkitConfigKeys})
}

// The coordination module's contract (docs/modules.md, "The `coordination` module").
var (
	coordinationVariables = map[string]contractVariable{
		"name":                     {"string", nil},
		"environment":              {"", nil},
		"artifact":                 {"string", nil},
		"function_timeout_seconds": {"number", 60.0},
		"memory_mb":                {"number", 256.0},
		"heartbeat_every_minutes":  {"number", 1.0},
		"max_receive_count":        {"number", 5.0},
		"snapshot_every":           {"number", 10000.0},
		"encryption_key":           {"string", "null"},
		"point_in_time_recovery":   {"bool", true},
		"deletion_protection":      {"bool", true},
		"tags":                     {"map(string)", map[string]any{}},
	}
	coordinationCloudVariables = map[string][]string{
		"aws":   {"architecture", "log_retention_days", "encryption_key_alias"},
		"azure": {"storage_replication"},
		"gcp":   {},
	}
	coordinationOutputs = []string{"name", "store_url", "queue_url", "dead_letter_queue_url", "blobs_url", "writer_function_name",
		"heartbeat_function_name", "identity", "client_identity", "table_id", "queue_id", "bucket_id", "coord_config"}
	// coordConfigKeys are the keys of the coord_config output: what `ssfkit coord proxy` needs.
	coordConfigKeys = []string{"blobs", "dead_letter_queue", "environment", "function_ids", "queue", "store"}
)

// TestCoordinationModuleContract checks the same of every cloud's coordination module: the same
// variables with the same types and defaults, the same outputs, coord_config's keys.
func TestCoordinationModuleContract(t *testing.T) {
	checkContract(t, moduleContract{module: "coordination", variables: coordinationVariables, own: coordinationCloudVariables,
		outputs: coordinationOutputs, object: "coord_config", keys: coordConfigKeys})
}

// TestEnvironmentProvenanceRetention checks that every cloud's environment module sets the
// provenance retention the same way (docs/provenance.md): days, none by default.
func TestEnvironmentProvenanceRetention(t *testing.T) {
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, cloud := range clouds {
		mod, diags := tfconfig.LoadModule(filepath.Join(root, "modules", cloud, "environment"))
		if diags.HasErrors() {
			t.Fatalf("%s: %v", cloud, diags.Err())
		}
		v, ok := mod.Variables["provenance_retention_days"]
		if !ok || v.Type != "number" || fmt.Sprint(v.Default) != "0" {
			t.Errorf("%s: the environment module's provenance_retention_days is %+v, want a number defaulting to 0", cloud, v)
		}
	}
}

func checkContract(t *testing.T, c moduleContract) {
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, cloud := range clouds {
		t.Run(cloud, func(t *testing.T) {
			dir := filepath.Join(root, "modules", cloud, c.module)
			mod, diags := tfconfig.LoadModule(dir)
			if diags.HasErrors() {
				t.Fatalf("%s: %v", dir, diags.Err())
			}
			for name, want := range c.variables {
				v, ok := mod.Variables[name]
				if !ok {
					t.Errorf("variable %s is missing", name)
					continue
				}
				if want.typ != "" && v.Type != want.typ {
					t.Errorf("variable %s has type %s, want %s", name, v.Type, want.typ)
				}
				if fmt.Sprint(v.Default) != fmt.Sprint(want.def) && !(want.def == "null" && v.Default == nil && !v.Required) {
					t.Errorf("variable %s defaults to %#v, want %#v", name, v.Default, want.def)
				}
				if want.def == nil && !v.Required {
					t.Errorf("variable %s must be required", name)
				}
			}
			own, listed := c.own[cloud]
			if !listed {
				t.Errorf("the contract does not list %s's own variables", cloud)
			}
			for name, v := range mod.Variables {
				if _, common := c.variables[name]; !common && !slices.Contains(own, name) {
					t.Errorf("variable %s is neither common (docs/modules.md) nor listed as %s's own", name, cloud)
				}
				if v.Description == "" {
					t.Errorf("variable %s has no description", name)
				}
			}
			for _, name := range own {
				if _, ok := mod.Variables[name]; !ok {
					t.Errorf("%s's own variable %s is missing", cloud, name)
				}
			}
			var outputs []string
			for name, o := range mod.Outputs {
				outputs = append(outputs, name)
				if o.Description == "" {
					t.Errorf("output %s has no description", name)
				}
			}
			slices.Sort(outputs)
			if want := slices.Sorted(slices.Values(c.outputs)); !slices.Equal(outputs, want) {
				t.Errorf("outputs %v, want %v", outputs, want)
			}
			keys, err := objectOutputKeys(filepath.Join(dir, "outputs.tf"), c.object)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys, c.keys) {
				t.Errorf("%s has keys %v, want %v", c.object, keys, c.keys)
			}
			for _, f := range []string{"main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("the module has no %s", f)
				}
			}
		})
	}
}

// objectOutputKeys returns the sorted keys of the object the named output's value builds.
func objectOutputKeys(path, output string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "output" || len(b.Labels) != 1 || b.Labels[0] != output {
			continue
		}
		value, ok := b.Body.Attributes["value"]
		if !ok {
			return nil, fmt.Errorf("%s: output %s has no value", path, output)
		}
		obj, ok := value.Expr.(*hclsyntax.ObjectConsExpr)
		if !ok {
			return nil, fmt.Errorf("%s: output %s is not an object literal", path, output)
		}
		var keys []string
		for _, item := range obj.Items {
			key := hcl.ExprAsKeyword(item.KeyExpr)
			if key == "" {
				return nil, fmt.Errorf("%s: output %s has a computed key", path, output)
			}
			keys = append(keys, strings.TrimSpace(key))
		}
		slices.Sort(keys)
		return keys, nil
	}
	return nil, fmt.Errorf("%s: no output %s", path, output)
}
