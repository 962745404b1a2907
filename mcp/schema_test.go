package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/nerve-agents/nerve/adapter"
)

// Gemini CLI's MCP client (0.61.0) rejects a tool list in which a top-level
// property of a schema is a boolean schema (`"result": true`, what a bare
// `any` field becomes), and then offers none of the server's tools.
func TestSchemaPropertiesAreObjects(t *testing.T) {
	cs := connect(t, Options{Getenv: getenv(nil)})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		for kind, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
			b, _ := json.Marshal(schema)
			var s struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			json.Unmarshal(b, &s)
			for name, p := range s.Properties {
				if len(p) == 0 || p[0] != '{' {
					t.Errorf("%s %s schema: property %q is %s, not an object", tool.Name, kind, name, p)
				}
			}
		}
	}
}

// The adapters allow nerve's tools by name (claude's --allowedTools,
// gemini's policy): their lists must be the server's.
func TestAdapterToolLists(t *testing.T) {
	names := func(readOnly bool) []string {
		cs := connect(t, Options{Getenv: getenv(nil), ReadOnly: readOnly})
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		slices.Sort(out)
		return out
	}
	read := slices.Sorted(slices.Values(adapter.MCPReadTools))
	all := slices.Sorted(slices.Values(append(slices.Clone(adapter.MCPReadTools), adapter.MCPWriteTools...)))
	if got := names(true); !slices.Equal(got, read) {
		t.Errorf("read-only tools %v, adapter.MCPReadTools %v", got, read)
	}
	if got := names(false); !slices.Equal(got, all) {
		t.Errorf("tools %v, adapter's lists %v", got, all)
	}
}
