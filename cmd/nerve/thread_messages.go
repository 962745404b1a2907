package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nerve-agents/nerve/workflow"
	"github.com/spf13/cobra"
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
	cmd := &cobra.Command{Use: "thread", Short: "Query a thread (what an agent runs inside a turn)"}
	cmd.AddCommand(newCmdThreadMessages(f, nil))
	return cmd
}

func newCmdThreadMessages(f *Factory, runF func(*threadMessagesOptions) error) *cobra.Command {
	opts := &threadMessagesOptions{}
	cmd := &cobra.Command{
		Use:   "messages [REF#THREAD]",
		Short: "Print a thread's messages, filtered; inside a turn the thread defaults to $NERVE_THREAD",
		Example: `  nerve thread messages --last 3
  nerve thread messages code-review#thread-3 --role reviewer --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Ref = args[0]
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
	current := f.Getenv("NERVE_THREAD")
	if opts.Ref == "" {
		if current == "" {
			return usageErrorf("name one, e.g. 'nerve thread messages code-review#thread-1', or run this inside a turn", "no thread given and NERVE_THREAD is not set")
		}
		opts.Ref = current
	}
	if opts.Last < 0 || opts.Step < 0 {
		return usageErrorf("", "--last and --step take positive numbers")
	}
	filter := workflow.Filter{Role: opts.Role, Last: opts.Last, Step: opts.Step}
	if opts.Since != "" {
		since, err := parseSince(opts.Since)
		if err != nil {
			return err
		}
		filter.Since = since
	}
	var msgs []workflow.Message
	snap := f.Getenv("NERVE_THREAD_SNAPSHOT")
	if opts.Ref == current && snap != "" {
		// Inside a turn: answer from the snapshot the daemon wrote, since
		// the agent's sandbox may not reach the socket or the network.
		all, err := readSnapshot(snap)
		if err != nil {
			return err
		}
		msgs = filter.Apply(all)
	} else {
		ref, err := threadRef(opts.Ref)
		if err != nil {
			return err
		}
		src, err := f.threadSource(ctx, ref)
		if err != nil {
			return err
		}
		if _, err := threadOf(ctx, src, ref); err != nil {
			return err
		}
		if msgs, err = src.Messages(ctx, ref.Thread, filter); err != nil {
			return err
		}
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

func parseSince(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageErrorf("e.g. --since 10m or --since 2026-11-23T10:00:00Z", "--since %q is neither a duration nor an RFC 3339 time", s)
}

func readSnapshot(path string) ([]workflow.Message, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read thread snapshot: %w", err)
	}
	defer file.Close()
	var out []workflow.Message
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var m workflow.Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("thread snapshot %s: %w", path, err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}
