package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/usage"
)

// consoleGet reads a console page with a signed-in client.
func consoleGet(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `nerve usage` and `nerve console`'s usage page give the same figures
// for a thread a person answered in: the person's answer has no usage and
// is in neither (it was counted as an agent's turn, by the person's name).
func TestConsoleUsageIsNerveUsage(t *testing.T) {
	e := newEnv(t)
	e.must(0, "workflow", "run", repoFile(t, "examples/release.yaml"), "--input", "version=1.2", "--detach")
	waitInbox(t, e, 1)
	by := e.must(0, "thread", "answer", "release#thread-1", "ship it", "--meta", `{"approved": true}`, "--json")
	var answered answerJSON
	if err := json.Unmarshal([]byte(by.stdout), &answered); err != nil || answered.By == "" {
		t.Fatalf("answer --json: %v %s", err, by)
	}
	e.must(0, "workflow", "logs", "release#thread-1", "-f")

	c, base := signedInConsole(t, e)
	status, page := consoleGet(t, c, base+"/usage")
	if status != 200 {
		t.Fatalf("/usage: %d\n%s", status, page)
	}
	m := regexp.MustCompile(`id="usage-total">Total: <b>(\d+)</b>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the usage page has no total:\n%s", page)
	}
	total, _ := strconv.ParseInt(m[1], 10, 64)
	for _, dim := range []string{"workflow", "agent", "model", "day"} {
		var r usage.Report
		out := e.must(0, "usage", "--by", dim, "--json")
		if err := json.Unmarshal([]byte(out.stdout), &r); err != nil {
			t.Fatalf("usage --json: %v\n%s", err, out)
		}
		if r.Total.Messages != 1 || total != r.Total.Messages {
			t.Errorf("by %s: nerve usage counts %d messages, the console %d; want 1 (the author's)", dim, r.Total.Messages, total)
		}
		i := strings.Index(page, `id="usage-by-`+dim+`"`)
		if i < 0 {
			t.Fatalf("the page has no table by %s:\n%s", dim, page)
		}
		table := page[i : i+strings.Index(page[i:], "</table>")]
		for _, g := range r.Groups {
			key := g.Key
			if key == "" {
				key = "(unknown)" // as nerve usage prints it
			}
			if !strings.Contains(table, "<tr><td>"+key+"</td><td>"+strconv.FormatInt(g.Messages, 10)+"</td>") {
				t.Errorf("by %s: the console lacks %s with %d messages:\n%s", dim, key, g.Messages, table)
			}
		}
		if n := strings.Count(table, "<tr><td>"); n != len(r.Groups) {
			t.Errorf("by %s: the console has %d rows, nerve usage %d:\n%s", dim, n, len(r.Groups), table)
		}
	}
	if strings.Contains(page, "<tr><td>"+answered.By+"</td>") {
		t.Errorf("the console counts %s's answer as an agent's turn:\n%s", answered.By, page)
	}
}
