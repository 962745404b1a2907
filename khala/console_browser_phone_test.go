package khala

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// phoneFit is what the phone test measures of the threads list: how wide
// the page and the table are against what shows, and the right edge of
// the last column's heading.
type phoneFit struct {
	Viewport    float64 `json:"viewport"`
	Page        float64 `json:"page"`
	TableScroll float64 `json:"tableScroll"`
	TableClient float64 `json:"tableClient"`
	LastRight   float64 `json:"lastRight"`
	Headings    int     `json:"headings"`
}

const measureFit = `(() => {
  const t = document.querySelector("table.list");
  const ths = [...t.querySelectorAll("thead th")];
  return {viewport: window.innerWidth, page: document.documentElement.scrollWidth,
    tableScroll: t.scrollWidth, tableClient: t.clientWidth,
    lastRight: Math.max(...ths.map(th => th.getBoundingClientRect().right)), headings: ths.length};
})()`

// TestConsoleThreadsFitAPhone: on a 390 px wide phone the threads list
// shows every column whole, with no sideways scrolling of the page or of
// the table, and a cancelled thread's mark says what happened to it.
func TestConsoleThreadsFitAPhone(t *testing.T) {
	ctx := newChrome(t)
	ts := newTestServer(t, withPerson)
	agent := ts.agent("worker-1")
	agent.putWorkflow(strings.Replace(pairWF, "workflow: pair", "workflow: security-review", 1))
	done := agent.start("security-review", map[string]any{"turns": 1}, "")
	agent.respond(agent.claimOne(), "reviewed", nil)
	cancelled := agent.start("security-review", map[string]any{"turns": 3}, "")
	agent.must("POST", "/v1/threads/"+cancelled+"/cancel", nil, 200, nil)
	for range 10 {
		agent.start("security-review", map[string]any{"turns": 3}, "")
	}

	// Leave the list (its counts stream live) before the server closes.
	t.Cleanup(func() { _ = chromedp.Do(ctx, chromedp.Navigate("about:blank")) })
	run(t, ctx, "sign in", signInActions(ts.URL, testPerson))
	run(t, ctx, "a phone's width", chromedp.EmulateViewport(390, 844), chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(css("table.list")))
	fit := get(t, ctx, "measure", chromedp.Evaluate[phoneFit](measureFit))
	t.Logf("at 390 px: %+v", fit)
	if dir := os.Getenv("NERVE_SHOTS"); dir != "" {
		os.WriteFile(filepath.Join(dir, "threads-390.png"), get(t, ctx, "screenshot", chromedp.FullScreenshot(100)), 0o644)
	}
	if fit.Headings != 5 || fit.Page > fit.Viewport || fit.TableScroll > fit.TableClient || fit.LastRight > fit.Viewport {
		t.Errorf("the threads list does not fit 390 px: %+v", fit)
	}
	row := get(t, ctx, "read the cancelled row", chromedp.Text(css(`tr[data-thread="`+cancelled+`"]`)))
	mark := get(t, ctx, "read its mark", chromedp.Evaluate[string](`document.querySelector('tr[data-thread="`+cancelled+`"] .status').title`))
	if !strings.Contains(row, "cancelled") || strings.Contains(row, "!") || !strings.Contains(mark, "cancelled by worker-1") {
		t.Errorf("a cancelled thread's row %q, its mark's title %q: want it to say cancelled and by whom, not a bare !", row, mark)
	}
	if row := get(t, ctx, "read the completed row", chromedp.Text(css(`tr[data-thread="`+done+`"]`))); !strings.Contains(row, "completed") {
		t.Errorf("the completed row: %q", row)
	}
}
