package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/pgtest"
)

func TestKhalaServePostgresFlags(t *testing.T) {
	home := t.TempDir()
	ios, _, _ := TestStreams()
	f := newFactory(ios)
	env := map[string]string{"NERVE_HOME": home, envKhalaPostgres: "postgres://env/db"}
	f.Getenv = func(k string) string { return env[k] }
	run := func(args ...string) (*khalaServeOptions, error) {
		var got *khalaServeOptions
		cmd := newCmdKhalaServe(f, func(o *khalaServeOptions) error { got = o; return nil })
		cmd.SetArgs(args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		return got, cmd.Execute()
	}
	if o, err := run(); err != nil || o.Postgres != "postgres://env/db" || o.DB != "" || o.PoolSize != 0 {
		t.Fatalf("from the environment: %v %+v", err, o)
	}
	if o, err := run("--postgres", "postgres://flag/db", "--pool-size", "25"); err != nil || o.Postgres != "postgres://flag/db" || o.PoolSize != 25 {
		t.Fatalf("the flag wins: %v %+v", err, o)
	}
	if o, err := run("--db", "/x/k.db"); err != nil || o.Postgres != "" || o.DB != "/x/k.db" {
		t.Fatalf("an explicit --db means bbolt: %v %+v", err, o)
	}
	if _, err := run("--db", "/x/k.db", "--postgres", "postgres://flag/db"); exitCodeOf(err) != exitUsage {
		t.Fatalf("--db with --postgres: %v", err)
	}
	if _, err := run("--pool-size", "many"); err == nil {
		t.Fatal("--pool-size many was accepted")
	}
	delete(env, envKhalaPostgres)
	if o, err := run(); err != nil || o.Postgres != "" || !strings.HasSuffix(o.DB, "khala.db") {
		t.Fatalf("default: %v %+v", err, o)
	}
}

// A database nobody listens on: one line that says why (the driver's
// reason is on its error's second line), without the password, with the
// hint, exit 1 (the configuration may be right and the database down).
func TestE2EKhalaPostgresUnreachable(t *testing.T) {
	e := newEnv(t)
	r := e.run("khala", "serve", "--addr", "127.0.0.1:0", "--postgres", "postgres://u:"+khPGSecret+"@"+freeAddr(t)+"/x?sslmode=disable")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != 1 || len(lines) != 2 || !strings.Contains(lines[0], "connection refused") ||
		!strings.HasPrefix(lines[1], "hint: check that PostgreSQL runs") || strings.Contains(r.stderr, khPGSecret) {
		t.Fatalf("%s", r)
	}
}

// khPGDatabase is a fresh database on the test binary's cluster, with a
// password in its DSN that the trusted superuser does not need: the tests
// check it never shows.
const khPGSecret = "pw-e2e-Secret-4242"

func khPGDatabase(t testing.TB) string {
	return strings.Replace(pgtest.Database(t), "postgres@", "postgres:"+khPGSecret+"@", 1)
}

// khReplicas starts n `nerve khala serve --postgres` processes on dsn (the
// first takes it from NERVE_KHALA_POSTGRES, the others from the flag) and
// returns them with an enroller token issued by the CLI.
func khReplicas(t testing.TB, dsn string, n, uses int) ([]*khProc, string) {
	t.Helper()
	var ps []*khProc
	for i := range n {
		if i == 0 {
			ps = append(ps, khStartEnv(t, []string{envKhalaPostgres + "=" + dsn, "NERVE_HOME=" + t.TempDir()}, "--pool-size", "6"))
		} else {
			ps = append(ps, khStartEnv(t, []string{"NERVE_HOME=" + t.TempDir()}, "--postgres", dsn, "--pool-size", "6"))
		}
	}
	cmd := exec.Command(khServerBin(t), "khala", "enroll-token", "--postgres", dsn, "--uses", fmt.Sprint(uses))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !strings.Contains(stderr.String(), "written to postgres://postgres@") || strings.Contains(stderr.String(), khPGSecret) {
		t.Fatalf("enroll-token --postgres: %v %s", err, stderr.String())
	}
	return ps, strings.TrimSpace(string(out))
}

// khAgents enrolls n agents named prefix-NN, agent i talking to replica
// i%len(ps).
func khAgents(t testing.TB, ps []*khProc, enroll, prefix string, n int) []*khClient {
	t.Helper()
	var cs []*khClient
	for i := range n {
		c := khNewClient(ps[i%len(ps)].url, enroll).enroll(t, fmt.Sprintf("%s-%02d", prefix, i))
		cs = append(cs, c)
	}
	return cs
}

func (c *khClient) at(p *khProc) *khClient {
	return &khClient{url: p.url, token: c.token, http: c.http}
}

// Three real replicas over one database: a thread created on one, claimed
// through the second, answered through the third; then fifty agents spread
// over the three race for one turn, long-polling and not: one wins.
func TestKhalaPostgresThreeReplicas(t *testing.T) {
	dsn := khPGDatabase(t)
	ps, enroll := khReplicas(t, dsn, 3, 60)
	agents := khAgents(t, ps, enroll, "agent", 50)
	a := agents[0]
	a.must(t, "PUT", "/v1/workflows/relay", map[string]string{"source": khRelayWF}, 201, nil)
	var started struct{ Thread string }
	a.at(ps[0]).must(t, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 2}}, 201, &started)
	tk := khClaim(t, a.at(ps[1]), 1, "5s")
	if len(tk) != 1 || tk[0].Thread != started.Thread {
		t.Fatalf("claim through replica 2: %+v", tk)
	}
	a.at(ps[2]).must(t, "POST", "/v1/turns/"+tk[0].Turn+"/response", map[string]any{"claim": tk[0].Claim, "content": "from replica 3"}, 200, nil)
	var msgs []struct{ Content, Agent string }
	a.at(ps[1]).must(t, "GET", "/v1/threads/"+started.Thread+"/messages", nil, 200, &msgs)
	if len(msgs) != 1 || msgs[0].Content != "from replica 3" || msgs[0].Agent != "agent-00" {
		t.Fatalf("messages through replica 2: %+v", msgs)
	}
	next := khClaim(t, a.at(ps[0]), 1, "5s") // the second turn, queued by replica 3's answer
	if len(next) != 1 || next[0].Step != 2 {
		t.Fatalf("next turn: %+v", next)
	}

	race := func(wait string, before func()) {
		t.Helper()
		var (
			wg, ready sync.WaitGroup
			mu        sync.Mutex
			won       []khTurn
		)
		ready.Add(len(agents))
		for _, ag := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				got := khClaim(t, ag, 1, wait)
				mu.Lock()
				won = append(won, got...)
				mu.Unlock()
			}()
		}
		ready.Wait()
		before()
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("wait %s: %d of 50 agents on three replicas won one turn: %+v", wait, len(won), won)
		}
	}
	a.must(t, "POST", "/v1/turns/"+next[0].Turn+"/response", map[string]any{"claim": next[0].Claim, "content": "done"}, 200, nil)
	race("3s", func() {
		khWaitParked(t, 50, a.at(ps[0]), a.at(ps[1]), a.at(ps[2])) // all fifty are waiting
		a.at(ps[2]).must(t, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 1}}, 201, nil)
	})
	a.at(ps[1]).must(t, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 1}}, 201, nil)
	race("0s", func() {})

	for i, p := range ps {
		var health struct{ OK bool }
		khNewClient(p.url, "").must(t, "GET", "/v1/health", nil, 200, &health)
		if log := p.stderr.String(); strings.Contains(log, khPGSecret) || !health.OK {
			t.Fatalf("replica %d: health %v, log:\n%s", i+1, health.OK, log)
		}
	}
	// SIGTERM: a replica holding a long poll answers it [] and exits 0;
	// the others serve on.
	polled := make(chan string, 1)
	go func() {
		_, data, _ := agents[1].at(ps[0]).do("POST", "/v1/turns/claim", map[string]any{"wait": "30s", "roles": []string{"nobody"}})
		polled <- strings.TrimSpace(string(data))
	}()
	khWaitParked(t, 1, a.at(ps[0]))
	ps[0].cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ps[0].done:
	case <-time.After(15 * time.Second):
		t.Fatal("no exit 15s after SIGTERM")
	}
	if code := ps[0].cmd.ProcessState.ExitCode(); code != 0 || <-polled != "[]" {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, ps[0].stderr)
	}
	a.at(ps[1]).must(t, "GET", "/v1/threads/"+started.Thread, nil, 200, nil)
}

// khWaitParked waits until the replicas together hold n long polls
// (their khala_claims_waiting gauges), for at most 10s.
func khWaitParked(t *testing.T, n int, replicas ...*khClient) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		parked := 0
		for _, c := range replicas {
			_, data, err := c.do("GET", "/metrics", nil)
			if err != nil {
				t.Fatalf("metrics: %v", err)
			}
			for _, line := range strings.Split(string(data), "\n") {
				if v, ok := strings.CutPrefix(line, "khala_claims_waiting "); ok {
					k, _ := strconv.Atoi(strings.TrimSpace(v))
					parked += k
				}
			}
		}
		if parked >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d long polls parked after 10s", parked, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// khJSON decodes data into v, ignoring errors (a test checks the result).
func khJSON(data []byte, v any) { _ = json.Unmarshal(data, v) }
