package khala

import (
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// badInput is a request that must be refused with status and code.
type badInput struct {
	method, path string
	body         any
	status       int
	code         string
}

func TestRefusals(t *testing.T) { eachBackend(t, testRefusals) }

func testRefusals(t *testing.T, bk backend) {
	ts := bk.server(t, func(o *Options) { o.MaxBody = 2048 })
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	id := a.start("pair", nil, "")
	tk := a.claimOne()
	turn := "/v1/turns/" + tk.Turn
	big := strings.Repeat("x", 4096)

	cases := []badInput{
		// 413
		{"POST", turn + "/response", map[string]string{"claim": tk.Claim, "content": big}, 413, codeTooLarge},
		{"PUT", "/v1/workflows/pair", map[string]string{"source": big}, 413, codeTooLarge},
		// malformed JSON
		{"POST", "/v1/turns/claim", "{", 400, codeBadRequest},
		{"POST", "/v1/turns/claim", "[1, 2]", 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"max": "3"}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"wait": "soon"}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"wait": true}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{} {}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"workflows": "pair"}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"max": 101}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"max": -1}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"wait": "-1s"}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"repos": {"globs": ["https://git.example/[a"]}}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"repos": {"globs": [""]}}`, 400, codeBadRequest},
		{"POST", "/v1/turns/claim", `{"repos": ["x"]}`, 400, codeBadRequest},
		{"POST", turn + "/response", "", 400, codeBadRequest},
		{"POST", turn + "/response", `{"content": "no claim"}`, 400, codeBadRequest},
		{"POST", turn + "/response", `{"claim": "` + tk.Claim + `", "error": 7}`, 400, codeBadRequest},
		{"POST", turn + "/response", `{"claim": "` + tk.Claim + `", "error": {"kind": "x"}}`, 400, codeBadRequest},
		{"POST", turn + "/response", `{"claim": "` + tk.Claim + `", "content": 5}`, 400, codeBadRequest},
		{"POST", turn + "/heartbeat", `{}`, 400, codeBadRequest},
		{"POST", turn + "/heartbeat", `{"claim": 1}`, 400, codeBadRequest},
		{"POST", "/v1/workflows/pair/threads", `{"input": [1]}`, 400, codeBadRequest},
		{"POST", "/v1/workflows/pair/threads", "\x00\xff", 400, codeBadRequest},
		// unknown ids
		{"GET", "/v1/threads/thread-999", nil, 404, codeNotFound},
		{"GET", "/v1/threads/bogus", nil, 404, codeNotFound},
		{"GET", "/v1/threads/thread-999/events", nil, 404, codeNotFound},
		{"GET", "/v1/threads/thread-0/trace", nil, 404, codeNotFound},
		{"POST", "/v1/threads/thread-999/cancel", nil, 404, codeNotFound},
		{"POST", "/v1/turns/thread-1.99/heartbeat", map[string]string{"claim": "c"}, 404, codeNotFound},
		{"POST", "/v1/turns/thread-999.1/response", map[string]string{"claim": "c"}, 404, codeNotFound},
		{"POST", "/v1/turns/nope/release", map[string]string{"claim": "c"}, 404, codeNotFound},
		{"POST", "/v1/turns/thread-1.01/release", map[string]string{"claim": "c"}, 404, codeNotFound},
		// ids past what a database key holds name nothing
		{"POST", "/v1/turns/thread-1.99999999999/heartbeat", map[string]string{"claim": "c"}, 404, codeNotFound},
		{"POST", "/v1/turns/thread-18446744073709551615.1/response", map[string]string{"claim": "c"}, 404, codeNotFound},
		{"GET", "/v1/threads/thread-18446744073709551615", nil, 404, codeNotFound},
		{"GET", "/v1/threads/thread-9223372036854775808/trace", nil, 404, codeNotFound},
		{"POST", "/v1/threads/thread-9223372036854775808/cancel", nil, 404, codeNotFound},
		{"GET", "/v1/workflows/nope", nil, 404, codeNotFound},
		{"POST", "/v1/workflows/nope/threads", nil, 404, codeNotFound},
		{"GET", "/v1/nope", nil, 404, codeNotFound},
		// wrong method
		{"DELETE", "/v1/threads/" + id, nil, 405, codeMethod},
		{"GET", "/v1/turns/claim", nil, 405, codeMethod},
		// bad queries
		{"GET", "/v1/threads?limit=0", nil, 400, codeBadRequest},
		{"GET", "/v1/threads?limit=x", nil, 400, codeBadRequest},
		{"GET", "/v1/threads?status=done", nil, 400, codeBadRequest},
		{"GET", "/v1/threads/" + id + "/messages?last=-1", nil, 400, codeBadRequest},
		{"GET", "/v1/threads/" + id + "/messages?step=x", nil, 400, codeBadRequest},
		{"GET", "/v1/threads/" + id + "/messages?since=yesterday", nil, 400, codeBadRequest},
		{"GET", "/v1/threads/" + id + "/events?after=-3", nil, 400, codeBadRequest},
		{"GET", "/v1/usage?by=colour", nil, 400, codeBadRequest},
		{"GET", "/v1/usage?since=yesterday", nil, 400, codeBadRequest},
		{"GET", "/v1/usage?since=2026-13-01", nil, 400, codeBadRequest},
		{"GET", "/v1/usage?thread=thread-999", nil, 404, codeNotFound},
		// definitions and inputs
		{"PUT", "/v1/workflows/pair", map[string]string{"source": "workflow: [unclosed"}, 400, codeInvalidWF},
		{"PUT", "/v1/workflows/pair", map[string]string{"source": strings.Replace(pairWF, "pair", "other", 1)}, 400, codeInvalidWF},
		{"PUT", "/v1/workflows/pair", map[string]string{"source": strings.Replace(pairWF, "$count(messages) >= input.turns", "$count(", 1)}, 400, codeInvalidWF},
		{"PUT", "/v1/workflows/pair", map[string]string{"source": ""}, 400, codeBadRequest},
		{"POST", "/v1/workflows/pair/threads", map[string]any{"input": map[string]any{"typo": 1}}, 400, codeInvalidIn},
		{"POST", "/v1/workflows/pair/threads", map[string]any{"input": map[string]any{"turns": "many"}}, 400, codeInvalidIn},
		{"POST", "/v1/workflows/pair/threads", map[string]any{"webhook": "ftp://example.com/x"}, 400, codeBadRequest},
		{"POST", "/v1/workflows/pair/threads", map[string]any{"webhook": "/relative"}, 400, codeBadRequest},
	}
	for _, c := range cases {
		status, data := a.do(c.method, c.path, c.body)
		t.Logf("%s %s %.40v -> %d %s", c.method, c.path, c.body, status, strings.TrimSpace(string(data)))
		if status != c.status || errCode(data) != c.code {
			t.Errorf("%s %s %.60v: want %d %s, got %d %s", c.method, c.path, c.body, c.status, c.code, status, data)
		}
	}
	// None of it changed the thread.
	if th := a.thread(id); th.Step != 1 || len(th.Turns) != 1 || th.Turns[0].State != khaladb.TurnClaimed {
		t.Fatalf("thread changed: %+v %+v", th.Thread, th.Turns)
	}
	if s, d := a.respond(tk, "fine", nil); s != 200 {
		t.Fatalf("the valid answer after all that: %d %s", s, d)
	}
}
