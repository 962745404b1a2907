package main

import (
	"os"
	"sync"

	"github.com/nerve-agents/nerve/config"
)

// Factory hands commands their dependencies lazily, so a command that does
// not need the config or the daemon never pays for them, and tests swap
// the funcs.
type Factory struct {
	IO *IOStreams

	// Config loads nerve.yaml once. Depends on NERVE_HOME and --config.
	Config func() (*config.Config, error)

	// Executable is the running nerve binary; the daemon is started from it
	// and adapters find it on PATH.
	Executable string

	// Getenv reads the environment (tests override it).
	Getenv func(string) string

	// configFile is set from the persistent --config flag.
	configFile string
}

func newFactory(io *IOStreams) *Factory {
	f := &Factory{IO: io, Getenv: os.Getenv}
	f.Executable, _ = os.Executable()
	var (
		once sync.Once
		cfg  *config.Config
		err  error
	)
	f.Config = func() (*config.Config, error) {
		once.Do(func() {
			cfg, err = config.Load(config.LoadOptions{File: f.configFile, Getenv: f.Getenv})
		})
		return cfg, err
	}
	return f
}
