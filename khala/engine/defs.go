package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/nerve-agents/nerve/workflow"
)

// maxCachedDefs bounds the parsed definitions kept in memory; past it the
// cache starts over (definitions are few, and reparsing is cheap).
const maxCachedDefs = 512

// defCache holds parsed definitions by content hash. Sources never change
// under a hash, so the cache is derived state any replica may drop.
type defCache struct {
	store Sources
	mu    sync.Mutex
	m     map[string]*workflow.Definition
}

func newDefCache(s Sources) *defCache {
	return &defCache{store: s, m: map[string]*workflow.Definition{}}
}

// SourceHash names a definition source by content.
func SourceHash(src []byte) string {
	h := sha256.Sum256(src)
	return hex.EncodeToString(h[:])
}

func (d *defCache) put(hash string, def *workflow.Definition) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.m) >= maxCachedDefs {
		clear(d.m)
	}
	d.m[hash] = def
}

// get returns the definition with hash, parsing its stored source once.
func (d *defCache) get(ctx context.Context, hash string) (*workflow.Definition, error) {
	d.mu.Lock()
	def := d.m[hash]
	d.mu.Unlock()
	if def != nil {
		return def, nil
	}
	src, err := d.store.Source(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("definition %.12s: %w", hash, err)
	}
	def, err = workflow.ParseStored("definition "+hash[:12], src)
	if err != nil {
		return nil, fmt.Errorf("definition %.12s no longer parses: %w", hash, err)
	}
	d.put(hash, def)
	return def, nil
}
