package main

import (
	"reflect"
	"runtime/debug"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// Each leaf command copies its arguments and flags into its options and
// hands them to runF: checked here without a daemon, a remote or a binary.
func TestCommandFlags(t *testing.T) {
	// capture builds a command whose runF stores the options it gets.
	type captured struct {
		cmd  *cobra.Command
		opts func() any
	}
	capture := func(build func(f *Factory, got *any) *cobra.Command) captured {
		io, _, _ := TestStreams()
		var got any
		cmd := build(newFactory(io), &got)
		return captured{cmd, func() any { return got }}
	}
	tests := []struct {
		name string
		cmd  func(f *Factory, got *any) *cobra.Command
		args []string
		want any
	}{
		{"workflow cancel", func(f *Factory, got *any) *cobra.Command {
			return newCmdWorkflowCancel(f, func(o *workflowCancelOptions) error { *got = *o; return nil })
		}, []string{"origin/review#thread-2", "--json"}, workflowCancelOptions{Ref: "origin/review#thread-2", JSON: true}},
		{"workflow push", func(f *Factory, got *any) *cobra.Command {
			return newCmdWorkflowPush(f, func(o *workflowPushOptions) error { *got = *o; return nil })
		}, []string{"review", "origin"}, workflowPushOptions{Workflow: "review", Remote: "origin"}},
		{"remote add", func(f *Factory, got *any) *cobra.Command {
			return newCmdRemoteAdd(f, func(o *remoteAddOptions) error { *got = *o; return nil })
		}, []string{"origin", "http://127.0.0.1:7700"}, remoteAddOptions{Name: "origin", URL: "http://127.0.0.1:7700"}},
		{"remote list", func(f *Factory, got *any) *cobra.Command {
			return newCmdRemoteList(f, func(o *remoteListOptions) error { *got = *o; return nil })
		}, []string{"--json"}, remoteListOptions{JSON: true}},
		{"remote remove", func(f *Factory, got *any) *cobra.Command {
			return newCmdRemoteRemove(f, func(o *remoteRemoveOptions) error { *got = *o; return nil })
		}, []string{"origin"}, remoteRemoveOptions{Name: "origin"}},
		{"daemon start", func(f *Factory, got *any) *cobra.Command {
			return newCmdDaemonStart(f, func(o *daemonStartOptions) error { *got = *o; return nil })
		}, []string{"--json"}, daemonStartOptions{JSON: true}},
		{"daemon stop", func(f *Factory, got *any) *cobra.Command {
			return newCmdDaemonStop(f, func(o *daemonStopOptions) error { *got = *o; return nil })
		}, []string{"--timeout", "5s"}, daemonStopOptions{Timeout: 5 * time.Second}},
		{"daemon status", func(f *Factory, got *any) *cobra.Command {
			return newCmdDaemonStatus(f, func(o *daemonStatusOptions) error { *got = *o; return nil })
		}, []string{"--json"}, daemonStatusOptions{JSON: true}},
		{"validate", func(f *Factory, got *any) *cobra.Command {
			return newCmdValidate(f, func(o *validateOptions) error { *got = *o; return nil })
		}, []string{"--json", "a.yaml", "b.yaml"}, validateOptions{JSON: true, Files: []string{"a.yaml", "b.yaml"}}},
		{"version", func(f *Factory, got *any) *cobra.Command {
			return newCmdVersion(f, func(o *versionOptions) error { *got = *o; return nil })
		}, []string{"--json"}, versionOptions{JSON: true}},
		{"example-agent", func(f *Factory, got *any) *cobra.Command {
			f.Getenv = func(k string) string { return map[string]string{"NERVE_ROLE": "author"}[k] }
			return newCmdExampleAgent(f, func(o *exampleAgentOptions) error { *got = *o; return nil })
		}, nil, exampleAgentOptions{Role: "author"}},
		{"usage", func(f *Factory, got *any) *cobra.Command {
			return newCmdUsage(f, func(o *usageOptions) error { *got = *o; return nil })
		}, []string{"origin/review", "--by", "model", "--since", "2026-11-01", "--remote", "origin", "--json"},
			usageOptions{Ref: "origin/review", By: "model", Since: "2026-11-01", Remote: "origin", JSON: true}},
		{"init", func(f *Factory, got *any) *cobra.Command {
			return newCmdInit(f, func(o *initOptions) error { *got = *o; return nil })
		}, []string{"--name", "n1", "--remote", "origin=http://h:1", "--enroll-token", "T", "--json"},
			initOptions{Name: "n1", NameGiven: true, Remote: "origin=http://h:1", EnrollToken: "T", JSON: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := capture(tt.cmd)
			c.cmd.SetArgs(tt.args)
			if err := c.cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if got := c.opts(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("options:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// The daemon's own flags reach its options and stay readable as flags
// (config.Load reads them from the flag set).
func TestDaemonFlags(t *testing.T) {
	io, _, _ := TestStreams()
	var got *daemonOptions
	cmd := newCmdDaemon(newFactory(io), func(o *daemonOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--log-level", "debug", "--name", "n1"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.LogLevel != "debug" || got.Name != "n1" || got.Flags == nil || !got.Flags.Changed("name") {
		t.Fatalf("options: %+v", got)
	}
}

func TestVersionOf(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	info := func(mod string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/nerve-agents/nerve", Version: mod}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	tests := []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            versionInfo
	}{
		{"make build (ldflags win)", "v0.3.0-2-gabc1234-dirty", rev, info("(devel)", "vcs.revision", "ffff"),
			versionInfo{Version: "v0.3.0-2-gabc1234-dirty", Commit: rev}},
		{"go build in a clone", "", "", info("(devel)", "vcs.revision", rev, "vcs.modified", "false"),
			versionInfo{Version: "dev", Commit: rev}},
		{"go build in a changed clone", "", "", info("(devel)", "vcs.revision", rev, "vcs.modified", "true"),
			versionInfo{Version: "dev", Commit: rev + "-dirty"}},
		{"go install module@v1.2.3", "", "", info("v1.2.3"),
			versionInfo{Version: "v1.2.3", Commit: "unknown"}},
		{"no build info", "", "", nil, versionInfo{Version: "dev", Commit: "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := versionOf(tt.version, tt.commit, tt.bi)
			got.Go = ""
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
