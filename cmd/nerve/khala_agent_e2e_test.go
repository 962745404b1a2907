package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// `nerve khala enroll-token --scope`, `agent list` and `agent revoke`
// against a running server (through its admin path): the listed scopes
// are the token's, and a revoked agent's next request is 401.
func TestE2EKhalaAgentRevoke(t *testing.T) {
	k := startKhala(t)
	admin := newEnv(t)
	if r := admin.must(2, "khala", "enroll-token", "--scope", "claim,root", "--db", k.db); !strings.Contains(r.stderr, `scope "root"`) {
		t.Fatalf("a bad scope: %s", r)
	}
	enroll := strings.TrimSpace(admin.must(0, "khala", "enroll-token", "--scope", "claim", "--db", k.db).stdout)
	call := func(method, path, tok string, body any) int {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, k.url+path, bytes.NewReader(data))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Token string }
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if out.Token != "" {
			enroll = out.Token
		}
		return resp.StatusCode
	}
	if s := call("POST", "/v1/agents", enroll, map[string]string{"name": "worker"}); s != 201 {
		t.Fatalf("enroll: %d", s)
	}
	tok := enroll
	if s := call("GET", "/v1/agents/me", tok, nil); s != 200 {
		t.Fatalf("the agent before revoke: %d", s)
	}
	var list []struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
	}
	if err := json.Unmarshal([]byte(admin.must(0, "khala", "agent", "list", "--json", "--db", k.db).stdout), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "worker" || strings.Join(list[0].Scopes, ",") != "claim" {
		t.Fatalf("agent list: %+v", list)
	}
	if s := call("POST", "/v1/workflows/x/threads", tok, nil); s != 403 {
		t.Fatalf("a claim-only agent starting a thread: %d", s)
	}
	r := admin.must(0, "khala", "agent", "revoke", "worker", "--db", k.db)
	if !strings.Contains(r.stderr, "revoked through the server") {
		t.Fatalf("revoke: %s", r)
	}
	if s := call("GET", "/v1/agents/me", tok, nil); s != 401 {
		t.Fatalf("a revoked agent: want 401, got %d", s)
	}
	if r := admin.must(1, "khala", "agent", "revoke", "worker", "--db", k.db); !strings.Contains(r.stderr, `no agent "worker"`) {
		t.Fatalf("revoking twice: %s", r)
	}
}
