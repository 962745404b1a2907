package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/knowledge"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/threadquery"
	"github.com/nerve-agents/nerve/workflow"
)

// Options are what the server works with, passed in explicitly; each is
// called only when a tool needs it.
type Options struct {
	// Version is nerve's, announced in initialize.
	Version string
	// Getenv reads NERVE_THREAD, NERVE_THREAD_SNAPSHOT, NERVE_STEP and
	// NERVE_WORKDIR (nil: os.Getenv).
	Getenv func(string) string
	// Getwd is where a local workflow runs and knowledge is looked up
	// outside a turn (nil: os.Getwd).
	Getwd func() (string, error)
	// Config loads nerve.yaml: workflow directories, remotes, the
	// knowledge endpoint.
	Config func() (*config.Config, error)
	// Daemon returns a client of the local daemon (starting it if need be).
	Daemon func(context.Context) (*daemon.Client, error)
	// Remote returns the client of a named remote.
	Remote func(name string) (*remote.Client, error)
	// ReadOnly offers the read tools only (thread_messages, thread_status,
	// knowledge_query, workflow_list): for agents under a read-only posture.
	ReadOnly bool
	// Log receives the SDK's diagnostics (nil: none).
	Log *slog.Logger
}

// server holds the options and the connections made on first use.
type server struct {
	opts Options

	mu     sync.Mutex
	daemon *daemon.Client
	// indexes stay open across a session's queries.
	indexes knowledge.Readers
}

// NewServer returns the MCP server with nerve's tools.
func NewServer(opts Options) *sdk.Server {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Getwd == nil {
		opts.Getwd = os.Getwd
	}
	s := &server{opts: opts}
	srv := sdk.NewServer(&sdk.Implementation{Name: "nerve", Title: "nerve", Version: opts.Version},
		&sdk.ServerOptions{Logger: opts.Log, Instructions: instructions})
	srv.AddReceivingMiddleware(clarifyMiddleware)
	s.addThreadTools(srv)
	s.addKnowledgeTools(srv)
	s.addWorkflowTools(srv)
	return srv
}

// Run serves one client over t until it disconnects, ctx ends, or
// StdioTransport gives up on calls after the end of its input (then it
// returns an error naming them). When ctx ends (SIGTERM) or the transport
// gives up it returns at once: the SDK's Server.Run would wait for the
// calls in flight, which it does not cancel, so a call blocked on I/O
// would hold the exit, and it logs the end as an error.
func Run(ctx context.Context, opts Options, t sdk.Transport) error {
	ss, err := NewServer(opts).Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	var gaveUp <-chan struct{} // stays nil for other transports
	st, _ := t.(*stdioTransport)
	if st != nil {
		gaveUp = st.s.gaveUp
	}
	select {
	case err := <-ended:
		if err == nil && st != nil {
			err = st.s.abandonedError()
		}
		return err
	case <-ctx.Done():
		go ss.Close() // no more replies; it returns when the calls in flight do
		return nil
	case <-gaveUp:
		// As at SIGTERM: a call still in flight may be blocked on I/O.
		go ss.Close()
		return st.s.abandonedError()
	}
}

const instructions = `nerve runs workflows of AI agents. Inside a turn of a thread, thread_messages reads the thread's
history (filter it: last, role, step, since) and notify tells the thread's people something; knowledge_query
searches the repository's index. workflow_list, workflow_run and thread_status start and watch workflows.`

// turnEnv is the turn this server runs inside, if any.
func (s *server) turn() threadquery.Turn { return threadquery.TurnFromEnv(s.opts.Getenv) }

// step is NERVE_STEP, or 0 outside a turn.
func (s *server) step() int {
	n, _ := strconv.Atoi(s.opts.Getenv("NERVE_STEP"))
	return n
}

// workdir is the turn's workdir, else the server's working directory.
func (s *server) workdir() string {
	if wd := s.opts.Getenv("NERVE_WORKDIR"); wd != "" {
		return wd
	}
	wd, _ := s.opts.Getwd()
	return wd
}

// daemonClient connects to the daemon on first use and keeps the client.
func (s *server) daemonClient(ctx context.Context) (*daemon.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.daemon != nil {
		return s.daemon, nil
	}
	if s.opts.Daemon == nil {
		return nil, errors.New("no nerve daemon is configured for this server")
	}
	c, err := s.opts.Daemon(ctx)
	if err != nil {
		return nil, err
	}
	s.daemon = c
	return c, nil
}

func (s *server) remote(name string) (*remote.Client, error) {
	if s.opts.Remote == nil {
		return nil, fmt.Errorf("remote %s: no remotes are configured for this server", name)
	}
	return s.opts.Remote(name)
}

// fetch reads a thread's messages outside a turn, from the daemon or the
// thread's remote; inside one, the turn's own thread (a remote one too)
// comes from the turn's socket when its snapshot cannot be read.
func (s *server) fetch(ctx context.Context, ref workflow.Ref, f workflow.Filter) ([]workflow.Message, error) {
	if ref.Remote != "" && !s.turn().Own(ref) {
		c, err := s.remote(ref.Remote)
		if err != nil {
			return nil, err
		}
		msgs, err := c.Messages(ctx, ref.Thread, f)
		return msgs, remoteUsage(err)
	}
	c, err := s.daemonClient(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := localThread(ctx, c, ref); err != nil {
		return nil, err
	}
	return c.Messages(ctx, ref.Thread, f)
}

// localThread fetches the daemon's thread a ref names, checking it is of
// that workflow.
func localThread(ctx context.Context, c *daemon.Client, ref workflow.Ref) (*workflow.Thread, error) {
	t, err := c.Thread(ctx, ref.Thread)
	if err != nil {
		return nil, err
	}
	if t.Workflow != ref.Workflow {
		return nil, usagef("%s is a thread of %s, not of %s: its ref is %s#%s", t.ID, t.Workflow, ref.Workflow, t.Workflow, t.ID)
	}
	return t, nil
}

// remoteUsage makes a remote's refusal of a request (unknown thread or
// workflow, bad input) one sentence without the HTTP status.
func remoteUsage(err error) error {
	var e *remote.Error
	if errors.As(err, &e) && (e.Status == 400 || e.Status == 404) {
		return usagef("%s", e.Error())
	}
	return err
}

// addTool registers a typed tool whose handler cannot take the server
// down: a panic becomes the call's error, and every error is one sentence
// (with its hint, when it has one).
func addTool[In, Out any](srv *sdk.Server, t *sdk.Tool, h func(context.Context, In) (Out, error)) {
	if t.InputSchema == nil {
		schema, err := jsonschema.For[In](nil)
		if err != nil {
			panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err))
		}
		t.InputSchema = schema
	}
	if t.OutputSchema == nil {
		schema, err := jsonschema.For[Out](&jsonschema.ForOptions{TypeSchemas: outputTypes()})
		if err != nil {
			panic(fmt.Sprintf("tool %s: output schema: %v", t.Name, err))
		}
		t.OutputSchema = schema
	}
	sdk.AddTool(srv, t, func(ctx context.Context, _ *sdk.CallToolRequest, in In) (res *sdk.CallToolResult, out Out, err error) {
		defer func() {
			if p := recover(); p != nil {
				var zero Out
				res, out, err = nil, zero, fmt.Errorf("%s failed inside nerve (%v); the server goes on, and the call may be tried again", t.Name, p)
			}
		}()
		out, err = h(ctx, in)
		if err != nil {
			var zero Out
			return nil, zero, toolError(err)
		}
		return nil, out, nil
	})
}

// toolError is err as the agent reads it: its message and, when it has
// one, what to do about it.
func toolError(err error) error {
	var h interface{ Hint() string }
	if errors.As(err, &h) && h.Hint() != "" {
		return fmt.Errorf("%s (%s)", err.Error(), h.Hint())
	}
	return err
}

// schemaFor is In's schema with the changes tune makes (bounds, enums).
func schemaFor[In any](tune func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(err)
	}
	tune(s.Properties)
	return s
}

func ptr[T any](v T) *T { return &v }

// usageError is a bad argument, said in one sentence.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// outputTypes are the schemas of types whose JSON is not their fields'
// default encoding: a usage writes null for each figure the CLI did not
// give.
// Built at first use: package initialisation runs in every nerve process.
var outputTypes = sync.OnceValue(func() map[reflect.Type]*jsonschema.Schema {
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[usage.Usage](): {
			Type: "object",
			Properties: map[string]*jsonschema.Schema{
				"model":             {Types: []string{"string", "null"}},
				"input_tokens":      {Types: []string{"integer", "null"}},
				"output_tokens":     {Types: []string{"integer", "null"}},
				"cache_read_tokens": {Types: []string{"integer", "null"}},
				"cost_usd":          {Types: []string{"number", "null"}},
				"duration_ms":       {Type: "integer"},
				"session_id":        {Types: []string{"string", "null"}},
				"tool_errors":       {Type: "integer"},
			},
		},
	}
})
