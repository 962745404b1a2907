package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// Bindings say who runs a workflow's turns.
const (
	BindingLocal = "local" // this agent runs every turn
	BindingCloud = "cloud" // turns go to a Khala queue
)

// Definition is a parsed, checked workflow: its moderator compiled and its
// roles' meta schemas compiled, ready to route threads.
type Definition struct {
	Name        string
	Description string
	Binding     string
	Inputs      map[string]Input
	Roles       map[string]*Role
	Limits      Limits
	Moderator   *Moderator
	// Workspace is the definition's workspace, nil when it declares none.
	// Its empty fields take their defaults when a thread starts.
	Workspace *WorkspaceSpec

	// File is where the definition was read from ("" when pushed inline).
	File string
	// nameLine is the line of the workflow key, for a name other files
	// also take.
	nameLine int
	// modLine is the line of the moderator key; modFile the .jsonata file
	// it names, "" when inline: where a problem in its source is.
	modLine int
	modFile string
	// Source is the definition with its moderator inlined: what a thread
	// keeps so it can resume, and what `workflow push` publishes.
	Source []byte
}

// Input declares one input of a thread.
type Input struct {
	Type        string `yaml:"type" json:"type"`
	Required    bool   `yaml:"required" json:"required,omitempty"`
	Default     any    `yaml:"default" json:"default,omitempty"`
	Description string `yaml:"description" json:"description,omitempty"`
}

// Role is who acts in a workflow.
type Role struct {
	Adapter string `yaml:"adapter" json:"adapter,omitempty"`
	// Human roles are answered by a person (nerve thread answer), never by
	// an agent; AnsweredBy, in a cloud workflow, names who may.
	Human      bool           `yaml:"human" json:"human,omitempty"`
	AnsweredBy []string       `yaml:"answered_by" json:"answered_by,omitempty"`
	Prompt     string         `yaml:"prompt" json:"prompt"`
	Meta       map[string]any `yaml:"meta" json:"meta,omitempty"`
	Context    *RoleContext   `yaml:"context" json:"context,omitempty"`

	schema *jsonschema.Schema
}

// RoleContext appends thread history to the prompt for agents that cannot
// run commands.
type RoleContext struct {
	Last int `yaml:"last" json:"last"`
}

// Schema returns the compiled meta schema, or nil when the role has none.
func (r *Role) Schema() *jsonschema.Schema { return r.schema }

// file is the YAML shape of a definition.
type file struct {
	Workflow    string           `yaml:"workflow"`
	Description string           `yaml:"description"`
	Binding     string           `yaml:"binding"`
	Moderator   string           `yaml:"moderator"`
	Inputs      map[string]Input `yaml:"inputs"`
	Roles       map[string]*Role `yaml:"roles"`
	Limits      Limits           `yaml:"limits"`
	Workspace   *WorkspaceSpec   `yaml:"workspace"`
}

var (
	nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`) })
	// memberRE is the rule of role and input names (workflow names follow
	// it too, lowercase, as they name branches): they reach environment
	// variables, prompts and file names, so a NUL, a line break or a
	// leading dash in one breaks a turn long after the definition loads.
	memberRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })
	inputTypes = []string{"string", "number", "integer", "boolean", "object", "array", "any"}
)

// memberRule says memberRE in words.
const memberRule = "a name starts with a letter or digit, then letters, digits, '_', '.' or '-', at most 64 in all"

// LoadFile reads and checks the definition at path.
func LoadFile(path string) (*Definition, error) { return loadFile(path, parseOptions{}) }

func loadFile(path string, o parseOptions) (*Definition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &yamlfile.Error{File: path, Msg: strings.TrimPrefix(err.Error(), "open "+path+": ")}
	}
	return parse(path, data, func(name string) ([]byte, error) {
		return os.ReadFile(filepath.Join(filepath.Dir(path), name))
	}, o)
}

// Parse checks a definition. readFile resolves a moderator that names a
// file beside the definition; nil means the moderator must be inline.
// Adapters are checked separately (config/validation): they depend on
// nerve.yaml.
func Parse(path string, data []byte, readFile func(string) ([]byte, error)) (*Definition, error) {
	return parse(path, data, readFile, parseOptions{})
}

// parseOptions say how parse checks a definition.
type parseOptions struct {
	// light skips compiling the roles' meta schemas, which costs
	// milliseconds a listing does not need.
	light bool
	// stored is a definition accepted before (see ParseStored): rules
	// added since do not refuse it.
	stored bool
}

// parse is Parse, checking as o says.
func parse(path string, data []byte, readFile func(string) ([]byte, error), o parseOptions) (*Definition, error) {
	var f file
	lines, err := yamlfile.Decode(path, data, &f)
	// Decode fills f with what the file got right: check that too, so one
	// pass reports every problem.
	undecoded, ok := err.(yamlfile.Errors)
	if err != nil && !ok {
		return nil, err
	}
	errs := slices.Clone(undecoded)
	bad := func(field, format string, a ...any) {
		if !reported(undecoded, field) {
			errs = append(errs, &yamlfile.Error{File: path, Line: lines.Line(field), Field: field, Msg: fmt.Sprintf(format, a...)})
		}
	}
	// newRule reports what a stored definition may have been accepted with.
	newRule := bad
	if o.stored {
		newRule = func(string, string, ...any) {}
	}
	d := &Definition{
		Name: f.Workflow, Description: f.Description, Binding: f.Binding,
		Inputs: f.Inputs, Roles: f.Roles, Limits: f.Limits, File: path, nameLine: lines.Line("workflow"),
	}
	switch {
	case d.Name == "":
		bad("workflow", "is required: the workflow's name")
	case !nameRE().MatchString(d.Name):
		bad("workflow", "name %q: use lowercase letters, digits, '-', '_' and '.'", d.Name)
	case len(d.Name) > 64:
		newRule("workflow", "name %q is %d characters long; at most 64", d.Name, len(d.Name))
	}
	checkNames := func(field string, names []string) {
		for _, n := range names {
			if !memberRE().MatchString(n) {
				newRule(field, "name %q: %s", n, memberRule)
			}
		}
	}
	checkNames("roles", slices.Sorted(maps.Keys(d.Roles)))
	checkNames("inputs", slices.Sorted(maps.Keys(d.Inputs)))
	if d.Binding == "" {
		d.Binding = BindingLocal
	}
	if d.Binding != BindingLocal && d.Binding != BindingCloud {
		bad("binding", "unknown binding %q (want local or cloud)", d.Binding)
	}
	if len(d.Roles) == 0 {
		bad("roles", "a workflow needs at least one role")
	}
	for _, name := range slices.Sorted(maps.Keys(d.Roles)) {
		r := d.Roles[name]
		p := "roles." + name
		if r == nil {
			bad(p, "role %q is empty", name)
			d.Roles[name] = &Role{}
			continue
		}
		if strings.TrimSpace(r.Prompt) == "" {
			bad(p+".prompt", "is required")
		}
		checkPeople(d.Binding, p, r, bad)
		if r.Context != nil && r.Context.Last < 0 {
			bad(p+".context.last", "must not be negative")
		}
		if r.Meta != nil && !o.light {
			s, err := compileSchema(d.Name+"/"+name, r.Meta)
			if err != nil {
				bad(p+".meta", "not a valid JSON Schema: %s", oneLine(err.Error()))
			}
			r.schema = s
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.Inputs)) {
		in := d.Inputs[name]
		if in.Type == "" {
			in.Type = "any"
		}
		if !slices.Contains(inputTypes, in.Type) {
			bad("inputs."+name+".type", "unknown type %q (want one of %v)", in.Type, inputTypes)
		} else if in.Default != nil {
			// A thread that leaves the input out gets the default: it must be
			// what the moderator is promised.
			if v, err := coerce(in.Type, in.Default); err != nil {
				newRule("inputs."+name+".default", "%s", err) // stored: kept as written
			} else {
				in.Default = v
			}
		}
		d.Inputs[name] = in
	}
	d.Workspace = checkWorkspace(f.Workspace, d.Binding, lines, bad)
	if d.Workspace != nil && nameRE().MatchString(d.Name) {
		if err := CheckBranch(DefaultBranch(d.Name, "thread-1")); err != nil {
			bad("workflow", "name %q cannot be part of its threads' branches (%s): %s; rename the workflow", d.Name, DefaultBranch(d.Name, "thread-N"), err)
		}
	}
	checkLimits(&d.Limits, lines, bad, newRule)
	src, err := moderatorSource(f.Moderator, readFile)
	if err != nil {
		bad("moderator", "%s", err)
	} else if m, err := CompileModerator(src); err != nil {
		bad("moderator", "%s", err)
	} else {
		d.Moderator, d.modLine = m, lines.Line("moderator")
		if moderatorFile(f.Moderator) {
			d.modFile = strings.TrimSpace(f.Moderator)
		}
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *yamlfile.Error) int { return a.Line - b.Line })
		return nil, errs
	}
	d.Source, err = inlineModerator(data, src)
	if err != nil {
		return nil, &yamlfile.Error{File: path, Msg: err.Error()}
	}
	return d, nil
}

// reported says whether field, or a field it is in, did not decode (a
// problem with no field is the whole file's): such a value is not checked
// further.
func reported(undecoded yamlfile.Errors, field string) bool {
	for _, e := range undecoded {
		if e.Field == "" || e.Field == field || strings.HasPrefix(field, e.Field+".") {
			return true
		}
	}
	return false
}

// checkWorkspace checks a definition's workspace (nil when the file has
// no workspace key; `workspace:` alone declares one with defaults).
func checkWorkspace(ws *WorkspaceSpec, binding string, lines yamlfile.Lines, bad func(field, format string, a ...any)) *WorkspaceSpec {
	if _, declared := lines["workspace"]; !declared {
		return nil
	}
	if ws == nil {
		ws = &WorkspaceSpec{}
	}
	if _, given := lines["workspace.repo"]; given {
		switch {
		case ws.Repo == "" && binding == BindingCloud:
			bad("workspace.repo", "is empty: give the git URL every serving agent fetches from and pushes to, or leave repo out and pass --repo to each run")
		case ws.Repo == "":
			bad("workspace.repo", "is empty: give a path in a git repository, or leave repo out to use the run's workdir")
		case binding == BindingCloud:
			if err := CheckSharedRepo(ws.Repo); err != nil {
				bad("workspace.repo", "%q: %s", ws.Repo, err)
			}
		case strings.HasPrefix(ws.Repo, "-") || strings.ContainsFunc(ws.Repo, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			bad("workspace.repo", "%q: not a path (no leading '-', no control characters)", ws.Repo)
		}
	}
	if _, given := lines["workspace.base"]; given {
		if err := CheckRevision(ws.Base); err != nil {
			bad("workspace.base", "%q is not a git revision: %s (leave base out to start from HEAD of the run's workdir)", ws.Base, err)
		}
	}
	return ws
}

// moderatorSource returns the JSONata text: the file the field names when
// it looks like a file name, else the field itself.
func moderatorSource(field string, readFile func(string) ([]byte, error)) (string, error) {
	field = strings.TrimSpace(field)
	if field == "" {
		return "", fmt.Errorf("is required: a JSONata expression or a .jsonata file beside the definition")
	}
	if moderatorFile(field) {
		if readFile == nil {
			return "", fmt.Errorf("names file %q, but this definition has no directory to read it from", field)
		}
		b, err := readFile(field)
		if err != nil {
			return "", fmt.Errorf("read moderator file %q: %v", field, unwrapPathErr(err))
		}
		return string(b), nil
	}
	return field, nil
}

// moderatorFile says whether a moderator field names a file.
func moderatorFile(field string) bool {
	field = strings.TrimSpace(field)
	return strings.HasSuffix(field, ".jsonata") && !strings.ContainsAny(field, "\n ()")
}

func compileSchema(id string, meta map[string]any) (*jsonschema.Schema, error) {
	// Round-trip through JSON: YAML gives ints and the validator wants JSON numbers.
	raw, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	url := "mem:///" + id + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " " + strings.Join(strings.Fields(s[i:]), " ")
	}
	return s
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
