package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/daemon"
)

// Each adapter's line: spent today against its caps, then its state.
func TestPrintAdapters(t *testing.T) {
	usd, tokens := 5.0, int64(100000)
	until := time.Date(2026, 11, 25, 16, 41, 30, 0, time.Local)
	var b bytes.Buffer
	printAdapters(&b, []daemon.AdapterStatus{
		{Name: "claude", Day: "2026-11-25", SpentUSD: 5.125, SpentTokens: 4200, DailyUSD: &usd, State: "capped"},
		{Name: "codex", Day: "2026-11-25", SpentTokens: 120, DailyTokens: &tokens, State: "paused", PausedUntil: &until, RateLimited: 3, WaitingTurns: 2},
		{Name: "flaky", Day: "2026-11-25", State: "ok"},
	})
	want := `adapters: spent today (UTC 2026-11-25)
  claude         $5.12 of $5.00, 4200 tokens  CAPPED until 00:00 UTC
  codex          $0.00, 120 of 100000 tokens  PAUSED after 3 rate limits in a row until 16:41:30, 2 turns waiting
  flaky          $0.00, 0 tokens  ok
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printAdapters(&b, nil)
	if b.Len() != 0 {
		t.Fatalf("no adapters printed %q", b.String())
	}
}
