package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// fakeKhala answers exactly the requests given as "METHOD PATH" with a
// status and a JSON body, and fails the test on any other, or on one of
// them left unasked.
func fakeKhala(t *testing.T, stubs map[string]func() (int, any)) *remote.Client {
	t.Helper()
	used := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.RequestURI()
		stub, ok := stubs[key]
		if !ok {
			t.Errorf("unexpected request %s", key)
			http.Error(w, "{}", http.StatusTeapot)
			return
		}
		used[key] = true
		status, body := stub()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(func() {
		srv.Close()
		for k := range stubs {
			if !used[k] {
				t.Errorf("stub %s was not used", k)
			}
		}
	})
	c := remote.New("origin", srv.URL, "khala_agent_x")
	c.Retries = 0
	return c
}

func apiErr(code, msg string) any {
	return map[string]any{"error": map[string]string{"code": code, "message": msg}}
}

// A remote is a threadSource: the server's refusals of a request are
// usage errors, a trace stands for events when not following, and cancel
// answers the thread as it is afterwards.
func TestRemoteSource(t *testing.T) {
	ctx := context.Background()
	running := func() (int, any) {
		return 200, workflow.Thread{ID: "thread-1", Workflow: "review", Status: workflow.StatusRunning}
	}
	t.Run("start", func(t *testing.T) {
		src := remoteSource{fakeKhala(t, map[string]func() (int, any){
			"POST /v1/workflows/review/threads": func() (int, any) { return 201, map[string]string{"thread": "thread-7", "status": "running"} },
		})}
		th, err := src.Start(ctx, daemon.StartRequest{Workflow: "review", Input: map[string]any{"change": "x"}})
		if err != nil || th.ID != "thread-7" || th.Workflow != "review" || th.Status != workflow.StatusRunning {
			t.Fatalf("start: %+v %v", th, err)
		}
	})
	t.Run("unknown workflow is a usage error", func(t *testing.T) {
		src := remoteSource{fakeKhala(t, map[string]func() (int, any){
			"POST /v1/workflows/nope/threads": func() (int, any) { return 404, apiErr("not_found", `unknown workflow "nope"`) },
		})}
		if _, err := src.Start(ctx, daemon.StartRequest{Workflow: "nope"}); exitCodeOf(err) != exitUsage {
			t.Fatalf("want exit 2, got %v", err)
		}
	})
	t.Run("unknown thread is a usage error", func(t *testing.T) {
		src := remoteSource{fakeKhala(t, map[string]func() (int, any){
			"GET /v1/threads/thread-9": func() (int, any) { return 404, apiErr("not_found", `unknown thread "thread-9"`) },
		})}
		_, err := threadOf(ctx, src, workflow.Ref{Remote: "origin", Workflow: "review", Thread: "thread-9"})
		if exitCodeOf(err) != exitUsage {
			t.Fatalf("want exit 2, got %v", err)
		}
	})
	t.Run("thread of another workflow", func(t *testing.T) {
		src := remoteSource{fakeKhala(t, map[string]func() (int, any){"GET /v1/threads/thread-1": running})}
		_, err := threadOf(ctx, src, workflow.Ref{Remote: "origin", Workflow: "other", Thread: "thread-1"})
		if exitCodeOf(err) != exitUsage || hintOf(err) != "its ref is origin/review#thread-1" {
			t.Fatalf("want exit 2 naming the right ref, got %v (hint %q)", err, hintOf(err))
		}
	})
	t.Run("events without follow are the trace", func(t *testing.T) {
		src := remoteSource{fakeKhala(t, map[string]func() (int, any){
			"GET /v1/threads/thread-1/trace": func() (int, any) {
				return 200, []workflow.Event{{Seq: 1, Type: workflow.EventThreadStarted}, {Seq: 2, Type: khalaTurnQueued, Step: 1}}
			},
		})}
		var seqs []uint64
		err := src.Events(ctx, "thread-1", false, func(e workflow.Event) error { seqs = append(seqs, e.Seq); return nil })
		if err != nil || len(seqs) != 2 || seqs[1] != 2 {
			t.Fatalf("events: %v %v", seqs, err)
		}
	})
	t.Run("cancel answers the thread afterwards", func(t *testing.T) {
		src := remoteSource{fakeKhala(t, map[string]func() (int, any){
			"POST /v1/threads/thread-1/cancel": func() (int, any) { return 200, map[string]string{"status": "cancelled"} },
			"GET /v1/threads/thread-1": func() (int, any) {
				return 200, workflow.Thread{ID: "thread-1", Workflow: "review", Status: workflow.StatusCancelled, Error: "cancelled by user"}
			},
		})}
		th, err := src.Cancel(ctx, "thread-1")
		if err != nil || th.Status != workflow.StatusCancelled {
			t.Fatalf("cancel: %+v %v", th, err)
		}
	})
	t.Run("threads", func(t *testing.T) {
		src := remoteSource{fakeKhala(t, map[string]func() (int, any){
			"GET /v1/threads?workflow=review": func() (int, any) { return 200, []workflow.Thread{{ID: "thread-2"}, {ID: "thread-1"}} },
		})}
		ts, err := src.Threads(ctx, "review")
		if err != nil || len(ts) != 2 || ts[0].ID != "thread-2" || ts[1].ID != "thread-1" {
			t.Fatalf("threads: %v %v", ts, err)
		}
	})
	if (remoteSource{remote.New("origin", "http://h", "")}).Where() != "at origin" {
		t.Fatal("where")
	}
}
