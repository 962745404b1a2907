package daemon

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/nerve-agents/nerve/internal/atomicfile"
	"github.com/nerve-agents/nerve/khala/api"
)

// claimRecord is a remote turn this daemon holds, kept in
// $NERVE_HOME/claims while its adapter runs: what a restart after a crash
// gives back. It is replaced atomically, so the daemon dying mid-write
// never leaves half a record (which would be dropped, its turn forgotten
// until the lease runs out). It is not fsynced: it must survive the
// daemon's death, not the machine's (a reboot ends the adapter anyway),
// and two fsyncs would add milliseconds to every remote turn.
type claimRecord struct {
	Remote    string    `json:"remote"`
	Turn      api.Turn  `json:"turn"`
	Adapter   string    `json:"adapter"`
	StartedAt time.Time `json:"started_at"`
}

func (r *runner) claimsDir() string { return filepath.Join(r.d.paths.Home, "claims") }

func (r *runner) claimFile(remoteName, turn string) string {
	return filepath.Join(r.claimsDir(), url.PathEscape(remoteName)+"~"+url.PathEscape(turn)+".json")
}

func (r *runner) putClaim(c claimRecord) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.claimsDir(), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFileNoSync(r.claimFile(c.Remote, c.Turn.Turn), raw, 0o600)
}

func (r *runner) deleteClaim(remoteName, turn string) { _ = os.Remove(r.claimFile(remoteName, turn)) }

// claims lists the claims recorded as held.
func (r *runner) claims() []claimRecord {
	entries, _ := os.ReadDir(r.claimsDir())
	var out []claimRecord
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(r.claimsDir(), e.Name()))
		if err != nil {
			continue
		}
		var c claimRecord
		if json.Unmarshal(raw, &c) == nil && c.Turn.Turn != "" {
			out = append(out, c)
		} else {
			_ = os.Remove(filepath.Join(r.claimsDir(), e.Name()))
		}
	}
	return out
}
