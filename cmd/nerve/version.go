package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set by `make build`: -ldflags "-X main.version=$(git describe --tags
// --always --dirty) -X main.commit=$(git rev-parse HEAD)".
var (
	version = ""
	commit  = ""
)

type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
}

func currentVersion() versionInfo {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(version, commit, bi)
}

// versionOf is what a binary says it is: what the linker was told (make
// build), else what the go command stamped into it (go install of a
// version: the module's version; go build in a clone: vcs.revision and
// vcs.modified), else "dev" and "unknown".
func versionOf(version, commit string, bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: version, Commit: commit, Go: runtime.Version()}
	if bi != nil {
		var rev string
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if v.Commit == "" && rev != "" {
			v.Commit = rev
			if modified {
				v.Commit += "-dirty"
			}
		}
		if mv := bi.Main.Version; v.Version == "" && mv != "" && mv != "(devel)" {
			v.Version = mv
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

type versionOptions struct {
	JSON bool
}

func newCmdVersion(f *Factory, runF func(*versionOptions) error) *cobra.Command {
	opts := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print nerve's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print as JSON")
	return cmd
}

func versionRun(f *Factory, opts *versionOptions) error {
	v := currentVersion()
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(v)
	}
	fmt.Fprintf(f.IO.Out, "nerve %s (commit %s, %s)\n", v.Version, v.Commit, v.Go)
	return nil
}
