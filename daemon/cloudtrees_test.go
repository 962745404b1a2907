package daemon

import (
	"testing"
	"time"
)

// A cloud worktree is never removed while a turn of it runs, a turn that
// begins while it is being removed waits for the removal, and a worktree
// is due for a check soon after each turn, then less and less often.
func TestCloudTreesBusyAndDue(t *testing.T) {
	ct := newCloudTrees()
	ct.begin("k")
	if ct.remove("k", func(string) { t.Fatal("removed under its turn") }) {
		t.Fatal("remove reported a removal under a turn")
	}
	ct.end("k")
	now := time.Now()
	if keys, next := ct.dueNow(now); len(keys) != 0 || next.Sub(now) > treeCheckFirst {
		t.Fatalf("due right after its turn: %v, next in %s", keys, next.Sub(now))
	}
	if keys, _ := ct.dueNow(now.Add(treeCheckFirst + time.Millisecond)); len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("due after treeCheckFirst: %v", keys)
	}
	ct.later("k")
	ct.later("k")
	if _, next := ct.dueNow(time.Now()); time.Until(next) < 3*treeCheckFirst {
		t.Fatalf("next check in %s after two checks found nothing; want the pause doubled", time.Until(next))
	}

	began := make(chan struct{})
	release := make(chan struct{})
	go func() {
		ct.remove("k", func(string) { close(began); <-release })
	}()
	<-began
	got := make(chan struct{})
	go func() { ct.begin("k"); close(got) }()
	select {
	case <-got:
		t.Fatal("a turn began while its worktree was being removed")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the turn never began after the removal")
	}
	if keys, _ := ct.dueNow(time.Now().Add(time.Hour)); len(keys) != 0 {
		t.Fatalf("a worktree in use is due for a check: %v", keys)
	}
}
