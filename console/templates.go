package console

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

//go:embed templates/*.html
var templateFS embed.FS

// pages are the templates by page name: each is the layout, the shared
// partials and the page's own file. Parsed at the first use (New), not
// at init: every nerve command links this package, and parsing costs a
// millisecond that `nerve version` or `nerve thread messages` would pay.
var pages = sync.OnceValue(func() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html"))
	m := map[string]*template.Template{}
	for _, name := range []string{"signin", "error", "threads", "thread", "inbox", "workflows", "workflow", "agents", "queue", "usage"} {
		m[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html"))
	}
	return m
})

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	// day and clock are when's halves, which a narrow table puts on two
	// lines.
	"day":   func(t time.Time) string { return t.UTC().Format(time.DateOnly) },
	"clock": func(t time.Time) string { return t.UTC().Format(time.TimeOnly) },
	"json": func(v any) string {
		if v == nil {
			return ""
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	},
	"cost": func(f *float64) string {
		if f == nil {
			return "—" // unknown: the CLI gave none and no pricing applies
		}
		return fmt.Sprintf("$%.4f", *f)
	},
	"tokens": tokens,
	// totalcost is a sum's cost as `nerve usage` shows it: "—" when no
	// message had one, "≥ $x" when some had none.
	"totalcost": func(t usage.Totals) string {
		switch {
		case t.CostUSD == nil:
			return "—"
		case t.Unpriced > 0:
			return "≥ " + usage.Dollars(*t.CostUSD)
		}
		return usage.Dollars(*t.CostUSD)
	},
	"count": func(n int) string {
		if n < 0 {
			return "—"
		}
		return fmt.Sprint(n)
	},
	"usage": func(u *usage.Usage) string {
		if u == nil {
			return ""
		}
		s := fmt.Sprintf("%s in · %s out", tokenCount(u.InputTokens), tokenCount(u.OutputTokens))
		if u.CostUSD != nil {
			s += fmt.Sprintf(" · $%.4f", *u.CostUSD)
		}
		if u.Model != "" {
			s = u.Model + " · " + s
		}
		if u.DurationMS > 0 {
			s += " · " + u.Duration().Round(100*time.Millisecond).String()
		}
		return s
	},
	"eventText": eventText,
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
}

// tokens writes a count the way people read it: 1234 → 1.2k.
// tokenCount is a figure a CLI may not have given: "—" when it did not.
func tokenCount(n *int64) string {
	if n == nil {
		return "—"
	}
	return tokens(*n)
}

func tokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// eventText is an event's details as one line: one value for the template
// to escape rather than a dozen (a thread's trace runs to thousands).
func eventText(e workflow.Event) string {
	var b strings.Builder
	add := func(s ...string) {
		for _, x := range s {
			if x != "" {
				if b.Len() > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(x)
			}
		}
	}
	if e.Step > 0 {
		add("#" + strconv.Itoa(e.Step))
	}
	add(e.Role)
	if e.Agent != "" {
		add("by", e.Agent)
	}
	if e.Adapter != "" {
		add("(" + e.Adapter + ")")
	}
	if e.Attempt > 0 {
		add("attempt", strconv.Itoa(e.Attempt))
	}
	add(e.Status, e.Message)
	return b.String()
}
