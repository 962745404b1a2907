package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/yamlfile"
	"github.com/nerve-agents/nerve/workflow"
)

// problem is one thing `nerve validate` found wrong.
type problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// MarshalJSON writes every key, an unknown line or field as null.
func (p problem) MarshalJSON() ([]byte, error) {
	type plain problem
	var line *int
	if p.Line > 0 {
		line = &p.Line
	}
	return json.Marshal(struct {
		plain
		Line  *int    `json:"line"`
		Field *string `json:"field"`
	}{plain(p), line, nullable(p.Field)})
}

type validateReport struct {
	OK        bool      `json:"ok"`
	Config    string    `json:"config"`
	Workflows []string  `json:"workflows"`
	Problems  []problem `json:"problems"`
}

type validateOptions struct {
	JSON bool
}

func newCmdValidate(f *Factory, runF func(*validateOptions) error) *cobra.Command {
	opts := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check nerve.yaml and every workflow definition, reporting all problems",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return validateRun(f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func validateRun(f *Factory, opts *validateOptions) error {
	rep := validateAll(f)
	if opts.JSON {
		if err := json.NewEncoder(f.IO.Out).Encode(rep); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintf(f.IO.Out, "✗ %s\n", (&yamlfile.Error{File: p.File, Line: p.Line, Field: p.Field, Msg: p.Message}).Error())
		}
		if rep.OK {
			fmt.Fprintf(f.IO.Out, "✓ %s and %d workflow(s) are valid\n", rep.Config, len(rep.Workflows))
		}
	}
	if !rep.OK {
		return &silentError{code: exitUsage}
	}
	return nil
}

func validateAll(f *Factory) validateReport {
	rep := validateReport{Workflows: []string{}, Problems: []problem{}}
	add := func(err error) {
		var fes yamlfile.Errors
		var fe *yamlfile.Error
		switch {
		case errors.As(err, &fes):
			for _, e := range fes {
				rep.Problems = append(rep.Problems, problem{e.File, e.Line, e.Field, e.Msg})
			}
		case errors.As(err, &fe):
			rep.Problems = append(rep.Problems, problem{fe.File, fe.Line, fe.Field, fe.Msg})
		default:
			rep.Problems = append(rep.Problems, problem{Message: err.Error()})
		}
	}
	cfg, err := f.Config()
	rep.Config = config.Paths{Home: config.Home(f.Getenv)}.Config()
	if f.configFile != "" {
		rep.Config = f.configFile
	}
	if err != nil {
		add(err)
		// Go on with defaults so workflow problems are reported too.
		cfg = config.Defaults(config.Home(f.Getenv))
		cfg.Workflows = []string{config.Paths{Home: cfg.Home}.Workflows()}
	}
	for name, ac := range cfg.Adapters {
		if err := adapter.Validate(name, ac); err != nil {
			add(&yamlfile.Error{File: rep.Config, Field: "adapters." + name, Msg: err.Error()})
		}
	}
	names := map[string]bool{}
	for _, e := range workflow.Discover(cfg.Workflows) {
		if e.Err != nil {
			add(e.Err)
			continue
		}
		names[e.Name] = true
		rep.Workflows = append(rep.Workflows, e.Name)
		if err := e.Def.CheckAdapters(cfg.HasAdapter); err != nil {
			add(err)
		}
	}
	for i, r := range cfg.Reflexes {
		if r.Do == "workflow" && r.Workflow != "" && !names[r.Workflow] {
			add(&yamlfile.Error{File: rep.Config, Field: fmt.Sprintf("reflexes[%d].workflow", i), Msg: fmt.Sprintf("unknown workflow %q", r.Workflow)})
		}
	}
	rep.OK = len(rep.Problems) == 0
	return rep
}
