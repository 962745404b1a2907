package khala

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/nerve-agents/nerve/internal/atomicfile"
)

// AdminFile is where a running server leaves its local admin credentials:
// beside its database, mode 0600, so only the user who runs the server
// (and root) can issue enrollment tokens through it.
func AdminFile(db string) string { return db + ".admin" }

type adminInfo struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	PID   int    `json:"pid"`
}

// writeAdminFile writes info atomically: a reader sees the old file or
// the whole new one, never a token without its URL.
func writeAdminFile(path string, info adminInfo) error {
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write admin file %s: %w", path, err)
	}
	return nil
}

// removeAdminFile removes the admin file if it is still ours (a second
// server refused the lock must not remove the first one's).
func removeAdminFile(path, token string) {
	if info, err := readAdminFile(path); err == nil && info.Token == token {
		os.Remove(path)
	}
}

func readAdminFile(path string) (adminInfo, error) {
	var info adminInfo
	data, err := os.ReadFile(path)
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("read %s: %w", path, err)
	}
	return info, nil
}
