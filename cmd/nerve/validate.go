package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/config/validation"
	"github.com/nerve-agents/nerve/internal/yamlfile"
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
	// noFile: there is no nerve.yaml, and the defaults were checked.
	noFile bool
}

type validateOptions struct {
	JSON bool
	// Files are definition files to check besides the configured
	// directories' (the one being written, before it is pushed or run).
	Files []string
}

func newCmdValidate(f *Factory, runF func(*validateOptions) error) *cobra.Command {
	opts := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate [FILE.yaml...]",
		Short: "Check nerve.yaml and every workflow definition, reporting all problems",
		Long: `Check nerve.yaml and every workflow definition in the workflow directories,
and the definition files named, reporting all problems at once: moderators
compile and call no function that neither JSONata nor they define, schemas
are valid, local workflows' roles name adapters that exist,
reflexes start workflows that exist with inputs they accept. Exit 2 when
anything is wrong.`,
		Example: `  nerve validate
  nerve validate ./my-workflow.yaml --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Files = args
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
	rep := validateAll(f, opts.Files)
	if opts.JSON {
		if err := json.NewEncoder(f.IO.Out).Encode(rep); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintf(f.IO.Out, "✗ %s\n", (&yamlfile.Error{File: p.File, Line: p.Line, Field: p.Field, Msg: p.Message}).Error())
		}
		switch {
		case rep.OK && rep.noFile:
			fmt.Fprintf(f.IO.Out, "no nerve.yaml at %s: the defaults apply ('nerve init' writes one)\n", rep.Config)
			fmt.Fprintf(f.IO.Out, "✓ the defaults and %d workflow(s) are valid\n", len(rep.Workflows))
		case rep.OK:
			fmt.Fprintf(f.IO.Out, "✓ %s and %d workflow(s) are valid\n", rep.Config, len(rep.Workflows))
		}
	}
	if !rep.OK {
		return &silentError{code: exitUsage}
	}
	return nil
}

func validateAll(f *Factory, files []string) validateReport {
	cfg, err := f.Config()
	v := validation.CheckLoaded(cfg, err, config.Home(f.Getenv), files...)
	rep := validateReport{Config: v.File, Workflows: []string{}, Problems: []problem{}, noFile: err == nil && cfg.File == ""}
	if f.configFile != "" {
		rep.Config = f.configFile
	}
	for _, w := range v.Workflows {
		if w.Def != nil {
			rep.Workflows = append(rep.Workflows, w.Name)
		}
	}
	for _, e := range v.Problems() {
		rep.Problems = append(rep.Problems, problem{e.File, e.Line, e.Field, e.Msg})
	}
	rep.OK = len(rep.Problems) == 0
	return rep
}
