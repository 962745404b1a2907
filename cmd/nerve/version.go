package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set by -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, Go: runtime.Version()}
	if v.Commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					v.Commit = s.Value
				}
			}
		}
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

func newCmdVersion(f *Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print nerve's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := currentVersion()
			if asJSON {
				return json.NewEncoder(f.IO.Out).Encode(v)
			}
			fmt.Fprintf(f.IO.Out, "nerve %s (commit %s, %s)\n", v.Version, v.Commit, v.Go)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}
