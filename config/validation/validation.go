package validation

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/yamlfile"
	"github.com/nerve-agents/nerve/workflow"
)

// Report is what was checked and every problem found, by file.
type Report struct {
	// File is the nerve.yaml checked.
	File string
	// Config holds nerve.yaml's problems: its own, and its references to
	// workflows. A reload refuses a file that has any.
	Config yamlfile.Errors
	// Workflows are the definitions found, sorted by name, then the files
	// named (CheckLoaded).
	Workflows []Workflow
}

// Workflow is one definition file and its problems.
type Workflow struct {
	Name     string
	File     string
	Def      *workflow.Definition // nil when the file does not parse
	Problems yamlfile.Errors
}

// OK reports whether nothing was found wrong.
func (r Report) OK() bool { return len(r.Problems()) == 0 }

// Problems returns every problem: nerve.yaml's, then each workflow's.
func (r Report) Problems() yamlfile.Errors {
	out := append(yamlfile.Errors{}, r.Config...)
	for _, w := range r.Workflows {
		out = append(out, w.Problems...)
	}
	return out
}

// Check validates a loaded configuration (config.Load has checked
// nerve.yaml on its own) together with the workflows it points at: each
// definition parses (its moderator compiles, its meta schemas are valid),
// its moderator calls no function that nobody defines, a local workflow's
// roles name adapters that exist, and reflexes name
// local workflows that exist and inputs they accept.
func Check(cfg *config.Config) Report {
	return check(cfg, nil, nil)
}

// CheckLoaded is Check of what config.Load returned, and of the
// definition files named besides the configured directories' (their
// roles' adapters checked against the same configuration). When loading
// failed, its problems are reported and the workflows are still checked,
// from the default directory of home, so that one run shows everything.
func CheckLoaded(cfg *config.Config, err error, home string, files ...string) Report {
	if err == nil {
		return check(cfg, nil, files)
	}
	cfg = config.Defaults(home)
	cfg.Workflows = []string{config.Paths{Home: home}.Workflows()}
	return check(cfg, Errors(err), files)
}

func check(cfg *config.Config, loadErrs yamlfile.Errors, files []string) Report {
	file := cfg.File
	if file == "" {
		file = config.Paths{Home: cfg.Home}.Config()
	}
	rep := Report{File: file, Config: loadErrs}
	defs := map[string]*workflow.Definition{}
	for _, e := range workflow.Discover(cfg.Workflows) {
		w := Workflow{Name: e.Name, File: e.File, Def: e.Def}
		if e.Err != nil {
			w.Problems = Errors(e.Err)
		} else {
			defs[e.Name] = e.Def
			w.Problems = append(RoleAdapters(e.Def, cfg), e.Def.UnknownFunctions()...)
		}
		rep.Workflows = append(rep.Workflows, w)
	}
	// Named files are checked, not discovered: no reflex can start them.
	for _, file := range files {
		w := Workflow{File: file}
		def, err := workflow.LoadFile(file)
		if err != nil {
			w.Problems = Errors(err)
		} else {
			w.Name, w.Def, w.Problems = def.Name, def, append(RoleAdapters(def, cfg), def.UnknownFunctions()...)
		}
		rep.Workflows = append(rep.Workflows, w)
	}
	bad := func(field, format string, a ...any) {
		rep.Config = append(rep.Config, &yamlfile.Error{File: file, Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	for i, r := range cfg.Reflexes {
		if r.Do != "workflow" || r.Workflow == "" {
			continue
		}
		p := fmt.Sprintf("reflexes[%d]", i)
		def, ok := defs[r.Workflow]
		switch {
		case !ok:
			bad(p+".workflow", "unknown workflow %q", r.Workflow)
		case def.Binding != workflow.BindingLocal:
			bad(p+".workflow", "workflow %q has binding %s; a reflex starts local workflows", r.Workflow, def.Binding)
		default:
			if _, err := def.CheckInputs(r.Input); err != nil {
				bad(p+".input", "%v", err)
			}
		}
	}
	return rep
}

// RoleAdapters reports the roles of a local workflow whose adapter does
// not exist in cfg or whose instance cannot run, each at its role's field.
func RoleAdapters(def *workflow.Definition, cfg *config.Config) yamlfile.Errors {
	if def.Binding != workflow.BindingLocal {
		return nil
	}
	var errs yamlfile.Errors
	for _, role := range sortedRoles(def) {
		if def.IsHuman(role) {
			continue // a person answers it
		}
		name := def.Roles[role].Adapter
		field := "roles." + role + ".adapter"
		if !cfg.HasAdapter(name) {
			errs = append(errs, &yamlfile.Error{File: def.File, Field: field, Msg: fmt.Sprintf(
				"unknown adapter %q (built in: %s; others are defined under adapters: in nerve.yaml)",
				name, strings.Join(adapter.Types(), ", "))})
			continue
		}
		spec, _ := cfg.AdapterConfig(name)
		if err := adapter.Validate(name, spec); err != nil {
			errs = append(errs, &yamlfile.Error{File: def.File, Field: field, Msg: err.Error()})
		}
	}
	return errs
}

// Errors returns err as located problems: the file errors it holds, or
// one problem with only a message.
func Errors(err error) yamlfile.Errors {
	var list yamlfile.Errors
	var one *yamlfile.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &list):
		return list
	case errors.As(err, &one):
		return yamlfile.Errors{one}
	default:
		return yamlfile.Errors{&yamlfile.Error{Msg: err.Error()}}
	}
}

func sortedRoles(def *workflow.Definition) []string {
	return slices.Sorted(maps.Keys(def.Roles))
}
