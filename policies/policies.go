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
	"sync"

	"github.com/open-policy-agent/opa/v1/rego"
)

//go:embed ssfkit/*.rego
var files embed.FS

// Verdict is what the policies say of a plan: Deny lists violations (a rule broken, or a grant
// the plan cannot show), Warn what a non-security rule cannot check. Each message starts with
// the rule that made it, in brackets: "[sovereignty] module.ssf...: ...".
type Verdict struct {
	Deny []string `json:"deny"`
	Warn []string `json:"warn"`
}

// queries are the policies compiled once: the deny and the warn rules of every package.
var queries = sync.OnceValues(func() ([2]rego.PreparedEvalQuery, error) {
	var modules []func(*rego.Rego)
	err := fs.WalkDir(files, "ssfkit", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.rego") {
			return err
		}
		src, err := files.ReadFile(path)
		modules = append(modules, rego.Module(path, string(src)))
		return err
	})
	var q [2]rego.PreparedEvalQuery
	if err != nil {
		return q, err
	}
	for i, rule := range []string{"deny", "warn"} {
		if q[i], err = rego.New(append(modules, rego.Query(fmt.Sprintf("msg := data.ssfkit[rule].%s[_]", rule)))...).PrepareForEval(context.Background()); err != nil {
			return q, fmt.Errorf("policies: %w", err)
		}
	}
	return q, nil
})

// Evaluate runs every policy against plan, the JSON of `terraform show -json`.
func Evaluate(ctx context.Context, plan []byte) (Verdict, error) {
	var input any
	if err := json.Unmarshal(plan, &input); err != nil {
		return Verdict{}, fmt.Errorf("policies: the plan is not JSON (`terraform show -json PLAN` writes it): %w", err)
	}
	if m, ok := input.(map[string]any); !ok || m["format_version"] == nil {
		return Verdict{}, fmt.Errorf("policies: the JSON has no format_version: not the output of `terraform show -json PLAN`")
	}
	q, err := queries()
	if err != nil {
		return Verdict{}, err
	}
	var v Verdict
	for i, into := range []*[]string{&v.Deny, &v.Warn} {
		rs, err := q[i].Eval(ctx, rego.EvalInput(input))
		if err != nil {
			return Verdict{}, fmt.Errorf("policies: %w", err)
		}
		for _, r := range rs {
			*into = append(*into, fmt.Sprintf("[%v] %v", r.Bindings["rule"], r.Bindings["msg"]))
		}
		sort.Strings(*into)
	}
	return v, nil
}
