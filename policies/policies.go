// Package policies evaluates ssfkit's Rego policies (policies/ssfkit) against a Terraform plan
// in JSON (`terraform show -json PLAN`), with OPA embedded. The same files work with conftest:
//
//	terraform show -json plan.out > plan.json
//	conftest test --policy policies/ssfkit --all-namespaces plan.json
package policies

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/rego"
)

//go:embed ssfkit/*.rego
var files embed.FS

// Verdict is what the policies say of a plan: Deny lists violations, Warn what a plan cannot
// show (values known only after apply).
type Verdict struct {
	Deny []string `json:"deny"`
	Warn []string `json:"warn"`
}

// Evaluate runs every policy against plan, the JSON of `terraform show -json`.
func Evaluate(ctx context.Context, plan []byte) (Verdict, error) {
	var input any
	if err := json.Unmarshal(plan, &input); err != nil {
		return Verdict{}, fmt.Errorf("policies: the plan is not JSON (`terraform show -json PLAN` writes it): %w", err)
	}
	if m, ok := input.(map[string]any); !ok || m["format_version"] == nil {
		return Verdict{}, fmt.Errorf("policies: the JSON has no format_version: not the output of `terraform show -json PLAN`")
	}
	opts := []func(*rego.Rego){rego.Input(input)}
	err := fs.WalkDir(files, "ssfkit", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.rego") {
			return err
		}
		src, err := files.ReadFile(path)
		opts = append(opts, rego.Module(path, string(src)))
		return err
	})
	if err != nil {
		return Verdict{}, err
	}
	var v Verdict
	for _, q := range []struct {
		rule string
		into *[]string
	}{{"deny", &v.Deny}, {"warn", &v.Warn}} {
		rs, err := rego.New(append(opts, rego.Query(fmt.Sprintf("msg := data.ssfkit[_].%s[_]", q.rule)))...).Eval(ctx)
		if err != nil {
			return Verdict{}, fmt.Errorf("policies: %w", err)
		}
		for _, r := range rs {
			*q.into = append(*q.into, fmt.Sprint(r.Bindings["msg"]))
		}
		sort.Strings(*q.into)
	}
	return v, nil
}
