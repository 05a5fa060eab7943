package main

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// curlRequest is one `curl -s -H ... -d ... URL` command of the README or the dev banner.
type curlRequest struct {
	method, url, key, body string
}

// curlCommands parses the curl commands of a shell snippet: continuation lines joined, words
// split on blanks outside single quotes (the only quoting the snippets use).
func curlCommands(t *testing.T, snippet string) []curlRequest {
	t.Helper()
	var out []curlRequest
	for _, line := range strings.Split(strings.ReplaceAll(snippet, "\\\n", " "), "\n") {
		words := shellWords(t, strings.TrimSpace(line))
		if len(words) == 0 || words[0] != "curl" {
			continue
		}
		var r curlRequest
		for i := 1; i < len(words); i++ {
			switch w := words[i]; {
			case w == "-s":
			case w == "-X" && i+1 < len(words):
				i++
				r.method = words[i]
			case w == "-H" && i+1 < len(words):
				i++
				if k, ok := strings.CutPrefix(words[i], "Idempotency-Key: "); ok {
					r.key = k
				}
			case w == "-d" && i+1 < len(words):
				i++
				r.body = words[i]
			case strings.HasPrefix(w, "http"):
				r.url = w
			default:
				t.Fatalf("curl option %q in %q: extend this parser", w, line)
			}
		}
		out = append(out, r)
	}
	return out
}

func shellWords(t *testing.T, line string) []string {
	var words []string
	var word strings.Builder
	inWord, quoted := false, false
	for _, c := range line {
		switch {
		case c == '\'':
			quoted, inWord = !quoted, true
		case (c == ' ' || c == '\t') && !quoted:
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(c)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

var loopbackBase = regexp.MustCompile(`^http://127\.0\.0\.1:\d+`)

// send runs one parsed curl command against the dev server at base (the snippets name the
// address they were printed for) and returns the status, the replay header and the body.
func (r curlRequest) send(t *testing.T, base string) (int, string, string) {
	t.Helper()
	url := loopbackBase.ReplaceAllString(r.url, base)
	method := r.method
	if method == "" && r.body != "" {
		method = "POST"
	} else if method == "" {
		method = "GET"
	}
	req, _ := http.NewRequest(method, url, strings.NewReader(r.body))
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(local.ReplayedHeader), string(b)
}

// The README's dev requests and the banner's, each run in order on a fresh database, all
// succeed without an application error; sent again they answer the same, marked replayed.
func TestREADMEAndBannerRequestsWorkInOrder(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```sh\n(go run ./cmd/ssfkit dev .*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README: no sh block starting with `go run ./cmd/ssfkit dev`")
	}
	snippets := map[string]string{"README": string(block[1])}
	_, out, stop := startDev(t, "--store", "sqlite://"+t.TempDir()+"/banner.db")
	_, banner, _ := strings.Cut(out.String(), "Try:\n")
	banner, _, _ = strings.Cut(banner, "\n\n")
	stop()
	snippets["banner"] = banner

	for name, snippet := range snippets {
		t.Run(name, func(t *testing.T) {
			reqs := curlCommands(t, snippet)
			if len(reqs) < 3 {
				t.Fatalf("%d curl commands in:\n%s", len(reqs), snippet)
			}
			base, _, stop := startDev(t, "--store", "sqlite://"+t.TempDir()+"/dev.db")
			defer stop()
			answers := map[int]string{}
			for i, r := range reqs {
				status, replayed, body := r.send(t, base)
				if status != 200 || strings.Contains(body, `"error"`) || replayed != "" {
					t.Fatalf("%s request %d (%+v): %d replayed=%q %s", name, i+1, r, status, replayed, body)
				}
				answers[i] = body
			}
			for i, r := range reqs {
				if r.key == "" {
					continue
				}
				status, replayed, body := r.send(t, base)
				if status != 200 || replayed != "true" || body != answers[i] {
					t.Fatalf("%s request %d sent again: %d replayed=%q %s, want %s replayed", name, i+1, status, replayed, body, answers[i])
				}
			}
		})
	}
}

// goSnippetDocs are the Markdown files whose Go snippets must be runnable examples.
var goSnippetDocs = []string{"README.md", "docs/sagas.md", "docs/sql-steps.md"}

// goSnippet is a ```go block of a Markdown file: its first line's number and its lines.
type goSnippet struct {
	line  int
	lines []string
}

// goSnippets returns the Go blocks of a Markdown file.
func goSnippets(t *testing.T, path string) []goSnippet {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []goSnippet
	var cur *goSnippet
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &goSnippet{line: i + 2}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	if cur != nil {
		t.Fatalf("%s: the go block at line %d is not closed", path, cur.line-1)
	}
	return out
}

// trimmed is text as lines without their indentation (or trailing blanks).
func trimmed(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimSpace(l)
	}
	return out
}

// chunks splits a snippet's trimmed lines at elisions (a line "...") and drops blank lines at
// the edges of each part.
func chunks(lines []string) [][]string {
	var out [][]string
	var cur []string
	flush := func() {
		for len(cur) > 0 && cur[0] == "" {
			cur = cur[1:]
		}
		for len(cur) > 0 && cur[len(cur)-1] == "" {
			cur = cur[:len(cur)-1]
		}
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur = nil
	}
	for _, l := range lines {
		if l == "..." {
			flush()
			continue
		}
		cur = append(cur, l)
	}
	flush()
	return out
}

// matchAt returns how many lines of chunk match file from line i on.
func matchAt(file, chunk []string, i int) int {
	n := 0
	for n < len(chunk) && i+n < len(file) && file[i+n] == chunk[n] {
		n++
	}
	return n
}

// findChunks reports whether the chunks appear in file in order, each as contiguous lines, and
// if not, the first line of the snippet that the best partial match failed on.
func findChunks(file []string, parts [][]string) (bool, string) {
	from := 0
	for _, c := range parts {
		found, best, missing := -1, -1, c[0]
		for i := from; i < len(file) && found < 0; i++ {
			n := matchAt(file, c, i)
			if n == len(c) {
				found = i
			} else if n > best {
				best, missing = n, c[n]
			}
		}
		if found < 0 {
			return false, missing
		}
		from = found + len(c)
	}
	return true, ""
}

// Every Go snippet of the README (and of docs/sagas.md and docs/sql-steps.md) is the code of a runnable example: its
// lines appear, in order and contiguous, in one example_test.go file of the module, whose
// output go test checks, so the snippets compile, run and say what they do. Indentation is
// ignored (a snippet may be dedented), and a line "..." elides: the parts around it must
// appear in order in the same file.
func TestREADMEGoSnippetsAreExamples(t *testing.T) {
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	examples := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() != "example_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		examples[rel] = trimmed(strings.Split(string(b), "\n"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 5 {
		t.Fatalf("found %d example_test.go files under %s: %v", len(examples), root, examples)
	}
	for _, doc := range goSnippetDocs {
		snippets := goSnippets(t, filepath.Join(root, doc))
		if len(snippets) == 0 {
			t.Errorf("%s has no Go snippet: drop it from goSnippetDocs", doc)
		}
		for _, sn := range snippets {
			parts := chunks(trimmed(sn.lines))
			if len(parts) == 0 {
				t.Errorf("%s:%d: an empty Go snippet", doc, sn.line)
				continue
			}
			var where []string
			var misses []string
			for path, file := range examples {
				if ok, missing := findChunks(file, parts); ok {
					where = append(where, path)
				} else if missing != parts[0][0] {
					misses = append(misses, fmt.Sprintf("%s has the snippet's start, but not %q", path, missing))
				}
			}
			if len(where) == 0 {
				t.Errorf("%s:%d: the Go snippet starting %q is in no example_test.go (modulo indentation); make it a runnable example, or copy the example's code into %s. %s",
					doc, sn.line, parts[0][0], doc, strings.Join(misses, "; "))
				continue
			}
			t.Logf("%s:%d (%q) is in %s", doc, sn.line, parts[0][0], strings.Join(where, ", "))
		}
	}
}
