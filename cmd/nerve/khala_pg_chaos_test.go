package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/pgtest"
)

// khShortLeaseWF is khRelayWF with short leases: a claim whose answer a
// crash swallowed is handed out again within seconds.
const khShortLeaseWF = khRelayWF + `  claim: 3s
  max_attempts: 5
`

// khLoad drives agents through replicas the way a load balancer would
// spread them: a request that fails (transport error or 5xx) is retried on
// the next replica. It records every answer the server acknowledged.
type khLoad struct {
	replicas []*khProc
	mu       sync.Mutex
	acked    map[string]string // turn -> content answered 200
	failures atomic.Int64      // requests that failed and were retried
}

func (l *khLoad) ack(turn, content string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[turn] = content
	return len(l.acked)
}

func (l *khLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// send retries a request over the replicas until it gets an answer below
// 500 or ctx ends; it returns the status (0: gave up).
func (l *khLoad) send(ctx context.Context, c *khClient, r *int, method, path string, body any) (int, []byte) {
	for ctx.Err() == nil {
		status, data, err := c.at(l.replicas[*r%len(l.replicas)]).do(method, path, body)
		if err == nil && status < 500 {
			return status, data
		}
		l.failures.Add(1)
		*r++
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return 0, nil
}

// agent claims and answers until ctx ends; onAck runs after each 200.
func (l *khLoad) agent(ctx context.Context, c *khClient, i int, onAck func(n int)) {
	r := i
	for ctx.Err() == nil {
		status, data := l.send(ctx, c, &r, "POST", "/v1/turns/claim", map[string]any{"wait": "1s"})
		if status != 200 {
			continue
		}
		var ts []khTurn
		khJSON(data, &ts)
		for _, tk := range ts {
			content := fmt.Sprintf("agent %d answers %s", i, tk.Turn)
			// 409: the lease was lost (expired while the answer could not be
			// sent); the turn is someone else's now.
			if status, _ := l.send(ctx, c, &r, "POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": content}); status == 200 {
				onAck(l.ack(tk.Turn, content))
			}
		}
	}
}

// verify checks that every thread completed with all its turns answered
// once, and that every acknowledged answer is the one stored.
func (l *khLoad) verify(t *testing.T, c *khClient, threads []string, turns int) {
	t.Helper()
	for _, id := range threads {
		var msgs []struct {
			Step    int
			Content string
		}
		c.must(t, "GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
		if len(msgs) != turns {
			t.Fatalf("%s has %d messages, want %d", id, len(msgs), turns)
		}
		for _, m := range msgs {
			turn := fmt.Sprintf("%s.%d", id, m.Step)
			l.mu.Lock()
			want, ok := l.acked[turn]
			l.mu.Unlock()
			if ok && want != m.Content {
				t.Fatalf("%s: acknowledged %q, stored %q", turn, want, m.Content)
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for turn := range l.acked {
		thread, _, _ := strings.Cut(turn, ".")
		if !slices.Contains(threads, thread) {
			t.Fatalf("an answer to a turn of an unknown thread: %s", turn)
		}
	}
}

// khRun starts threads of turns each, runs agents until they are all
// answered (or a minute passes), calling chaos once when n answers were
// acknowledged, and returns the load and the threads.
func khRun(t *testing.T, ps []*khProc, agents []*khClient, threads, turns, at int, chaos func()) (*khLoad, []string) {
	t.Helper()
	agents[0].must(t, "PUT", "/v1/workflows/relay", map[string]string{"source": khShortLeaseWF}, 201, nil)
	var ids []string
	for range threads {
		var out struct{ Thread string }
		agents[0].must(t, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": turns}}, 201, &out)
		ids = append(ids, out.Thread)
	}
	l := &khLoad{replicas: ps, acked: map[string]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var once sync.Once
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.agent(ctx, a, i, func(n int) {
				if n >= at {
					once.Do(chaos)
				}
			})
		}()
	}
	// Done when every thread is: agents keep answering until then.
	checker := agents[0]
	for ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		var running []struct{ ID string }
		r := 0
		if status, data := l.send(ctx, checker, &r, "GET", "/v1/threads?status=running", nil); status == 200 {
			khJSON(data, &running)
			if len(running) == 0 {
				break
			}
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("threads still running after a minute; %d answers acknowledged", l.count())
	}
	cancel()
	wg.Wait()
	return l, ids
}

// kill -9 of a replica holding long polls and serving requests: the other
// two carry on, no acknowledged answer is lost, no turn is answered twice,
// and the turns it had just leased come back when their leases expire.
func TestKhalaPostgresKill9Replica(t *testing.T) {
	dsn := khPGDatabase(t)
	ps, enroll := khReplicas(t, dsn, 3, 20)
	agents := khAgents(t, ps, enroll, "agent", 6)
	victim := ps[2]
	// Two agents long-poll on the victim for a role that never comes.
	pollers := khAgents(t, []*khProc{victim}, enroll, "poller", 2)
	polled := make(chan error, len(pollers))
	for _, p := range pollers {
		go func() {
			_, _, err := p.do("POST", "/v1/turns/claim", map[string]any{"wait": "50s", "roles": []string{"nobody"}})
			polled <- err
		}()
	}
	var killed time.Time
	l, ids := khRun(t, ps, agents, 10, 40, 120, func() {
		killed = time.Now()
		victim.cmd.Process.Signal(syscall.SIGKILL)
	})
	for range pollers {
		select {
		case err := <-polled:
			if err == nil {
				t.Fatal("a long poll on the killed replica got an answer")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a long poll on the killed replica hangs")
		}
	}
	l.verify(t, agents[0].at(ps[0]), ids, 40)
	t.Logf("%d answers acknowledged, %d requests retried on another replica after the kill at %s",
		l.count(), l.failures.Load(), killed.Format(time.StampMilli))
}

// The database crashes and restarts under load: clients see errors or
// waits, then recovery, and nothing acknowledged is lost.
func TestKhalaPostgresDatabaseRestart(t *testing.T) {
	cl := pgtest.Own(t, pgtest.Options{})
	name := "khala_restart"
	if err := cl.Exec(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(cl.DSN(name), "postgres@", "postgres:"+khPGSecret+"@", 1)
	ps, enroll := khReplicas(t, dsn, 2, 10)
	agents := khAgents(t, ps, enroll, "agent", 4)
	l, ids := khRun(t, ps, agents, 8, 30, 60, func() {
		go func() {
			cl.Kill()
			time.Sleep(time.Second)
			if err := cl.Run(); err != nil {
				t.Errorf("restart the database: %v", err)
			}
		}()
	})
	l.verify(t, agents[0].at(ps[0]), ids, 30)
	if l.failures.Load() == 0 {
		t.Fatal("no request failed while the database was down: did it go down?")
	}
	for i, p := range ps {
		khNewClient(p.url, "").must(t, "GET", "/v1/health", nil, 200, nil)
		log := p.stderr.String()
		if strings.Contains(log, khPGSecret) {
			t.Fatalf("replica %d logged the password:\n%s", i+1, log)
		}
		if !strings.Contains(log, "database unreachable") || !strings.Contains(log, "database reachable again") {
			t.Errorf("replica %d did not log the outage and the recovery:\n%s", i+1, log)
		}
	}
	t.Logf("%d answers acknowledged; %d requests failed and were retried", l.count(), l.failures.Load())
}
