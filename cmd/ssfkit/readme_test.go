package main

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/host/local"
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
