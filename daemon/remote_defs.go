package daemon

import (
	"context"
	"sync"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// maxThreadDefs bounds the threads whose definition is remembered.
const maxThreadDefs = 256

// remoteDefs caches remote definitions by remote, workflow and version,
// for the meta schema of a role, and which one each thread uses: a
// thread keeps its definition, so its later turns need not ask again. A
// version stays while a thread remembered here uses it: one published
// again does not keep the old one for the daemon's life.
type remoteDefs struct {
	mu       sync.Mutex
	defs     map[string]*usedDef // remote/workflow@version
	byThread map[string]string   // thread's history key -> its version's key
}

// usedDef is a definition and how many remembered threads use it.
type usedDef struct {
	def     *workflow.Definition
	threads int
}

// thread returns the definition thread uses, nil when not remembered.
func (c *remoteDefs) thread(thread string) *workflow.Definition {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u := c.defs[c.byThread[thread]]; u != nil {
		return u.def
	}
	return nil
}

// version returns the definition stored under key, nil when none is.
func (c *remoteDefs) version(key string) *workflow.Definition {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u := c.defs[key]; u != nil {
		return u.def
	}
	return nil
}

// use remembers that thread uses def, stored under key.
func (c *remoteDefs) use(thread, key string, def *workflow.Definition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.defs == nil || len(c.byThread) >= maxThreadDefs {
		c.defs, c.byThread = map[string]*usedDef{}, map[string]string{}
	}
	if c.byThread[thread] == key {
		return
	}
	c.release(thread)
	u := c.defs[key]
	if u == nil {
		u = &usedDef{def: def}
		c.defs[key] = u
	}
	u.threads++
	c.byThread[thread] = key
}

// forget drops what thread used (it ended), and its version when no other
// remembered thread uses it.
func (c *remoteDefs) forget(thread string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.release(thread)
}

func (c *remoteDefs) release(thread string) {
	key, ok := c.byThread[thread]
	if !ok {
		return
	}
	delete(c.byThread, thread)
	if u := c.defs[key]; u != nil {
		if u.threads--; u.threads <= 0 {
			delete(c.defs, key)
		}
	}
}

// remoteRole returns the role's definition, or nil when the workflow
// cannot be read (then no structured output is extracted).
func (d *Daemon) remoteRole(ctx context.Context, cl *remote.Client, remoteName string, t api.Turn) *workflow.Role {
	if def := d.remoteDef(ctx, cl, remoteName, t); def != nil {
		return def.Roles[t.Role]
	}
	return nil
}

// remoteDef returns the definition of t's thread, or nil when the
// workflow cannot be read.
func (d *Daemon) remoteDef(ctx context.Context, cl *remote.Client, remoteName string, t api.Turn) *workflow.Definition {
	thread := historyKey(remoteName, t)
	if def := d.rdefs.thread(thread); def != nil {
		return def
	}
	w, err := cl.Workflow(ctx, t.Workflow)
	if err != nil {
		d.log.Warn("read remote workflow", "remote", remoteName, "workflow", t.Workflow, "err", err)
		return nil
	}
	key := remoteName + "/" + t.Workflow + "@" + w.Version
	def := d.rdefs.version(key)
	if def == nil {
		if def, err = workflow.ParseStored(key, []byte(w.Source)); err != nil {
			d.log.Warn("parse remote workflow", "workflow", key, "err", err)
			return nil
		}
	}
	d.rdefs.use(thread, key, def)
	return def
}
