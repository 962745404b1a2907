package khala

import (
	"strings"
	"testing"
)

// Publishing a definition whose role or input name breaks the names rule
// is refused with 400, naming the field: raw API requests, as any
// agent token can send them.
func TestPublishRefusesBadNames(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ts := bk.server(t)
		a := ts.agent("a")
		bad := map[string]string{"NUL": "a\x00b", "newline": "a\nb", "empty": "", "too long": strings.Repeat("a", 65), "leading dash": "-a"}
		for what, n := range bad {
			for _, field := range []string{"roles", "inputs"} {
				def := map[string]any{"workflow": "names", "binding": "cloud", "moderator": `{"done": true}`,
					"roles": map[string]any{"a": map[string]any{"prompt": "A"}}}
				if field == "roles" {
					def["roles"].(map[string]any)[n] = map[string]any{"prompt": "A"}
				} else {
					def["inputs"] = map[string]any{n: map[string]any{"type": "string"}}
				}
				s, d := a.do("PUT", "/v1/workflows/names", def)
				if s != 400 || errCode(d) != codeInvalidWF || !strings.Contains(string(d), field+": name") {
					t.Errorf("%s %s: %d %s, want 400 naming %s", field, what, s, d, field)
				}
			}
		}
		a.must("GET", "/v1/workflows/names", nil, 404, nil)
	})
}
