package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/workflow"
)

type threadAnswerOptions struct {
	Ref  string
	Text string
	File string
	Meta string
	Step int
	// StepSet: --step was given; steps count from 1, so it names one.
	StepSet bool
	JSON    bool
}

func newCmdThreadAnswer(f *Factory, runF func(*threadAnswerOptions) error) *cobra.Command {
	opts := &threadAnswerOptions{}
	cmd := &cobra.Command{
		Use:   "answer REF#THREAD [TEXT | --file F] [--meta JSON]",
		Short: "Answer a turn that waits for a person (a human role's turn)",
		Long: `Answer the turn of a thread that waits for a person. The meta is checked
against the role's schema before anything is recorded: an answer that does
not match changes nothing. 'nerve inbox' lists what waits.`,
		Example: `  nerve thread answer release#thread-4 "Ship it" --meta '{"approved": true}'
  nerve thread answer origin/release#thread-9 --file review.md --meta '{"approved": false}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("see 'nerve thread answer --help'", "name the thread (REF#thread-N), then the answer's text")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			if len(args) == 2 {
				opts.Text = args[1]
			}
			opts.StepSet = cmd.Flags().Changed("step")
			if runF != nil {
				return runF(opts)
			}
			return threadAnswerRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.File, "file", "", "read the answer's text from a file ('-': stdin)")
	cmd.Flags().StringVar(&opts.Meta, "meta", "", "the answer's structured output, a JSON object matching the role's meta schema")
	cmd.Flags().IntVar(&opts.Step, "step", 0, "the step to answer, when several wait at once")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print {thread, step, role, by} as JSON")
	return cmd
}

// answerJSON is `thread answer --json`.
type answerJSON struct {
	Thread string `json:"thread"`
	Step   int    `json:"step"`
	Role   string `json:"role"`
	By     string `json:"by"`
}

func threadAnswerRun(ctx context.Context, f *Factory, opts *threadAnswerOptions) error {
	ref, err := workflow.ParseRef(opts.Ref)
	if err != nil {
		return err
	}
	if ref.Thread == "" {
		return usageErrorf("'nerve inbox' lists the turns waiting for you", "%s names a workflow; name one of its threads (REF#thread-N)", opts.Ref)
	}
	if opts.StepSet && opts.Step < 1 {
		return usageErrorf("'nerve inbox' lists the turns waiting for you and their steps", "--step takes a positive number (steps count from 1), not %d", opts.Step)
	}
	answer, err := readAnswer(f, opts)
	if err != nil {
		return err
	}
	var res answerJSON
	if ref.Remote != "" {
		res, err = remoteAnswer(ctx, f, ref, opts.Step, answer)
	} else {
		res, err = localAnswer(ctx, f, ref, opts.Step, answer)
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(res)
	}
	by := ""
	if res.By != "" {
		by = " as " + res.By
	}
	fmt.Fprintf(f.IO.Out, "answered step %d (%s) of %s%s\n", res.Step, res.Role, res.Thread, by)
	return nil
}

// readAnswer takes the answer from the arguments: text or a file, and the
// meta as a JSON object.
func readAnswer(f *Factory, opts *threadAnswerOptions) (workflow.Answer, error) {
	a := workflow.Answer{Content: opts.Text}
	if opts.File != "" {
		if opts.Text != "" {
			return a, usageErrorf("", "give the answer as TEXT or with --file, not both")
		}
		var (
			b   []byte
			err error
		)
		if opts.File == "-" {
			b, err = io.ReadAll(io.LimitReader(f.IO.In, 4<<20))
		} else {
			b, err = os.ReadFile(opts.File)
		}
		if err != nil {
			return a, usageErrorf("", "read --file: %v", err)
		}
		a.Content = string(b)
	}
	if strings.TrimSpace(opts.Meta) != "" {
		var m any
		if err := json.Unmarshal([]byte(opts.Meta), &m); err != nil {
			return a, usageErrorf(`e.g. --meta '{"approved": true}'`, "--meta is not JSON: %v", err)
		}
		if _, ok := m.(map[string]any); !ok {
			return a, usageErrorf(`e.g. --meta '{"approved": true}'`, "--meta must be a JSON object")
		}
		a.Meta = m
	}
	if strings.TrimSpace(a.Content) == "" && a.Meta == nil {
		return a, usageErrorf("give TEXT, --file or --meta", "the answer is empty")
	}
	return a, nil
}

func localAnswer(ctx context.Context, f *Factory, ref workflow.Ref, step int, a workflow.Answer) (answerJSON, error) {
	c, err := f.daemonClient(ctx)
	if err != nil {
		return answerJSON{}, err
	}
	t, err := c.Thread(ctx, ref.Thread)
	if err != nil {
		return answerJSON{}, err
	}
	if t.Workflow != ref.Workflow {
		return answerJSON{}, usageErrorf("", "%s is a thread of %s, not of %s", ref.Thread, t.Workflow, ref.Workflow)
	}
	res, err := c.Answer(ctx, ref.Thread, daemon.AnswerRequest{Step: step, Content: a.Content, Meta: a.Meta})
	if ae := (*daemon.APIError)(nil); errors.As(err, &ae) && ae.Field == "meta" {
		if w, werr := pickWaiting(ref, t, step); werr == nil {
			return answerJSON{}, metaRefused(err, ref, w)
		}
	}
	if err != nil {
		return answerJSON{}, err
	}
	return answerJSON{Thread: ref.String(), Step: res.Step, Role: res.Role, By: res.By}, nil
}

// metaRefused is the refusal of an answer's meta with a hint: the role's
// schema, and the answer command with meta that has its required keys.
func metaRefused(err error, ref workflow.Ref, w *workflow.Waiting) error {
	if w.Meta == nil {
		return err
	}
	schema, jerr := json.Marshal(w.Meta)
	if jerr != nil {
		return err
	}
	s := string(schema)
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return &usageError{msg: err.Error(), hint: fmt.Sprintf("role %s's meta schema is %s; e.g. %s", w.Role, s, answerCommand(ref.String(), w, false))}
}
