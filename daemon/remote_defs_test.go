package daemon

import (
	"context"
	"testing"
)

// The cache of remote definitions keeps a version while a thread it
// remembers uses it, and drops it when the last such thread ends here:
// a workflow published again and again no longer keeps every version
// for the daemon's life.
func TestRemoteDefinitionsGoWithTheirThreads(t *testing.T) {
	const v1 = "workflow: defs\nbinding: cloud\nmoderator: '$count(messages) < 2 ? {\"role\": \"w\", \"instruction\": \"go\"} : {\"done\": true}'\nroles:\n  w: {prompt: p}\n"
	cl, _ := remoteAgent(t, "defs", v1)
	ctx := context.Background()
	if _, err := cl.StartThread(ctx, "defs", nil, ""); err != nil {
		t.Fatal(err)
	}
	d := remoteDaemon(t, cl)
	runClaimed(t, d, claimOne(t, cl), "fragile") // thread A, turn 1 of 2, under v1
	if n := cachedVersions(d); n != 1 {
		t.Fatalf("%d versions cached after a turn, want 1", n)
	}
	a2 := claimOne(t, cl)

	// v2: one turn per thread. Thread B runs under it and ends.
	if _, err := cl.PutWorkflow(ctx, "defs", []byte("workflow: defs\nbinding: cloud\nmoderator: 'last = null ? {\"role\": \"w\", \"instruction\": \"go\"} : {\"done\": true}'\nroles:\n  w: {prompt: p}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.StartThread(ctx, "defs", nil, ""); err != nil {
		t.Fatal(err)
	}
	runClaimed(t, d, claimOne(t, cl), "fragile")
	if n := cachedVersions(d); n != 1 {
		t.Fatalf("%d versions cached after thread B ended, want 1 (v1, which thread A still uses)", n)
	}
	if d.rdefs.thread(historyKey("origin", a2)) == nil {
		t.Fatal("thread A's definition was dropped while it runs")
	}
	runClaimed(t, d, a2, "fragile") // thread A ends
	if n := cachedVersions(d); n != 0 {
		t.Fatalf("%d versions cached after every thread ended, want 0", n)
	}
}

// cachedVersions is how many remote definitions d keeps.
func cachedVersions(d *Daemon) int {
	d.rdefs.mu.Lock()
	defer d.rdefs.mu.Unlock()
	return len(d.rdefs.defs)
}
