package khala

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/usage"
)

// usageRowRE reads a row of a console usage table: its key and messages.
var usageRowRE = regexp.MustCompile(`<tr><td>([^<]*)</td><td>(\d+)</td>`)

// consoleUsage reads the console's usage page: the total messages and,
// per table id (usage-by-agent, ...), each key's messages.
func consoleUsage(t *testing.T, page string) (int64, map[string]map[string]int64) {
	t.Helper()
	m := regexp.MustCompile(`id="usage-total">Total: <b>(\d+)</b>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the usage page has no total:\n%s", page)
	}
	total, _ := strconv.ParseInt(m[1], 10, 64)
	tables := map[string]map[string]int64{}
	for _, part := range strings.Split(page, `<table class="list num" id="`)[1:] {
		id := part[:strings.IndexByte(part, '"')]
		part = part[:strings.Index(part, "</table>")]
		tables[id] = map[string]int64{}
		for _, r := range usageRowRE.FindAllStringSubmatch(part, -1) {
			n, _ := strconv.ParseInt(r[2], 10, 64)
			tables[id][r[1]] = n
		}
	}
	return total, tables
}

// The console's usage page and GET /v1/usage read one rollup: the same
// totals, and a person's answer (which has no usage) counted in neither.
func TestConsoleUsageIsTheAPIs(t *testing.T) {
	ts := newTestServer(t, withPerson)
	a := ts.agent("laptop")
	alice := ts.person("alice")
	a.putWorkflow(releaseWF)
	id := a.start("release", nil, "")
	a.answerWith(a.claimOne(), "codex", costing("gpt-5", 1200, 0.25))
	alice.must("POST", answerPath(id, 2), map[string]any{"content": "ship it", "meta": map[string]any{"approved": true}}, 200, nil)
	if th := a.thread(id); th.Status != "completed" {
		t.Fatalf("the thread did not end: %s", th.Status)
	}

	b := newBrowser(t, ts.URL)
	b.signIn(testPerson)
	status, page := b.get("/usage")
	if status != 200 {
		t.Fatalf("/usage: %d\n%s", status, page)
	}
	total, tables := consoleUsage(t, page)
	for _, by := range []string{"workflow", "agent", "model", "day"} {
		api := a.usage("?by=" + by)
		if api.Total.Messages != 1 || total != api.Total.Messages {
			t.Errorf("by %s: the API counts %d messages, the console %d; want 1 (the agent's)", by, api.Total.Messages, total)
		}
		want := map[string]int64{}
		for _, g := range api.Groups {
			key := g.Key
			if key == "" {
				key = "(unknown)"
			}
			want[key] = g.Messages
		}
		if got := tables["usage-by-"+by]; !equalCounts(got, want) {
			t.Errorf("by %s: the console shows %v, the API %v", by, got, want)
		}
	}
	if _, ok := tables["usage-by-agent"]["alice"]; ok {
		t.Error("the console counts alice's answer as an agent's turn")
	}
	if !strings.Contains(page, usage.Dollars(0.25)) {
		t.Errorf("the page lacks the cost %s", usage.Dollars(0.25))
	}
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
