package main

import (
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
)

var remoteNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })

func newCmdRemote(f *Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "remote", Short: "Manage Khala remotes, git-style"}
	cmd.AddCommand(newCmdRemoteAdd(f, nil), newCmdRemoteList(f, nil), newCmdRemoteRemove(f, nil))
	return cmd
}

// configPath is the nerve.yaml that edits go to.
func (f *Factory) configPath() string {
	if f.configFile != "" {
		return f.configFile
	}
	return config.Paths{Home: config.Home(f.Getenv)}.Config()
}

// checkRemote checks a remote's name and URL as given on the command line
// (what is a flag or an argument: name it in what), in nerve's words.
func checkRemote(what, name, raw string) error {
	if !remoteNameRE().MatchString(name) {
		return usageErrorf("use letters, digits, '-', '_' and '.'", "%s: bad remote name %q", what, name)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(raw, " \t\n") {
		return usageErrorf("give an http(s) URL, e.g. http://127.0.0.1:7700", "%s: %q is not an http(s) URL", what, raw)
	}
	return nil
}
