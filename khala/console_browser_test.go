package khala

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// newChrome starts headless Chromium for one test (Debian's chromium;
// .ci/run installs it). Without it the test skips, unless
// NERVE_REQUIRE_CHROMIUM=1 says it must run.
func newChrome(t testing.TB) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("NERVE_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("chromium not found and NERVE_REQUIRE_CHROMIUM=1: %v", err)
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() }) // cancelling kills the browser
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs browser actions with a deadline, failing the test on error.
func run(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// get runs one action that reads something, with a deadline.
func get[T any](t testing.TB, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

func signInActions(base, token string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(base+"/signin"),
		chromedp.SendKeys(css("#token"), token),
		chromedp.Click(css(`form[action="/signin"] button`)),
		chromedp.WaitVisible(css(`form.signout`)),
	)
}

// TestConsoleInBrowser walks the console in headless Chromium against a
// Khala on loopback, with an agent answering through the HTTP API.
func TestConsoleInBrowser(t *testing.T) {
	ctx := newChrome(t)
	ts := newTestServer(t, withPerson)
	agent := ts.agent("worker-1")
	agent.putWorkflow(pairWF)
	done := agent.start("pair", map[string]any{"turns": 1}, "")
	agent.answerWith(agent.claimOne(), "codex", costing("gpt-5", 1200, 0.01)) // what the usage page shows
	quick := agent.start("pair", map[string]any{"turns": 1}, "")              // its turn is the oldest queued
	id := agent.start("pair", map[string]any{"turns": 4}, "")
	shots := filepath.Join(t.TempDir(), "screenshots")
	os.MkdirAll(shots, 0o755)
	// shoot loads the page again at each width (a reload could repost a
	// form) and saves it whole.
	shoot := func(t *testing.T, name string) {
		t.Helper()
		here := get(t, ctx, "where", chromedp.Evaluate[string](`location.href`))
		for _, size := range []struct {
			name string
			w, h int64
		}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
			run(t, ctx, "resize for "+name, chromedp.EmulateViewport(size.w, size.h), chromedp.Navigate(here), chromedp.WaitVisible(css("main")))
			png := get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
			file := filepath.Join(shots, name+"-"+size.name+".png")
			if err := os.WriteFile(file, png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		run(t, ctx, "desktop again", chromedp.EmulateViewport(1280, 900))
	}

	t.Run("sign in", func(t *testing.T) {
		run(t, ctx, "refuse an agent's token", chromedp.Navigate(ts.URL+"/threads/"+id),
			chromedp.WaitVisible(css("#token")), chromedp.SendKeys(css("#token"), agent.token),
			chromedp.Click(css(`form[action="/signin"] button`)), chromedp.WaitVisible(css("#token-error")))
		if text := get(t, ctx, "read the refusal", chromedp.Text(css("#token-error"))); !strings.Contains(text, "agents cannot sign in") {
			t.Errorf("agent token refusal: %q", text)
		}
		shoot(t, "signin")
		run(t, ctx, "sign in", signInActions(ts.URL, testPerson))
		if html := get(t, ctx, "read the page", chromedp.OuterHTML(css("html"))); strings.Contains(html, testPerson) {
			t.Error("the token is in the page after sign-in")
		}
	})

	t.Run("threads list", func(t *testing.T) {
		run(t, ctx, "list", chromedp.Navigate(ts.URL+"/"))
		rows := get(t, ctx, "read the list", chromedp.Text(css("table.list tbody")))
		if !strings.Contains(rows, id) || !strings.Contains(rows, done) || !strings.Contains(rows, "completed") {
			t.Errorf("threads list: %q", rows)
		}
		shoot(t, "threads")
		run(t, ctx, "filter", chromedp.Navigate(ts.URL+"/?status=completed"))
		rows = get(t, ctx, "read the filtered list", chromedp.Text(css("table.list tbody")))
		if strings.Contains(rows, id+"\t") || strings.Contains(rows, "running") || !strings.Contains(rows, done) {
			t.Errorf("filtered list: %q", rows)
		}
		// The counts follow the threads without a reload.
		run(t, ctx, "list again", chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(css("#counts")))
		get(t, ctx, "mark the page", chromedp.Evaluate[int](`window.nerveMarker = 7`))
		if tk := agent.claimOne(); tk.Thread != quick {
			t.Fatalf("claimed %s, want %s's turn", tk.Thread, quick)
		} else if s, b := agent.respond(tk, "done", nil); s != 200 {
			t.Fatalf("respond: %d %s", s, b)
		}
		run(t, ctx, "see the count move", chromedp.WaitVisible(chromedp.Search(`//ul[@id="counts"]//a[contains(@href, "completed")]/b[text()="2"]`)))
		if m := get(t, ctx, "read the mark", chromedp.Evaluate[int](`window.nerveMarker || 0`)); m != 7 {
			t.Error("the list reloaded to show the counts")
		}
	})

	t.Run("live thread page", func(t *testing.T) {
		run(t, ctx, "open the thread", chromedp.Navigate(ts.URL+"/threads/"+id), chromedp.WaitVisible(css("#summary")))
		get(t, ctx, "mark the page", chromedp.Evaluate[int](`window.nerveMarker = 42`))
		time.Sleep(100 * time.Millisecond) // the stream is open
		tk := agent.claimOne()
		if s, b := agent.respond(tk, "the first answer", nil); s != 200 {
			t.Fatalf("respond: %d %s", s, b)
		}
		run(t, ctx, "see the answer", chromedp.WaitVisible(css("#step-1")))
		text := get(t, ctx, "read it", chromedp.Text(css("#step-1 .content")))
		marker := get(t, ctx, "read the mark", chromedp.Evaluate[int](`window.nerveMarker || 0`))
		if text != "the first answer" || marker != 42 {
			t.Errorf("live message %q, marker %d (0: the page reloaded)", text, marker)
		}

		// A message that is markup shows as text, live and after a reload.
		const evil = `<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">`
		tk = agent.claimOne()
		if s, b := agent.respond(tk, evil, nil); s != 200 {
			t.Fatalf("respond: %d %s", s, b)
		}
		run(t, ctx, "see the markup", chromedp.WaitVisible(css("#step-2")), chromedp.Sleep(200*time.Millisecond))
		text = get(t, ctx, "read it", chromedp.Text(css("#step-2 .content")))
		if pwned := get(t, ctx, "did it run", chromedp.Evaluate[bool](`window.pwned !== undefined`)); text != evil || pwned {
			t.Errorf("live: the markup ran or was not shown as text: %q, pwned %v", text, pwned)
		}
		run(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(css("#step-2")), chromedp.Sleep(200*time.Millisecond))
		text = get(t, ctx, "read it", chromedp.Text(css("#step-2 .content")))
		if pwned := get(t, ctx, "did it run", chromedp.Evaluate[bool](`window.pwned !== undefined`)); text != evil || pwned {
			t.Errorf("reloaded: the markup ran or was not shown as text: %q, pwned %v", text, pwned)
		}
		shoot(t, "thread")
	})

	t.Run("cross-site form post refused", func(t *testing.T) {
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/signout"><input name="csrf" value="guessed"></form>
<script>document.getElementById("f").submit()</script>`, ts.URL)
		}))
		defer evil.Close()
		run(t, ctx, "the other site posts", chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.Search(`//body[contains(., "refused")]`)))
		run(t, ctx, "still signed in", chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(css(`form.signout`)))
	})

	t.Run("other pages", func(t *testing.T) {
		for _, p := range []struct{ name, path, want string }{
			{"inbox", "/inbox", "Nothing waits for you"}, {"workflows", "/workflows", "pair"}, {"workflow", "/workflows/pair", "moderator"},
			{"agents", "/agents", "worker-1"}, {"queue", "/queue", id}, {"usage", "/usage", "pair"},
		} {
			run(t, ctx, p.name, chromedp.Navigate(ts.URL+p.path))
			if text := get(t, ctx, "read "+p.name, chromedp.Text(css("main"))); !strings.Contains(text, p.want) {
				t.Errorf("%s page lacks %q:\n%s", p.name, p.want, text)
			}
			shoot(t, p.name)
		}
	})

	t.Run("first load transfer", func(t *testing.T) {
		kb := firstLoadKB(t, ctx, ts.URL+"/threads/"+id)
		t.Logf("first load of a thread page: %.1f KB", kb)
		if kb > 150 || kb < 1 {
			t.Errorf("a first page load transfers %.1f KB; want some, and at most 150 KB", kb)
		}
	})

	t.Run("sign out", func(t *testing.T) {
		run(t, ctx, "sign out", chromedp.Navigate(ts.URL+"/"), chromedp.Click(css(`form.signout button`)),
			chromedp.WaitVisible(css("#token")), chromedp.Navigate(ts.URL+"/threads/"+id), chromedp.WaitVisible(css("#token")))
	})

	if dir := os.Getenv("NERVE_CONSOLE_DOCS"); dir != "" { // refresh the README's pictures
		for _, f := range []string{"thread-desktop.png", "threads-phone.png"} {
			b, _ := os.ReadFile(filepath.Join(shots, f))
			os.WriteFile(filepath.Join(dir, "console-"+f), b, 0o644)
		}
	}
	t.Logf("screenshots in %s", shots)
}

// firstLoadKB loads url with an empty cache and sums what crossed the
// network: the page and every file it pulled.
func firstLoadKB(t testing.TB, ctx context.Context, url string) float64 {
	t.Helper()
	var (
		mu    sync.Mutex
		total float64
	)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := chromedp.Listen(lctx, func(ev any) {
		if e, ok := ev.(*network.EventLoadingFinished); ok {
			mu.Lock()
			total += e.EncodedDataLength
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "first load", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		if _, err := chromedp.Call(ctx, network.ClearBrowserCache, cdp.Empty{}); err != nil {
			return err
		}
		_, err := chromedp.Call(ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
		return err
	}), chromedp.Navigate(url), chromedp.WaitVisible(css("#summary")), chromedp.Sleep(300*time.Millisecond))
	cancel()
	mu.Lock()
	defer mu.Unlock()
	return total / 1024
}
