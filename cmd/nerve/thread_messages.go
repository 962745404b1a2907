package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/threadquery"
	"github.com/nerve-agents/nerve/workflow"
)

type threadMessagesOptions struct {
	Ref   string
	Role  string
	Last  int
	Since string
	Step  int
	JSON  bool
}

func newCmdThread(f *Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "thread", Short: "Read a thread's messages, answer its human turns, review its change"}
	cmd.AddCommand(newCmdThreadMessages(f, nil), newCmdThreadDiff(f, nil), newCmdThreadCheckout(f, nil), newCmdThreadAnswer(f, nil))
	return cmd
}

func newCmdThreadMessages(f *Factory, runF func(*threadMessagesOptions) error) *cobra.Command {
	opts := &threadMessagesOptions{}
	cmd := &cobra.Command{
		Use:   "messages [REF#THREAD]",
		Short: "Print a thread's messages, filtered; inside a turn the thread defaults to $NERVE_THREAD",
		Example: `  nerve thread messages --last 3
  nerve thread messages code-review#thread-3 --role reviewer --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("see 'nerve thread messages --help'", "nerve thread messages takes at most one thread, got %d: %s", len(args), strings.Join(args, " "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Ref = args[0]
			}
			// 0 is what leaving a filter out means; given, it is a mistake
			// (as --uses 0 and --limit 0 are elsewhere).
			for _, fl := range []string{"last", "step"} {
				if n, _ := cmd.Flags().GetInt(fl); cmd.Flags().Changed(fl) && n < 1 {
					return usageErrorf("leave --"+fl+" out for every message", "--%s %d: want 1 or more", fl, n)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return threadMessagesRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Role, "role", "", "only this role's messages")
	cmd.Flags().IntVar(&opts.Last, "last", 0, "only the last N messages")
	cmd.Flags().StringVar(&opts.Since, "since", "", "only messages since a time (RFC 3339) or a duration ago (10m)")
	cmd.Flags().IntVar(&opts.Step, "step", 0, "only the message of this step")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one message object per line")
	return cmd
}

func threadMessagesRun(ctx context.Context, f *Factory, opts *threadMessagesOptions) error {
	q := threadquery.Query{Ref: opts.Ref, Role: opts.Role, Last: opts.Last, Since: opts.Since, Step: opts.Step, Flags: true}
	_, msgs, err := threadquery.Messages(ctx, q, threadquery.TurnFromEnv(f.Getenv), func(ctx context.Context, ref workflow.Ref, filter workflow.Filter) ([]workflow.Message, error) {
		src, err := f.threadSource(ctx, ref)
		if err != nil {
			return nil, err
		}
		if _, err := threadOf(ctx, src, ref); err != nil {
			return nil, err
		}
		return src.Messages(ctx, ref.Thread, filter)
	})
	if err != nil {
		return err
	}
	return printMessages(f, msgs, opts.JSON)
}

func printMessages(f *Factory, msgs []workflow.Message, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(f.IO.Out)
		for _, m := range msgs {
			if err := enc.Encode(newMessageJSON(m)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, m := range msgs {
		fmt.Fprintf(f.IO.Out, "--- step %d · %s · %s · %s ---\n", m.Step, m.Role, m.Agent, m.At.Local().Format(time.DateTime))
		printMessage(f, m)
	}
	return nil
}
