package mcp

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nerve-agents/nerve/daemon"
)

// connect runs a server with opts and returns a client session on it.
func connect(t *testing.T, opts Options) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

func getenv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func callText(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// A panic inside a tool is that call's error; the server answers the next.
func TestPanicIsACallError(t *testing.T) {
	calls := 0
	cs := connect(t, Options{Getenv: getenv(nil), Daemon: func(context.Context) (*daemon.Client, error) {
		calls++
		if calls == 1 {
			panic("boom")
		}
		return nil, &daemon.NotRunningError{Socket: "/nowhere"}
	}})
	got, isErr := callText(t, cs, "thread_status", map[string]any{"thread": "w#thread-1"})
	if !isErr || !strings.Contains(got, "thread_status failed inside nerve (boom)") {
		t.Fatalf("after a panic: %v %q", isErr, got)
	}
	got, isErr = callText(t, cs, "thread_status", map[string]any{"thread": "w#thread-1"})
	if !isErr || !strings.Contains(got, "no nerve daemon is running") {
		t.Fatalf("the call after a panic: %v %q", isErr, got)
	}
}

// --read-only offers the read tools only.
func TestReadOnlyTools(t *testing.T) {
	cs := connect(t, Options{Getenv: getenv(nil), ReadOnly: true})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("%s is offered read-only but not marked read-only", tool.Name)
		}
	}
	if got := strings.Join(names, " "); got != "knowledge_query thread_messages thread_status workflow_list" {
		t.Fatalf("read-only tools: %s", got)
	}
}

// The validator's trace becomes one sentence naming the argument.
func TestClarifyArguments(t *testing.T) {
	for in, want := range map[string]string{
		`validating "arguments": validating root: validating /properties/last: type: three has type "string", want "integer"`:                  `Argument "last" must be an integer, not a string.`,
		`validating "arguments": validating root: validating /properties/last: minimum: -1/1 is less than 0.000000`:                            `Argument "last" must be at least 0.`,
		`validating "arguments": validating root: validating /properties/t: maximum: 4000/1 is greater than 3600.000000`:                       `Argument "t" must be at most 3600.`,
		`validating "arguments": validating root: validating /properties/query: minLength: "" contains 0 Unicode code points, fewer than 1`:    `Argument "query" must not be empty.`,
		`validating "arguments": validating root: validating /properties/message: maxLength: "xx" contains 2 Unicode code points, more than 1`: `Argument "message" must be at most 1 characters long.`,
		`validating "arguments": validating root: validating /properties/level: enum: loud does not equal any of: [info warning blocking]`:     `Argument "level" must be one of info, warning, blocking, not loud.`,
		`validating "arguments": validating root: unexpected additional properties ["lats"]`:                                                   `Unknown argument "lats": see the tool's input schema for the arguments it takes.`,
		`validating "arguments": validating root: required: missing properties: ["query"]`:                                                     `Missing argument "query".`,
		`validating "arguments": validating root: something new: odd`:                                                                          `The arguments do not match the tool's input schema: odd.`,
	} {
		if got := clarifyArguments(in); got != want {
			t.Errorf("clarifyArguments(%s)\n got %s\nwant %s", in, got, want)
		}
	}
}
