package policies

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// basePlan is a recorded real plan of the corpus with only the kit's module in it (the case's
// own violation left out): a plan the policies pass.
func basePlan(t *testing.T, cloud string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", cloud, "unencrypted-queue", "plan.json"))
	if cloud == "gcp" {
		b, err = os.ReadFile(filepath.Join("testdata", "corpus", cloud, "editor", "plan.json"))
	}
	if err != nil {
		t.Fatal(err)
	}
	var plan map[string]any
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, rc := range plan["resource_changes"].([]any) {
		if strings.HasPrefix(rc.(map[string]any)["address"].(string), "module.") {
			kept = append(kept, rc)
		}
	}
	plan["resource_changes"] = kept
	if v := evaluate(t, plan); len(v.Deny) != 0 || len(v.Warn) != 0 {
		t.Fatalf("the kit's module alone: %+v", v)
	}
	return plan
}

func evaluate(t *testing.T, plan map[string]any) Verdict {
	t.Helper()
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Evaluate(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// after returns the planned values of the resource at address.
func after(t *testing.T, plan map[string]any, address string) map[string]any {
	for _, rc := range plan["resource_changes"].([]any) {
		if rc.(map[string]any)["address"] == address {
			return rc.(map[string]any)["change"].(map[string]any)["after"].(map[string]any)
		}
	}
	t.Fatalf("no %s in the plan", address)
	return nil
}

// A mutation rewrites one statement of an IAM policy; widens says whether the result reaches
// more than the original (the policies must then deny it) or the same (they must not).
type mutation struct {
	name   string
	widens bool
	apply  func(r *rand.Rand, s map[string]any)
}

func randomCase(r *rand.Rand, s string) string {
	b := []byte(s)
	for i := range b {
		if r.IntN(2) == 0 {
			b[i] = strings.ToUpper(string(b[i]))[0]
		} else {
			b[i] = strings.ToLower(string(b[i]))[0]
		}
	}
	return string(b)
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

var iamMutations = []mutation{
	{"an action's case", false, func(r *rand.Rand, s map[string]any) {
		if s["Action"] == nil { // moved to NotAction by an earlier mutation
			return
		}
		actions := asList(s["Action"])
		for i, a := range actions {
			actions[i] = randomCase(r, a.(string))
		}
		s["Action"] = actions
	}},
	{"a lone action as a string", false, func(r *rand.Rand, s map[string]any) {
		if l := asList(s["Action"]); len(l) == 1 {
			s["Action"] = l[0]
		}
	}},
	{"a wildcard action", true, func(r *rand.Rand, s map[string]any) {
		s["Action"] = append(asList(s["Action"]), randomCase(r, pick(r, "*", "dynamodb:*", "sqs:*", "dynamodb:Get*", "*:*", "s3:GetObject", "iam:PassRole", "dynamodb:Scan", "kms:*", "lambda:*")))
	}},
	{"NotAction", true, func(r *rand.Rand, s map[string]any) { s["NotAction"] = s["Action"]; delete(s, "Action") }},
	{"NotResource", true, func(r *rand.Rand, s map[string]any) { s["NotResource"] = s["Resource"]; delete(s, "Resource") }},
	{"a wildcard resource", true, func(r *rand.Rand, s map[string]any) {
		s["Resource"] = append(asList(s["Resource"]), pick(r, "*", "arn:aws:dynamodb:*:*:table/*", "arn:aws:sqs:us-east-1:123456789012:*", "arn:aws:dynamodb:us-east-1:123456789012:table/corpus-*", "arn:aws:lambda:us-east-1:123456789012:function:*"))
	}},
	{"another SSF's resource", true, func(r *rand.Rand, s map[string]any) {
		s["Resource"] = append(asList(s["Resource"]), pick(r, "arn:aws:dynamodb:us-east-1:123456789012:table/corpus-b", "arn:aws:sqs:us-east-1:123456789012:corpus-b", "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/corpus-b:*",
			"arn:aws:s3:::corpus-provenance-123456789012/provenance/calls/ssf=b/*", "arn:aws:s3:::corpus-provenance-123456789012/provenance/*/ssf=a/*"))
	}},
	{"an Effect IAM would not read as Deny", true, func(r *rand.Rand, s map[string]any) {
		s["Effect"] = pick(r, "allow", "ALLOW", " Allow", "Allow ")
		s["Action"] = append(asList(s["Action"]), "*")
	}},
	{"a condition", false, func(r *rand.Rand, s map[string]any) {
		s["Condition"] = map[string]any{"Bool": map[string]any{"aws:SecureTransport": "true"}}
	}},
	{"a principal", true, func(r *rand.Rand, s map[string]any) { s["NotPrincipal"] = map[string]any{"AWS": "arn:aws:iam::1:root"} }},
}

// The SSF role's policy in the AWS example's real plan, mutated at random: every widening is
// denied, and rewriting that reaches the same is not.
func TestMutatedIAMPolicies(t *testing.T) {
	base := basePlan(t, "aws")
	const address = "module.ssf.aws_iam_role_policy.this"
	r := rand.New(rand.NewPCG(1, 2))
	widened := 0
	for i := range 200 {
		plan := clone(t, base)
		values := after(t, plan, address)
		var doc map[string]any
		if err := json.Unmarshal([]byte(values["policy"].(string)), &doc); err != nil {
			t.Fatal(err)
		}
		statements := asList(doc["Statement"])
		var applied []string
		widens := false
		for range 1 + r.IntN(3) {
			m := iamMutations[r.IntN(len(iamMutations))]
			m.apply(r, statements[r.IntN(len(statements))].(map[string]any))
			applied = append(applied, m.name)
			widens = widens || m.widens
		}
		doc["Statement"] = statements
		b, _ := json.Marshal(doc)
		values["policy"] = string(b)
		v := evaluate(t, plan)
		denied := slices.ContainsFunc(v.Deny, func(d string) bool { return strings.Contains(d, address) })
		if denied != widens {
			t.Fatalf("mutation %d (%s) widens=%v, denied=%v:\n%s\n%v", i, strings.Join(applied, ", "), widens, denied, b, v.Deny)
		}
		if widens {
			widened++
		}
	}
	if widened < 80 {
		t.Fatalf("only %d of 200 mutations widened the policy", widened)
	}
}

// The Firestore grant's condition in the GCP example's real plan, rewritten: anything but the
// module's exact form is denied.
func TestMutatedGCPConditions(t *testing.T) {
	base := basePlan(t, "gcp")
	address := `module.ssf.google_project_iam_member.state[0]`
	values := after(t, base, address)
	own := values["condition"].([]any)[0].(map[string]any)["expression"].(string)
	for _, expr := range append(rewrapped(own),
		strings.ReplaceAll(own, "==", "!="),
		strings.Replace(own, "corpus-a", "corpus-b", 1),
		strings.Replace(own, "corpus-a", "corpus-a\" || \"x", 1),
		strings.Replace(own, "databases/", "databases/*", 1),
		"resource.name.startsWith(\"projects/\")",
		"",
	) {
		expectConditionDenied(t, base, address, expr)
	}
	expectConditionDenied(t, base, address, nil)
}

// rewrapped are an exact condition's rewritings that no longer read as it: widened, negated,
// parenthesized, padded.
func rewrapped(own string) []string {
	return []string{own + " || true", "true || " + own, "!(" + own + ")", "(" + own + ")", own + " "}
}

// expectConditionDenied sets the condition of the grant at address in a copy of base to expr (a
// string; nil: no condition at all) and expects the policies to deny that grant.
func expectConditionDenied(t *testing.T, base map[string]any, address string, expr any) {
	t.Helper()
	plan := clone(t, base)
	if expr == nil {
		after(t, plan, address)["condition"] = []any{}
	} else {
		after(t, plan, address)["condition"].([]any)[0].(map[string]any)["expression"] = expr
	}
	if v := evaluate(t, plan); !slices.ContainsFunc(v.Deny, func(d string) bool { return strings.Contains(d, address) }) {
		t.Errorf("condition %v: not denied (%v)", expr, v.Deny)
	}
}

// The provenance grant's condition in the GCP example's real plan, rewritten: anything but the
// module's exact form (the SSF's own three partitions) is denied, and so is a grant without it.
func TestMutatedGCPProvenanceConditions(t *testing.T) {
	base := basePlan(t, "gcp")
	address := `module.ssf.google_storage_bucket_iam_member.provenance[0]`
	values := after(t, base, address)
	own := values["condition"].([]any)[0].(map[string]any)["expression"].(string)
	first, _, _ := strings.Cut(own, " || ")
	for _, expr := range append(rewrapped(own),
		first,
		strings.ReplaceAll(own, "ssf=a/", "ssf=b/"),
		strings.ReplaceAll(own, "ssf=a/", "ssf=a"),
		strings.ReplaceAll(own, "/calls/", "/other/"),
		strings.ReplaceAll(own, "startsWith", "endsWith"),
		strings.ReplaceAll(own, "corpus-provenance-123456789012", "corpus-provenance-1"),
		`resource.name.startsWith("projects/_/buckets/corpus-provenance-123456789012/objects/")`,
		"",
	) {
		expectConditionDenied(t, base, address, expr)
	}
	expectConditionDenied(t, base, address, nil)
}

func clone(t *testing.T, plan map[string]any) map[string]any {
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}
