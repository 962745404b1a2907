package main

import (
	"regexp"
	"strings"
	"testing"
)

// `nerve console` for a person: the inbox shows the role's prompt and the
// instruction, not the text composed for an agent; the workflow filter
// offers every workflow with threads (one run from a file is in no
// workflow directory); a cancelled thread's mark says so in words; an
// unknown path gets the console's own 404 page.
func TestConsoleLocalPagesForPeople(t *testing.T) {
	e := newEnv(t)
	e.write("workflows/quick.yaml", quickWorkflow)
	e.must(0, "workflow", "run", "quick")
	release := repoFile(t, "examples/release.yaml")
	e.must(0, "workflow", "run", release, "--input", "version=1.2", "--detach")
	e.must(0, "workflow", "run", release, "--input", "version=1.3", "--detach")
	waitInbox(t, e, 2)
	e.must(0, "workflow", "cancel", "release#thread-3")
	waitInbox(t, e, 1)

	c, base := signedInConsole(t, e)
	_, inbox := consoleGet(t, c, base+"/inbox")
	for _, want := range []string{"Read the release notes and approve them, or say what must change.", "Approve the release notes of version 1.2"} {
		if !strings.Contains(inbox, want) {
			t.Errorf("the inbox lacks %q:\n%s", want, inbox)
		}
	}
	for _, agents := range []string{"fenced", "nerve thread messages", "You are approver"} {
		if strings.Contains(inbox, agents) {
			t.Errorf("the inbox shows the agent's text %q:\n%s", agents, inbox)
		}
	}

	_, list := consoleGet(t, c, base+"/?status=completed")
	filter := regexp.MustCompile(`(?s)<select name="workflow">(.*?)</select>`).FindStringSubmatch(list)
	if filter == nil || !strings.Contains(filter[1], "<option>release</option>") || !strings.Contains(filter[1], "<option>quick</option>") {
		t.Errorf("the workflow filter should offer quick and release: %v", filter)
	}
	_, all := consoleGet(t, c, base+"/")
	row := regexp.MustCompile(`(?s)<tr data-thread="thread-3">.*?</tr>`).FindString(all)
	if !strings.Contains(row, `title="cancelled by user">cancelled</span>`) || strings.Contains(row, ">!<") {
		t.Errorf("the cancelled thread's row should say cancelled by whom, not a bare mark:\n%s", row)
	}

	status, page := consoleGet(t, c, base+"/no/such/page")
	if status != 404 || !strings.Contains(page, "there is no page at /no/such/page") || !strings.Contains(page, "Sign out") {
		t.Errorf("an unknown path: %d\n%s", status, page)
	}
}
