package config

import (
	"os"
	"path/filepath"
	"strings"
)

// Home returns NERVE_HOME: the environment variable when set, else ~/.nerve.
func Home(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if h := getenv("NERVE_HOME"); h != "" {
		return ExpandHome(h)
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "."
	}
	return filepath.Join(home, ".nerve")
}

// ExpandHome turns a leading ~/ into the user's home directory.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// Paths are the files of one NERVE_HOME.
type Paths struct{ Home string }

func (p Paths) Config() string    { return filepath.Join(p.Home, "nerve.yaml") }
func (p Paths) DB() string        { return filepath.Join(p.Home, "nerve.db") }
func (p Paths) Socket() string    { return filepath.Join(p.Home, "nerve.sock") }
func (p Paths) Lock() string      { return filepath.Join(p.Home, "nerve.lock") }
func (p Paths) PID() string       { return filepath.Join(p.Home, "nerve.pid") }
func (p Paths) Log() string       { return filepath.Join(p.Home, "nerve.log") }
func (p Paths) Workflows() string { return filepath.Join(p.Home, "workflows") }
func (p Paths) Snapshots() string { return filepath.Join(p.Home, "snapshots") }
