package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func reviewerRole(t *testing.T) *Role {
	return mustParse(t, twoRoles).Roles["b"]
}

func TestExtractTakesJSON(t *testing.T) {
	r := reviewerRole(t)
	for _, out := range []string{
		"Looks good.\n```json\n{\"ok\": true}\n```\n",
		"```json\n{\"ok\": false}\n```\nthen\n```json\n{\"ok\": true}\n```",
		"{\"ok\": true}",
		"```\n{\"ok\": true}\n```",
	} {
		v, err := (*Extractor)(nil).Extract(context.Background(), r, out)
		if err != nil || v.(map[string]any)["ok"] != true {
			t.Fatalf("%q: got %v, %v", out, v, err)
		}
	}
	if v, err := (*Extractor)(nil).Extract(context.Background(), mustParse(t, twoRoles).Roles["a"], "free text"); v != nil || err != nil {
		t.Fatal("a role without meta has no structured output")
	}
}

func TestExtractErrors(t *testing.T) {
	r := reviewerRole(t)
	for out, want := range map[string]string{
		"no json at all":                  "no JSON object found",
		"```json\n{\"ok\": \"yes\"}\n```": "does not match the meta schema",
		"```json\n{broken\n```":           "not a JSON object",
		"{\"other\": 1}":                  "does not match the meta schema",
	} {
		_, err := (*Extractor)(nil).Extract(context.Background(), r, out)
		var xe *ExtractError
		if !errors.As(err, &xe) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: got %v, want ExtractError with %q", out, err, want)
		}
	}
}

// One repair request goes to the endpoint, with the raw output and the
// validation error; a good answer is used, a bad one is an ExtractError.
func TestExtractRepair(t *testing.T) {
	var calls atomic.Int32
	answer := `{"ok": true}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "bad request", 400)
			return
		}
		var req struct {
			Model    string                     `json:"model"`
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if req.Model != "fixer" || !strings.Contains(req.Messages[1].Content, "ok: maybe") {
			http.Error(w, "missing raw output", 400)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": answer}}}})
	}))
	defer srv.Close()
	x := &Extractor{Endpoint: &Endpoint{BaseURL: srv.URL + "/v1", Model: "fixer", APIKeyEnv: "K"},
		Getenv: func(string) string { return "k" }}
	r := reviewerRole(t)
	v, err := x.Extract(context.Background(), r, "ok: maybe")
	if err != nil || v.(map[string]any)["ok"] != true || calls.Load() != 1 {
		t.Fatalf("repair: %v %v (calls %d)", v, err, calls.Load())
	}
	answer = `still not json`
	_, err = x.Extract(context.Background(), r, "ok: maybe")
	if err == nil || !strings.Contains(err.Error(), "still invalid after repair") || calls.Load() != 2 {
		t.Fatalf("want still-invalid after exactly one more call, got %v (calls %d)", err, calls.Load())
	}
	srv.Close()
	_, err = x.Extract(context.Background(), r, "ok: maybe")
	if err == nil || !strings.Contains(err.Error(), "repair failed") {
		t.Fatalf("endpoint down: got %v", err)
	}
}
